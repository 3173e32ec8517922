"""The five named attention ops of seed 001, composed into causal multi-head attention.

Seed 001 (lab 15-attention-perf) times attention as five ops: qkv_proj, scores, softmax, av and
out_proj. The attention profiler times these very functions one by one, and `mha` (what the GPT
runs, with or without a KV cache) is nothing but these five calls, so the profiler measures the code
that generate() runs. Each op fully materialises its output (a fresh contiguous array), never a
view: timing a view would time nothing (seed 001's "memcpy / view" pitfall).

This is the naive version on purpose: A (the attention matrix) is materialised and nothing is
fused. Flash attention lives in its own module.

GQA: there are H query heads and H_kv <= H key/value heads; query head h reads K/V head
h // (H / H_kv), the grouping of Ainslie et al. (2023) and of Llama's repeat_kv.

Llama-family models add two things around these ops, not inside them: rotary position embeddings
on q and k between qkv_proj and scores (model/rope.py), and, for Mistral, a sliding window that
hides keys more than `window - 1` positions back (causal_mask's `window`). Biases may be None
(Llama and Mistral have none; Qwen2 has them on q, k, v only).
"""

from __future__ import annotations

import numpy as np

OPS = ("qkv_proj", "scores", "softmax", "av", "out_proj")


def causal_mask(t_q: int, t_k: int, window: int | None = None) -> np.ndarray:
    """Additive causal mask: 0 where query i may see key j, -inf where j is in its future.

    The t_q queries are the last t_q of the t_k positions (t_k - t_q of them are cached), so query i
    sits at absolute position t_k - t_q + i and sees keys j <= that position. With a sliding
    `window` it sees only the last `window` of them, j > position - window (transformers'
    sliding_window_overlay, Mistral's rule).
    """
    past = t_k - t_q
    mask = np.triu(np.full((t_q, t_k), -np.inf, dtype=np.float32), k=past + 1)   # (T_q, T_k)
    if window is not None:
        mask += np.tril(np.full((t_q, t_k), -np.inf, dtype=np.float32), k=past - window)
    return mask


def qkv_proj(x: np.ndarray, w: np.ndarray, b: np.ndarray, n_heads: int, n_kv_heads: int):
    """(T, d), (d, (H + 2 H_kv) d_head), (.,) -> q (H, T, d_head), k (H_kv, T, d_head), v (H_kv, T, d_head)."""
    t = x.shape[0]
    qkv = x @ w                                                        # (T, (H + 2 H_kv) d_head)
    if b is not None:
        qkv += b
    d_head = qkv.shape[1] // (n_heads + 2 * n_kv_heads)
    nq, nk = n_heads * d_head, n_kv_heads * d_head
    # Transposes are views; ascontiguousarray makes each output a real array, as seed 001 requires.
    q = np.ascontiguousarray(qkv[:, :nq].reshape(t, n_heads, d_head).transpose(1, 0, 2))             # (H, T, d_head)
    k = np.ascontiguousarray(qkv[:, nq:nq + nk].reshape(t, n_kv_heads, d_head).transpose(1, 0, 2))   # (H_kv, T, d_head)
    v = np.ascontiguousarray(qkv[:, nq + nk:].reshape(t, n_kv_heads, d_head).transpose(1, 0, 2))     # (H_kv, T, d_head)
    return q, k, v


def scores(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """q (H, T_q, d_head), k (H_kv, T_k, d_head), mask (T_q, T_k) -> S (H, T_q, T_k).

    S = q k^T / sqrt(d_head) + mask: the causal mask is added here, before the softmax (seed 001's
    A = softmax(S + mask)).
    """
    h, t_q, d_head = q.shape
    h_kv, t_k, _ = k.shape
    qg = q.reshape(h_kv, h // h_kv, t_q, d_head)                       # (H_kv, G, T_q, d_head)
    s = qg @ k[:, None].transpose(0, 1, 3, 2)                          # (H_kv, G, T_q, T_k)
    s *= np.float32(1.0 / np.sqrt(d_head))
    s += mask                                                          # broadcast (T_q, T_k)
    return s.reshape(h, t_q, t_k)                                      # (H, T_q, T_k)


def softmax(s: np.ndarray) -> np.ndarray:
    """Row softmax over the last axis, (..., T_k) -> (..., T_k); max-subtracted so exp cannot overflow."""
    e = np.exp(s - s.max(axis=-1, keepdims=True))                      # (..., T_k)
    e /= e.sum(axis=-1, keepdims=True)
    return e


def av(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """a (H, T_q, T_k), v (H_kv, T_k, d_head) -> o (H, T_q, d_head)."""
    h, t_q, t_k = a.shape
    h_kv, _, d_head = v.shape
    o = a.reshape(h_kv, h // h_kv, t_q, t_k) @ v[:, None]              # (H_kv, G, T_q, d_head)
    return o.reshape(h, t_q, d_head)                                   # (H, T_q, d_head)


def out_proj(o: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """o (H, T, d_head), w (H d_head, d), b (d,) -> (T, d): concatenate the heads, then project."""
    h, t, d_head = o.shape
    concat = o.transpose(1, 0, 2).reshape(t, h * d_head)               # (T, H d_head) (copies)
    out = concat @ w                                                   # (T, d)
    if b is not None:
        out += b
    return out


def mha(x: np.ndarray, w_qkv, b_qkv, w_o, b_o, *, n_heads: int, n_kv_heads: int,
        cache=None, layer: int = 0, rope=None, window: int | None = None) -> np.ndarray:
    """Causal multi-head attention, (T, d) -> (T, d), as exactly the five ops above.

    Without a cache, x is the whole sequence (full recompute). With a cache (ContiguousKVCache or
    PagedKVCache), x holds only the new positions: their k, v are appended to `layer` of the cache
    and the queries attend to every cached position. `rope` (a rope.Rotary for these positions)
    rotates q and k before k is cached; `window` limits each query to its last `window` keys.
    """
    q, k, v = qkv_proj(x, w_qkv, b_qkv, n_heads, n_kv_heads)         # (H, T, d_head), (H_kv, T, d_head) x2
    if rope is not None:
        q, k = rope.apply(q), rope.apply(k)
    if cache is not None:
        cache.append(layer, k, v)
        k, v = cache.read(layer)                                       # (H_kv, T_k, d_head) x2
    t_q, t_k = q.shape[1], k.shape[1]
    if window is not None and t_k - t_q - window + 1 > 0:
        # keys older than every query's window: skip them rather than mask them, so a decode
        # step past the window costs `window` keys, not the whole cache
        drop = t_k - t_q - window + 1
        k, v, t_k = k[:, drop:], v[:, drop:], t_k - drop
    s = scores(q, k, causal_mask(t_q, t_k, window))                   # (H, T, T_k)
    a = softmax(s)                                                     # (H, T, T_k)
    o = av(a, v)                                                       # (H, T, d_head)
    return out_proj(o, w_o, b_o)                                       # (T, d)
