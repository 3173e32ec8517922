"""`inferlab compare DIR_A DIR_B`: B/A per shared measurement (Hodges-Lehmann on the raw samples,
Mann-Whitney 95% CI) and an outcome at --margin; refusals in one line, exit 2. Synthetic folders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inferlab.cli import main
from inferlab.measure.compare import compare_runs, measurements


def _timing(ms) -> dict:
    return {"median_ms": float(np.median(ms)), "n": len(ms), "samples_ms": [float(x) for x in ms]}


def _folder(path, experiment, **tables) -> object:
    """An experiment folder holding only what compare reads: results.json with timings."""
    path.mkdir()
    results = {"schema_version": 1, "experiment": experiment,
               "table": [{"vocab": v, "no_mask": {"call": _timing(ms)}} for v, ms in tables.items()]}
    (path / "results.json").write_text(json.dumps(results))
    return path


def test_measurements_are_named_by_path_and_list_items_by_their_key():
    r = {"table": [{"vocab": "512", "no_mask": {"call": _timing([1.0, 2.0])}}],
         "points": [{"x": 1, "t": {"samples_us": [3.0]}}], "other": {"samples_ms": "not a list"}}
    found = measurements(r)
    assert set(found) == {"/table[vocab=512]/no_mask/call", "/points[0]/t"}
    assert found["/points[0]/t"][0] == "us" and list(found["/points[0]/t"][1]) == [3.0]


def test_ratio_ci_and_outcomes(tmp_path):
    rng = np.random.default_rng(0)
    base = 10 * np.exp(0.02 * rng.standard_normal(30))                                  # (30,)
    a = _folder(tmp_path / "a", "30-mask-overhead", **{"512": base, "cl100k": base, "qwen": base[:3]})
    same = 10 * np.exp(0.02 * rng.standard_normal(30))
    b = _folder(tmp_path / "b", "30-mask-overhead", **{"512": same, "cl100k": 1.5 * base, "qwen": base[:3]})
    rows = {r["name"]: r for r in compare_runs(a, b, margin=0.05)["rows"]}
    eq, slower, few = (rows[f"/table[vocab={v}]/no_mask/call"] for v in ("512", "cl100k", "qwen"))
    assert eq["outcome"] == "equivalent" and 0.95 < eq["ci_low"] <= eq["ratio"] <= eq["ci_high"] < 1.05
    # every B sample is 1.5x its A sample: each log difference log 1.5 + (e_i - e_j), the median of
    # which is log 1.5 by symmetry
    assert slower["ratio"] == pytest.approx(1.5) and slower["outcome"] == "above" and slower["reading"] == "B slower"
    # 3 samples a side: even the extremes cover under 95% (1 - 2/20): no outcome
    assert few["outcome"] == "undecided" and few["confidence"] < 0.95


def test_cli_table_json_and_plot(tmp_path, capsys):
    a = _folder(tmp_path / "a", "15-attention-perf", x=[1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98])
    b = _folder(tmp_path / "b", "15-attention-perf", x=[2.0, 2.2, 1.8, 2.1, 1.9, 2.0, 2.04, 1.96])
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "/table[vocab=x]/no_mask/call" in out and "above (B slower)" in out and "1 shared measurements" in out
    assert main(["compare", str(a), str(b), "--json", "--margin", "0.03", "--out", str(tmp_path / "cmp")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["margin"] == 0.03 and report["rows"][0]["ratio"] == pytest.approx(2.0)
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == ["compare.json", "compare.png"]
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text()) == report
    # an existing --out needs --force, refused before any work
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["compare", str(b), str(a), "--out", str(tmp_path / "cmp"), "--force"]) == 0   # its own folder
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"][0]["ratio"] == pytest.approx(0.5)


def test_several_runs_a_side_give_a_ci_over_runs(tmp_path, capsys):
    """Each run drifts as a whole (x exp(0.1 z), one z per run) and its samples scatter 2% around
    that. One run a side sees only the samples: two runs of one machine state read as different.
    Eight runs a side: the run medians' Hodges-Lehmann CI covers the drift, 1 for the same
    distribution, 1.5 for B x 1.5; three runs a side cover under 95% and decide nothing."""
    rng = np.random.default_rng(1)

    def runs(side, count, scale=1.0):
        out = []
        for i in range(count):
            level = scale * 10 * np.exp(0.1 * rng.standard_normal())
            out.append(_folder(tmp_path / f"{side}{i}", "15-attention-perf",
                               x=level * np.exp(0.02 * rng.standard_normal(40))))
        return out

    a, same, slower = runs("a", 8), runs("s", 8), runs("b", 8, scale=1.5)
    row = lambda r: r["rows"][0]  # noqa: E731
    one = row(compare_runs(a[0], same[0]))
    # one run a side: the two run levels differ by exp(0.1 (z1 - z2)), far outside the 2% noise
    assert one["outcome"] in ("above", "below") and one["a_samples"] == 40
    eq = compare_runs(a, same, margin=0.2)
    assert eq["a_runs"] == [str(d) for d in a] and "drift between runs" in eq["scope"]
    assert row(eq)["a_samples"] == 8 and row(eq)["confidence"] >= 0.95
    assert row(eq)["outcome"] == "equivalent" and row(eq)["ci_low"] < 1 < row(eq)["ci_high"]
    up = row(compare_runs(a, slower))
    assert up["outcome"] == "above" and up["ci_low"] < 1.5 < up["ci_high"]
    few = row(compare_runs(a[:3], same[:3]))
    assert few["outcome"] == "undecided" and few["confidence"] < 0.95
    argv = ["compare", str(a[0]), str(slower[0]), "--also-a", *map(str, a[1:]), "--also-b", *map(str, slower[1:]), "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["ratio"] == pytest.approx(up["ratio"])
    other = _folder(tmp_path / "other", "30-mask-overhead", x=[1.0])
    assert main(["compare", str(a[0]), str(same[0]), "--also-a", str(other)]) == 2
    assert "one side's runs must be of the same lab" in capsys.readouterr().err


def test_paired_runs_cancel_drift_slower_than_a_pair(tmp_path, capsys):
    """Slow drift: pair i's level exp(0.1 z_i) reaches both of its runs, each run adds its own
    exp(0.01 e) and each sample 2% noise. Unpaired, eight runs a side see the pairs' drift (a
    CI past +-5%); paired, each ratio cancels z_i: equivalent within 5% for one distribution, and
    "above" with 1.5 inside the CI for B x 1.5. Hand-derived: a ratio's log is 0.01 (e_b - e_a)
    plus the log of two sample medians' quotient, well inside log 1.05."""
    rng = np.random.default_rng(2)
    pairs = 8
    level = 10 * np.exp(0.1 * rng.standard_normal(pairs))                               # (pairs,)

    def run(name, lvl):
        return _folder(tmp_path / name, "15-attention-perf",
                       x=lvl * np.exp(0.01 * rng.standard_normal()) * np.exp(0.02 * rng.standard_normal(40)))

    a = [run(f"a{i}", level[i]) for i in range(pairs)]
    same = [run(f"s{i}", level[i]) for i in range(pairs)]
    slower = [run(f"b{i}", 1.5 * level[i]) for i in range(pairs)]
    unpaired_row = compare_runs(a, same)["rows"][0]
    assert unpaired_row["outcome"] != "equivalent" and unpaired_row["ci_high"] / unpaired_row["ci_low"] > 1.1
    eq = compare_runs(a, same, paired=True)
    assert eq["paired"] is True and "pairs" in eq["scope"] and "paired" in eq["statistic"]
    assert eq["rows"][0]["outcome"] == "equivalent" and eq["rows"][0]["confidence"] >= 0.95
    assert 0.95 < eq["rows"][0]["ci_low"] <= 1 <= eq["rows"][0]["ci_high"] < 1.05
    up = compare_runs(a, slower, paired=True)["rows"][0]
    assert up["outcome"] == "above" and up["ci_low"] < 1.5 < up["ci_high"] and up["a_samples"] == pairs
    argv = ["compare", str(a[0]), str(slower[0]), "--also-a", *map(str, a[1:]), "--also-b", *map(str, slower[1:]),
            "--paired", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["ratio"] == pytest.approx(up["ratio"])
    # unequal sides cannot pair: one line, exit 2
    assert main(["compare", str(a[0]), str(same[0]), "--also-a", str(a[1]), "--paired"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--paired" in err[0] and "as many runs a side" in err[0]


@pytest.mark.parametrize("case", ["two labs", "nothing shared", "not a folder", "bad margin"])
def test_refusals_are_one_line_exit_2(tmp_path, capsys, case):
    a = _folder(tmp_path / "a", "15-attention-perf", x=[1.0, 1.1])
    other = {"two labs": lambda: _folder(tmp_path / "b", "30-mask-overhead", x=[1.0]),
             "nothing shared": lambda: _folder(tmp_path / "b", "15-attention-perf", y=[1.0]),
             "not a folder": lambda: tmp_path / "missing", "bad margin": lambda: a}[case]()
    argv = ["compare", str(a), str(other)] + (["--margin", "5"] if case == "bad margin" else [])
    try:
        code = main(argv)
    except SystemExit as exc:            # argparse's own refusal of a flag's value
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("inferlab compare: error:")
    words = {"two labs": "same lab", "nothing shared": "share no timed measurement", "not a folder": "not a folder",
             "bad margin": "--margin"}[case]
    assert words in err[0]
    assert not (tmp_path / "cmp").exists()
