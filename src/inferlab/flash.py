"""Flash attention in numpy: the Phase 27 preview that seed 001 points to.

Tiled scaled-dot-product attention with the online softmax (Dao et al. 2022, "FlashAttention",
Algorithm 1; Milakov & Gimelshein 2018 for the running max/sum). Queries are processed one block
at a time; for each, key/value blocks stream past while a running row max m, row sum l and
unnormalised output acc are rescaled. Only (H, block, block) tiles of scores ever exist, never the
(H, T, T) matrices S and A that the naive ops write to and read back from DRAM.

It computes the same function as the engine's naive ops (scores -> softmax -> av), so the FLOPs are
the same (up to the O(T^2 d_k / block) rescaling); what changes is the bytes moved, which
`flash_bytes` models: Q read once, O written once, and K and V streamed once per query block.
The naive version stays naive (the seed forbids tuning it): this is a separate function.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Callable

import numpy as np

from inferlab.attention_perf import FLOAT32_BYTES, OpCost, av_cost, scores_cost, softmax_cost
from inferlab.model import attention as ops

DEFAULT_BLOCK = 64   # a (64, 64) float32 tile is 16 KiB: S tile, K and V blocks stay in L1/L2


def _key_end(q_end: int, T: int, causal: bool) -> int:
    """Keys a query block [q_start, q_end) can see: all T, or only up to its last query (causal)."""
    return q_end if causal else T


def flash_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = True,
                    block: int = DEFAULT_BLOCK) -> np.ndarray:
    """softmax(q k^T / sqrt(d_k) + mask) v, tiled, without materialising the T x T matrix.

    q, k, v: (H, T, d_k) -> (H, T, d_k), in q's dtype. With causal=True query t sees keys 0..t.
    """
    if q.ndim != 3 or q.shape != k.shape or k.shape != v.shape:
        raise ValueError(f"q, k, v must share one (H, T, d_k) shape, got {q.shape}, {k.shape}, {v.shape}")
    if block <= 0:
        raise ValueError(f"block must be positive, got {block}")
    H, T, d_k = q.shape
    scale = np.asarray(1.0 / math.sqrt(d_k), dtype=q.dtype)
    out = np.empty_like(q)                                               # (H, T, d_k)
    for q0 in range(0, T, block):
        q1 = min(q0 + block, T)
        qb = q[:, q0:q1] * scale                                         # (H, bq, d_k)
        m = np.full((H, q1 - q0), -np.inf, dtype=q.dtype)                # running row max
        l = np.zeros((H, q1 - q0), dtype=q.dtype)                        # running row sum of exp
        acc = np.zeros((H, q1 - q0, d_k), dtype=q.dtype)                 # unnormalised output
        for k0 in range(0, _key_end(q1, T, causal), block):
            k1 = min(k0 + block, T)
            s = qb @ k[:, k0:k1].transpose(0, 2, 1)                      # (H, bq, bk)
            if causal and k1 > q0 + 1:
                # only tiles crossing the diagonal need the mask; key j is hidden from query i if j > i
                hidden = np.arange(k0, k1)[None, :] > np.arange(q0, q1)[:, None]   # (bq, bk)
                s = np.where(hidden, -np.inf, s)
            m_new = np.maximum(m, s.max(axis=-1))                        # (H, bq), finite: key k0=0 is always seen first
            p = np.exp(s - m_new[..., None])                             # (H, bq, bk)
            correction = np.exp(m - m_new)                               # (H, bq); exp(-inf) = 0 on the first tile
            l = l * correction + p.sum(axis=-1)
            acc = acc * correction[..., None] + p @ v[:, k0:k1]          # (H, bq, d_k)
            m = m_new
        out[:, q0:q1] = acc / l[..., None]
    return out


def flash_bytes(T: int, d_k: int, heads: int = 1, *, block: int = DEFAULT_BLOCK, causal: bool = True) -> int:
    """Modelled DRAM bytes of the fused scores+softmax+av: tiles are assumed to stay in cache.

    Per head: Q read once (4 T d_k), O written once (4 T d_k), and each query block reads the K and
    V rows it visits (8 d_k bytes per key row): all T rows, or up to its last query when causal.
    """
    key_rows = sum(_key_end(min(q0 + block, T), T, causal) for q0 in range(0, T, block))
    return heads * FLOAT32_BYTES * (2 * T * d_k + 2 * key_rows * d_k)


def naive_t2_cost(T: int, d_k: int, heads: int, kv_heads: int | None = None) -> OpCost:
    """The naive scores, softmax and av together: the FLOPs and bytes flash attention replaces."""
    parts = (scores_cost(T, d_k, heads, kv_heads), softmax_cost(T, heads), av_cost(T, d_k, heads, kv_heads))
    return OpCost(flops=sum(p.flops for p in parts), bytes=sum(p.bytes for p in parts))


def flash_cost(T: int, d_k: int, heads: int, *, block: int = DEFAULT_BLOCK, causal: bool = True) -> OpCost:
    """Flash attention's modelled cost: the naive ops' FLOPs, `flash_bytes` bytes."""
    return OpCost(flops=naive_t2_cost(T, d_k, heads).flops,
                  bytes=flash_bytes(T, d_k, heads, block=block, causal=causal))


def traced_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes allocated (numpy buffers included: numpy reports to tracemalloc) while fn() runs.

    The result of fn() is dropped inside the traced window, so the figure is the working set of the
    computation itself, measured from a fresh tracemalloc baseline.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.clear_traces()
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak - before


def flash_mha(x: np.ndarray, mha, *, block: int = DEFAULT_BLOCK) -> np.ndarray:
    """The engine's causal MHA with scores -> softmax -> av replaced by `flash_attention`.

    x (T, d) -> (T, d); mha holds w_qkv, b_qkv, w_o, b_o, n_heads, n_kv_heads (MHAWeights). The
    projections are the engine's own ops, so only the T^2 core differs from the naive forward.
    With GQA each K/V head is repeated for its query heads (transformers' repeat_kv) before the
    core, which is per head: the copy is part of flash's time, and `flash_bytes` reads K and V
    per query head.
    """
    q, k, v = ops.qkv_proj(x, mha.w_qkv, mha.b_qkv, mha.n_heads, mha.n_kv_heads)   # (H, T, d_k), (H_kv, T, d_k) x2
    group = q.shape[0] // k.shape[0]
    if group > 1:
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)                 # (H, T, d_k) x2
    o = flash_attention(q, k, v, causal=True, block=block)                            # (H, T, d_k)
    return ops.out_proj(o, mha.w_o, mha.b_o)                                          # (T, d)
