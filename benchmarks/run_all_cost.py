"""Wall time and peak RSS of `inferlab run all`, full and --quick (issue 13's cost targets).

Each run is a fresh `python -m inferlab run all [--quick] --out TMP --force` subprocess: its wall
time is measured here, its peak RSS is the child's ru_maxrss (the largest resident set any lab
reached, the figure a laptop user hits), and each lab's own wall time and peak RSS are read back
from the run_cost of its manifest.json. Targets (quiet 2-core machine): full <= 360 s and
<= 1.5 GiB, --quick <= 60 s.

    python benchmarks/run_all_cost.py --out benchmarks/results/run_all_cost [--force] [--only quick|full]

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
from pathlib import Path

from inferlab.cli.common import add_out_arguments, parse_out_args
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest

EXPERIMENT = "run-all-cost"
TARGETS = {"full": {"wall_s": 360.0, "peak_rss_bytes": 1.5 * 2**30}, "quick": {"wall_s": 60.0}}


def run_once(quick: bool) -> dict:
    """One `run all` in a child process: wall seconds, the child's peak RSS, each lab's run_cost."""
    with tempfile.TemporaryDirectory(prefix="inferlab-run-all-") as tmp, \
            tempfile.TemporaryFile("w+") as err:   # a file, not a pipe: the progress bars cannot fill it
        cmd = [sys.executable, "-m", "inferlab", "run", "all", "--out", tmp, "--force"] + (["--quick"] if quick else [])
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
    return {"command": " ".join(cmd[1:]).replace(tmp, "TMP"), "wall_s": wall,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "labs": labs}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_arguments(p, default_out="benchmarks/results/run_all_cost")   # the one --out policy
    p.add_argument("--only", choices=("quick", "full"), default=None, help="run one of the two (default both)")
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)
        runs = {}
        for kind in ("quick", "full"):
            if args.only in (None, kind):
                runs[kind] = run_once(kind == "quick")
                runs[kind]["targets"] = TARGETS[kind]
                runs[kind]["within_targets"] = all(runs[kind][k] <= v for k, v in TARGETS[kind].items())
        results = {"schema_version": 1, "experiment": EXPERIMENT, "cpu_count": os.cpu_count(), "runs": runs}
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(
            experiment=EXPERIMENT, seed=0, config={"only": args.only}, depends_on=None,
            results_summary={k: {"wall_s": r["wall_s"], "peak_rss_GiB": r["peak_rss_bytes"] / 2**30}
                             for k, r in runs.items()}, threads=None))
        writer.commit()
    except InferlabError as exc:
        print(f"run_all_cost.py: error: {exc}", file=sys.stderr)
        return 2
    for kind, r in runs.items():
        print(f"run all {'--quick' if kind == 'quick' else '(full)'}: {r['wall_s']:.1f} s, peak RSS "
              f"{r['peak_rss_bytes'] / 2**30:.2f} GiB (targets {r['targets']})")
    print(f"wrote {args.out}/")  # (a timestamped sibling where the default folder held results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
