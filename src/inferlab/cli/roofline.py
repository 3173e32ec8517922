"""`inferlab roofline`: this machine's bandwidth and compute ceilings, and the ridge point."""

from __future__ import annotations

from dataclasses import replace

from inferlab.cli.common import add_budget_argument, add_lab_arguments, print_json
from inferlab.labs.roofline import write_roofline
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S
from inferlab.roofline import EXPERIMENT, RooflineConfig

NAME = "roofline"
HELP = "measure STREAM bandwidth, cache roofs, GEMM peak and the ridge point of this machine"
EXAMPLES = (
    'inferlab roofline --quick --out /tmp/roofline',
    'inferlab roofline --threads 1 --json > roofline.json',
)


def add_arguments(p) -> None:
    add_budget_argument(p, default=DEFAULT_BUDGET_S, quick=QUICK_BUDGET_S)
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=None)


def run(args) -> int:
    config = RooflineConfig.for_run(quick=args.quick, threads=args.threads)
    if args.budget_s is not None:
        config = replace(config, budget_s=args.budget_s)
    results = write_roofline(config, args.out, force=args.force)
    if args.json:
        print_json(results)
    else:
        ridge = results["ridge"]
        print(f"wrote {args.out}/  ridge {results['ridge_point_flop_per_byte']:.2f} FLOP/B "
              f"(p10-p90 {ridge['p10']:.2f}-{ridge['p90']:.2f}) = {ridge['peak_GFLOPS']:.1f} GFLOP/s (float32 GEMM "
              f"median) / {ridge['bandwidth_GBps']:.1f} GB/s (triad median), {ridge['threads']} thread(s)")
    return 0
