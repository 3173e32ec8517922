"""Flash attention against an independent float64 softmax-attention oracle, and its cost model."""

import numpy as np
import pytest

from inferlab.flash import flash_attention, flash_bytes, flash_cost, naive_t2_cost, traced_peak_bytes


def reference_attention(q, k, v, causal):
    """Plain float64 attention, written from the definition: softmax(q k^T / sqrt(d_k) + mask) v."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    T, d_k = q.shape[1], q.shape[2]
    s = q @ k.transpose(0, 2, 1) / np.sqrt(d_k)
    if causal:
        s = s + np.triu(np.full((T, T), -np.inf), k=1)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def qkv(H, T, d_k, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((H, T, d_k)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,block", [(1, 64), (64, 64), (100, 32), (130, 64), (96, 7), (257, 128)])
def test_flash_matches_reference(T, block, causal):
    q, k, v = qkv(4, T, 16)
    out = flash_attention(q, k, v, causal=causal, block=block)
    assert out.dtype == np.float32 and out.shape == (4, T, 16)
    np.testing.assert_allclose(out, reference_attention(q, k, v, causal), rtol=2e-4, atol=2e-5)


def test_flash_survives_large_logits():
    # the running max must keep exp() finite where a plain exp(s) would overflow float32
    q, k, v = qkv(2, 80, 16, seed=1)
    out = flash_attention(q * 30, k * 30, v, block=16)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, reference_attention(q * 30, k * 30, v, True), rtol=1e-3, atol=1e-3)


def test_causal_mask_hides_the_future():
    # changing keys/values after position t must not change outputs at positions <= t
    q, k, v = qkv(2, 48, 8, seed=2)
    k2, v2 = k.copy(), v.copy()
    k2[:, 30:] += 5.0
    v2[:, 30:] -= 3.0
    a = flash_attention(q, k, v, block=16)
    b = flash_attention(q, k2, v2, block=16)
    np.testing.assert_array_equal(a[:, :30], b[:, :30])
    assert not np.allclose(a[:, 30:], b[:, 30:])
    # the first query sees only the first key, so its output is exactly v[:, 0]
    np.testing.assert_allclose(a[:, 0], v[:, 0], rtol=1e-6)


def test_flash_rejects_mismatched_shapes():
    q, k, v = qkv(2, 8, 4)
    with pytest.raises(ValueError, match="shape"):
        flash_attention(q, k[:, :4], v)


def test_flash_bytes_hand_values():
    # T=128, block 64, d_k 16, one head. Q read + O written: 2 * 4 * 128 * 16 = 16384 bytes.
    # Non-causal: 2 query blocks each stream all 128 key rows of K and V: 2*128*(2*4*16) = 32768.
    assert flash_bytes(128, 16, 1, block=64, causal=False) == 16384 + 32768
    # Causal: block 0 sees keys 0..63, block 1 keys 0..127: 192 rows * 128 bytes = 24576.
    assert flash_bytes(128, 16, 1, block=64, causal=True) == 16384 + 24576
    assert flash_bytes(128, 16, 4, block=64, causal=True) == 4 * (16384 + 24576)


def test_flash_keeps_flops_and_cuts_bytes():
    # naive T^2 ops at T=512, d_k=16, per head: scores 2*512^2*16 = 8388608 FLOPs, softmax
    # 5*512^2 = 1310720, av 8388608: 18087936. Bytes: 16 T^2 + 16 T d_k = 4194304 + 131072.
    naive = naive_t2_cost(512, 16, 1)
    assert naive.flops == 18087936 and naive.bytes == 4325376
    flash = flash_cost(512, 16, 1, block=64, causal=False)
    assert flash.flops == naive.flops
    # Q+O 65536, K/V: 8 blocks * 512 rows * 128 bytes = 524288
    assert flash.bytes == 65536 + 524288
    assert flash.intensity > 7 * naive.intensity


def test_traced_peak_bytes_sees_numpy_buffers():
    n = 1 << 20   # a 4 MiB float32 buffer must show up in the peak
    peak = traced_peak_bytes(lambda: np.ones(n, dtype=np.float32).sum())
    assert 4 * n <= peak < 4 * n + (1 << 16)


def test_flash_peak_memory_below_naive():
    q, k, v = qkv(4, 1024, 16, seed=3)
    naive_peak = traced_peak_bytes(lambda: reference_attention(q, k, v, True))
    flash_peak = traced_peak_bytes(lambda: flash_attention(q, k, v))
    # the float64 reference holds at least one (4, 1024, 1024) float64 matrix: 32 MiB
    assert naive_peak >= 4 * 1024 * 1024 * 8
    assert flash_peak < naive_peak / 10


def test_flash_mha_matches_the_engines_mha():
    from inferlab.attention_perf import MHAWeights
    from inferlab.flash import flash_mha

    rng = np.random.default_rng(4)
    f32 = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    m = MHAWeights(f32(64, 192), f32(192), f32(64, 64), f32(64), n_heads=4, n_kv_heads=4)
    x = rng.standard_normal((200, 64)).astype(np.float32)
    np.testing.assert_allclose(flash_mha(x, m, block=48), m.forward(x), rtol=2e-4, atol=2e-5)


def test_flash_mha_matches_the_engines_gqa():
    """14 query heads over 2 KV heads (Qwen2.5-0.5B's grouping at a small width): flash repeats
    each K/V head for its group; the output equals the engine's grouped attention."""
    from inferlab.attention_perf import MHAWeights
    from inferlab.flash import flash_mha

    m = MHAWeights.random(112, 14, 2, qkv_bias=True, seed=3)
    x = np.random.default_rng(5).standard_normal((150, 112)).astype(np.float32)
    np.testing.assert_allclose(flash_mha(x, m, block=32), m.forward(x), rtol=2e-4, atol=2e-6)
