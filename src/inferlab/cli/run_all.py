"""`inferlab run all`: every registered lab in order, each into OUT/<lab name>/."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from inferlab.errors import InferlabError
from inferlab.labs import LabOptions, all_labs

NAME = "run"
HELP = "run every registered lab in order (run all) or one lab by name"


def add_arguments(p):
    p.add_argument("which", help="'all', or a lab name such as 15-attention-perf")
    p.add_argument("--quick", action="store_true", help="reduced runs for CI (at most ~2 minutes per lab)")
    p.add_argument("--out", type=Path, default=Path("experiments"), help="root folder (default experiments)")
    p.add_argument("--force", action="store_true", help="replace existing experiment folders")


def run(args) -> int:
    labs = all_labs()
    if args.which != "all":
        labs = [lab for lab in labs if lab.name == args.which]
        if not labs:
            names = ", ".join(lab.name for lab in all_labs())
            raise InferlabError(f"unknown lab {args.which!r}; known: all, {names}")
    console = Console(stderr=True)
    for lab in labs:
        out = args.out / lab.name
        t0 = time.perf_counter()
        console.rule(f"[bold]{lab.name}[/bold]: {lab.title}")
        lab.run(LabOptions(out=out, quick=args.quick, force=args.force))
        console.print(f"{lab.name}: wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return 0
