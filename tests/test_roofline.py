"""Roofline: STREAM kernels and byte counts, plateaus, theoretical peak, the ridge, the lab folder.

The measuring functions run here on tiny sizes (the LLC is patched to 256 KiB) so the file stays
fast; the numbers are not the point, their arithmetic is: every GB/s and GFLOP/s is recomputed
from the recorded times with STREAM's byte counts and 2n^3.
"""

import json
import math
import os
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import numpy as np
import pytest

from inferlab import roofline
from inferlab.errors import InferlabError
from inferlab.labs.roofline import LAB, write_roofline
from inferlab.measure.artifacts import load_schema
from inferlab.measure.timing import summarize
from inferlab.roofline import (Roofline, RooflineConfig, load_roofline, plateau_roofs,
                               theoretical_peak)
from verdict_checks import check_readme, check_verdicts

TINY_LLC = 256 * 1024
TINY_CACHES = [{"level": 1, "type": "Data", "size_bytes": 32 * 1024, "shared_cpu_list": "0"},
               {"level": 2, "type": "Unified", "size_bytes": TINY_LLC, "shared_cpu_list": "0"}]


@pytest.fixture
def tiny_machine(monkeypatch):
    monkeypatch.setattr(roofline, "data_caches", lambda: TINY_CACHES)


def tiny_config(threads=2, **over):
    return RooflineConfig(**{"threads": threads, "quick": True, "trials": 10, "sweep_points_per_octave": 1,
                             "sweep_samples": 3, "gemm_sizes": (64, 96), "max_memory_bytes": 4 * 2**20,
                             "gemm_samples": 3, "min_sample_s": 0.002, "budget_s": 0.0, **over})


@pytest.mark.parametrize("threads", [1, 3])
def test_stream_kernels_compute_stream(threads):
    n = 1001
    a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.zeros(n)
    parts = roofline._chunks(n, threads)
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        def run(kernel):
            roofline._parallel([roofline._stream_call(kernel, a[p], b[p], c[p]) for p in parts], pool)()
        run("copy")   # c = a
        assert np.all(c == 1.0)
        run("scale")  # b = 3c
        assert np.all(b == 3.0)
        run("add")    # c = a + b
        assert np.all(c == 4.0)
        run("triad")  # a = b + 3c
        assert np.all(a == 15.0)
    finally:
        if pool:
            pool.shutdown()


def test_chunks_cover_the_array_once():
    parts = roofline._chunks(10, 3)
    idx = np.concatenate([np.arange(10)[p] for p in parts])
    assert idx.tolist() == list(range(10))
    assert [p.stop - p.start for p in parts] == [3, 3, 4]


def test_stream_byte_counts_are_streams():
    # float64: copy/scale 16 B/elem, add/triad 24 (McCalpin's table)
    assert {k: 8 * v for k, v in roofline.STREAM_ARRAYS_TOUCHED.items()} == {
        "copy": 16, "scale": 16, "add": 24, "triad": 24}


def test_sweep_point_counts_bytes(tiny_machine):
    p = roofline.sweep_point(8 * 1024, tiny_config())
    n = 8 * 1024 // 16
    assert p["working_set_bytes"] == 16 * n
    assert p["reps"] == roofline.SWEEP_STREAM_ELEMS // n
    assert p["GBps_best"] >= p["GBps_median"] > 0


def test_cache_levels_bands(tiny_machine):
    sysfs = roofline.sysfs_levels(tiny_config())
    # L1 from 0 to half its 32 KiB; the last level from 2 x L1 to half the size the sweep shows
    # (here 192 KiB, not sysfs's 256); DRAM: its plateau in the sweep, from where it begins
    dram = {"reached": True, "plateau": {"first_bytes": 2**20}}
    levels = roofline.cache_levels(sysfs, 192 * 1024, dram)
    assert [lv["name"] for lv in levels] == ["L1", "L2", "DRAM"]
    assert levels[0]["band_bytes"] == [0, 16 * 1024] and levels[0]["from"] == "sysfs"
    assert levels[1]["band_bytes"] == [64 * 1024, 96 * 1024] and levels[1]["size_bytes"] == TINY_LLC
    assert levels[2]["band_bytes"] == [2**20, None]
    assert roofline.cache_levels(sysfs, TINY_LLC, {"reached": False})[2]["band_bytes"] is None
    # --llc pretends the last level's size; the levels below stay sysfs's
    pretended = roofline.sysfs_levels(tiny_config(llc_bytes=480 * 2**20))
    assert pretended == [{"name": "L1", "size_bytes": 32 * 1024, "from": "sysfs"},
                         {"name": "L2", "size_bytes": 480 * 2**20, "from": "--llc"}]


