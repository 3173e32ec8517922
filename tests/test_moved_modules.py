"""Issue 49's moves: each old import path still works for one release (inferlab.deprecation's
import hook: no file stays at the old path), warns, and is the new module itself (so private names
and monkeypatches reach the same object)."""

import importlib
import sys

import pytest

from inferlab.deprecation import MOVED

# written out here too: the table under test must keep every move of issue 49
ISSUE_49 = {
    "inferlab.constrain.bench": "inferlab.bench.schema_bench",
    "inferlab.constrain.bench_peers": "inferlab.bench.schema_peers",
    "inferlab.constrain.jump_forward": "inferlab.bench.jump_forward",
    "inferlab.constrain.numbers": "inferlab.constrain.number_regex",
    "inferlab.kv.units": "inferlab.units",
    "inferlab.measure.publish": "inferlab.cli.publish",
}


def test_every_move_has_its_old_path():
    assert MOVED == ISSUE_49


@pytest.mark.parametrize("old", sorted(ISSUE_49))
def test_old_path_warns_and_is_the_new_module(old, monkeypatch):
    new = importlib.import_module(ISSUE_49[old])
    monkeypatch.delitem(sys.modules, old, raising=False)   # the shim runs again, as on a first import
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {ISSUE_49[old]}"):
        module = importlib.import_module(old)
    assert module is new
    from_import = importlib.import_module(old.rsplit(".", 1)[0])   # `from package import old_name` too
    assert getattr(from_import, old.rsplit(".", 1)[1]) is new
