"""Wall time, peak RSS and verdicts of `inferlab run all`, full and --quick (issues 13 and 47).

Each run is a fresh `python -m inferlab run all [--quick] --out TMP --force` subprocess: its wall
time is measured here, its peak RSS is the child's ru_maxrss from wait4 (the largest resident set
of the run, its own waited-for children included, as GNU time reports it), and each lab's own wall
time and peak RSS are read back from the run_cost of its manifest.json. Then every lab's verdicts
are audited by the test suite's independent checker (tests/verdict_checks.py): each statement
parsed back against its numbers and the rule, each README sentence that compares backed by a
verdict; a failure is a contradiction. Counted: verdicts, decided, contradictions.

--busy starts one busy loop per core (`python -c "while True: pass"`) for the whole run, the
issue's loaded condition. --llc and --max-memory pass through to `run all` (the roofline).

Targets (issue 47): quick <= 90 s quiet and <= 1 GiB; full <= 1.5 GiB; under --busy, quick
>= 60% decided, full >= 80% decided and <= 480 s; 0 contradictions everywhere.

    python benchmarks/run_all_cost.py --out benchmarks/results/run_all_cost [--force]
        [--only quick|full] [--busy] [--llc 480MiB] [--max-memory SIZE]

Writes results.json and manifest.json into --out (atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from inferlab.cli.common import add_out_arguments, parse_out_args
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest

# The auditor is the test suite's own independent checker (it re-derives each outcome from the CI).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from verdict_checks import check_verdict, unbacked_comparisons  # noqa: E402

EXPERIMENT = "run-all-cost"
QUIET = {"quick": {"wall_s": 90.0, "peak_rss_bytes": 2**30}, "full": {"peak_rss_bytes": 1.5 * 2**30}}
BUSY = {"quick": {"decided_share": 0.60}, "full": {"decided_share": 0.80, "wall_s": 480.0}}


def audit(root: Path) -> dict:
    """Every lab's verdicts under root: counts, and the checker's failures (contradictions)."""
    labs, bad = {}, []
    for results in sorted(root.glob("*/results.json")):
        verdicts = json.loads(results.read_text()).get("verdicts", [])   # a list in every lab's results
        readme = (results.parent / "README.md").read_text()
        for v in verdicts:
            try:
                check_verdict(v)
            except AssertionError:
                bad.append(f"{results.parent.name}: {v.get('id')}")
        bad += [f"{results.parent.name}: unbacked: {line}" for line in unbacked_comparisons(readme, verdicts)]
        labs[results.parent.name] = {"verdicts": len(verdicts), "decided": sum(v["resolved"] for v in verdicts),
                                     "undecided": [v["id"] for v in verdicts if not v["resolved"]]}
    total, decided = sum(x["verdicts"] for x in labs.values()), sum(x["decided"] for x in labs.values())
    return {"verdicts": total, "decided": decided, "decided_share": decided / total if total else None,
            "contradictions": bad, "labs": labs}


@contextmanager
def busy_loops(n: int):
    """n processes spinning at 100% CPU while the block runs (none for n = 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def run_once(quick: bool, extra: list[str]) -> dict:
    """One `run all` in a child process: wall seconds, the child's peak RSS, each lab's run_cost,
    the verdict audit."""
    with tempfile.TemporaryDirectory(prefix="inferlab-run-all-") as tmp, \
            tempfile.TemporaryFile("w+") as err:   # a file, not a pipe: the progress bars cannot fill it
        cmd = [sys.executable, "-m", "inferlab", "run", "all", "--out", tmp, "--force"] + (["--quick"] if quick else []) + extra
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)   # this child's own rusage, not all children's
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            last = (err.read().strip().splitlines() or ["no stderr"])[-1]
            raise InferlabError(f"`{' '.join(cmd)}` exited {proc.returncode}: {last}")
        labs = {}
        for manifest in sorted(Path(tmp).glob("*/manifest.json")):
            labs[manifest.parent.name] = json.loads(manifest.read_text()).get("run_cost")
        verdicts = audit(Path(tmp))
    return {"command": " ".join(cmd[1:]).replace(tmp, "TMP"), "wall_s": wall,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "labs": labs, "verdicts": verdicts}


def targets_met(run: dict, targets: dict) -> bool:
    figures = {**run, "decided_share": run["verdicts"]["decided_share"]}
    at_least = {"decided_share"}
    return (not run["verdicts"]["contradictions"]
            and all(figures[k] >= v if k in at_least else figures[k] <= v for k, v in targets.items()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_arguments(p, default_out="benchmarks/results/run_all_cost")   # the one --out policy
    p.add_argument("--only", choices=("quick", "full"), default=None, help="run one of the two (default both)")
    p.add_argument("--busy", action="store_true", help="one busy loop per core during each run")
    p.add_argument("--llc", default=None, help="passed to run all (e.g. 480MiB)")
    p.add_argument("--max-memory", default=None, help="passed to run all")
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)
        extra = [a for flag, v in (("--llc", args.llc), ("--max-memory", args.max_memory)) if v for a in (flag, v)]
        targets = BUSY if args.busy else QUIET
        runs = {}
        with busy_loops(os.cpu_count() if args.busy else 0):
            for kind in ("quick", "full"):
                if args.only in (None, kind):
                    runs[kind] = run_once(kind == "quick", extra)
                    runs[kind]["targets"] = targets[kind]
                    runs[kind]["within_targets"] = targets_met(runs[kind], targets[kind])
        results = {"schema_version": 2, "experiment": EXPERIMENT, "cpu_count": os.cpu_count(),
                   "busy_loops": os.cpu_count() if args.busy else 0, "run_all_flags": extra, "runs": runs}
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(
            experiment=EXPERIMENT, seed=0, config={"only": args.only, "busy": args.busy, "llc": args.llc,
                                                   "max_memory": args.max_memory}, depends_on=None,
            results_summary={k: {"wall_s": r["wall_s"], "peak_rss_GiB": r["peak_rss_bytes"] / 2**30,
                                 "decided": f"{r['verdicts']['decided']}/{r['verdicts']['verdicts']}",
                                 "contradictions": len(r["verdicts"]["contradictions"])}
                             for k, r in runs.items()}, threads=None))
        writer.commit()
    except InferlabError as exc:
        print(f"run_all_cost.py: error: {exc}", file=sys.stderr)
        return 2
    for kind, r in runs.items():
        v = r["verdicts"]
        print(f"run all {'--quick' if kind == 'quick' else '(full)'}{' under busy loops' if args.busy else ''}: "
              f"{r['wall_s']:.1f} s, peak RSS {r['peak_rss_bytes'] / 2**30:.2f} GiB, {v['decided']}/{v['verdicts']} "
              f"verdicts decided, {len(v['contradictions'])} contradictions (targets {r['targets']}: "
              f"{'met' if r['within_targets'] else 'NOT met'})")
    print(f"wrote {args.out}/")  # (a timestamped sibling where the default folder held results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
