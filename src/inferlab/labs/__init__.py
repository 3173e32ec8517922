"""The labs: each module here defines LAB, a thin runner that composes the library and writes
one experiments/NN-name/ folder. `inferlab run all` runs them in LAB.order.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class LabOptions:
    out: Path                 # the experiment folder this run writes
    quick: bool = False       # reduced run, at most ~2 minutes (CI)
    force: bool = False       # replace an existing folder
    threads: int | None = None  # BLAS threads; None = the lab's own default
    seed: int = 0

    def sibling(self, name: str) -> Path | None:
        """The folder `name` beside this lab's out when it holds a finished run (results.json),
        as when `run all` wrote 01-roofline before the labs that read it."""
        path = self.out.parent / name
        return path if (path / "results.json").is_file() else None


@dataclass(frozen=True)
class Lab:
    order: int
    name: str                  # folder name, e.g. "15-attention-perf"
    title: str
    run: Callable[[LabOptions], dict]  # returns the results dict it wrote


def all_labs() -> list[Lab]:
    import inferlab.labs as pkg

    labs = []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"inferlab.labs.{info.name}")
        if isinstance(getattr(mod, "LAB", None), Lab):
            labs.append(mod.LAB)
    return sorted(labs, key=lambda lab: lab.order)
