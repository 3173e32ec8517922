"""Attention performance on the roofline (seed 001, Phase 15 lab 03).

Two halves:

* the cost model: FLOPs, bytes and arithmetic intensity of the five attention ops, with the
  seed's formulas, and the memory-bound threshold T* derived from the ridge point I_crit = pi/beta;
* the profiler: `attention_forward_timed(x, mha)` times the engine's own five ops
  (inferlab.model.attention, the code generate runs) with perf_counter_ns, and
  `profile_attention` turns that into medians with p10/p90 over many >= 50 ms samples.

The byte counts are the seed's (float32, each operand moved once to or from DRAM):

    op         FLOPs (per projection / per head)   bytes                      intensity
    qkv_proj   2 T d^2          (x3 projections)    4 T d + 4 d^2              T d / (2T + 2d)
    scores     2 T^2 d_k        (x H heads)         8 T d_k + 4 T^2            T d_k / (4 d_k + 2T)
    softmax    5 T^2            (x H heads)         8 T^2                      5/8 = 0.625
    av         2 T^2 d_k        (x H heads)         8 T d_k + 4 T^2            T d_k / (4 d_k + 2T)
    out_proj   2 T d^2                              4 T d + 4 d^2              T d / (2T + 2d)

The seed's projection bytes read x and W but do not count writing the (T, d) output; we keep its
formula (so intensities match the curriculum) and say so here rather than silently "fix" it.
Softmax's 5 T^2 FLOPs are: max, subtract, exp, sum, divide, one each per element; its bytes are
reading S and writing A once. Multiplying FLOPs and bytes by the same count (3 projections,
H heads) leaves the intensity unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OPS = ("qkv_proj", "scores", "softmax", "av", "out_proj")   # forward order, as gpt.py composes them
T2_OPS = ("scores", "softmax", "av")                        # the T^2 ops flash attention fuses
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class OpCost:
    """Modelled work of one op for one forward: FLOPs and DRAM bytes."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/byte."""
        return self.flops / self.bytes


def projection_cost(T: int, d: int) -> OpCost:
    """One (T, d) @ (d, d) projection: 2 T d^2 FLOPs over 4 T d + 4 d^2 bytes (read x and W)."""
    return OpCost(flops=2 * T * d * d, bytes=FLOAT32_BYTES * (T * d + d * d))


def qkv_proj_cost(T: int, d: int) -> OpCost:
    """Q, K and V projections: three times `projection_cost`; I = T d / (2T + 2d)."""
    one = projection_cost(T, d)
    return OpCost(flops=3 * one.flops, bytes=3 * one.bytes)


def out_proj_cost(T: int, d: int) -> OpCost:
    """The output projection concat(heads) @ W_O: one `projection_cost`; I = T d / (2T + 2d)."""
    return projection_cost(T, d)


def scores_cost(T: int, d_k: int, heads: int = 1) -> OpCost:
    """S = Q K^T / sqrt(d_k) per head: 2 T^2 d_k FLOPs over 8 T d_k + 4 T^2 bytes.

    Bytes: read Q and K (4 T d_k each), write S (4 T^2). I = T d_k / (4 d_k + 2T).
    """
    return OpCost(flops=heads * 2 * T * T * d_k, bytes=heads * FLOAT32_BYTES * (2 * T * d_k + T * T))


def softmax_cost(T: int, heads: int = 1) -> OpCost:
    """A = softmax(S + mask) per head: ~5 T^2 FLOPs over 8 T^2 bytes (read S, write A); I = 0.625."""
    return OpCost(flops=heads * 5 * T * T, bytes=heads * FLOAT32_BYTES * 2 * T * T)


def av_cost(T: int, d_k: int, heads: int = 1) -> OpCost:
    """out_h = A V per head: the same shape as scores, 2 T^2 d_k FLOPs over 4 T^2 + 8 T d_k bytes.

    Bytes: read A (4 T^2) and V (4 T d_k), write out_h (4 T d_k).
    """
    return OpCost(flops=heads * 2 * T * T * d_k, bytes=heads * FLOAT32_BYTES * (T * T + 2 * T * d_k))


def op_costs(T: int, d_model: int, n_heads: int) -> dict[str, OpCost]:
    """The five ops' modelled cost for one multi-head attention forward over T tokens."""
    d_k = d_model // n_heads
    return {
        "qkv_proj": qkv_proj_cost(T, d_model),
        "scores": scores_cost(T, d_k, n_heads),
        "softmax": softmax_cost(T, n_heads),
        "av": av_cost(T, d_k, n_heads),
        "out_proj": out_proj_cost(T, d_model),
    }


def projection_intensity(T: float, d: float) -> float:
    """Closed form of the projections' intensity: T d / (2T + 2d) FLOP/byte."""
    return T * d / (2 * T + 2 * d)


def scores_intensity(T: float, d_k: float) -> float:
    """Closed form of scores' and av's intensity: T d_k / (4 d_k + 2T); tends to d_k / 2 as T grows."""
    return T * d_k / (4 * d_k + 2 * T)


def memory_bound_threshold(d_k: float, i_crit: float) -> float | None:
    """T* where scores/av cross the ridge point: the exact root of T d_k / (4 d_k + 2T) = I_crit.

    T d_k = I_crit (4 d_k + 2T)  =>  T (d_k - 2 I_crit) = 4 d_k I_crit  =>
    T* = 4 d_k I_crit / (d_k - 2 I_crit).  Below T* the ops are memory-bound, above it compute-bound.
    The intensity is increasing in T with supremum d_k / 2, so when I_crit >= d_k / 2 no T makes
    them compute-bound: returns None.
    """
    if i_crit <= 0:
        raise ValueError(f"ridge point I_crit must be positive, got {i_crit}")
    if i_crit >= d_k / 2:
        return None
    return 4 * d_k * i_crit / (d_k - 2 * i_crit)


def seed_shortcut_threshold(d_k: float, i_crit: float) -> float | None:
    """The seed's shortcut T d_k > 4 (d_k + T) I_crit, solved: T > 4 d_k I_crit / (d_k - 4 I_crit).

    Its denominator 4 (d_k + T) counts 8 T^2 bytes for the T x T matrix instead of the 4 T^2 in the
    seed's own byte formula, i.e. the intensity T d_k / (4 d_k + 4T), whose supremum is d_k / 4.
    So the shortcut gives a larger T* than the exact root, and already says "never compute-bound"
    once I_crit >= d_k / 4 (None), where the exact threshold still exists up to d_k / 2.
    """
    if i_crit <= 0:
        raise ValueError(f"ridge point I_crit must be positive, got {i_crit}")
    if i_crit >= d_k / 4:
        return None
    return 4 * d_k * i_crit / (d_k - 4 * i_crit)


def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(pi, beta * I) in GFLOP/s (beta in GB/s, I in FLOP/byte)."""
    return min(peak_gflops, bandwidth_gbs * intensity)


def bound_by(intensity: float, i_crit: float) -> str:
    """'memory' left of the ridge point, 'compute' at or right of it."""
    return "memory" if intensity < i_crit else "compute"
