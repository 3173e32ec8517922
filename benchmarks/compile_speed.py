"""Compile time of the stack grammar (issue 15): an object with 1,000 optional properties, and
optionally the slowest JSONSchemaBench schemas, schema -> CompiledGrammar -> minimal DFAs -> StackMachine.

Each compile is cold: the caches a process keeps across compiles (small DFAs, the parser's class
texts: stack.clear_compile_caches) are cleared first, so the figure is a first compile's. Timed
with inferlab.measure (warm-up discarded, gc off, >= 50 ms per sample, median with p10/p90).
Bench schemas compile as schema-bench does (its state and NFA limits); a refusal is timed too.

    python benchmarks/compile_speed.py --out benchmarks/results/compile_speed [--force] [--quick] [--json]
    python benchmarks/compile_speed.py --jsb ../shared/jsonschemabench --out /tmp/compile-speed
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int
from inferlab.bench.schema_bench import BenchConfig, compile_within_limits
from inferlab.constrain.stack import clear_compile_caches, compile_machine
from inferlab.errors import InferlabError
from inferlab.measure.machine import machine_info
from inferlab.cli.publish import benchmark_main
from inferlab.measure.timing import measure

EXPERIMENT = "compile-speed"
# The slowest compiles and refusals of the schema-bench sample before issue 15's speed work.
JSB_SCHEMAS = ("WashingtonPost---wp_96_Normalized", "WashingtonPost---wp_78_Normalized",
               "WashingtonPost---wp_83_Normalized", "WashingtonPost---wp_8_Normalized", "Github_ultra---o32645",
               "JsonSchemaStore---schema-app", "Snowplow---sp_17_Normalized")


def optional_properties(n: int) -> dict:
    return {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(n)}}


def time_compile(compile_fn, samples: int) -> dict:
    """Cold compiles of one schema: seconds (median, p10, p90) and the machine's size or refusal."""
    outcome = {}

    def once():
        clear_compile_caches()
        try:
            _, machine = compile_fn()
            outcome.update(compiled=True, automata=machine.n_automata, dfa_states=machine.n_states)
        except InferlabError as exc:
            outcome.update(compiled=False, reason=str(exc)[:200])
    stats = measure(once, samples=samples, min_sample_s=0.05)
    return {"median_s": stats.median, "p10_s": stats.p10, "p90_s": stats.p90, "samples": stats.n,
            "noisy": stats.noisy, **outcome}


def run(args) -> dict:
    samples = 3 if args.quick else args.samples
    cases = {"1,000 optional properties": time_compile(lambda: compile_machine(optional_properties(1000)), samples)}
    if args.jsb is not None:
        config = BenchConfig(directory=args.jsb)
        for name in JSB_SCHEMAS:
            path = args.jsb / f"{name}.json"
            if not path.is_file():
                raise InferlabError(f"--jsb: {path} is not a file (expected the JSONSchemaBench folder)")
            schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
            cases[name] = time_compile(lambda s=schema: compile_within_limits(s, config), samples)
    config = {"samples": samples, "jsb": None if args.jsb is None else str(args.jsb), "quick": args.quick}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "machine": machine_info(args.threads),
            "summary": {name: c["median_s"] for name, c in cases.items()}, "cases": cases}


def report(results: dict) -> None:
    for name, c in results["cases"].items():
        what = f"{c['automata']} automata, {c['dfa_states']:,} DFA states" if c["compiled"] else f"refused: {c['reason']}"
        print(f"{name}: {c['median_s']:.3f} s (p10 {c['p10_s']:.3f}, p90 {c['p90_s']:.3f}; {c['samples']} cold "
              f"compiles) {what}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/compile_speed")
    p.add_argument("--samples", type=positive_int, default=5, help="timed cold compiles per schema (default 5)")
    p.add_argument("--jsb", type=Path, default=None,
                   help="JSONSchemaBench folder: also time its slowest schemas (as schema-bench compiles them)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    return benchmark_main("compile_speed", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
