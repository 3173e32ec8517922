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
    budget_s: float | None = None  # extra seconds to resolve comparisons; None = the lab's default
    llc_bytes: int | None = None   # the roofline's pretended last-level cache (--llc); None = sysfs's
    max_memory_bytes: int | None = None  # the roofline's memory budget (--max-memory); None = its default

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
    # The report: README, figures and the reproducing script, rendered from the folder's
    # results.json and manifest.json alone (`inferlab report DIR`). name -> str | Figure.
    report: Callable[[dict, dict, Path], dict[str, object]] | None = None


def add_report(writer, files: dict[str, object]) -> None:
    """Put a report's files into an ExperimentWriter: text as UTF-8, figures as PNG."""
    for name, item in files.items():
        if isinstance(item, str):
            writer.add_text(name, item)
        else:
            writer.add_figure(name, item)


def lab_named(name: str) -> Lab | None:
    return next((lab for lab in all_labs() if lab.name == name), None)


def all_labs() -> list[Lab]:
    import inferlab.labs as pkg

    labs = []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"inferlab.labs.{info.name}")
        if isinstance(getattr(mod, "LAB", None), Lab):
            labs.append(mod.LAB)
    return sorted(labs, key=lambda lab: lab.order)
