"""Old import paths kept for one release after a module moved (issue 49's moves).

A shim at the old path calls `moved(__name__, new_module)`: the import warns (DeprecationWarning,
naming the new path) and the old name becomes the new module itself, so private names, patches
and identity (`old is new`) behave as before the move.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType


def moved(old_name: str, new_module: ModuleType) -> None:
    warnings.warn(f"{old_name} moved to {new_module.__name__}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old_name] = new_module
