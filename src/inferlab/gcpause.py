"""gc_disabled(): the cyclic GC off for a block, its previous state restored (a leaf: the timing
harness, the benchmarks and the grammar's warm-up all pause the GC, and none should import the
others for it)."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_disabled():
    """Disable the cyclic GC (its pauses land in random samples); restore the previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
