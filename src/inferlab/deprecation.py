"""Old import paths kept for one release after a module moved (issue 49's moves).

No file stays at an old path (so git sees each move as a rename, and edits made on other branches
follow the file): an import hook answers for the old names instead. Importing one warns
(DeprecationWarning, naming the new path) and gives the new module itself, so private names,
patches and identity (`old is new`) behave as before the move. `inferlab/__init__.py` installs it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {  # old module name -> new module name
    "inferlab.constrain.bench": "inferlab.bench.schema_bench",
    "inferlab.constrain.bench_peers": "inferlab.bench.schema_peers",
    "inferlab.constrain.jump_forward": "inferlab.bench.jump_forward",
    "inferlab.constrain.numbers": "inferlab.constrain.number_regex",
    "inferlab.kv.units": "inferlab.units",
    "inferlab.measure.publish": "inferlab.cli.publish",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new_name: str):
        self.new_name = new_name

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {self.new_name}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)  # (warn skips the import machinery's frames)
        return importlib.import_module(self.new_name)   # its own attributes are kept (not re-initialised)

    def exec_module(self, module) -> None:
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new_name = MOVED.get(fullname)
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new_name)) if new_name else None


def install() -> None:
    """Append the finder (after the real ones: a module at a path always wins); idempotent."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
