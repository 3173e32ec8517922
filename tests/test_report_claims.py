"""Sentences of the roofline and attention READMEs that name a roof: the roof they name is the
one their number was measured against, checked with hand-worked values."""

from __future__ import annotations

from inferlab.labs.attention_report import _fitting_roof_clause, _over_roof_lines
from inferlab.labs.roofline_report import _float64_ridge_sentence
from inferlab.roofline import in_band


def test_points_in_band_count_both_ends_and_an_open_top():
    points = [{"working_set_bytes": ws} for ws in (1024, 2048, 4096, 8192, 2**27)]
    assert len(in_band(points, [2048, 4096])) == 2      # both ends inside
    assert len(in_band(points, [2**27, None])) == 1     # DRAM's open band: one point
    assert len(in_band(points, [3000, 4000])) == 0


def test_float64_ridge_pairs_the_gemm_p10_with_the_triad_p90():
    r = {"ridge": {"threads": 2}, "ridge_points_flop_per_byte": {"float64": 60.0 / 20.0},
         "peak_GFLOPS": {"float64": {"2": {"median": 60.0, "p10": 33.0, "p90": 90.0}}},
         "bandwidth_GBps": {"triad": {"2": {"median": 20.0, "p10": 15.0, "p90": 22.0}}}}
    # 33 / 22 = 1.50 and 90 / 15 = 6.00
    assert _float64_ridge_sentence(r) == "With float64 GEMM as the roof the ridge is 3.00 FLOP/B (p10-p90 1.50-6.00)."


def test_a_cache_roof_above_the_compute_peak_is_not_named_as_the_bound():
    op = {"fits_in": "L3", "intensity": 0.625, "pct_of_fitting_roof": 6.2}
    # 115 x 0.625 = 71.875 GFLOP/s, above a 56.5 GFLOP/s peak: the peak bounds it
    text = _fitting_roof_clause(op, 115.0, 56.5)
    assert "71.9 GFLOP/s) lies above the compute peak (56.5 GFLOP/s), so against that peak it reaches 6.2%" in text
    # 80 x 0.625 = 50 GFLOP/s, below the peak: the cache roof bounds it
    assert _fitting_roof_clause(op, 80.0, 56.5).startswith("against the L3 roof (80 GB/s, 1 thread, x I = 50 GFLOP/s)")


def test_points_over_the_roof_are_explained_by_their_side_of_the_ridge():
    def point(T, **ops):
        return {"T": T, "ops": {n: {"pct_of_attainable": 50.0, "bound": "memory"} for n in
                                ("qkv_proj", "scores", "softmax", "av", "out_proj")} | ops}
    points = [point(128, av={"pct_of_attainable": 171.0, "bound": "compute"}),
              point(512, softmax={"pct_of_attainable": 120.0, "bound": "memory"})]
    lines = _over_roof_lines(points)
    memory = next(x for x in lines if x.startswith("Points left of the ridge"))
    compute = next(x for x in lines if x.startswith("Points right of the ridge"))
    assert "softmax@T=512 (120%)" in memory and "av@" not in memory
    assert "av@T=128 (171%)" in compute and "cache" not in compute
    assert _over_roof_lines([point(64)]) == []
