"""Decode ms/token at the Qwen2.5-0.5B shape: our numpy Llama-family engine against transformers (issue 12).

Both run the same random weights (transformers' initialisation, shared with our engine without a
copy where no fusion is needed), one thread each (threadpoolctl for numpy's BLAS,
torch.set_num_threads(1)), float32, transformers with use_cache=True (its DynamicCache). Each round
decodes positions 1..P one token at a time, alternating engines token by token (which engine goes
first alternates too), so load drift lands on both. The first round is a discarded warm-up. Each
step is far above 50 ms, so a sample is one step. Per position: the median of the rounds; the ratio
is ours / transformers for the same round and position, summarised as median with p10/p90. Every
step's logits are compared too (max |difference| relative to the logit scale).

    python benchmarks/decode_llama.py --out benchmarks/results/decode_llama [--force] [--quick]

Writes results.json, manifest.json and decode_llama.png into --out, published atomically.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int, print_json
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.machine import blas_threads
from inferlab.measure.plots import new_figure
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import gc_disabled, summarize
from inferlab.model.hf_llama import llama_config, params_from_hf
from inferlab.model.llama import Llama
from inferlab.model.random_folder import QWEN25_05B

EXPERIMENT = "decode-llama"
ENGINES = ("inferlab", "transformers")


def build(seed: int, positions: int):
    """(our Llama, transformers Qwen2ForCausalLM) with the same random float32 weights."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.Qwen2Config(**{k: v for k, v in QWEN25_05B.items() if k != "model_type"})
    hf = transformers.Qwen2ForCausalLM(config).eval()
    ours_config = llama_config(config.to_dict(), "Qwen2.5-0.5B shape", context=positions)
    tensors = ((name, t.detach().numpy()) for name, t in hf.state_dict().items())
    return Llama(ours_config, params_from_hf(ours_config, tensors)), hf


def run(positions: int, rounds: int, seed: int) -> dict:
    import torch
    import transformers

    torch.set_num_threads(1)
    ours, hf = build(seed, positions)
    ids = np.random.default_rng(seed).integers(0, QWEN25_05B["vocab_size"], positions)
    times = {e: np.zeros((rounds, positions)) for e in ENGINES}      # seconds, (rounds, P)
    deviation = 0.0
    with blas_threads(1), torch.inference_mode(), progress_bar(rounds * positions, "decode steps") as step:
        for r in range(rounds + 1):                                   # round 0: warm-up, discarded
            cache = ours.new_cache("contiguous", max_seq=positions)
            hf_cache = transformers.DynamicCache(config=hf.config)
            for p in range(positions):
                logits = {}
                order = ENGINES if (p + r) % 2 == 0 else ENGINES[::-1]
                for engine in order:
                    with gc_disabled():
                        t0 = time.perf_counter_ns()
                        if engine == "inferlab":
                            logits[engine] = ours.decode(ids[p:p + 1], cache)[-1]
                        else:
                            out = hf(input_ids=torch.tensor([[int(ids[p])]]), cache=hf_cache, use_cache=True)
                            logits[engine] = out.logits[0, -1].numpy()
                        t1 = time.perf_counter_ns()
                    if r > 0:
                        times[engine][r - 1, p] = (t1 - t0) * 1e-9
                ref = logits["transformers"]
                deviation = max(deviation, float(np.abs(logits["inferlab"] - ref).max() / np.abs(ref).max()))
                if r > 0:
                    step(f"round {r}, position {p + 1}")
    ratio = times["inferlab"] / times["transformers"]                 # (rounds, P), paired
    return {
        "per_position": {e: [summarize(times[e][:, p]).to_json("ms") for p in range(positions)] for e in ENGINES},
        "ratio_all_steps": _ratio_stats(ratio.ravel()),
        "max_logit_deviation": deviation,
        "weights_bytes": ours.nbytes,
    }


def _ratio_stats(ratios: np.ndarray) -> dict:
    s = summarize(ratios)                      # unit-less values through the same quantiles
    return {"median": s.median, "p10": s.p10, "p90": s.p90, "n": s.n}


def summary_of(result: dict, positions: int) -> dict:
    def med(engine, p):
        return result["per_position"][engine][p - 1]["median_ms"]

    r = result["ratio_all_steps"]
    out = {"ratio_median": r["median"], "ratio_p10": r["p10"], "ratio_p90": r["p90"],
           "max_logit_deviation": result["max_logit_deviation"]}
    for p in sorted({1, min(64, positions), min(128, positions), positions}):
        out[f"pos_{p}"] = {"inferlab_ms": med("inferlab", p), "transformers_ms": med("transformers", p),
                           "ratio": med("inferlab", p) / med("transformers", p)}
    return out


def plot(result: dict, positions: int):
    fig, ax = new_figure()
    xs = np.arange(1, positions + 1)
    for engine, label in (("inferlab", "inferlab (numpy)"), ("transformers", "transformers (torch, use_cache=True)")):
        rows = result["per_position"][engine]
        ax.plot(xs, [s["median_ms"] for s in rows], label=label, lw=1.2)
        ax.fill_between(xs, [s["p10_ms"] for s in rows], [s["p90_ms"] for s in rows], alpha=0.25)
    r = result["ratio_all_steps"]
    ax.set_title(f"Decode step at the Qwen2.5-0.5B shape, 1 thread each\ninferlab / transformers = "
                 f"{r['median']:.2f}x (p10 {r['p10']:.2f}, p90 {r['p90']:.2f}), paired per step", fontsize=9)
    ax.set_xlabel("position of the decoded token")
    ax.set_ylabel("ms per token (median over rounds, p10-p90 band)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/decode_llama")
    p.add_argument("--positions", type=positive_int, default=256, help="decode positions 1..N (default 256; --quick 16)")
    p.add_argument("--rounds", type=positive_int, default=3, help="timed rounds after the warm-up (default 3; --quick 1)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    try:
        if args.threads != 1:
            raise InferlabError("--threads: this benchmark runs both engines on 1 thread each")
        writer = ExperimentWriter(args.out, force=args.force)        # refuses before any work
        positions = 16 if args.quick else args.positions
        rounds = 1 if args.quick else args.rounds
        result = run(positions, rounds, args.seed)
        summary = summary_of(result, positions)
        run_config = {"shape": QWEN25_05B, "positions": positions, "rounds": rounds, "threads": 1,
                      "dtype": "float32", "quick": args.quick,
                      "transformers": "Qwen2ForCausalLM, DynamicCache, use_cache=True, torch.set_num_threads(1)"}
        results = {"schema_version": 1, "experiment": EXPERIMENT, "config": run_config, "unit": "ms per decode step",
                   **result, "summary": summary}
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(experiment=EXPERIMENT, seed=args.seed, config=run_config,
                                                        depends_on=None, results_summary=summary, threads=1))
        writer.add_figure("decode_llama.png", plot(result, positions))
        writer.commit()
    except InferlabError as exc:
        print(f"decode_llama: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        print(f"inferlab / transformers per decode step: {summary['ratio_median']:.3f}x "
              f"(p10 {summary['ratio_p10']:.3f}, p90 {summary['ratio_p90']:.3f}); "
              f"max logit deviation {summary['max_logit_deviation']:.2e}")
        for key, row in summary.items():
            if key.startswith("pos_"):
                print(f"{key}: inferlab {row['inferlab_ms']:.1f} ms, transformers {row['transformers_ms']:.1f} ms, "
                      f"{row['ratio']:.3f}x")
        print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