def test_plateau_roofs_take_the_highest_median_two_points_of_each_band_reach():
    levels = [{"name": "L1", "band_bytes": [0, 100]}, {"name": "L2", "band_bytes": [400, 1000]},
              {"name": "DRAM", "band_bytes": [4000, None]}]
    # GBps_best carries a lone outlier sample (999) that must not lift any roof; L2's 150 is a
    # lone fast point (its neighbours 60 and 55): the roof is 60, which two points reach
    points = [{"working_set_bytes": ws, "GBps_median": g, "GBps_best": 999.0} for ws, g in
              [(50, 90.0), (100, 95.0), (200, 70.0), (500, 60.0), (700, 150.0), (1000, 55.0), (2000, 40.0),
               (4000, 10.0), (8000, 11.0)]]
    roofs = plateau_roofs(points, levels)
    assert roofs == {"L1": 90.0, "L2": 60.0, "DRAM": 10.0}
    assert plateau_roofs(points[:2], levels)["DRAM"] is None
    assert plateau_roofs(points[-1:], levels)["DRAM"] == 11.0            # a band of one point: that point
    assert roofline.unordered_roofs(roofs) == []
    assert roofline.unordered_roofs({"L1": 50.0, "L2": 80.0, "L3": None, "DRAM": 9.0}) == [
        "L2 (80 GB/s) above L1 (50 GB/s)"]


@pytest.mark.parametrize("llc, budget, shown, elems, capped, bound", [
    # 4 x 38 MiB = 152 MiB = 19,922,944 float64; three of them (456 MiB) fit 768 MiB: DRAM's
    (38 * 2**20, 768 * 2**20, True, 19_922_944, False, "none"),
    # a 480 MiB LLC wants 1,920 MiB arrays; 768 MiB / 3 = 256 MiB = 33,554,432 float64: an upper bound
    (480 * 2**20, 768 * 2**20, True, 33_554_432, True, "upper"),
    # 4 x 10,000,001 B = 40,000,004 B is 5,000,000.5 float64, rounded up; 100 MB / 24 B = 4,166,666:
    # the budget cuts it
    (10_000_001, 100_000_000, True, 4_166_666, True, "upper"),
    # the same with a 200 MB budget: 8,333,333 elements hold the 5,000,001 wanted
    (10_000_001, 200_000_000, True, 5_000_001, False, "none"),
    # full-size arrays, but the sweep showed no DRAM (the size came from sysfs): still an upper bound
    (32 * 2**20, 768 * 2**20, False, 16_777_216, False, "upper"),
])
def test_stream_sizing_rule(llc, budget, shown, elems, capped, bound):
    sizing = roofline.stream_sizing(llc, RooflineConfig(threads=1, max_memory_bytes=budget), dram_shown=shown)
    assert (sizing["array_elems"], sizing["array_capped"], sizing["bound"]) == (elems, capped, bound)
    assert sizing["array_bytes"] == 8 * elems


def test_ridge_and_ceilings_ignore_a_lone_outlier():
    """The ceilings are medians: one absurd trial (the 223 vs 8 GFLOP/s of issue 13) moves nothing."""
    from inferlab.measure.timing import summarize

    times = [0.010] * 9 + [0.0004]          # nine 10 ms trials and one impossible 0.4 ms one
    e = roofline._bandwidth_entry(summarize(times), nbytes=10**8)
    assert e["median"] == pytest.approx(10.0)  # 1e8 B / 10 ms = 10 GB/s
    assert e["best"] == pytest.approx(250.0)


def test_roofline_type_at_one_thread_count():
    results = {"ridge": {"threads": 2},
               "peak_GFLOPS": {"float32": {t: {"median": m, "p10": m * 0.9, "p90": m * 1.1} for t, m in
                                           (("1", 40.0), ("2", 80.0))},
                               "float64": {"1": {"median": 20.0}, "2": {"median": 40.0}}},
               "bandwidth_GBps": {"triad": {t: {"median": b, "p10": b * 0.8, "p90": b * 1.25} for t, b in
                                            (("1", 8.0), ("2", 10.0))}},
               "cache_roofs_GBps": {"L1": 100.0, "DRAM": 9.0},
               "wide_ceilings": ["triad, 2 thread(s): ..."]}
    one, two = Roofline.from_results(results, 1), Roofline.from_results(results, 2)
    assert (one.threads, one.peak_GFLOPS, one.bandwidth_GBps) == (1, 40.0, 8.0)
    assert one.cache_roofs_GBps["L1"] == 100.0 and two.cache_roofs_GBps == {}   # cache roofs are 1-thread
    assert two.wide and not one.wide
    # ridge 80 / 10 = 8; conservative ends: 72 / 12.5 and 88 / 8
    assert (two.ridge.value, two.ridge.p10, two.ridge.p90) == pytest.approx((8.0, 5.76, 11.0))
    assert one.attainable_GFLOPS(0.5) == 4.0 and one.attainable_GFLOPS(100) == 40.0
    assert one.bound_by(4.9) == "memory" and one.bound_by(5.0) == "compute"
    assert Roofline.from_json(two.to_json()) == two
    # a run whose triad is an upper bound of DRAM's says so to the labs that read it
    upper = Roofline.from_results({**results, "stream": {"bound": "upper"}}, 2)
    assert upper.bound == "upper" and two.bound == "none"
    assert Roofline.from_json(upper.to_json()) == upper and upper.to_json()["bandwidth_bound"] == "upper"


