"""Deprecated path: moved to inferlab.bench.schema_peers (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab.bench import schema_peers
from inferlab.deprecation import moved

moved(__name__, schema_peers)
