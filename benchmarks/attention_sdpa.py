"""What a user would pick instead: torch's fused SDPA against the engine's naive attention core.

Times, at each T, the T^2 core of causal attention (scores -> softmax -> av) three ways, on the
same float32 q, k, v of shape (H, T, d_k):
  naive  the engine's ops (inferlab.model.attention), the code the attention lab profiles;
  flash  inferlab.flash.flash_attention (tiled, online softmax, numpy);
  sdpa   torch.nn.functional.scaled_dot_product_attention(is_causal=True), CPU.
It checks the three outputs agree before timing, and reports the medians and naive/sdpa.
torch is an optional extra: the package never imports it, only this benchmark does.

  python benchmarks/attention_sdpa.py [--T 64 128 256 512] [--threads 1] [--json] [--out FILE [--force]]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from inferlab.cli.common import positive_int, print_json, thread_count
from inferlab.errors import InferlabError
from inferlab.flash import flash_attention
from inferlab.measure import atomic_write_json, blas_threads, machine_info, measure, versions
from inferlab.model import attention as ops

TOLERANCE = 1e-4   # float32 outputs of three different summation orders


def naive_core(q, k, v, mask):
    """The engine's scores -> softmax -> av, (H, T, d_k) x3 -> (H, T, d_k)."""
    return ops.av(ops.softmax(ops.scores(q, k, mask)), v)


def run(T_sweep, *, d_model: int, heads: int, threads: int, samples: int, seed: int = 0) -> dict:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        raise InferlabError("torch is not installed: pip install 'inferlab[test]' (torch==2.13.0, CPU)") from None
    torch.set_num_threads(threads)
    d_k = d_model // heads
    rng = np.random.default_rng(seed)
    rows = []
    with blas_threads(threads):
        for T in T_sweep:
            q, k, v = (rng.standard_normal((heads, T, d_k)).astype(np.float32) for _ in range(3))  # (H, T, d_k)
            mask = ops.causal_mask(T, T)                                                        # (T, T)
            tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))                         # (1, H, T, d_k)
            sdpa = lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            with torch.inference_mode():
                ref = naive_core(q, k, v, mask)
                for name, out in (("flash", flash_attention(q, k, v)), ("sdpa", sdpa()[0].numpy())):
                    err = float(np.abs(out - ref).max())
                    if err > TOLERANCE:
                        raise InferlabError(f"T={T}: {name} differs from the naive ops by {err:.2g} > {TOLERANCE}")
                times = {
                    "naive": measure(lambda: naive_core(q, k, v, mask), samples=samples),
                    "flash": measure(lambda: flash_attention(q, k, v), samples=samples),
                    "sdpa": measure(sdpa, samples=samples),
                }
            rows.append({"T": T, **{f"{n}_ms": s.to_json("ms") for n, s in times.items()},
                         "naive_over_sdpa": times["naive"].median / times["sdpa"].median,
                         "flash_over_sdpa": times["flash"].median / times["sdpa"].median})
    return {"schema_version": 1, "experiment": "attention-sdpa",
            "config": {"T_sweep": list(T_sweep), "d_model": d_model, "heads": heads, "threads": threads,
                       "samples": samples, "seed": seed, "dtype": "float32", "causal": True},
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "versions": versions(), "hardware": machine_info(threads), "points": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--T", type=positive_int, nargs="+", default=[64, 128, 256, 512])
    p.add_argument("--d-model", type=positive_int, default=64)
    p.add_argument("--heads", type=positive_int, default=4)
    p.add_argument("--threads", type=thread_count, default=1, help="BLAS and torch threads (default 1)")
    p.add_argument("--samples", type=positive_int, default=30)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", type=Path, help="also write the results to this JSON file")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = p.parse_args(argv)
    try:
        if args.d_model % args.heads:
            raise InferlabError(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
        if args.out and args.out.exists() and not args.force:
            raise InferlabError(f"--out {args.out} already exists; pass --force to replace it")
        result = run(args.T, d_model=args.d_model, heads=args.heads, threads=args.threads, samples=args.samples)
    except InferlabError as exc:
        print(f"attention_sdpa: error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        atomic_write_json(args.out, result)
    if args.json:
        print_json(result)
    else:
        print(f"causal attention core, d_k={args.d_model // args.heads}, {args.heads} heads, "
              f"{args.threads} thread(s); median ms")
        print(f"{'T':>6} {'naive':>10} {'flash':>10} {'sdpa':>10} {'naive/sdpa':>11} {'flash/sdpa':>11}")
        for r in result["points"]:
            print(f"{r['T']:>6} {r['naive_ms']['median_ms']:>10.4g} {r['flash_ms']['median_ms']:>10.4g} "
                  f"{r['sdpa_ms']['median_ms']:>10.4g} {r['naive_over_sdpa']:>11.2f} {r['flash_over_sdpa']:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
