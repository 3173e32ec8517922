"""`inferlab compare` with several runs a side: the acceptance runs of issue 47, repeatable.

Takes --runs rounds of three `inferlab attention` runs, interleaved (A, A', T per round, in a
seeded random order; A and A' one command at 1 BLAS thread, T the same at --threads 2), so slow
drift of the machine reaches every side alike. Then writes into --out:
- same_commit/: A against A' (one commit, one machine: "equivalent" is the expected answer);
- threads/: A against T (1 against 2 BLAS threads).
Each with --runs runs a side, so the CI covers the drift between runs (compare's per-run mode,
unpaired). Then the same two paired by round (`compare --paired`: run i of each side came from
round i, so drift slower than a round cancels in its ratio): same_commit_paired/ and
threads_paired/. Also first_pair/: A's and A''s first runs alone, the one-run-a-side CI, for
contrast.

    python benchmarks/compare_repeat.py --out benchmarks/results/compare_repeat --runs 6 --force
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAB = "15-attention-perf"


def attention(out: Path, roofline: Path, quick: bool, threads: int) -> None:
    cmd = ["inferlab", "attention", "--roofline", str(roofline), "--out", str(out), "--threads", str(threads)]
    subprocess.run(cmd + (["--quick"] if quick else []), check=True, stdout=subprocess.DEVNULL)


def compare(a: list[Path], b: list[Path], out: Path, paired: bool = False) -> None:
    cmd = ["inferlab", "compare", str(a[0]), str(b[0]), "--out", str(out)] + (["--paired"] if paired else [])
    if len(a) > 1:
        cmd += ["--also-a", *map(str, a[1:]), "--also-b", *map(str, b[1:])]
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=6, help="runs a side (at least 4 for a 95%% CI; default 6)")
    ap.add_argument("--roofline", type=Path, default=Path("experiments/01-roofline"))
    ap.add_argument("--full", action="store_true", help="full attention runs (default: --quick)")
    ap.add_argument("--seed", type=int, default=0, help="the runs' order within each round (default 0)")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"compare_repeat: {args.out} exists (--force replaces it)", file=sys.stderr)
        return 2
    runs = tempfile.TemporaryDirectory(prefix="compare_repeat_")
    root = Path(runs.name)
    sides = {"a": [], "a2": [], "t": []}
    t0 = time.perf_counter()
    rng = random.Random(args.seed)
    for i in range(args.runs):
        # a seeded order per round: a fixed one would put a first-in-round effect in every pair
        for side, threads in rng.sample([("a", 1), ("a2", 1), ("t", 2)], 3):
            folder = root / f"{side}{i}" / LAB
            attention(folder, args.roofline, not args.full, threads)
            sides[side].append(folder)
        print(f"compare_repeat: round {i + 1}/{args.runs} after {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    compare(sides["a"], sides["a2"], args.out / "same_commit")
    compare(sides["a"], sides["t"], args.out / "threads")
    compare(sides["a"], sides["a2"], args.out / "same_commit_paired", paired=True)
    compare(sides["a"], sides["t"], args.out / "threads_paired", paired=True)
    compare(sides["a"][:1], sides["a2"][:1], args.out / "first_pair")
    runs.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
