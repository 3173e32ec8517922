"""Deprecated path: moved to inferlab.bench.jump_forward (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab.bench import jump_forward
from inferlab.deprecation import moved

moved(__name__, jump_forward)
