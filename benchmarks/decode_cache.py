"""Milliseconds per decode step at positions 1..256, with and without the KV cache (issue 3).

Without a cache, the step that produces token p recomputes the whole prefix: forward(ids[:p]),
whose cost grows with p (T d^2 projections and T^2 attention). With a cache, the step decodes one
token against p - 1 cached positions: a constant T = 1 of projections plus attention over p keys.
The paged cache adds its block gather. The model is MiniGPT's shape with seeded random weights:
the weights do not change the time of a step.

    python benchmarks/decode_cache.py --out benchmarks/results/decode_cache [--force] [--quick]

Writes results.json (every position's Stats, raw samples included), manifest.json and
decode_cache.png into --out, published atomically.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int, print_json
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.machine import blas_threads
from inferlab.measure.plots import new_figure
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import measure_interleaved
from inferlab.measure.verdicts import paired, paired_ratio
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT

EXPERIMENT = "decode-cache"
SERIES = ("no_cache", "contiguous", "paged")
LABELS = {"no_cache": "no cache (full recompute)", "contiguous": "contiguous KV cache", "paged": "paged KV cache (16-token blocks)"}


def step_flops(config: GPTConfig, t_new: int, t_k: int) -> int:
    """FLOPs (2 per multiply-add) of a forward over t_new positions attending to t_k keys.

    The naive attention computes every score, masked or not, so a full recompute costs T^2."""
    d, dh, h = config.d_model, config.d_head, config.n_heads
    per_layer = (2 * t_new * d * (h + 2 * config.kv_heads) * dh     # qkv_proj
                 + 2 * 2 * h * t_new * t_k * dh                     # scores and av
                 + 2 * t_new * h * dh * d                           # out_proj
                 + 2 * 2 * t_new * d * config.ff)                   # MLP, two matmuls
    return config.n_layers * per_layer + 2 * t_new * d * config.vocab_size   # + tied LM head


def step_fn(model: GPT, ids: list[int], p: int, series: str):
    """A no-argument call that runs the step producing the logits at position p (1-based)."""
    if series == "no_cache":
        prefix = ids[:p]
        return lambda: model.forward(prefix)
    cache = model.new_cache(series)
    if p > 1:
        model.decode(ids[:p - 1], cache)

    def cached_step():
        cache.truncate(p - 1)               # rewind, so every call decodes position p again
        return model.decode(ids[p - 1:p], cache)

    return cached_step


def run(config: GPTConfig, positions: list[int], *, samples: int, seed: int, threads: int | None) -> dict:
    model = GPT.init(config, seed=seed)
    ids = np.random.default_rng(seed).integers(0, config.vocab_size, config.context).tolist()
    out = {s: [] for s in SERIES}
    paired = []  # per position: no_cache / contiguous, per round
    with blas_threads(threads), progress_bar(len(positions), "decode steps") as step:
        for p in positions:
            # the three series of a position take turns within each round: their ratio is paired
            stats = measure_interleaved({s: step_fn(model, ids, p, s) for s in SERIES}, samples=samples)
            for series in SERIES:
                out[series].append(stats[series].to_json("ms"))
            paired.append(paired_ratio(stats["no_cache"], stats["contiguous"]).to_json())
            step(f"position {p}")
    return {"series": out, "speedup_contiguous_paired": paired}


def summarize_run(config: GPTConfig, positions: list[int], measured: dict) -> dict:
    """At a few positions: each series' median ms, and the contiguous cache's speedup over the
    full recompute as the labs decide it (verdicts.paired: the per-round ratios' median, 95% CI), with the
    FLOP ratio (an estimate beside the measurement: how much less arithmetic the cached step does)."""
    series = measured["series"]

    def at(name, p):
        return series[name][positions.index(p)]

    summary = {}
    for p in sorted({positions[0], *[q for q in (64, 128) if q in positions], positions[-1]}):
        speedup = paired(at("no_cache", p), at("contiguous", p))
        summary[f"pos_{p}"] = {
            "no_cache_ms": at("no_cache", p)["median_ms"], "contiguous_ms": at("contiguous", p)["median_ms"],
            "paged_ms": at("paged", p)["median_ms"],
            "speedup_contiguous": speedup.to_json(),
            "flop_ratio": step_flops(config, p, p) / step_flops(config, 1, p),
        }
    return summary


def plot(positions, series, config):
    fig, ax = new_figure()
    for name in SERIES:
        med = [s["median_ms"] for s in series[name]]
        lo = [s["p10_ms"] for s in series[name]]
        hi = [s["p90_ms"] for s in series[name]]
        ax.plot(positions, med, label=LABELS[name], lw=1.5)
        ax.fill_between(positions, lo, hi, alpha=0.25)
    ax.set_xlabel("position of the decoded token")
    ax.set_ylabel("ms per decode step (median, p10-p90 band)")
    ax.set_title(f"MiniGPT decode step: d_model {config.d_model}, {config.n_layers} layers, "
                 f"{config.n_heads} heads, vocab {config.vocab_size}")
    # log y: the cached step (~ms, nearly flat) and the full recompute (~p times more work) both stay readable
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/decode_cache")
    p.add_argument("--samples", type=positive_int, default=7, help="samples per position and series (default 7)")
    p.add_argument("--stride", type=positive_int, help="measure every STRIDE-th position (default 1; --quick: 32)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)        # refuses before any work
        config = GPTConfig()
        stride = args.stride or (32 if args.quick else 1)
        positions = sorted({*range(1, config.context + 1, stride), config.context})
        samples = 3 if args.quick else args.samples
        measured = run(config, positions, samples=samples, seed=args.seed, threads=args.threads)
        series = measured["series"]
        summary = summarize_run(config, positions, measured)
        run_config = {"model": {"vocab_size": config.vocab_size, "d_model": config.d_model,
                                "n_heads": config.n_heads, "n_layers": config.n_layers, "context": config.context},
                      "positions": positions, "samples": samples, "threads": args.threads, "quick": args.quick}
        results = {"schema_version": 1, "experiment": EXPERIMENT, "config": run_config, "unit": "ms per decode step",
                   "positions": positions, **measured, "summary": summary}
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(experiment=EXPERIMENT, seed=args.seed, config=run_config,
                                                        depends_on=None, results_summary=summary,
                                                        threads=args.threads))
        writer.add_figure("decode_cache.png", plot(positions, series, config))
        writer.commit()
    except InferlabError as exc:
        print(f"decode_cache: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        for key, row in summary.items():
            print(f"{key}: no cache {row['no_cache_ms']:.3f} ms, contiguous {row['contiguous_ms']:.3f} ms, "
                  f"paged {row['paged_ms']:.3f} ms, speedup {row['speedup_contiguous']['value']:.1f}x "
                  f"(p10-p90 {row['speedup_contiguous']['p10']:.1f}-{row['speedup_contiguous']['p90']:.1f}, "
                  f"{row['speedup_contiguous']['basis']}; FLOP ratio {row['flop_ratio']:.1f}x)")
        print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
