"""Deprecated path: moved to inferlab.units (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab import units
from inferlab.deprecation import moved

moved(__name__, units)
