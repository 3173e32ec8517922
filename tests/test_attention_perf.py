"""The attention cost model against hand-derived values, and the threshold T*."""

import pytest

from inferlab.attention_perf import (
    attainable_gflops, av_cost, bound_by, memory_bound_threshold, op_costs, out_proj_cost,
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
