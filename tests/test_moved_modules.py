"""Issue 49's moves: each old import path still works for one release, warns, and is the new
module itself (so private names and monkeypatches reach the same object)."""

import importlib
import sys

import pytest

MOVED = {
    "inferlab.constrain.bench": "inferlab.bench.schema_bench",
    "inferlab.constrain.bench_peers": "inferlab.bench.schema_peers",
    "inferlab.constrain.jump_forward": "inferlab.bench.jump_forward",
    "inferlab.constrain.numbers": "inferlab.constrain.number_regex",
    "inferlab.kv.units": "inferlab.units",
    "inferlab.measure.publish": "inferlab.cli.publish",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_is_the_new_module(old, monkeypatch):
    new = importlib.import_module(MOVED[old])
    monkeypatch.delitem(sys.modules, old, raising=False)   # the shim runs again, as on a first import
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is new
