"""Deprecated path: moved to inferlab.constrain.number_regex (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab.constrain import number_regex
from inferlab.deprecation import moved

moved(__name__, number_regex)
