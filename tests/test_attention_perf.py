"""The attention cost model against hand-derived values, and the threshold T*."""

from pathlib import Path

import numpy as np
import pytest

from inferlab.attention_perf import (
    OPS, MHAWeights, SweepConfig, attention_forward_timed, av_cost, memory_bound_threshold, op_costs, out_proj_cost,
    profile_forward,
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


def test_gqa_costs_hand_values():
    # Qwen2.5-0.5B's attention: d = 896, H = 14 query heads, H_kv = 2 KV heads, d_k = 64, at T = 128.
    c = op_costs(128, 896, 14, 2)
    # qkv_proj: x (128, 896) @ W (896, (14 + 2*2)*64 = 1152): 2*128*896*1152 = 264,241,152 FLOPs;
    # bytes: x read by each of q, k, v (3*128*896 = 344,064 floats) + W (896*1152 = 1,032,192 floats)
    assert c["qkv_proj"].flops == 264_241_152
    assert c["qkv_proj"].bytes == 4 * (344_064 + 1_032_192) == 5_505_024
    # scores: 14 heads x 2*128^2*64 = 29,360,128 FLOPs; bytes: Q 14*128*64 = 114,688 floats,
    # K 2*128*64 = 16,384 floats (once per KV head), S 14*128^2 = 229,376 floats
    assert c["scores"].flops == 29_360_128
    assert c["scores"].bytes == 4 * (114_688 + 16_384 + 229_376) == 1_441_792
    # av: same FLOPs; bytes: A 229,376 + V 16,384 + out 114,688 floats (the same total)
    assert c["av"].flops == 29_360_128 and c["av"].bytes == 1_441_792
    # out_proj: (128, 896) @ (896, 896): 2*128*896^2 = 205,520,896 FLOPs; 4*(128*896 + 896^2) bytes
    assert c["out_proj"].flops == 205_520_896 and c["out_proj"].bytes == 4 * (114_688 + 802_816)
    # softmax does not see the KV heads: 14 * 5 * 128^2 FLOPs over 14 * 8 * 128^2 bytes
    assert c["softmax"].flops == 1_146_880 and c["softmax"].bytes == 1_835_008
    # intensity: 29,360,128 / 1,441,792 = 20.3636... = 128*64 / (2*64*(1 + 1/7) + 256)
    assert c["scores"].intensity == pytest.approx(29_360_128 / 1_441_792)
    assert scores_intensity(128, 64, group=7) == pytest.approx(8192 / (128 * 8 / 7 + 256))
    # H_kv = H is the MHA table: the same numbers as without kv heads
    assert op_costs(512, 64, 4, 4) == op_costs(512, 64, 4)


def test_gqa_threshold_hand_value():
    # d_k = 64, G = 7, I_crit = 8: T d_k = I (2 d_k (1 + 1/7) + 2T) => 64T = 8*(1024/7) + 16T
    # => 48 T = 8192/7 => T* = 8192/336 = 24.38...; and I(T*) = I_crit
    t_star = memory_bound_threshold(64, 8, group=7)
    assert t_star == pytest.approx(8192 / 336)
    assert scores_intensity(t_star, 64, group=7) == pytest.approx(8)
    # fewer K/V bytes: a lower T* than MHA's 4*64*8 / (64 - 16) = 42.67 at the same d_k
    assert memory_bound_threshold(64, 8) == pytest.approx(2048 / 48)


def test_threshold_rejects_a_non_positive_ridge():
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
    # every op's samples come from the same calibrated batches of forwards
    assert total.iters_per_sample >= 1
    assert stats["softmax"].iters_per_sample == total.iters_per_sample
    assert total.p10 <= total.median <= total.p90


def test_sweep_config_defaults_are_the_seeds():
    c = SweepConfig()
    assert c.T_sweep == (64, 128, 256, 512) and c.d_model == 64 and c.n_heads == 4 and c.d_head == 16
    assert c.samples >= 100 and c.min_sample_s >= 0.05


# --- the lab: files, manifest keys, thresholds from the roofline it depends on, CLI errors --------

import json

import jsonschema

from inferlab.cli import main
from inferlab.errors import InferlabError
from inferlab.labs.attention import AttentionLabConfig, run_attention
from verdict_checks import check_readme

SEED_SUMMARY_KEYS = {"softmax_GFLOPS_at_T_512", "softmax_pct_of_total_at_T_512", "scores_GFLOPS_at_T_512",
                     "phase_27_motivation_pct_memory"}


def fake_roofline(folder, peak=40.0, bw=8.0):
    """An `inferlab roofline` folder with round ceilings: I_crit = 40 / 8 = 5 FLOP/byte, each
    ceiling known to +-1% (p10-p90)."""
    folder.mkdir()
    entry = lambda m: {"median": m, "p10": 0.99 * m, "p90": 1.01 * m}  # noqa: E731
    results = {"schema_version": 1, "experiment": "01-roofline",
               "ridge": {"peak_GFLOPS": peak, "bandwidth_GBps": bw, "threads": 1},
               "ridge_point_flop_per_byte": peak / bw,
               "cache_roofs_GBps": {"L1": 80.0, "L2": 60.0, "L3": 40.0, "DRAM": bw},
               "peak_GFLOPS": {"float32": {"1": entry(peak)}, "float64": {"1": entry(peak / 2)}},
               "bandwidth_GBps": {"triad": {"1": entry(bw)}}}
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "manifest.json").write_text("{}")
    return folder


