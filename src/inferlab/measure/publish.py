"""Deprecated path: moved to inferlab.cli.publish (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab.cli import publish
from inferlab.deprecation import moved

moved(__name__, publish)
