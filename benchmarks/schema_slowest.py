"""The slowest schemas of a schema-bench run, timed again, optionally under several source trees.

Reads a schema-bench results.json, takes its `--top` schemas by compile + refusal time, and runs
each one as schema-bench does with `--vocab none` (bench.schema_bench.run_schema: compile or
refuse, then the test instances; no mask timing) in a fresh Python process per run, so one run's
caches never serve another and a hung compile is cut at `--timeout` (jsonschema, which the
compiler loads for enum/const beside other keywords, is imported before the clock starts, as a
bench process imports it once for all its schemas). With several `--src` trees
(e.g. a snapshot of the base commit and this checkout's src) the runs are interleaved per schema,
so a ratio between trees comes from one run. Per run: the bench's compile_ms or refuse_ms (wall)
and the child's CPU seconds for the whole run_schema call, test instances included (less
sensitive to a loaded machine than wall time).

    python benchmarks/schema_slowest.py --results RUN/results.json --top 30 --out /tmp/slowest
    python benchmarks/schema_slowest.py --results RUN/results.json --src /tmp/base/src --src src --out /tmp/slowest
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int
from inferlab.errors import InferlabError
from inferlab.measure.machine import machine_info
from inferlab.measure.progress import progress_bar
from inferlab.cli.publish import benchmark_main

EXPERIMENT = "schema-slowest"

# run in the child, under the tree given by its PYTHONPATH: one schema as `--vocab none` runs it
_CHILD = """
import json, sys, time
from pathlib import Path
from inferlab.bench.schema_bench import BenchConfig, run_schema
try:  # imported once per bench process (~2 s): not part of one schema's time there
    import jsonschema.validators
except ImportError:
    pass
path = Path(sys.argv[1])
cpu = time.process_time()
res = run_schema(path, BenchConfig(directory=path.parent))
cpu = time.process_time() - cpu
print(json.dumps({"compiled": res.compiled, "reason": res.reason, "run_cpu_s": cpu,
                  "wall_ms": res.compile_ms if res.compiled else res.refuse_ms}))
"""


def slowest(results_path: Path, top: int) -> tuple[Path, list[dict]]:
    """(the bench's folder, its `top` schemas by compile + refusal time, slowest first)."""
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
        directory = Path(results["config"]["directory"])
        rows = results["schemas"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InferlabError(f"--results: {results_path} is not a schema-bench results.json ({exc})") from None
    rows = sorted(rows, key=lambda r: (r.get("compile_ms") or 0) + (r.get("refuse_ms") or 0), reverse=True)
    return directory, rows[:top]


def run_one(path: Path, src: Path, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out": True, "wall_ms": timeout * 1e3, "run_cpu_s": None, "compiled": None, "reason": None}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise InferlabError(f"{path.name} under {src}: the child failed ({tail[0][:200]})")
    return {"timed_out": False, **json.loads(done.stdout.strip().splitlines()[-1])}


def run(args) -> dict:
    directory, rows = slowest(args.results, args.top)
    if args.dir is not None:
        directory = args.dir
    trees = args.src or [Path(__file__).resolve().parents[1] / "src"]
    for tree in trees:
        if not (tree / "inferlab").is_dir():
            raise InferlabError(f"--src: {tree} holds no inferlab package")
    paths = [directory / f"{r['name']}.json" for r in rows]  # name: the file's stem
    for path in paths:
        if not path.is_file():
            raise InferlabError(f"--dir: {path} is not a file (expected the bench's JSONSchemaBench folder)")
    runs = {str(t): {p.stem: [] for p in paths} for t in trees}
    with progress_bar(len(paths) * len(trees) * args.samples, "slowest schemas") as step:
        for _ in range(args.samples):
            for path in paths:
                for tree in trees:  # interleaved: each schema under every tree before the next
                    step(f"{path.stem} ({tree})")
                    runs[str(tree)][path.stem].append(run_one(path, tree, args.timeout))
    recorded = {r["name"]: (r.get("compile_ms") or 0) + (r.get("refuse_ms") or 0) for r in rows}
    schemas = {}
    for path in paths:
        per_tree = {}
        for tree in trees:
            samples = runs[str(tree)][path.stem]
            last = samples[-1]
            per_tree[str(tree)] = {
                "wall_ms_median": statistics.median(s["wall_ms"] for s in samples),
                "run_cpu_s_median": None if any(s["run_cpu_s"] is None for s in samples)
                else statistics.median(s["run_cpu_s"] for s in samples),
                "timed_out": any(s["timed_out"] for s in samples), "compiled": last["compiled"],
                "reason": None if last["reason"] is None else last["reason"][:200], "samples": samples}
        schemas[path.stem] = {"recorded_ms": recorded.get(path.stem), "trees": per_tree}
    totals = {str(t): sum(s["trees"][str(t)]["wall_ms_median"] for s in schemas.values()) / 1e3 for t in trees}
    config = {"results": str(args.results), "directory": str(directory), "top": args.top, "samples": args.samples,
              "timeout_s": args.timeout, "trees": [str(t) for t in trees]}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "machine": machine_info(args.threads),
            "summary": {"total_wall_s": totals}, "schemas": schemas}


def report(results: dict) -> None:
    trees = results["config"]["trees"]
    print(f"{'schema':<48} {'recorded':>9} " + " ".join(f"{'tree ' + str(i):>18}" for i in range(len(trees))))
    for name, s in results["schemas"].items():
        cells = []
        for tree in trees:
            t = s["trees"][tree]
            mark = ">" if t["timed_out"] else "C" if t["compiled"] else "R"
            cpu = "" if t["run_cpu_s_median"] is None else f" {t['run_cpu_s_median']:.2f}cpu"
            cells.append(f"{mark}{t['wall_ms_median'] / 1e3:8.2f}s{cpu:>9}")
        print(f"{name[:48]:<48} {(s['recorded_ms'] or 0) / 1e3:8.1f}s " + " ".join(cells))
    for i, tree in enumerate(trees):
        print(f"tree {i}: {tree}: {results['summary']['total_wall_s'][tree]:.1f} s in all "
              "(C compiled, R refused, > cut at the timeout)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/schema_slowest")
    p.add_argument("--results", type=Path, required=True, help="a schema-bench results.json")
    p.add_argument("--top", type=positive_int, default=30, help="how many of its slowest schemas (default 30)")
    p.add_argument("--dir", type=Path, default=None, help="the schemas' folder (default: the run's directory)")
    p.add_argument("--src", type=Path, action="append", default=None,
                   help="a source tree to run under (PYTHONPATH); repeat to compare (default: this checkout's src)")
    p.add_argument("--samples", type=positive_int, default=1, help="runs per schema and tree (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before one run is cut (default 120)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    return benchmark_main("schema_slowest", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