# The lab run end to end (its three figures are most of its ~2 s): `pytest -m slow` and CI run these;
# the cost model, verdicts and CLI errors above and below are checked by default.
LAB_RUN = pytest.mark.slow


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("att")
    roof = fake_roofline(root / "01-roofline")
    config = AttentionLabConfig(sweep=SweepConfig(T_sweep=(64, 512), samples=3, min_sample_s=0.005),
                                threads=1, all_threads=2, roofline_dir=roof, flash_T=(128,), flash_samples=3,
                                budget_s=0)
    out = root / "15-attention-perf"
    results = run_attention(config, out, force=False)
    return out, roof, config, results


@LAB_RUN
def test_lab_writes_the_seeds_six_files(lab_run):
    out, _, config, _ = lab_run
    for name in ("perf.py", "results.json", "perf.png", "roofline.png", "manifest.json", "README.md", "flash.png"):
        assert (out / name).is_file(), name
    compile((out / "perf.py").read_text(), "perf.py", "exec")
    assert "run_attention" in (out / "perf.py").read_text()
    with pytest.raises(InferlabError, match="--force"):
        run_attention(config, out, force=False)


@LAB_RUN
def test_manifest_has_the_seeds_keys(lab_run):
    out, roof, _, _ = lab_run
    manifest = json.loads((out / "manifest.json").read_text())
    # seed 001 Block F, key by key
    assert {"experiment", "date", "seed", "versions", "depends_on", "config", "hardware",
            "results_summary"} <= set(manifest)
    assert manifest["experiment"] == "15-attention-perf" and manifest["seed"] == 0
    assert {"python", "numpy"} <= set(manifest["versions"])
    assert manifest["depends_on"] == str(roof / "manifest.json")
    assert manifest["config"]["d_model"] == 64 and manifest["config"]["n_heads"] == 4
    assert manifest["config"]["T_sweep"] == [64, 512]
    assert {"cpu_model", "cpu_governor_at_run"} <= set(manifest["hardware"])
    assert set(manifest["results_summary"]) == SEED_SUMMARY_KEYS
    assert all(isinstance(v, float) for v in manifest["results_summary"].values())
    schema = json.loads((Path(__file__).parents[1] / "src/inferlab/measure/schemas/manifest.schema.json").read_text())
    jsonschema.validate(manifest, schema)


