"""`inferlab run all`: every registered lab in order, each into OUT/<lab name>/."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from inferlab.cli.common import add_budget_argument, print_skip_notes, timestamped_runs_folder
from inferlab.cli.roofline import add_memory_arguments, memory_flags
from inferlab.errors import InferlabError
from inferlab.labs import LabOptions, all_labs
from inferlab.labs.mask_overhead import MASK_BUDGET_S
from inferlab.measure.artifacts import check_writable
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S

NAME = "run"
HELP = "run every registered lab in order (run all) or one lab by name"
EXAMPLES = (
    'inferlab run all --quick',
    'inferlab run 22-cache-sizing --out /tmp/experiments',
    'inferlab run all --quick --budget-s 10',
    'inferlab run all --quick --llc 480MiB --max-memory 512MiB',
)
DEFAULT_ROOT = Path("experiments")


def _root_folder(text: str) -> Path:
    """--out's folder; an empty path is refused here, as Path("") is the working folder, '.'."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (it would be the working folder)")
    return Path(text)


def add_arguments(p):
    p.add_argument("which", help="'all', or a lab name such as 15-attention-perf")
    p.add_argument("--quick", action="store_true", help="reduced runs for CI (at most ~2 minutes per lab)")
    p.add_argument("--out", type=_root_folder, default=None,
                   help=f"root folder, one sub-folder per lab (default {DEFAULT_ROOT}; when it already holds "
                        f"these labs, a new {DEFAULT_ROOT}/runs/<UTC time>/)")
    p.add_argument("--force", action="store_true", help="replace existing experiment folders in --out")
    # passed to every lab; without it each lab keeps its own default
    add_budget_argument(p, default=f"each lab's own: {DEFAULT_BUDGET_S:g}, the mask lab {MASK_BUDGET_S:g}",
                        quick=QUICK_BUDGET_S)
    add_memory_arguments(p)   # passed to the roofline, the lab that sizes arrays by them


def run_root(out: Path | None, names: list[str], *, force: bool) -> Path:
    """Where this run writes: the one --out policy (cli.common.resolve_out) for a root folder.
    The default root holding one of these labs sends the run to DEFAULT_ROOT/runs/<UTC time>/;
    an explicit --out holding one is refused unless --force."""
    held = [name for name in names if ((out or DEFAULT_ROOT) / name).exists()]
    if force or not held:
        return out or DEFAULT_ROOT
    if out is not None:
        raise InferlabError(f"--out {out} already holds {', '.join(held)}; pass --force to replace "
                            f"or choose another --out")
    return timestamped_runs_folder(DEFAULT_ROOT)


def _interrupted(console: Console, root: Path, done: list[str], lab: str) -> None:
    if done:
        console.print(f"interrupted during {lab}: {root}/ keeps the completed lab(s) {', '.join(done)}; "
                      f"{lab} and the labs after it were not written")
    else:
        console.print(f"interrupted during {lab}: nothing was written")


def run(args) -> int:
    memory = memory_flags(args)
    labs = all_labs()
    if args.which != "all":
        labs = [lab for lab in labs if lab.name == args.which]
        if not labs:
            names = ", ".join(lab.name for lab in all_labs())
            raise InferlabError(f"unknown lab {args.which!r}; known: all, {names}")
    root = run_root(args.out, [lab.name for lab in labs], force=args.force)
    check_writable(root / labs[0].name, given=root)   # before the first header
    console = Console(stderr=True)
    if root != (args.out or DEFAULT_ROOT):
        held = [f"{DEFAULT_ROOT / lab.name}/" for lab in labs if (DEFAULT_ROOT / lab.name).exists()]
        console.print(f"{DEFAULT_ROOT}/ already holds results: this run writes to {root}/ "
                      f"(pass --force to replace {', '.join(held)} in place; nothing else there)")
    done: list[str] = []
    for lab in labs:
        out = root / lab.name
        t0 = time.perf_counter()
        console.rule(f"[bold]{lab.name}[/bold]")
        console.print(lab.title)  # (under the rule: a rule cuts a long title at the console's width)
        try:
            results = lab.run(LabOptions(out=out, quick=args.quick, force=args.force, budget_s=args.budget_s,
                                         **memory))
        except KeyboardInterrupt:
            _interrupted(console, root, done, lab.name)
            raise
        done.append(lab.name)
        console.print(f"{lab.name}: wrote {out}/ in {time.perf_counter() - t0:.1f} s")
        print_skip_notes(results, f"{lab.name}")
    print(f"artifacts: {root}/")
    return 0
