"""The attention cost model against hand-derived values, and the threshold T*."""

import numpy as np
import pytest

from inferlab.attention_perf import (
    MHAWeights, SweepConfig, attainable_gflops, attention_forward_timed, profile_forward, av_cost, bound_by, memory_bound_threshold, op_costs, out_proj_cost,
    projection_intensity, qkv_proj_cost, scores_cost, scores_intensity, seed_shortcut_threshold,
    softmax_cost,
)


def test_projection_hand_values():
    # T=64, d=64: one projection is 2*64*64^2 = 524288 FLOPs over 4*64*64 + 4*64^2 = 32768 bytes
    qkv = qkv_proj_cost(64, 64)
    assert qkv.flops == 3 * 524288 and qkv.bytes == 3 * 32768
    assert qkv.intensity == 16.0                 # 64*64 / (2*64 + 2*64)
    out = out_proj_cost(512, 64)
    assert out.flops == 2 * 512 * 64 * 64 == 4194304
    assert out.bytes == 4 * 512 * 64 + 4 * 64 * 64 == 147456
    assert out.intensity == pytest.approx(512 * 64 / (1024 + 128))   # 28.444...


def test_scores_and_av_hand_values():
    # T=512, d_k=16: 2*512^2*16 = 8388608 FLOPs; 8*512*16 + 4*512^2 = 65536 + 1048576 bytes
    s = scores_cost(512, 16)
    assert s.flops == 8388608 and s.bytes == 1114112
    assert s.intensity == pytest.approx(8192 / 1088)                 # 7.529...
    a = av_cost(512, 16, heads=4)
    assert a.flops == 4 * 8388608 and a.bytes == 4 * 1114112
    # T=64: 2*64^2*16 = 131072 FLOPs over 8*64*16 + 4*64^2 = 8192 + 16384 bytes: I = 16/3
    assert scores_cost(64, 16).intensity == pytest.approx(16 / 3)


def test_softmax_hand_values():
    sm = softmax_cost(512, heads=4)
    assert sm.flops == 4 * 5 * 262144 and sm.bytes == 4 * 8 * 262144
    assert sm.intensity == 0.625


def test_closed_forms_agree_with_counts():
    for T in (64, 128, 256, 512, 4096):
        c = op_costs(T, 64, 4)
        assert c["qkv_proj"].intensity == pytest.approx(projection_intensity(T, 64))
        assert c["out_proj"].intensity == pytest.approx(projection_intensity(T, 64))
        assert c["scores"].intensity == pytest.approx(scores_intensity(T, 16))
        assert c["av"].intensity == pytest.approx(scores_intensity(T, 16))
    assert set(op_costs(64, 64, 4)) == {"qkv_proj", "scores", "softmax", "av", "out_proj"}


def test_threshold_exact_root():
    # I_crit = 4, d_k = 16: T* = 4*16*4 / (16 - 8) = 32, and I(32) = 512 / 128 = 4 exactly
    assert memory_bound_threshold(16, 4) == 32
    assert scores_intensity(32, 16) == 4
    # I_crit = 2: T* = 128 / 12
    assert memory_bound_threshold(16, 2) == pytest.approx(128 / 12)
    # I tends to d_k/2 = 8: a ridge at or beyond 8 FLOP/byte leaves every T memory-bound
    assert memory_bound_threshold(16, 8) is None
    assert memory_bound_threshold(16, 30) is None
    assert scores_intensity(10**9, 16) < 8


def test_seed_shortcut_differs():
    # shortcut T*16 > 4(16+T)*2  =>  8T > 128  =>  T > 16, versus the exact 10.67
    assert seed_shortcut_threshold(16, 2) == 16
    # at I_crit = 4 the shortcut 16T > 256 + 16T never holds, yet the exact root is T* = 32
    assert seed_shortcut_threshold(16, 4) is None
    assert memory_bound_threshold(16, 4) == 32


def test_roofline_helpers():
    assert attainable_gflops(0.625, 100.0, 20.0) == 12.5       # memory roof: 20 GB/s * 0.625
    assert attainable_gflops(50.0, 100.0, 20.0) == 100.0       # compute roof
    assert bound_by(0.625, 5.0) == "memory" and bound_by(7.5, 5.0) == "compute"
    with pytest.raises(ValueError):
        memory_bound_threshold(16, 0)