@LAB_RUN
def test_results_use_the_roofline_it_depends_on(lab_run):
    _, _, _, r = lab_run
    assert r["roofline"]["ridge_flop_per_byte"]["value"] == 5.0
    assert r["threshold"]["i_crit"] == 5.0
    # exact T* = 4*16*5 / (16 - 10) = 53.33; the shortcut gives none because 5 >= 16/4
    assert r["threshold"]["T_star_exact"] == pytest.approx(160 / 3)
    assert r["threshold"]["T_star_seed_shortcut"] is None
    p64, p512 = r["profile"]["points"]
    assert p64["ops"]["scores"]["bound"] == "compute"      # I = 16/3 = 5.33 > 5
    assert p64["ops"]["softmax"]["bound"] == "memory"      # 0.625 < 5
    assert p512["ops"]["scores"]["flops"] == 4 * 8388608   # 4 heads * 2 * 512^2 * 16
    for op in p512["ops"].values():
        assert op["gflops"] == pytest.approx(op["flops"] / (op["median_ms"] * 1e-3) / 1e9)
        assert op["n"] == 3 and op["p10_ms"] <= op["median_ms"] <= op["p90_ms"]
    # softmax's roof at I = 0.625 is 8 GB/s * 0.625 = 5 GFLOP/s
    sm = p512["ops"]["softmax"]
    assert sm["attainable_gflops"] == 5.0 and sm["pct_of_attainable"] == pytest.approx(20 * sm["gflops"])
    verdicts = {v["id"]: v for v in r["verdicts"]}
    # scores at T=64: I = 16/3 over a ridge of 5 (+-2% at the ends): 1.067 with p10 1.046 > 1
    assert verdicts["bound_scores_T64"]["resolved"] and "compute-bound" in verdicts["bound_scores_T64"]["statement"]
    assert verdicts["bound_softmax_T512"]["value"] == pytest.approx(0.625 / 5)
    assert {"softmax_below_10pct", "projections_vs_t2_T64", "projections_vs_t2_T512", "threads_T64",
            "threads_T512", "flash_vs_naive_T64", "flash_vs_naive_T512"} <= set(verdicts)
    assert all(c["forward"]["1"]["n"] == 3 for c in r["threads_comparison"])   # budget 0: no extra rounds
    # scores and av are right of the ridge at T=512, so only softmax counts as flash's memory-bound time
    s = r["summary"]
    assert s["phase_27_motivation_ops"] == ["softmax"]
    assert s["phase_27_motivation_pct_memory"] == sm["pct_of_total"]
    flash = {p["T"]: p for p in r["flash"]["points"]}
    assert sorted(flash) == [64, 128, 512]
    assert flash[512]["flash_peak_bytes"] < flash[512]["naive_peak_bytes"]
    assert flash[512]["max_abs_diff"] <= 1e-4 * max(1.0, flash[512]["max_abs_output"])


@LAB_RUN
def test_readme_answers_block_e_with_the_runs_numbers(lab_run):
    out, _, _, r = lab_run
    text = (out / "README.md").read_text()
    assert "T* = 53.3" in text
    assert "### 1." in text and "### 2." in text and "### 3." in text
    assert f"{r['summary']['softmax_pct_of_memory_roof_at_T_512']:.1f}% of the memory roof" in text
    check_readme(text, r["verdicts"])
    assert "reliably" not in text


@pytest.mark.parametrize("argv, needle", [
    (["--d-model", "65"], "--d-model 65 is not divisible by --heads 4"),
    (["--T", "64", "64"], "--T lists a length twice"),
    (["--roofline", "/nonexistent/roof"], "--roofline /nonexistent/roof"),
    (["--T", "0"], "argument --T"),
])
def test_cli_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) if needle.startswith("argument") else _no_exit() as ctx:
        code = main(["attention", "--out", str(tmp_path / "o"), *argv])
    if needle.startswith("argument"):
        assert ctx.value.code == 2
    else:
        assert code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_lab_is_registered_for_run_all():
    from inferlab.labs import all_labs

    lab = next(lab for lab in all_labs() if lab.name == "15-attention-perf")
    assert lab.order == 15