@pytest.mark.parametrize("flags,ident,mhz,threads,expect64", [
    # Intel AVX-512 + FMA, 2 pipes: 2 pipes x 8 lanes x 2 = 32 FLOP/cycle; x 4 cores x 2.0 GHz
    ({"avx512f", "avx2", "fma"}, {"vendor": "GenuineIntel", "family": 6}, {"max_mhz": 2000.0}, 4, 256.0),
    # Zen 4: 512-bit ops on 256-bit datapaths: 2 x 4 x 2 = 16; x 2 cores x 2.5 GHz
    ({"avx512f", "avx2", "fma"}, {"vendor": "AuthenticAMD", "family": 25}, {"current_mhz": 2500.0}, 2, 80.0),
    # AVX without FMA: an add pipe and a mul pipe, 4 lanes: 8 FLOP/cycle; x 1 core x 3 GHz
    ({"avx"}, {"vendor": "GenuineIntel", "family": 6}, {"max_mhz": 3000.0}, 1, 24.0),
])
def test_theoretical_peak_from_flags(monkeypatch, flags, ident, mhz, threads, expect64):
    monkeypatch.setattr(roofline, "cpu_flags", lambda: flags)
    monkeypatch.setattr(roofline, "cpu_identity", lambda: ident)
    monkeypatch.setattr(roofline, "cpu_mhz", lambda: mhz)
    monkeypatch.setattr(roofline, "physical_cores", lambda: 8)
    peak = theoretical_peak(threads)
    assert peak["float64"]["GFLOPS"] == pytest.approx(expect64)
    assert peak["float32"]["GFLOPS"] == pytest.approx(2 * expect64)


def test_theoretical_peak_unknown_without_clock(monkeypatch):
    monkeypatch.setattr(roofline, "cpu_flags", lambda: {"avx2", "fma"})
    monkeypatch.setattr(roofline, "cpu_mhz", lambda: {})
    assert theoretical_peak(1)["float32"] == "unknown"


def _theory_results(median, p10, p90, ghz_source="current_mhz"):
    """A float32-only results dict: 32 FLOP/cycle/core at 2.5 GHz on 2 cores (80 GFLOP/s per core)."""
    theory = {"isa": "AVX-512 on 256-bit datapaths (Zen 4)", "vector_bits": 256, "fma": True, "pipes_assumed": 2,
              "cores": 2, "ghz": 2.5, "ghz_source": ghz_source,
              "float32": {"flop_per_cycle_per_core": 32, "GFLOPS": 160.0}, "float64": "unknown"}
    entry = lambda k: {"median": k * median, "p10": k * p10, "p90": k * p90}  # noqa: E731
    return {"theoretical_peak_GFLOPS": theory, "peak_GFLOPS": {"float32": {"1": entry(1), "2": entry(2)}}}


def test_a_gemm_above_the_theoretical_peak_calls_it_an_underestimate():
    # 1 thread: 100 (95-101) GFLOP/s over 1 core's 80: 1.25 (1.19-1.26), wholly above 1. The
    # assumed 32 FLOP/cycle would need 100 / 32 = 3.125 GHz, not the 2.5 read from current_mhz.
    verdicts = {v["id"]: v for v in roofline.theoretical_verdicts(_theory_results(100.0, 95.0, 101.0))}
    assert set(verdicts) == {"theoretical_float32_1", "theoretical_float32_2"}   # float64 unknown: no claim
    one = verdicts["theoretical_float32_1"]
    assert (one["value"], one["p10"], one["p90"]) == pytest.approx((1.25, 95 / 80, 101 / 80))
    assert one["resolved"] and "underestimate" in one["statement"]
    assert "3.12 GHz" in one["statement"] or "3.13 GHz" in one["statement"]
    assert "2.50 GHz from current_mhz" in one["statement"] and "turbo unknown" in one["statement"]
    assert "80.0 GFLOP/s of 1 core(s)" in one["statement"]
    # 2 threads are held to 2 cores' 160: the same share
    assert verdicts["theoretical_float32_2"]["value"] == pytest.approx(1.25)
    check_verdicts(list(verdicts.values()))


@pytest.mark.parametrize("median,p10,p90,expect", [
    (60.0, 55.0, 65.0, "stays under"),        # 0.75 (0.69-0.81): under the peak
    (80.0, 70.0, 90.0, "cannot tell"),        # 1.0 (0.875-1.125) straddles: no side taken
])
def test_a_gemm_under_or_at_the_theoretical_peak(median, p10, p90, expect):
    v = roofline.theoretical_verdicts(_theory_results(median, p10, p90))[0]
    assert expect in v["statement"] and "underestimate" not in v["statement"]
    check_verdicts([v])


