"""`inferlab run all`: every registered lab in order, each into OUT/<lab name>/."""

from __future__ import annotations

import datetime as _dt
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
    p.add_argument("--force", action="store_true", help="replace existing experiment folders in --out")


def run_root(out: Path, names: list[str], *, force: bool) -> Path:
    """Where this run writes. Earlier results are never overwritten without --force: when --out
    already holds one of these labs, the run goes to a new folder out/runs/<UTC time>/ instead."""
    if force or not any((out / name).exists() for name in names):
        return out
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return out / "runs" / stamp


def run(args) -> int:
    labs = all_labs()
    if args.which != "all":
        labs = [lab for lab in labs if lab.name == args.which]
        if not labs:
            names = ", ".join(lab.name for lab in all_labs())
            raise InferlabError(f"unknown lab {args.which!r}; known: all, {names}")
    console = Console(stderr=True)
    root = run_root(args.out, [lab.name for lab in labs], force=args.force)
    if root != args.out:
        console.print(f"{args.out}/ already holds results: this run writes to {root}/ "
                      f"(pass --force to replace {args.out}/ in place)")
    for lab in labs:
        out = root / lab.name
        t0 = time.perf_counter()
        console.rule(f"[bold]{lab.name}[/bold]: {lab.title}")
        lab.run(LabOptions(out=out, quick=args.quick, force=args.force))
        console.print(f"{lab.name}: wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    print(f"artifacts: {root}/")
    return 0
