"""`inferlab compare DIR_A DIR_B`: runs of one lab, every shared measurement's B/A with its 95% CI."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from inferlab.cli.common import print_json
from inferlab.measure.artifacts import ExperimentWriter
from inferlab.measure.compare import DEFAULT_MARGIN, compare_figure, compare_runs

NAME = "compare"
HELP = "compare runs of one lab: B/A per shared measurement, its 95% CI and an outcome at a margin"
EXAMPLES = (
    "inferlab compare experiments/30-mask-overhead /tmp/run2/30-mask-overhead",
    "inferlab compare A/15-attention-perf B/15-attention-perf --margin 0.03 --out /tmp/cmp",
    "inferlab compare A/01-roofline B/01-roofline --json",
    "inferlab compare A1/15-attention-perf B1/15-attention-perf --also-a A2/15-attention-perf A3/15-attention-perf "
    "A4/15-attention-perf --also-b B2/15-attention-perf B3/15-attention-perf B4/15-attention-perf",
    "inferlab compare A1/01-roofline B1/01-roofline --also-a A2/01-roofline A3/01-roofline A4/01-roofline "
    "A5/01-roofline A6/01-roofline --also-b B2/01-roofline B3/01-roofline B4/01-roofline B5/01-roofline "
    "B6/01-roofline --paired",
)


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 (0.05 is 5%), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 (0.05 is 5%), got {text}")
    return value


def add_arguments(p) -> None:
    p.add_argument("dir_a", type=Path, metavar="DIR_A", help="experiment folder of run A (the baseline)")
    p.add_argument("dir_b", type=Path, metavar="DIR_B", help="experiment folder of run B, the same lab")
    for side in ("a", "b"):
        p.add_argument(f"--also-{side}", type=Path, nargs="+", action="extend", default=[], metavar="DIR",
                       help=f"further runs of side {side.upper()}: with several runs on a side, each run gives "
                            "one value (its median) and the CI covers the drift between runs "
                            "(at least 4 runs a side for a 95%% CI)")
    p.add_argument("--paired", action="store_true",
                   help="the runs were taken in pairs, back to back (A1 B1 A2 B2 ...; DIR_A with DIR_B, then "
                        "--also-a with --also-b in order): B/A is the median of the per-pair ratios, whose CI "
                        "drift slower than a pair does not widen (at least 6 pairs for a 95%% CI)")
    p.add_argument("--margin", type=_margin, default=DEFAULT_MARGIN,
                   help=f"equivalence margin: 'equivalent' when the CI of B/A lies inside 1 +- margin "
                        f"(default {DEFAULT_MARGIN:g})")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON instead of the table")
    p.add_argument("--out", type=Path, default=None,
                   help="also write compare.json and compare.png into this new folder (none without --out)")
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")


def run(args) -> int:
    writer = ExperimentWriter(args.out, force=args.force) if args.out is not None else None   # refuses before any work
    report = compare_runs([args.dir_a, *args.also_a], [args.dir_b, *args.also_b], margin=args.margin,
                          paired=args.paired)
    if writer is not None:
        writer.add_json("compare.json", report)
        writer.add_figure("compare.png", compare_figure(report))
        writer.commit()
    if args.json:
        print_json(report)
        return 0
    runs = f" ({len(report['a_runs'])} runs of A, {len(report['b_runs'])} of B)" if len(report["a_runs"]) + len(report["b_runs"]) > 2 else ""
    how = "median of paired ratios" if report["paired"] else "Hodges-Lehmann"
    table = Table(title=f"{report['experiment']}{runs}: B/A, {how} with its 95% CI, margin +-{report['margin']:.0%}")
    for col in ("measurement", "A median", "B median", "B/A", "95% CI", "outcome"):
        table.add_column(col, justify="left" if col in ("measurement", "outcome") else "right",
                         no_wrap=col != "measurement")
    for r in report["rows"]:
        unit = r["unit"]
        table.add_row(escape(r["name"]), f"{r['a_median']:.4g} {unit}", f"{r['b_median']:.4g} {unit}", f"{r['ratio']:.3f}",
                      f"{r['ci_low']:.3f}-{r['ci_high']:.3f}", f"{r['outcome']} ({r['reading']})")
    console = Console()
    if not console.is_terminal:      # a pipe or a log: whole names, not 80 columns of folded cells
        console = Console(width=max(120, max(len(r["name"]) for r in report["rows"]) + 90))
    console.print(table)
    counts = {o: sum(r["outcome"] == o for r in report["rows"]) for o in ("equivalent", "above", "below", "undecided")}
    console.print(f"{len(report['rows'])} shared measurements: " + ", ".join(f"{n} {o}" for o, n in counts.items())
                  + (f"; wrote {args.out}/" if args.out is not None else ""))
    console.print(f"[dim]{report['scope']}[/dim]")
    return 0