def test_the_report_names_the_beaten_theoretical_line(tmp_path):
    from inferlab.labs.roofline_report import _theory_lines, beaten_theory

    r = {**_theory_results(100.0, 95.0, 101.0), "verdicts": []}   # an older results.json: none stored
    assert beaten_theory(r, 1) == frozenset({"float32"})
    r = {**_theory_results(60.0, 55.0, 65.0), "verdicts": []}
    assert beaten_theory(r, 1) == frozenset()
    text = "\n".join(_theory_lines(r))
    assert "| float32 | 1 | 32 | 80.0 (1) | 60.0 (55.0-65.0) | 0.75 |" in text
    assert "| float32 | 2 | 32 | 160.0 (2) | 120.0 (110.0-130.0) | 0.75 |" in text


def test_quick_keeps_ten_gemm_and_stream_trials():
    quick = RooflineConfig.for_run(quick=True, threads=2)
    assert quick.gemm_samples >= 10 and quick.trials >= 10


def test_run_roofline_numbers_follow_from_the_times(tiny_machine):
    r = roofline.run_roofline(tiny_config(threads=2))
    n = r["stream"]["array_elems"]
    assert n * 8 >= 4 * TINY_LLC
    assert r["thread_counts"] == [1, 2]
    for kernel, per_t in r["bandwidth_GBps"].items():
        for t, e in per_t.items():
            nbytes = e["bytes_per_elem"] * n
            assert e["best"] == pytest.approx(nbytes / (e["time"]["min_ms"] / 1e3) / 1e9)
            assert e["median"] == pytest.approx(nbytes / (e["time"]["median_ms"] / 1e3) / 1e9)
            assert e["p10"] == pytest.approx(nbytes / (e["time"]["p90_ms"] / 1e3) / 1e9)
            assert e["trials"] >= 10 and e["best"] >= e["median"] > 0
    for dtype, per_t in r["peak_GFLOPS"].items():
        for t, e in per_t.items():
            assert e["median"] == pytest.approx(2 * e["n"] ** 3 / (e["time"]["median_ms"] / 1e3) / 1e9)
            assert e["median"] == max(e["by_n"].values())
    ridge = r["ridge"]
    assert ridge["threads"] == 2
    assert ridge["peak_GFLOPS"] == r["peak_GFLOPS"]["float32"]["2"]["median"]
    assert ridge["bandwidth_GBps"] == r["bandwidth_GBps"]["triad"]["2"]["median"]
    assert r["ridge_point_flop_per_byte"] == pytest.approx(ridge["peak_GFLOPS"] / ridge["bandwidth_GBps"])
    assert ridge["p10"] <= ridge["value"] <= ridge["p90"]
    check_verdicts(r["verdicts"])
    theory = {"theoretical_float32_1", "theoretical_float32_2", "theoretical_float64_1", "theoretical_float64_2"}
    known = isinstance(r["theoretical_peak_GFLOPS"]["float32"], dict)
    assert {v["id"] for v in r["verdicts"]} == {"triad_threads", "gemm_float32_threads", "gemv_memory_bound",
                                                *(theory if known else ())}
    ws = [p["working_set_bytes"] for p in r["sweep"]["points"]]
    assert ws[0] <= 32 * 1024 and ws[-1] >= 4 * TINY_LLC  # L1-sized to DRAM-sized
    assert set(r["cache_roofs_GBps"]) == {"L1", "L2", "DRAM"}
    json.dumps(r, allow_nan=False)

    roof = Roofline.from_results(r)
    assert roof.threads == 2
    assert roof.attainable_GFLOPS(1e-3) == pytest.approx(roof.bandwidth_GBps * 1e-3)
    assert roof.attainable_GFLOPS(1e6) == roof.peak_GFLOPS
    # at the ridge both roofs meet
    assert roof.bandwidth_GBps * roof.ridge_point_flop_per_byte == pytest.approx(roof.peak_GFLOPS)


def test_lab_writes_a_valid_folder_and_load_roofline_reads_it(tiny_machine, tmp_path):
    out = tmp_path / "01-roofline"
    results = write_roofline(tiny_config(threads=1), out, force=False)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["README.md", "bench.py", "manifest.json", "results.json", "roofline.png", "sweep.png"]
    for name in ("results", "manifest"):
        jsonschema.validate(json.loads((out / f"{name}.json").read_text()), load_schema(name),
                            cls=jsonschema.Draft202012Validator)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hardware"]["threads_used"] == 1
    assert manifest["results_summary"]["ridge_point_flop_per_byte"] == results["ridge_point_flop_per_byte"]
    readme = (out / "README.md").read_text()
    assert f"{results['ridge_point_flop_per_byte']:.2f} FLOP/byte" in readme
    assert "**median**" in readme          # the README names the statistic of its ceilings
    check_readme(readme, results["verdicts"])
    assert manifest["provenance"]["inferlab"] and "run_cost" in manifest
    assert manifest["run_cost"]["wall_s"] > 0
    compile((out / "bench.py").read_text(), "bench.py", "exec")
    roof = load_roofline(out)
    assert roof.ridge_point_flop_per_byte == results["ridge_point_flop_per_byte"]
    assert roof.threads == 1
    with pytest.raises(InferlabError, match="--force"):
        write_roofline(tiny_config(threads=1), out, force=False)


