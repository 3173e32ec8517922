"""Issue 49's moves: each old import path still works for one release (inferlab.deprecation's
import hook: no file stays at the old path), warns, and is the new module itself (so private names
and monkeypatches reach the same object)."""

import importlib
import re
import sys
from pathlib import Path

import pytest

from inferlab.deprecation import MOVED

# the moves as docs/architecture.md's table tells a reader (its rows: | `old` | `new` |), so the
# hook and the page cannot drift apart
_PAGE = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
_TABLE = _PAGE.split("### Moved in issue 49", 1)[1].split("\n\n", 2)[1]
ISSUE_49 = dict(re.findall(r"^\| `(inferlab[.\w]+)` \| `(inferlab[.\w]+)` \|$", _TABLE, re.M))


def test_every_move_has_its_old_path():
    assert len(ISSUE_49) == 6 and MOVED == ISSUE_49


@pytest.mark.parametrize("old", sorted(ISSUE_49))
def test_old_path_warns_and_is_the_new_module(old, monkeypatch):
    new = importlib.import_module(ISSUE_49[old])
    monkeypatch.delitem(sys.modules, old, raising=False)   # the shim runs again, as on a first import
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {ISSUE_49[old]}"):
        module = importlib.import_module(old)
    assert module is new
    from_import = importlib.import_module(old.rsplit(".", 1)[0])   # `from package import old_name` too
    assert getattr(from_import, old.rsplit(".", 1)[1]) is new