def test_existing_out_is_refused_before_measuring(tmp_path, capsys):
    (tmp_path / "o").mkdir()
    assert main(["attention", "--out", str(tmp_path / "o")]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err


def _side(ms: list[float]) -> dict:
    """One side of a comparison as results.json stores it, from per-round times in ms."""
    from inferlab.measure.timing import summarize

    return summarize([t / 1e3 for t in ms]).to_json("ms")


def _paired(num: list[float], den: list[float]) -> dict:
    from inferlab.measure.verdicts import Interval

    return Interval.from_samples(a / b for a, b in zip(num, den)).to_json()


# a loaded --quick run at T=256 (a new user's): 1 thread, and 2 threads (flagged noisy), 5 rounds
AUDIT_ONE = [2.26, 1.18, 1.92, 0.9, 0.93]
AUDIT_TWO = [2.08, 3.18, 16.65, 41.13, 1.67]


def test_noisy_sides_stay_paired_and_five_rounds_decide_nothing():
    from inferlab.measure.verdicts import paired

    # The audit's per-round ratios 1.087, 0.371, 0.115, 0.022, 0.557: all five rounds' range covers
    # the median with 1 - 2/32 = 93.75%, under 95%: no direction, however far below 1 they lie
    e = paired(_side(AUDIT_ONE), _side(AUDIT_TWO))
    assert (e.ci_low, e.ci_high) == pytest.approx((0.9 / 41.13, 2.26 / 2.08), rel=1e-3)   # the least and most
    assert e.confidence == pytest.approx(0.9375) and not e.decidable
    # ten quiet rounds, B always 2x A: exactly 0.5
    a, b = [1.0, 1.02] * 5, [2.0, 2.04] * 5
    e = paired(_side(a), _side(b))
    assert (e.value, e.ci_low, e.ci_high) == pytest.approx((0.5, 0.5, 0.5))
    # noisy sides (1-1.5 ms against 10-15 ms), every round's ratio about 0.1: paired, decided
    a, b = [1.0, 1.5, 1.1, 1.2, 1.3] * 2, [10.0, 15.0, 11.0, 12.0, 13.0] * 2
    e = paired(_side(a), _side(b))
    assert e.basis == "paired" and e.ci_high < 0.11


def _results_with(comparison: dict, projections=None, t2_ops=None) -> dict:
    """The least results dict attention_verdicts reads: one profile point, round ceilings, and
    the given thread comparison (and the projections' and T^2 ops' per-round times in ms,
    default quiet ones at half)."""
    from inferlab.measure.verdicts import Interval
    from inferlab.roofline import Roofline

    roof = Roofline(threads=1, peak=Interval.exact(40.0), bandwidth=Interval.exact(8.0))
    op = {"intensity": 1.0, "gflops": 1.0, "gflops_p10": 1.0, "gflops_p90": 1.0}
    projections = projections or [1.0, 1.01] * 5
    t2_ops = t2_ops or [2.0, 2.02] * 5
    point = {"T": comparison["T"], "projections_over_t2": _paired(projections, t2_ops),
             "projections_time": _side(projections), "t2_ops_time": _side(t2_ops),
             "ops": {name: op for name in OPS}}
    return {"roofline": roof.to_json(), "profile": {"points": [point]}, "flash": {"points": []},
            "threads_comparison": [comparison]}


def test_a_loaded_quick_runs_noisy_thread_comparison_cannot_tell():
    from inferlab.labs.attention import attention_verdicts
    from verdict_checks import check_verdicts

    comparison = {"T": 256, "threads": [1, 2], "speedup": _paired(AUDIT_ONE, AUDIT_TWO),
                  "forward": {"1": _side(AUDIT_ONE), "2": _side(AUDIT_TWO)}}
    verdicts = attention_verdicts(_results_with(comparison))
    check_verdicts(verdicts)
    (v,) = [v for v in verdicts if v["id"] == "threads_T256"]
    assert not v["resolved"] and "cannot tell" in v["statement"] and "slower" not in v["statement"]
    assert "93.8% CI" in v["statement"] and "too few for a 95% CI (at least 6)" in v["statement"]


def test_projections_against_t2_ops_stay_paired_on_noisy_sides():
    """An audit's busy run: both sides noisy, their ranges overlapping, but the per-sample share
    below 1 in every one of ten samples: the paired CI decides it."""
    from inferlab.labs.attention import attention_verdicts

    comparison = {"T": 256, "threads": [1, 2], "speedup": _paired(AUDIT_ONE, AUDIT_ONE),
                  "forward": {"1": _side(AUDIT_ONE), "2": _side(AUDIT_ONE)}}
    # per-round shares 0.5-0.91, p90 below 1; the sides' ranges overlap (1-10 ms against 2-11 ms)
    projections, t2_ops = [1.0, 5.0, 10.0, 2.0, 8.0] * 2, [2.0, 5.5, 11.0, 4.0, 9.0] * 2
    assert _paired(projections, t2_ops)["p90"] < 1
    verdicts = attention_verdicts(_results_with(comparison, projections, t2_ops))
    (v,) = [v for v in verdicts if v["id"] == "projections_vs_t2_T256"]
    assert v["outcome"] == "below" and "(paired)" in v["statement"]
    # the default quiet sides (1.0-1.01 ms against 2.0-2.02 ms) decide it paired: T^2 ops take longer
    (v,) = [v for v in attention_verdicts(_results_with(comparison)) if v["id"] == "projections_vs_t2_T256"]
    assert v["resolved"] and "(paired)" in v["statement"] and "scores + softmax + av take more time" in v["statement"]


@LAB_RUN
@pytest.mark.parametrize("speedup,side", [((1.2, 1.1, 1.3), "faster"), ((0.8, 0.7, 0.9), "slower"),
                                          ((1.0, 0.7, 1.4), None)])
def test_thread_sentences_follow_the_interval(lab_run, speedup, side):
    """The report re-rendered from edited results: thread comparisons whose ten per-round ratios
    time(1) / time(N) run from p10-ish to p90-ish around the median, faster, slower and straddling."""
    from copy import deepcopy

    from inferlab.labs.attention import attention_verdicts
    from inferlab.labs.attention_report import readme_text

    r = deepcopy(lab_run[3])
    v, lo, hi = speedup
    ratios = [lo + (v - lo) * i / 4 for i in range(5)] + [v + (hi - v) * i / 4 for i in range(5)]
    one = [1.0, 1.02] * 5
    for c in r["threads_comparison"]:
        c["speedup"] = dict(zip(("value", "p10", "p90"), speedup))
        c["forward"] = {str(c["threads"][0]): _side(one), str(c["threads"][1]): _side([a / q for a, q in zip(one, ratios)])}
    r["verdicts"] = attention_verdicts(r)
    text = readme_text(r)
    check_readme(text, r["verdicts"])
    thread_lines = [v["statement"] for v in r["verdicts"] if v["id"].startswith("threads_")]
    assert len(thread_lines) == 2
    for s in thread_lines:
        assert (side in s) if side else ("cannot tell" in s and "faster" not in s and "slower" not in s)


@pytest.mark.slow  # a real (quick) profile at two T with the >= 50 ms samples: ~6 s
def test_lab_profiles_a_model_folders_gqa_shape(tmp_path):
    """--model DIR reads config.json only: a Qwen2-shaped folder (GQA, q/k/v bias) gives its shape
    to the sweep, the costs use its KV heads, and the README states the shape and what changes."""
    folder = tmp_path / "qwen"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}))
    roof = fake_roofline(tmp_path / "01-roofline")
    out = tmp_path / "att"
    assert main(["attention", "--model", str(folder), "--T", "32", "64", "--quick", "--roofline", str(roof),
                 "--budget-s", "0", "--threads", "1", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    assert (r["config"]["d_model"], r["config"]["n_heads"], r["config"]["kv_heads"]) == (96, 6, 2)
    scores = r["profile"]["points"][1]["ops"]["scores"]
    # T=64, d_k=16: Q 6*64*16 + K 2*64*16 + S 6*64*64 floats
    assert scores["bytes"] == 4 * (6144 + 2048 + 24576)
    assert r["threshold"]["group"] == 3
    readme = (out / "README.md").read_text()
    assert "2 KV heads (grouped-query: 3 query heads share each K/V head, q/k/v biases)" in readme
    assert "## What changes from the MiniGPT defaults" in readme
    check_readme(readme, r["verdicts"])
    # --model with --heads is refused in one line, nothing written
    assert main(["attention", "--model", str(folder), "--heads", "4", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def _summary_point(T: int, bounds: dict[str, str]) -> dict:
    """A profile point with round figures: every op 10 GFLOP/s, 20% of the forward, 5% of its roof."""
    return {"T": T, "ops": {name: {"gflops": 10.0 + T / 64, "pct_of_total": 20.0, "pct_of_attainable": 5.0,
                                   "bound": bounds.get(name, "compute")} for name in OPS}}


def test_summary_uses_the_largest_T_and_keeps_the_seeds_keys():
    from inferlab.labs.attention_report import _summary_lines
    from inferlab.labs.attention_results import summary_json

    # --T 64 only: the seed's T=512 keys stay (null), the largest-T keys carry T=64's figures
    only64 = {"profile": {"points": [_summary_point(64, {"softmax": "memory"})]}}
    s = summary_json(only64)
    assert s["softmax_GFLOPS_at_T_512"] is None and s["phase_27_motivation_pct_memory"] is None
    assert s["largest_T"] == 64 and s["softmax_GFLOPS_at_largest_T"] == 11.0
    # softmax alone is memory-bound: 20% of the forward; the three T^2 ops 60%
    assert s["phase_27_motivation_ops_at_largest_T"] == ["softmax"]
    assert s["phase_27_motivation_pct_memory_at_largest_T"] == 20.0 and s["t2_ops_pct_of_total_at_largest_T"] == 60.0
    text = "\n".join(_summary_lines(s))
    assert "n/a" not in text and "(none" not in text and "T = 64" in text
    assert "- softmax_GFLOPS_at_largest_T = 11" in text and "(softmax)" in text
    # listed out of order with 512 measured: the seed's keys at 512, the largest-T keys at 1024
    both = {"profile": {"points": [_summary_point(1024, {}), _summary_point(512, {"scores": "memory"})]}}
    s = summary_json(both)
    assert s["largest_T"] == 1024 and s["softmax_GFLOPS_at_largest_T"] == 26.0
    assert s["softmax_GFLOPS_at_T_512"] == 18.0 and s["phase_27_motivation_ops"] == ["scores"]
    text = "\n".join(_summary_lines(s))
    assert "- softmax_GFLOPS_at_T_512 = 18" in text and "At the largest T measured, T = 1024" in text
    assert "(none of them)" in text   # at 1024 no T^2 op is memory-bound
