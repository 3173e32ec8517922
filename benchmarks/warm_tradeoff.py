"""What a longer warm-up buys: time to first mask against the first walk's tail, per --warm-ms.

Our grammar may build the masks nearest its start for a fixed time before its first mask
(StackGrammar.warm; schema-bench's and compile_json_schema's default is stack.WARM_MS). That time
is paid in the time to first mask (TTFM); it is spent so that the first walk meets fewer
configurations and frame splits new to the process. Issue 15 asks for both a TTFM median
<= 50 ms and a first-walk p99 <= 100 us: this sweep shows how far the one can be traded for the
other. Each budget is one fresh `inferlab schema-bench DIR --limit N --vocab V --warm-ms W`
process (the same sample, in the order given), whose summary is read back:

    python benchmarks/warm_tradeoff.py ../shared/jsonschemabench --limit 250 --vocab qwen \
        --warm-ms 0,30,100,300,1000 --out benchmarks/results/warm_tradeoff

Writes results.json (per budget: TTFM median and p90, the first walk's p50 and p99, every valid
instance's walk p99, each kind of step's share of the first walk's tokens and its p50), a plot
(tradeoff.png) and manifest.json into --out, atomically. The runs are minutes apart, not
interleaved: read the curve's shape, not a ratio between two of its points.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inferlab.cli.common import add_out_arguments, parse_out_args
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest

EXPERIMENT = "warm-tradeoff"
TARGETS = {"ttfm_ms_median": 50.0, "first_walk_us_p99": 100.0}   # issue 15's
KEPT = ("compiled", "ttfm_ms_median", "ttfm_ms_p90", "first_walk_tokens", "first_walk_us_p50", "first_walk_us_p99",
        "all_walks_us_p99", "mask_us_per_token_median", "mask_us_p99_median")


def warm_budgets(text: str) -> list[float]:
    """'0,30,100' -> [0.0, 30.0, 100.0]: non-negative milliseconds."""
    try:
        out = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--warm-ms wants comma-separated milliseconds, got {text!r}") from None
    if not out or any(not x >= 0 for x in out):
        raise argparse.ArgumentTypeError(f"--warm-ms wants milliseconds >= 0, got {text!r}")
    return out


def run_once(directory: Path, limit: int, vocab: str, warm_ms: float) -> dict:
    """One schema-bench process at this warm-up: its summary over all schemas, kept figures only."""
    with tempfile.TemporaryDirectory(prefix="inferlab-warm-") as tmp, tempfile.TemporaryFile("w+") as err:
        cmd = [sys.executable, "-m", "inferlab", "schema-bench", str(directory), "--limit", str(limit),
               "--vocab", vocab, "--warm-ms", f"{warm_ms:g}", "--out", tmp, "--force"]
        t0 = time.perf_counter()
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err).returncode
        wall = time.perf_counter() - t0
        if code != 0:
            err.seek(0)
            last = (err.read().strip().splitlines() or ["no stderr"])[-1]
            raise InferlabError(f"schema-bench at --warm-ms {warm_ms:g} exited {code}: {last}")
        summary = json.loads((Path(tmp) / "results.json").read_text())["summary"]["all"]
    out = {k: summary.get(k) for k in KEPT}
    out["by_step"] = {kind: {"token_share": v["token_share"], "us_p50": v["us_p50"]}
                      for kind, v in (summary.get("first_walk_by_step") or {}).items()}
    out["warm_ms"], out["wall_s"] = warm_ms, wall
    return out


def plot(runs: list[dict]):
    """First-walk p99 against TTFM median, one point per warm-up budget, with issue 15's targets."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = [r["ttfm_ms_median"] for r in runs]
    y = [r["first_walk_us_p99"] for r in runs]
    ax.plot(x, y, "o-")
    for r in runs:
        ax.annotate(f"warm {r['warm_ms']:g} ms", (r["ttfm_ms_median"], r["first_walk_us_p99"]),
                    textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.axvline(TARGETS["ttfm_ms_median"], ls="--", c="grey")
    ax.axhline(TARGETS["first_walk_us_p99"], ls="--", c="grey")
    ax.text(TARGETS["ttfm_ms_median"], TARGETS["first_walk_us_p99"], "  targets: TTFM median <= 50 ms,\n"
            "  first-walk p99 <= 100 us (both: below left)", fontsize=8, va="bottom")
    ax.margins(x=0.2)  # room for the last point's label
    ax.set(xscale="log", yscale="log", xlabel="time to first mask, median over schemas (ms)",
           ylabel="first walk, p99 over all its tokens (us)",
           title="What warming the grammar before its first mask buys")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path, help="the JSONSchemaBench folder")
    p.add_argument("--limit", type=int, default=250, help="stratified sample size, as schema-bench's (default 250)")
    p.add_argument("--vocab", default="qwen", help="schema-bench's --vocab (default qwen)")
    p.add_argument("--warm-ms", type=warm_budgets, default=[0.0, 30.0, 100.0, 300.0, 1000.0],
                   help="comma-separated warm-up budgets in ms (default 0,30,100,300,1000)")
    add_out_arguments(p, default_out="benchmarks/results/warm_tradeoff")
    args = parse_out_args(p, argv)
    if not args.directory.is_dir():
        print(f"warm_tradeoff.py: error: {args.directory} is not a folder", file=sys.stderr)
        return 2
    if args.limit < 1:
        print(f"warm_tradeoff.py: error: --limit wants a positive count, got {args.limit}", file=sys.stderr)
        return 2
    try:
        writer = ExperimentWriter(args.out, force=args.force)
        runs = []
        for i, w in enumerate(args.warm_ms):
            print(f"[{i + 1}/{len(args.warm_ms)}] schema-bench --warm-ms {w:g} ...", file=sys.stderr, flush=True)
            runs.append(run_once(args.directory, args.limit, args.vocab, w))
        results = {"schema_version": 1, "experiment": EXPERIMENT, "targets": TARGETS, "runs": runs,
                   "config": {"limit": args.limit, "vocab": args.vocab, "warm_ms": args.warm_ms}}
        writer.add_json("results.json", results)
        writer.add_figure("tradeoff.png", plot(runs))
        writer.add_json("manifest.json", build_manifest(
            experiment=EXPERIMENT, seed=0, config=results["config"], depends_on=None,
            results_summary={f"warm_{r['warm_ms']:g}_ms": {k: r[k] for k in TARGETS} for r in runs}, threads=None))
        writer.commit()
    except InferlabError as exc:
        print(f"warm_tradeoff.py: error: {exc}", file=sys.stderr)
        return 2
    for r in runs:
        print(f"warm {r['warm_ms']:>6g} ms: TTFM median {r['ttfm_ms_median']:.1f} ms, p90 {r['ttfm_ms_p90']:.1f} ms; "
              f"first walk p50 {r['first_walk_us_p50']:.2f} us, p99 {r['first_walk_us_p99']:.0f} us")
    print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
