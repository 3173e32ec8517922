"""Deprecated path: moved to inferlab.bench.schema_bench (issue 49); kept for one release, with a DeprecationWarning."""

from inferlab.bench import schema_bench
from inferlab.deprecation import moved

moved(__name__, schema_bench)
