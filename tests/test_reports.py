"""The report layer: READMEs and figures are pure functions of results.json. Synthetic results
(quiet, noisy, inverted, missing parts) are rendered and every sentence is checked against the
numbers (tests/verdict_checks.py); `inferlab report DIR` re-renders a folder or refuses in one line."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.cli import main
from inferlab.labs import mask_overhead as mo
from inferlab.labs.mask_overhead_report import duration, render, scaling_figure
from verdict_checks import check_readme

MANIFEST = {"hardware": {"cpu_model": "test CPU", "cpu_governor_at_run": "unknown"}}


LOAD = 1 + 0.3 * np.sin(np.arange(10))   # (rounds,) the load of each round, shared by its samples


def spread_over(v: float, lo: float, hi: float, n: int, seed: int = 0) -> np.ndarray:
    """n per-round values with median v, least lo and most hi, in a seeded order: (n,)."""
    x = np.r_[np.linspace(lo, v, n // 2), np.linspace(v, hi, n - n // 2)]
    return np.random.default_rng(seed).permutation(x)


def _call(ms_per_step: np.ndarray, steps: int) -> dict:
    """A row's `call` (Stats.to_json("ms") of whole calls) from per-step samples."""
    return {"n": len(ms_per_step), "samples_ms": list(ms_per_step * steps)}


def _row(ms: float, steps: int, rounds: int, ratio=None, spread=0.05, seed=0) -> dict:
    per_step = ms * LOAD[:rounds] * (spread_over(*ratio, rounds, seed) / ratio[0] if ratio else 1.0)   # (rounds,)
    row = {"steps": steps, "call": _call(per_step, steps), "noisy": 2 * spread > 0.10, "ms_per_step": ms, "ms_per_step_p10": ms * (1 - spread),
           "ms_per_step_p90": ms * (1 + spread), "stop_reason": "eos", "tokens": [1] * steps,
           "breakdown": {"step_ms": ms, "mask_build_ms": 0.0, "mask_apply_ms": 0.0, "rest_of_decoder_ms": ms}}
    if ratio is not None:
        v, lo, hi = ratio
        row.update(ratio_paired={"value": v, "p10": lo, "p90": hi}, compile_ms=12.0,
                   agreement={"agree_prefix": steps, "diverged": False, "explained_by_mask": True})
        row["breakdown"].update(mask_build_ms=ms * 0.3, rest_of_decoder_ms=ms * 0.7)
    return row


def _entry(V: int, steps: int, ratios: dict[str, tuple]) -> dict:
    base = 2.0
    masks = {k: _row(base * r[0], steps, 10, r, seed=i) for i, (k, r) in enumerate(ratios.items()) if "/" not in k}
    if "naive" in masks:
        masks["naive"]["breakdown"]["naive"] = {"token_checks_per_step": V - 1.0, "transitions_per_step": 2.0 * V,
                                                "ns_per_token_check": 80.0, "ns_per_transition": 40.0}
    return {"vocab": str(V), "vocab_size": V, "model": "synthetic", "prompt": "p", "no_mask": _row(base, steps, 10),
            "masks": masks, "max_new_tokens": steps, "vocab_preprocessing_ms": 5.0,
            "ratios": {(k if "/" in k else f"{k}/none"): dict(zip(("value", "p10", "p90"), r)) for k, r in ratios.items()}}


def synthetic(table: list[dict], skipped=()) -> dict:
    default = table[0]
    results = {"schema_version": 1, "experiment": mo.EXPERIMENT, **mo.headline(default), "table": table,
               "skipped": list(skipped), "budget": {"seconds": 30.0, "left_s": 0.0},
               "config": {"threads": 1, "seed": 0, "temperature": 1.0, "quick": False, "trials": 10,
                          "max_new_tokens": 64, "vocabs": [e["vocab"] for e in table], "masks": ["naive", "indexed"],
                          "peers": False, "naive_large_vocab_tokens": 8, "large_vocab": 4096, "roofline_dir": None,
                          "budget_s": 30.0}}
    roof = mo.Roofline(threads=1, peak=mo.Interval.exact(50.0), bandwidth=mo.Interval(10.0, 9.0, 11.0),
                       cache_roofs_GBps={"L1": 100.0})
    results["roofline"] = mo.roofline_placement(default, roof)
    results["verdicts"] = mo.mask_verdicts(table, default["vocab_size"])
    return results


