"""`inferlab roofline`: this machine's bandwidth and compute ceilings, and the ridge point."""

from __future__ import annotations

from dataclasses import replace

from inferlab.cli.common import add_budget_argument, add_lab_arguments, check_fits_in_memory, print_json
from inferlab.units import parse_bytes
from inferlab.labs.roofline import write_roofline
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S
from inferlab.roofline import (DEFAULT_MAX_MEMORY_BYTES, EXPERIMENT, MIN_LLC_BYTES, MIN_MAX_MEMORY_BYTES,
                               RooflineConfig, check_memory_flags)

NAME = "roofline"
HELP = "measure STREAM bandwidth, cache roofs, GEMM peak and the ridge point of this machine"
EXAMPLES = (
    'inferlab roofline --quick --out /tmp/roofline',
    'inferlab roofline --threads 1 --json > roofline.json',
    'inferlab roofline --quick --llc 480MiB --max-memory 512MiB --out /tmp/roofline-480',
)


def add_memory_arguments(p) -> None:
    """--llc and --max-memory, as `inferlab roofline` and `inferlab run all` take them."""
    p.add_argument("--llc", default=None, metavar="SIZE",
                   help="pretend sysfs's last-level cache is SIZE (e.g. 480MiB; at least "
                        f"{MIN_LLC_BYTES // 1024} KiB): the sweep still finds the level this process reaches")
    p.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="memory budget of the roofline's arrays: the three STREAM arrays together and the "
                        f"sweep's largest working set (default {DEFAULT_MAX_MEMORY_BYTES // 2**20}MiB; at least "
                        f"{MIN_MAX_MEMORY_BYTES // 2**20}MiB); units as `inferlab kv` takes them (MiB, GiB, MB, GB)")


def memory_flags(args) -> dict:
    """{"llc_bytes", "max_memory_bytes"} from --llc and --max-memory (None where not given);
    a bad value is one line naming the flag, before any work."""
    llc = None if args.llc is None else parse_bytes(args.llc, flag="--llc")
    budget = None if args.max_memory is None else parse_bytes(args.max_memory, flag="--max-memory")
    check_memory_flags(llc, budget)
    if budget is not None:
        check_fits_in_memory(budget, "--max-memory")
    return {"llc_bytes": llc, "max_memory_bytes": budget}


def add_arguments(p) -> None:
    add_budget_argument(p, default=DEFAULT_BUDGET_S, quick=QUICK_BUDGET_S)
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=None)
    add_memory_arguments(p)


def run(args) -> int:
    config = RooflineConfig.for_run(quick=args.quick, threads=args.threads, **memory_flags(args))
    if args.budget_s is not None:
        config = replace(config, budget_s=args.budget_s)
    results = write_roofline(config, args.out, force=args.force)
    if args.json:
        print_json(results)
    else:
        ridge = results["ridge"]
        at_least = ">= " if ridge["bound"] == "lower" else ""
        print(f"wrote {args.out}/  ridge {at_least}{results['ridge_point_flop_per_byte']:.2f} FLOP/B "
              f"(p10-p90 {ridge['p10']:.2f}-{ridge['p90']:.2f}) = {ridge['peak_GFLOPS']:.1f} GFLOP/s (float32 GEMM "
              f"median) / {ridge['bandwidth_GBps']:.1f} GB/s (triad median), {ridge['threads']} thread(s)"
              + (f"; a lower bound: {ridge['bound_reason']}" if ridge["bound"] == "lower" else ""))
    return 0
