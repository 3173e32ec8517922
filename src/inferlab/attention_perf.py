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

With grouped-query attention (H query heads, H_kv key/value heads, G = H / H_kv) the K and V
operands shrink to H_kv heads: qkv_proj makes (H + 2 H_kv) d_k columns, and scores and av read
K or V once per KV head (the engine's ops broadcast each K/V head over its G query heads):

    qkv_proj   2 T d (H + 2 H_kv) d_k               4 (3 T d + d (H + 2 H_kv) d_k)
    scores     2 H T^2 d_k                          4 (H T d_k + H_kv T d_k + H T^2)
    av         2 H T^2 d_k                          4 (H T^2 + H_kv T d_k + H T d_k)
    out_proj   2 T (H d_k) d                        4 (T H d_k + H d_k d)

so scores' and av's intensity is T d_k / (2 d_k (1 + 1/G) + 2T); G = 1 is the table above.

The seed's projection bytes read x and W but do not count writing the (T, d) output; we keep its
formula (so intensities match the curriculum) and say so here rather than silently "fix" it.
Softmax's 5 T^2 FLOPs are: max, subtract, exp, sum, divide, one each per element; its bytes are
reading S and writing A once. Multiplying FLOPs and bytes by the same count (3 projections,
H heads) leaves the intensity unchanged.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from inferlab.measure import Stats, blas_threads, gc_disabled, summarize
from inferlab.model import attention as ops
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT

OPS = ops.OPS                                               # forward order, as mha composes them
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


def projection_cost(T: int, d_in: int, d_out: int | None = None) -> OpCost:
    """One (T, d_in) @ (d_in, d_out) projection (d_out = d_in by default): 2 T d_in d_out FLOPs over
    4 T d_in + 4 d_in d_out bytes (read x and W)."""
    d_out = d_in if d_out is None else d_out
    return OpCost(flops=2 * T * d_in * d_out, bytes=FLOAT32_BYTES * (T * d_in + d_in * d_out))


def qkv_proj_cost(T: int, d: int, q_width: int | None = None, kv_width: int | None = None) -> OpCost:
    """Q, K and V projections, each reading x: widths H d_k (q_width) and H_kv d_k (kv_width), both
    d by default (MHA: three times `projection_cost`, I = T d / (2T + 2d))."""
    q_width = d if q_width is None else q_width
    kv_width = q_width if kv_width is None else kv_width
    parts = (projection_cost(T, d, q_width), projection_cost(T, d, kv_width), projection_cost(T, d, kv_width))
    return OpCost(flops=sum(p.flops for p in parts), bytes=sum(p.bytes for p in parts))


def out_proj_cost(T: int, d: int, q_width: int | None = None) -> OpCost:
    """The output projection concat(heads) (T, H d_k) @ W_O (H d_k, d); I = T d / (2T + 2d) when H d_k = d."""
    return projection_cost(T, d if q_width is None else q_width, d)


def scores_cost(T: int, d_k: int, heads: int = 1, kv_heads: int | None = None) -> OpCost:
    """S = Q K^T / sqrt(d_k) per query head: 2 T^2 d_k FLOPs; bytes read Q (4 T d_k per query head),
    K (4 T d_k per KV head, kv_heads = heads by default) and write S (4 T^2 per query head).
    MHA: 8 T d_k + 4 T^2 per head, I = T d_k / (4 d_k + 2T)."""
    kv = heads if kv_heads is None else kv_heads
    return OpCost(flops=heads * 2 * T * T * d_k,
                  bytes=FLOAT32_BYTES * (heads * T * d_k + kv * T * d_k + heads * T * T))


def softmax_cost(T: int, heads: int = 1) -> OpCost:
    """A = softmax(S + mask) per head: ~5 T^2 FLOPs over 8 T^2 bytes (read S, write A); I = 0.625."""
    return OpCost(flops=heads * 5 * T * T, bytes=heads * FLOAT32_BYTES * 2 * T * T)


def av_cost(T: int, d_k: int, heads: int = 1, kv_heads: int | None = None) -> OpCost:
    """out_h = A V per query head: 2 T^2 d_k FLOPs; bytes read A (4 T^2 per query head), V (4 T d_k
    per KV head) and write out_h (4 T d_k per query head). MHA: 4 T^2 + 8 T d_k per head."""
    kv = heads if kv_heads is None else kv_heads
    return OpCost(flops=heads * 2 * T * T * d_k,
                  bytes=FLOAT32_BYTES * (heads * T * T + kv * T * d_k + heads * T * d_k))


def op_costs(T: int, d_model: int, n_heads: int, n_kv_heads: int | None = None) -> dict[str, OpCost]:
    """The five ops' modelled cost for one causal attention forward over T tokens (GQA when
    n_kv_heads < n_heads; d_k = d_model / n_heads)."""
    d_k = d_model // n_heads
    kv = n_heads if n_kv_heads is None else n_kv_heads
    return {
        "qkv_proj": qkv_proj_cost(T, d_model, n_heads * d_k, kv * d_k),
        "scores": scores_cost(T, d_k, n_heads, kv),
        "softmax": softmax_cost(T, n_heads),
        "av": av_cost(T, d_k, n_heads, kv),
        "out_proj": out_proj_cost(T, d_model, n_heads * d_k),
    }


def projection_intensity(T: float, d: float) -> float:
    """Closed form of the projections' intensity: T d / (2T + 2d) FLOP/byte."""
    return T * d / (2 * T + 2 * d)


def scores_intensity(T: float, d_k: float, group: float = 1) -> float:
    """Closed form of scores' and av's intensity: T d_k / (2 d_k (1 + 1/G) + 2T) with G query heads
    per KV head (MHA, G = 1: T d_k / (4 d_k + 2T)); tends to d_k / 2 as T grows."""
    return T * d_k / (2 * d_k * (1 + 1 / group) + 2 * T)


def memory_bound_threshold(d_k: float, i_crit: float, group: float = 1) -> float | None:
    """T* where scores/av cross the ridge point: the exact root of scores_intensity(T) = I_crit.

    T d_k = I_crit (c d_k + 2T), c = 2 (1 + 1/G)  =>  T (d_k - 2 I_crit) = c d_k I_crit  =>
    T* = c d_k I_crit / (d_k - 2 I_crit) (MHA: 4 d_k I_crit / (d_k - 2 I_crit)). Below T* the ops are
    memory-bound, above it compute-bound. The intensity is increasing in T with supremum d_k / 2,
    so when I_crit >= d_k / 2 no T makes them compute-bound: returns None.
    """
    if i_crit <= 0:
        raise ValueError(f"ridge point I_crit must be positive, got {i_crit}")
    if i_crit >= d_k / 2:
        return None
    return 2 * (1 + 1 / group) * d_k * i_crit / (d_k - 2 * i_crit)


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


# --- the profiler ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MHAWeights:
    """One layer's attention weights, as the engine's `mha` takes them."""

    w_qkv: np.ndarray   # (d, (H + 2 H_kv) d_head)
    b_qkv: np.ndarray   # ((H + 2 H_kv) d_head,)
    w_o: np.ndarray     # (H d_head, d)
    b_o: np.ndarray     # (d,)
    n_heads: int
    n_kv_heads: int

    @classmethod
    def from_model(cls, model: GPT, layer: int = 0) -> MHAWeights:
        p, h = model.params, f"h.{layer}.attn."
        return cls(p[h + "c_attn.w"], p[h + "c_attn.b"], p[h + "c_proj.w"], p[h + "c_proj.b"],
                   model.config.n_heads, model.config.kv_heads)

    @classmethod
    def init(cls, d_model: int, n_heads: int, *, context: int, seed: int = 0) -> MHAWeights:
        """Layer 0 of a freshly initialised one-layer GPT (the engine's own initialisation)."""
        config = GPTConfig(d_model=d_model, n_heads=n_heads, n_layers=1, context=context)
        return cls.from_model(GPT.init(config, seed), 0)

    @classmethod
    def random(cls, d_model: int, n_heads: int, n_kv_heads: int, *, qkv_bias: bool, seed: int = 0) -> MHAWeights:
        """A Llama-family layer's attention shape with transformers' N(0, 0.02) initialisation (the
        ops' time depends on the shapes, not the values); o_proj without bias, q/k/v with one if
        qkv_bias (Qwen2)."""
        rng = np.random.default_rng(seed)
        d_head = d_model // n_heads
        width = (n_heads + 2 * n_kv_heads) * d_head
        w = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
        return cls(w(d_model, width), np.zeros(width, np.float32) if qkv_bias else None,
                   w(n_heads * d_head, d_model), None, n_heads, n_kv_heads)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """(T, d) -> (T, d): the engine's causal multi-head attention, untimed."""
        return ops.mha(x, self.w_qkv, self.b_qkv, self.w_o, self.b_o,
                       n_heads=self.n_heads, n_kv_heads=self.n_kv_heads)


def attention_forward_timed(x: np.ndarray, mha: MHAWeights, *, iters: int = 1,
                            outputs: dict | None = None) -> dict[str, float]:
    """Seed 001 Block A: one causal MHA forward over x (T, d), each op timed; seconds per forward.

    Returns {"qkv_proj", "scores", "softmax", "av", "out_proj", "total"}. The ops are the engine's
    (inferlab.model.attention), called in `mha`'s order, so this times the code generate() runs;
    every op returns a freshly materialised array (numpy is eager), so a timer never brackets a
    mere view. perf_counter_ns is read around each op; `iters` forwards are run back to back and
    the sums divided by iters (the caller picks iters so that one call is >= 50 ms of work).
    "total" brackets the whole forward: it also holds building the causal mask and the timer
    reads, which no op owns, so total - sum(ops) is that unattributed rest.
    With `outputs`, the last forward's intermediates are stored there (for the correctness tests).
    """
    clock = time.perf_counter_ns
    ns = dict.fromkeys((*OPS, "total"), 0)
    for _ in range(iters):
        t0 = clock()
        q, k, v = ops.qkv_proj(x, mha.w_qkv, mha.b_qkv, mha.n_heads, mha.n_kv_heads)  # (H, T, d_k) x3
        t1 = clock()
        mask = ops.causal_mask(q.shape[1], k.shape[1])                                # (T, T)
        t2 = clock()
        s = ops.scores(q, k, mask)                                                    # (H, T, T)
        t3 = clock()
        a = ops.softmax(s)                                                            # (H, T, T)
        t4 = clock()
        o = ops.av(a, v)                                                              # (H, T, d_k)
        t5 = clock()
        y = ops.out_proj(o, mha.w_o, mha.b_o)                                         # (T, d)
        t6 = clock()
        ns["qkv_proj"] += t1 - t0
        ns["scores"] += t3 - t2
        ns["softmax"] += t4 - t3
        ns["av"] += t5 - t4
        ns["out_proj"] += t6 - t5
        ns["total"] += t6 - t0
    if outputs is not None:
        outputs.update(q=q, k=k, v=v, mask=mask, scores=s, softmax=a, av=o, out_proj=y)
    return {name: total / iters / 1e9 for name, total in ns.items()}


def calibrate_iters(per_call_s: float, min_sample_s: float) -> int:
    """Forwards per sample so that one sample is at least min_sample_s (20% margin for jitter)."""
    return max(1, math.ceil(1.2 * min_sample_s / max(per_call_s, 1e-9)))


def profile_forward(x: np.ndarray, mha: MHAWeights, *, samples: int, min_sample_s: float = 0.05,
                    warmup: int = 3) -> dict[str, Stats]:
    """Per-op Stats of `attention_forward_timed`: warm-up discarded, >= min_sample_s per sample,
    gc disabled while timing (restored after), `samples` samples; medians with p10/p90."""
    for _ in range(warmup):   # page faults, first-touch of the (H, T, T) buffers, BLAS thread start-up
        attention_forward_timed(x, mha)
    # calibrate on the fastest of a few forwards: a descheduled one only ever looks slower, and
    # would otherwise shrink every sample below min_sample_s
    fastest = min(attention_forward_timed(x, mha)["total"] for _ in range(max(warmup, 3)))
    iters = calibrate_iters(fastest, min_sample_s)
    per_op: dict[str, list[float]] = {name: [] for name in (*OPS, "total")}
    with gc_disabled():
        for _ in range(samples):
            for name, seconds in attention_forward_timed(x, mha, iters=iters).items():
                per_op[name].append(seconds)
    return {name: summarize(values, iters_per_sample=iters) for name, values in per_op.items()}


@dataclass(frozen=True)
class SweepConfig:
    """Seed 001 Block B: the T sweep at fixed width, and how hard to measure each point."""

    T_sweep: tuple[int, ...] = (64, 128, 256, 512)
    d_model: int = 64
    n_heads: int = 4              # d_head = 16, as in the seed
    # None: MHA with a GPT layer's weights (MiniGPT); else a Llama-family layer (GQA when < n_heads)
    n_kv_heads: int | None = None
    qkv_bias: bool = False        # a Llama-family layer's q/k/v bias (Qwen2)
    samples: int = 100            # seed: 100+ runs, median (quick runs use fewer, and say so)
    min_sample_s: float = 0.05    # >= 50 ms of work per sample
    seed: int = 0

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def group(self) -> int:
        """Query heads per KV head (1: MHA)."""
        return self.n_heads // self.kv_heads


def sweep_inputs(config: SweepConfig) -> tuple[MHAWeights, dict[int, np.ndarray]]:
    """The weights and one fixed-seed (T, d) float32 input per T (unit variance, as after LayerNorm)."""
    if config.n_kv_heads is None:
        mha = MHAWeights.init(config.d_model, config.n_heads, context=max(config.T_sweep), seed=config.seed)
    else:
        mha = MHAWeights.random(config.d_model, config.n_heads, config.n_kv_heads, qkv_bias=config.qkv_bias,
                                seed=config.seed)
    rng = np.random.default_rng(config.seed)
    xs = {T: rng.standard_normal((T, config.d_model)).astype(np.float32) for T in config.T_sweep}
    return mha, xs


def profile_sweep(config: SweepConfig, *, threads: int | None,
                  on_point: Callable[[int], None] | None = None) -> dict[int, dict[str, Stats]]:
    """Block B: `profile_forward` at each T with `threads` BLAS threads (threadpoolctl)."""
    mha, xs = sweep_inputs(config)
    out = {}
    with blas_threads(threads):
        for T in config.T_sweep:
            out[T] = profile_forward(xs[T], mha, samples=config.samples, min_sample_s=config.min_sample_s)
            if on_point:
                on_point(T)
    return out