SCENARIOS = {
    "quiet": [_entry(512, 23, {"naive": (1.5, 1.45, 1.55), "indexed": (1.01, 1.005, 1.02),
                               "naive/indexed": (1.48, 1.4, 1.55)}),
              _entry(151_851, 8, {"naive": (9.0, 8.5, 9.5), "indexed": (1.1, 1.05, 1.15),
                                  "naive/indexed": (8.0, 7.5, 8.6)})],
    "noisy": [_entry(512, 23, {"naive": (1.1, 0.6, 1.9), "indexed": (0.95, 0.5, 1.6),
                               "naive/indexed": (1.1, 0.7, 1.8)})],
    "inverted": [_entry(512, 23, {"naive": (0.88, 0.8, 0.95), "indexed": (0.79, 0.7, 0.9),
                                  "naive/indexed": (1.1, 1.02, 1.2)})],
    "missing": [_entry(512, 23, {"indexed": (1.02, 1.01, 1.03)})],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_mask_readme_follows_its_numbers(name):
    results = synthetic(SCENARIOS[name], skipped=["vocabulary qwen skipped: not installed"] if name == "missing" else ())
    files = render(results, MANIFEST, None)
    readme = files["README.md"]
    check_readme(readme, results["verdicts"])
    by_id = {v["id"]: v for v in results["verdicts"]}
    if name == "noisy":
        # every comparison straddles 1; only "halves throughput" (p90 1.9 < 2) is decided
        assert [v["id"] for v in results["verdicts"] if v["resolved"]] == ["naive_halves_throughput"]
        assert "slower" not in readme and "faster" not in readme
    if name == "inverted":
        assert "the naive mask makes a decode step faster than no mask" in by_id["naive_vs_none_512"]["statement"]
        assert "slower than no mask" not in readme
    if name == "missing":
        assert "qwen skipped" in readme and "no scaling to report" in readme
        assert set(by_id) == {"indexed_vs_none_512"}
    if name == "quiet":
        assert by_id["naive_halves_throughput"]["resolved"] is False or by_id["naive_halves_throughput"]["p90"] < 2
        assert "8, 23 decode steps" in readme      # the steps actually run, not max_new_tokens
    assert "10 interleaved rounds" in readme       # the rounds actually taken


def test_duration_picks_the_unit():
    assert duration(12.8) == "12.8 ms" and duration(0.0129) == "12.9 us" and duration(1500) == "1.5 s"


def test_scaling_figure_draws_no_line_through_one_point():
    fig = scaling_figure(synthetic(SCENARIOS["noisy"]))
    ax = fig.axes[0]
    assert all(len(line.get_xdata()) <= 1 or line.get_linestyle() == "None" for line in ax.get_lines())
    assert any("one vocabulary" in t.get_text() for t in ax.texts)


def test_report_cli_rerenders_a_folder_from_its_results(tmp_path, capsys):
    out = tmp_path / "22-cache-sizing"
    assert main(["run", "22-cache-sizing", "--out", str(tmp_path)]) == 0
    before = (out / "README.md").read_text()
    (out / "README.md").unlink()
    (out / "kv_sizes.png").unlink()
    results_bytes = (out / "results.json").read_bytes()
    assert main(["report", str(out)]) == 0
    assert (out / "README.md").read_text() == before and (out / "kv_sizes.png").is_file()
    assert (out / "results.json").read_bytes() == results_bytes


def test_report_cli_rewrites_nothing_when_one_target_cannot_be_written(tmp_path, capsys):
    # a fuzz made README.md a folder: the figures written before it had already been replaced
    out = tmp_path / "22-cache-sizing"
    assert main(["run", "22-cache-sizing", "--out", str(tmp_path)]) == 0
    (out / "README.md").unlink()
    (out / "README.md").mkdir()
    before = {p.name: p.stat().st_ino for p in out.iterdir() if p.is_file()}   # (a rewrite renames a new file in)
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "README.md: not a regular file" in err[0] and "nothing was rewritten" in err[0]
    assert {p.name: p.stat().st_ino for p in out.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("make,needle", [
    (lambda d: d, "not a folder"),
    (lambda d: (d.mkdir(), d)[1], "no results.json"),
    (lambda d: (d.mkdir(), (d / "results.json").write_text("{}"), (d / "manifest.json").write_text("{}"), d)[-1],
     "not a lab with a report"),
])
def test_report_cli_refuses_what_is_not_an_experiment(tmp_path, capsys, make, needle):
    folder = make(tmp_path / "x")
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_mask_readme_reports_the_model_row_and_the_jump_forward_row():
    """A --model row beside MiniGPT's and a jump-forward row, synthetic: the model's section states
    the mask's share of its step from the breakdown, every comparison is a verdict."""
    mini = _entry(512, 23, {"indexed": (1.001, 0.981, 1.021)})
    real = _entry(151_936, 6, {"indexed": (1.001, 0.999, 1.004)})
    for e, shape in ((mini, (64, 4, 4, 4, "MiniGPT")), (real, (896, 24, 14, 2, "Qwen2ForCausalLM"))):
        e["real_model"] = e is real
        e["shape"] = dict(zip(("d_model", "n_layers", "n_heads", "kv_heads", "architecture"), shape),
                          vocab_size=e["vocab_size"], weight_bytes=4_000_000)
    real["vocab"], real["model"] = "model", "Qwen2ForCausalLM from /m"
    real["no_mask"].update(ms_per_step=250.0, ms_per_step_p10=240.0, ms_per_step_p90=260.0)
    for row in (real["no_mask"], real["masks"]["indexed"]):       # 125x MiniGPT's step, round by round
        row["call"]["samples_ms"] = [125 * x for x in row["call"]["samples_ms"]]
    real["masks"]["indexed"]["breakdown"] = {"step_ms": 250.0, "mask_build_ms": 0.03, "mask_apply_ms": 0.02,
                                             "rest_of_decoder_ms": 249.95}
    results = synthetic([mini, real])
    results["config"]["model_max_new_tokens"] = 6
    results["verdicts"] += mo.model_verdicts([mini, real])
    results["jump_forward"] = {
        "vocab_size": 512, "prompts": ["p"], "rounds": 10, "timed_tokens": {"plain": 40, "jump_forward": 40},
        "timing": {"plain": {"median_ms": 80.0, "p10_ms": 78.0, "p90_ms": 82.0, "noisy": False, "n": 10,
                             "samples_ms": list(80 * LOAD)},
                   "jump_forward": {"median_ms": 40.0, "p10_ms": 39.0, "p90_ms": 41.0, "noisy": False, "n": 10,
                                    "samples_ms": list(40 * LOAD * spread_over(1.0, 0.95, 1.05, 10))}},
        "tokens_per_s_ratio": {"value": 2.0, "p10": 1.9, "p90": 2.1},
        "summary": {"runs": 6, "plain_forward_passes": 120, "jump_forward_passes": 45, "forward_passes_saved": 75,
                    "tokens_forced": 75, "plain_valid": 6, "jump_valid": 6, "same_text": 4, "same_text_greedy": 3,
                    "greedy_runs": 3, "differ_reasons": {"rng_shift": 2}}}
    results["verdicts"].append(mo.jump_forward_verdict(results["jump_forward"]))
    readme = render(results, MANIFEST, None)["README.md"]
    check_readme(readme, results["verdicts"])
    by_id = {v["id"]: v for v in results["verdicts"]}
    # 250 ms x a load of 0.7-1.3 against MiniGPT's 2 ms x the same loads: every pairwise ratio is above 50
    assert by_id["model_step_vs_minigpt"]["outcome"] == "above" and by_id["model_step_vs_minigpt"]["ci_low"] > 50
    assert "unpaired, Hodges-Lehmann" in by_id["model_step_vs_minigpt"]["statement"]
    # the mask's ratio 1.001 (0.999-1.004) on the model against 1.001 (0.981-1.021) on MiniGPT: no side
    assert by_id["indexed_overhead_model_vs_minigpt"]["outcome"] == "undecided"
    assert "| indexed | 50 us | 0.02% |" in readme             # (0.03 + 0.02) / 250 of the traced step
    assert "Forward passes saved: 75 of 120" in readme and "| jump-forward | 45 | 75 | 6/6 | 1000 | 2 (1.9-2.1) |" in readme
    assert "Jump-forward decodes more tokens per second than plain masked decoding" in by_id["jump_forward_tokens_per_s"]["statement"]


def test_jump_forward_verdict_stays_paired_on_noisy_sides():
    """Plain 80 ms for 40 tokens, jump-forward 40 ms for 80, each round's load (0.7x-1.3x) on
    both: the sides are noisy, the per-round tokens/s ratio time(plain) x 2 / time(jump) is 4 in
    every round, and the paired CI decides it; with 5 rounds it cannot (under 95%)."""
    def side(ms, n):
        return {"median_ms": ms, "p10_ms": ms * 0.7, "p90_ms": ms * 1.3, "noisy": True, "n": n,
                "samples_ms": list(ms * LOAD[:n])}
    row = {"vocab_size": 512, "prompts": ["p"], "timed_tokens": {"plain": 40, "jump_forward": 80},
           "timing": {"plain": side(80.0, 10), "jump_forward": side(40.0, 10)}}
    v = mo.jump_forward_verdict(row)
    assert (v["value"], v["ci_low"], v["ci_high"]) == pytest.approx((4.0, 4.0, 4.0)) and v["outcome"] == "above"
    assert "paired)" in v["statement"]
    row["timing"] = {"plain": side(80.0, 5), "jump_forward": side(40.0, 5)}
    assert mo.jump_forward_verdict(row)["outcome"] == "undecided"