def test_load_roofline_errors(tmp_path):
    with pytest.raises(InferlabError, match="not found"):
        load_roofline(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"experiment": "15-attention-perf"}))
    with pytest.raises(InferlabError, match="/experiment"):
        load_roofline(tmp_path)
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(InferlabError, match="not JSON"):
        load_roofline(tmp_path)
    # read as every JSON file is (jsonfile.read_json): one line, never a traceback
    (tmp_path / "results.json").write_text("[" * 6000 + "]" * 6000)
    with pytest.raises(InferlabError, match="nested deeper than 5,000"):
        load_roofline(tmp_path)
    (tmp_path / "results.json").write_bytes(b'{"experiment": "\xff"}')
    with pytest.raises(InferlabError, match="not UTF-8"):
        load_roofline(tmp_path)


def test_lab_is_registered_first():
    assert LAB.order == 1 and LAB.name == "01-roofline"


def test_cli_quick_json(tiny_machine, tmp_path, capsys, monkeypatch):
    from inferlab.cli import main

    # the CLI path end to end on the tiny machine's config (a few seconds, not a real run)
    monkeypatch.setattr(RooflineConfig, "for_run", classmethod(lambda cls, **kw: tiny_config(kw["threads"] or 2)))
    assert main(["roofline", "--quick", "--json", "--out", str(tmp_path / "r")]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("bandwidth_GBps", "peak_GFLOPS", "ridge_point_flop_per_byte", "sweep"):
        assert key in r
    assert r["ridge_point_flop_per_byte"] == pytest.approx(
        r["ridge"]["peak_GFLOPS"] / r["ridge"]["bandwidth_GBps"])
    assert all(e["best"] > 0 for per_t in r["bandwidth_GBps"].values() for e in per_t.values())


# --- benchmarks/likwid_compare.py: parsing and ratios, with a stand-in likwid-bench -----------

LIKWID_OUTPUT = """Using 2 threads
Cycles:\t\t\t2331775420
Time:\t\t\t9.102329e-01 sec
Iterations:\t\t10
MFlops/s:\t\t468.74
MByte/s:\t\t5624.93
"""


@pytest.fixture
def likwid_compare(tmp_path, monkeypatch, load_benchmark):
    mod = load_benchmark("likwid_compare")
    fake = tmp_path / "bin" / "likwid-bench"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nif [ \"$2\" = bad ]; then echo 'ERROR: kernel bad not found' >&2; exit 1; fi\n"
                    f"cat <<'X'\n{LIKWID_OUTPUT}X\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    return mod


def test_likwid_output_parsed(likwid_compare):
    r = likwid_compare.run_likwid("stream_avx512", 1024, 2)
    assert r["MByte_per_s"] == 5624.93 and r["MFlops_per_s"] == 468.74
    assert r["time_s"] == pytest.approx(0.9102329) and r["iterations"] == 10
    assert r["command"] == "likwid-bench -t stream_avx512 -W N:1024kB:2"


def test_likwid_failure_is_one_line(likwid_compare):
    with pytest.raises(InferlabError, match="kernel bad not found"):
        likwid_compare.run_likwid("bad", 1024, 1)


def test_likwid_ratios_and_kernels(likwid_compare):
    assert likwid_compare.likwid_kernels({"avx512f", "avx2", "fma"})["triad"] == "stream_avx512"
    assert likwid_compare.likwid_kernels({"avx2", "fma"})["float64"] == "peakflops_avx_fma"
    ours = {"bandwidth": {"triad": {"1": {"best": 9.0}}, "copy": {"1": {"best": 12.0}}},
            "peak": {"float64": {"1": {"best": 30.0}}}}
    likwid = {"triad": {"1": {"best": 10.0}}, "copy": {"1": {"best": 8.0}},
              "copy_nt": {"1": {"best": 12.5}}, "float64": {"1": {"best": 40.0}}}
    rows = {(r["quantity"], r["threads"]): r for r in likwid_compare.ratios(ours, likwid).values()}
    assert rows[("triad", 1)]["ratio"] == pytest.approx(0.9) and rows[("triad", 1)]["within_target"]
    assert rows[("copy", 1)]["ratio"] == pytest.approx(1.5) and not rows[("copy", 1)]["within_target"]
    assert rows[("copy_nt", 1)]["ratio"] == pytest.approx(0.96)
    assert rows[("float64", 1)]["ratio"] == pytest.approx(0.75) and "within_target" not in rows[("float64", 1)]
    merged = likwid_compare.merge_runs({"triad": {"1": {"best": 10.0, "runs": [1]}}},
                                       {"triad": {"1": {"best": 11.0, "runs": [2]}}})
    assert merged["triad"]["1"] == {"best": 11.0, "runs": [1, 2]}


def test_blocked_triad_equals_the_whole_array_expression(monkeypatch):
    monkeypatch.setattr(roofline, "TRIAD_BLOCK", 7)   # many blocks and a ragged last one
    rng = np.random.default_rng(0)
    b, c = rng.random(100), rng.random(100)
    a = np.empty(100)
    roofline._stream_call("triad", a, b, c)()
    assert np.array_equal(a, b + roofline.STREAM_SCALAR * c)


def _side(ms: list[float]) -> dict:
    """One thread count's times as results.json keeps them (Stats.to_json("ms"))."""
    from inferlab.measure.timing import summarize

    return summarize([t / 1e3 for t in ms]).to_json("ms")


def _thread_times(n: int, ratio_lo: float, ratio_hi: float) -> dict:
    """1 thread 8-12 ms swinging with the load, N threads faster by ratio_lo..ratio_hi per round."""
    load = [1 + 0.2 * math.sin(i) for i in range(n)]
    ratios = [ratio_lo + (ratio_hi - ratio_lo) * ((7 * i) % n) / max(n - 1, 1) for i in range(n)]
    return {"1": _side([10 * x for x in load]), "2": _side([10 * x / r for x, r in zip(load, ratios)])}


@pytest.mark.parametrize("n, outcome", [(20, "above"), (5, "undecided")])
def test_thread_verdicts_are_paired_from_the_kept_times(monkeypatch, n, outcome):
    """1 thread 8-12 ms, 2 threads faster by 1.2-1.6x in every round: the sides' ranges overlap,
    but the paired CI decides (5 rounds cover the median with 93.75% only: undecided)."""
    from inferlab import roofline

    monkeypatch.setattr(roofline, "theoretical_verdicts", lambda results: [])
    t = _thread_times(n, 1.2, 1.6)
    times = {c: {"time": t[c], "n": 512} for c in t}
    results = {"thread_counts": [1, 2], "bandwidth_GBps": {"triad": times}, "peak_GFLOPS": {"float32": times},
               "thread_ratios": {"stream": {"triad": {}},
                                 "gemm": {"float32": {"value": 1.4, "p10": 1.2, "p90": 1.6, "n": 512, "time": t}}},
               "ridge": {"value": 5.0, "p10": 4.0, "p90": 6.0, "threads": 2}}
    got = {v["id"]: v for v in roofline.roofline_verdicts(results)}
    check_verdicts(list(got.values()))
    for vid in ("triad_threads", "gemm_float32_threads"):
        assert got[vid]["outcome"] == outcome and "paired)" in got[vid]["statement"]
        assert got[vid]["rounds"] == n


def test_gemm_thread_verdict_pairs_the_times_at_the_ratios_n(monkeypatch):
    """The committed run's case: the 1-thread peak at n=512, the 2-thread one at n=2048, the
    paired ratio at n=2048: the verdict pairs both counts' times at n=2048 (ratio 1.7-1.9), not
    the two peaks. A run from before those times were kept has only the ratio's p10-p90: bounds."""
    from inferlab import roofline

    monkeypatch.setattr(roofline, "theoretical_verdicts", lambda results: [])
    at_2048 = _thread_times(20, 1.7, 1.9)
    peaks = {"1": {"n": 512, "time": _side([3.04] * 20)}, "2": {"n": 2048, "time": at_2048["2"]}}
    quiet = _thread_times(20, 1.6, 1.7)
    results = {"thread_counts": [1, 2], "bandwidth_GBps": {"triad": {c: {"time": quiet[c]} for c in quiet}},
               "peak_GFLOPS": {"float32": peaks},
               "thread_ratios": {"stream": {"triad": {}},
                                 "gemm": {"float32": {"value": 1.8, "p10": 1.7, "p90": 1.9, "n": 2048, "time": at_2048}}},
               "ridge": {"value": 5.0, "p10": 4.0, "p90": 6.0, "threads": 2}}
    v = next(v for v in roofline.roofline_verdicts(results) if v["id"] == "gemm_float32_threads")
    assert 1.7 <= v["ci_low"] <= v["value"] <= v["ci_high"] <= 1.9 and v["outcome"] == "above"
    del results["thread_ratios"]["gemm"]["float32"]["time"]
    v = next(v for v in roofline.roofline_verdicts(results) if v["id"] == "gemm_float32_threads")
    assert (v["ci_low"], v["ci_high"], v["confidence"]) == (1.7, 1.9, None) and "bounds" in v["statement"]


def test_sweep_sizes_keep_every_power_of_two_on_the_grid():
    # 4 KiB to a 128 MiB budget at 1 point per octave is 4 KiB, 8 KiB, ..., 128 MiB: every one a
    # power of two, and each must stay exactly that (2 MiB rounded down to 2,097,024 fell out of
    # the L3 band that begins at 2 x a 1 MiB L2)
    config = RooflineConfig(threads=1, sweep_points_per_octave=1, max_memory_bytes=128 * 2**20)
    assert roofline.sweep_sizes(config) == [2**k for k in range(12, 28)]
    config = RooflineConfig(threads=1, sweep_points_per_octave=4, max_memory_bytes=256 * 2**20)
    sizes = roofline.sweep_sizes(config)
    assert all(s % 128 == 0 for s in sizes)
    assert {2**k for k in range(12, 29)} <= set(sizes)


# --- the sweep's DRAM, the sizing rule and the bound labels, on a sweep of known shape ----------

KNOWN = {"L1": 100.0, "edge": 50.0, "DRAM": 20.0}


def run_with_readme(config, tmp_path):
    """(results, README text) of a run, without the lab's figures (their rendering is the slow part)."""
    from inferlab.labs.roofline import summary
    from inferlab.labs.roofline_report import readme
    from inferlab.measure import build_manifest

    r = roofline.run_roofline(config)
    manifest = build_manifest(experiment=r["experiment"], seed=0, config=r["config"], depends_on=None,
                              results_summary=summary(r), threads=config.threads)
    return r, readme(r, manifest, tmp_path / "r")


def known_sweep_point(ws_bytes, config):
    """A stand-in for sweep_point: 100 GB/s up to 64 KiB, 50 at 128 KiB, 20 from 256 KiB on."""
    gbps = KNOWN["L1"] if ws_bytes <= 64 * 1024 else KNOWN["edge"] if ws_bytes <= 128 * 1024 else KNOWN["DRAM"]
    return {"working_set_bytes": ws_bytes, "GBps_best": gbps, "GBps_median": gbps, "noisy": False, "reps": 1}


@pytest.mark.parametrize("budget, bound", [
    # the sweep's DRAM begins at 256 KiB: arrays of 4 x 256 KiB = 131,072 float64; three (3 MiB)
    # fit a 4 MiB budget: DRAM bandwidth
    (4 * 2**20, "none"),
    # in 2 MiB only 2 MiB / 24 B = 87,381 float64 each: an upper bound, the ridge a lower one
    (2 * 2**20, "upper"),
])
def test_run_sizes_stream_from_the_sweeps_dram_and_labels_the_bound(tiny_machine, monkeypatch, tmp_path, budget, bound):
    monkeypatch.setattr(roofline, "sweep_point", known_sweep_point)
    r, readme = run_with_readme(tiny_config(max_memory_bytes=budget), tmp_path)
    assert r["sweep"]["stopped"] == "dram"
    # stops once DRAM spans 2 octaves: 256 KiB to 1 MiB
    assert r["sweep"]["points"][-1]["working_set_bytes"] == 2**20
    assert r["llc"]["sweep_bytes"] == 256 * 1024 and r["llc"]["assumed_agrees"]   # sysfs's 256 KiB L2
    assert [(k["from_bytes"], k["to_bytes"], k["dram"], k["past_dram"]) for k in r["sweep"]["knees"]] == [
        (64 * 1024, 256 * 1024, True, False)]
    assert r["cache_roofs_GBps"]["DRAM"] == KNOWN["DRAM"] and r["ridge"]["sweep_dram_GBps"] == KNOWN["DRAM"]
    assert r["stream"]["array_elems"] == (131_072 if bound == "none" else 87_381)
    assert (r["stream"]["bound"], r["ridge"]["bound"]) == (bound, "none" if bound == "none" else "lower")
    ridge = f"{r['ridge_point_flop_per_byte']:.2f} FLOP/byte**"
    if bound == "none":
        assert f"**{ridge}" in readme and "DRAM bandwidth: each array 1 MiB" in readme
        assert "Upper bounds" not in readme and "lower bound" not in readme
    else:
        assert f"**>= {ridge}" in readme and "**A lower bound**" in readme
        assert "**Upper bounds of DRAM bandwidth**: each array 683 KiB: 3 arrays of 4x the 256 KiB" in readme
    assert "agrees with the 256 KiB sysfs gives" in readme
    check_readme(readme, r["verdicts"])


def test_a_pretended_llc_the_sweep_does_not_show_is_named(tiny_machine, monkeypatch, tmp_path):
    monkeypatch.setattr(roofline, "sweep_point", known_sweep_point)
    r, readme = run_with_readme(tiny_config(llc_bytes=480 * 2**20), tmp_path)
    assert r["llc"]["assumed_bytes"] == 480 * 2**20 and r["llc"]["assumed_from"] == "--llc"
    assert r["llc"]["assumed_agrees"] is False and r["stream"]["bound"] == "none"   # sized from the sweep
    assert "L2 480 MiB (pretended, --llc): **no knee of the sweep within 2x of it**" in readme
    assert "**disagrees with** the 480 MiB --llc gives" in readme


def test_without_dram_the_sweep_runs_to_the_budget_and_the_arrays_are_an_upper_bound(tiny_machine, monkeypatch,
                                                                                    tmp_path):
    monkeypatch.setattr(roofline, "sweep_point", lambda ws, config: {**known_sweep_point(ws, config),
                                                                     "GBps_median": KNOWN["L1"]})
    r, readme = run_with_readme(tiny_config(), tmp_path)
    assert r["sweep"]["stopped"] == "budget" and not r["sweep"]["dram"]["reached"]
    assert r["sweep"]["points"][-1]["working_set_bytes"] == 4 * 2**20
    # sysfs's 256 KiB is below the 4 MiB the sweep reached without DRAM: 4 x 4 MiB wanted, 4 MiB / 24 B held
    assert r["llc"]["used_bytes"] == 4 * 2**20 and r["stream"]["array_elems"] == 174_762
    assert r["stream"]["bound"] == "upper" and r["ridge"]["bound"] == "lower" and r["cache_roofs_GBps"]["DRAM"] is None
    assert "- DRAM: **not shown**" in readme


@pytest.mark.slow  # a whole --quick roofline (~2.3 s); the pretended LLC's naming is in the default run
def test_cli_pretends_a_480_mib_llc_under_a_small_budget(tmp_path, capsys, monkeypatch):
    """--quick --llc 480MiB --max-memory 32MiB, end to end on this machine (timing shrunk). The
    sweep stops at the 32 MiB budget; the arrays (at least 4 x the 4 MiB past the private caches
    where DRAM could begin) cannot reach 4x in 32 MiB / 3: an upper bound, the ridge a lower one."""
    from dataclasses import replace

    from inferlab.cli import main

    real = RooflineConfig.for_run.__func__
    monkeypatch.setattr(RooflineConfig, "for_run", classmethod(lambda cls, **kw: replace(
        real(cls, **kw), trials=3, sweep_samples=3, gemm_sizes=(64,), gemm_samples=3, min_sample_s=0.002,
        budget_s=0.0)))
    out = tmp_path / "r"
    assert main(["roofline", "--quick", "--llc", "480MiB", "--max-memory", "32MiB", "--json", "--out", str(out)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["config"]["llc_bytes"] == 480 * 2**20 and r["config"]["max_memory_bytes"] == 32 * 2**20
    assert r["sweep"]["points"][-1]["working_set_bytes"] <= 32 * 2**20
    assert r["llc"]["assumed_bytes"] == 480 * 2**20 and r["llc"]["assumed_from"] == "--llc"
    assert r["stream"]["array_elems"] == 32 * 2**20 // 24 and r["stream"]["array_capped"]
    assert (r["stream"]["bound"], r["ridge"]["bound"]) == ("upper", "lower")
    assert "**A lower bound**" in (out / "README.md").read_text()


def test_run_all_passes_the_memory_flags_to_the_labs(tmp_path, monkeypatch):
    from inferlab.cli import main
    from inferlab.labs import Lab

    seen = []
    monkeypatch.setattr("inferlab.cli.run_all.all_labs",
                        lambda: [Lab(order=1, name="01-x", title="x", run=lambda o: seen.append(o) or {})])
    assert main(["run", "all", "--quick", "--llc", "480MiB", "--max-memory", "1GiB", "--out", str(tmp_path / "e")]) == 0
    assert (seen[0].llc_bytes, seen[0].max_memory_bytes) == (480 * 2**20, 2**30)
    assert main(["run", "all", "--out", str(tmp_path / "f")]) == 0
    assert (seen[1].llc_bytes, seen[1].max_memory_bytes) == (None, None)


def test_only_the_verdicts_comparisons_take_extra_rounds_each_from_a_share(monkeypatch):
    """The triad's and the float32 GEMM's thread ratios are verdicts; copy, scale, add and float64
    are not and take no budget. Each claimant gets an equal share of what is left, so an undecided
    first one cannot spend what the later ones need: 1 + 2 claimants of a 30 s budget get 10 s, then
    (30 - spent) / 2, then what is left."""
    calls = []

    def fake(fns, *, more=None, budget=None, **_):
        calls.append((more is not None, None if budget is None else budget.seconds))
        if budget is not None:
            budget.charge(budget.seconds)           # an undecided comparison spends all it is given
        return {name: summarize([1e-3] * 10, iters_per_sample=1) for name in fns}

    monkeypatch.setattr(roofline, "measure_interleaved", fake)
    config = tiny_config(gemm_sizes=(64, 96), budget_s=30.0)
    budget = roofline.Budget(config.budget_s)
    roofline.measure_ceilings(config, 1024, lambda _: None, budget)
    stream, f32, f64 = calls[:4], calls[4:6], calls[6:]
    assert stream == [(False, None)] * 3 + [(True, 10.0)]
    assert f32 == [(True, 10.0), (True, 10.0)] and f64 == [(False, None)] * 2
    assert budget.left() == 0