# --- the timed forward: each op's output against an untimed float64 reference ----------------


def random_mha(d, H, seed=0):
    """Weights with non-zero biases (GPT.init's are zero, which would leave the bias add untested)."""
    rng = np.random.default_rng(seed)
    f32 = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    return MHAWeights(f32(d, 3 * d), f32(3 * d), f32(d, d), f32(d), n_heads=H, n_kv_heads=H)


def float64_reference(x, m):
    """Causal MHA from the definition, in float64, head by head with explicit loops over heads."""
    x, wq, bq, wo, bo = (a.astype(np.float64) for a in (x, m.w_qkv, m.b_qkv, m.w_o, m.b_o))
    T, d = x.shape
    H, dk = m.n_heads, d // m.n_heads
    qkv = x @ wq + bq
    q = np.stack([qkv[:, h * dk:(h + 1) * dk] for h in range(H)])
    k = np.stack([qkv[:, d + h * dk:d + (h + 1) * dk] for h in range(H)])
    v = np.stack([qkv[:, 2 * d + h * dk:2 * d + (h + 1) * dk] for h in range(H)])
    future = np.arange(T)[None, :] > np.arange(T)[:, None]
    s = np.stack([np.where(future, -np.inf, q[h] @ k[h].T / np.sqrt(dk)) for h in range(H)])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    a = e / e.sum(axis=-1, keepdims=True)
    o = np.stack([a[h] @ v[h] for h in range(H)])
    y = np.concatenate(list(o), axis=1) @ wo + bo
    return dict(q=q, k=k, v=v, scores=s, softmax=a, av=o, out_proj=y)


def test_each_timed_op_matches_float64_reference():
    m = random_mha(64, 4, seed=1)
    x = np.random.default_rng(2).standard_normal((96, 64)).astype(np.float32)
    out = {}
    times = attention_forward_timed(x, m, iters=2, outputs=out)
    ref = float64_reference(x, m)
    for name in ("q", "k", "v", "av", "out_proj", "softmax"):
        assert out[name].dtype == np.float32
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-4, atol=1e-5, err_msg=name)
    # scores: equal where visible, -inf exactly where the causal mask hides the future
    visible = np.isfinite(ref["scores"])
    assert (np.isfinite(out["scores"]) == visible).all()
    np.testing.assert_allclose(out["scores"][visible], ref["scores"][visible], rtol=1e-4, atol=1e-5)
    # the causal mask: A is lower-triangular, rows sum to 1, row 0 attends only to position 0
    assert (out["softmax"][:, np.triu_indices(96, 1)[0], np.triu_indices(96, 1)[1]] == 0).all()
    np.testing.assert_allclose(out["softmax"].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out["av"][:, 0], ref["v"][:, 0], rtol=1e-4, atol=1e-6)
    # the same code as the engine's mha: bitwise the same output
    np.testing.assert_array_equal(out["out_proj"], m.forward(x))
    assert set(times) == {"qkv_proj", "scores", "softmax", "av", "out_proj", "total"}
    assert all(t > 0 for t in times.values())
    assert times["total"] >= sum(times[k] for k in ("qkv_proj", "scores", "softmax", "av", "out_proj"))


def test_profile_forward_aggregates_min_sample_time():
    m = MHAWeights.init(64, 4, context=64, seed=0)
    x = np.zeros((64, 64), np.float32)
    stats = profile_forward(x, m, samples=3, min_sample_s=0.01, warmup=1)
    total = stats["total"]
    assert total.n == 3 and len(total.samples) == 3
    # every sample ran iters_per_sample forwards, calibrated to >= 10 ms per sample
    assert total.iters_per_sample * total.median > 0.005
    assert stats["softmax"].iters_per_sample == total.iters_per_sample
    assert total.p10 <= total.median <= total.p90


def test_sweep_config_defaults_are_the_seeds():
    c = SweepConfig()
    assert c.T_sweep == (64, 128, 256, 512) and c.d_model == 64 and c.n_heads == 4 and c.d_head == 16
    assert c.samples >= 100 and c.min_sample_s >= 0.05
