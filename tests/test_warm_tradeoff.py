"""benchmarks/warm_tradeoff.py: each budget's figures are schema-bench's own summary, read back
from a fresh process; bad input writes nothing."""

from __future__ import annotations

import json

import pytest

from inferlab.cli import main as cli_main
from oracles import write_case


@pytest.fixture()
def tradeoff(load_benchmark):
    return load_benchmark("warm_tradeoff")


@pytest.fixture()
def bench_dir(tmp_path):
    folder = tmp_path / "bench"
    folder.mkdir()
    write_case(folder, "Alpha---int", {"type": "integer", "minimum": 0}, [(True, 17), (False, -1)])
    write_case(folder, "Beta---obj", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
               [(True, {"a": "xy"}), (False, {})])
    return folder


@pytest.mark.slow  # two schema-bench children (~5 s of interpreter starts): the benchmark's plumbing
def test_each_budget_reads_back_schema_bench_summary(tradeoff, bench_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert tradeoff.main([str(bench_dir), "--limit", "2", "--vocab", "512", "--warm-ms", "0,5", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [r["warm_ms"] for r in results["runs"]] == [0.0, 5.0]
    assert (out / "tradeoff.png").stat().st_size > 0 and (out / "manifest.json").exists()
    # the counts a direct schema-bench run gives (timings differ run to run; counts do not)
    capsys.readouterr()
    assert cli_main(["schema-bench", str(bench_dir), "--limit", "2", "--vocab", "512", "--json"]) == 0
    direct = json.loads(capsys.readouterr().out)["summary"]["all"]
    assert direct["compiled"] == 2
    for run in results["runs"]:
        assert run["compiled"] == direct["compiled"]
        assert run["first_walk_tokens"] == direct["first_walk_tokens"] > 0
        assert run["first_walk_us_p50"] <= run["first_walk_us_p99"]
        # each kind of step's share of the first walk's tokens: together, every token
        assert sum(v["token_share"] for v in run["by_step"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize("budgets", ["10,-1", "ten", ""])
def test_bad_budgets_exit_2_and_write_nothing(tradeoff, bench_dir, tmp_path, budgets):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        tradeoff.main([str(bench_dir), "--vocab", "512", "--out", str(out), "--warm-ms", budgets])
    assert exc.value.code == 2 and not out.exists()


def test_bad_limit_exits_2_and_writes_nothing(tradeoff, bench_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert tradeoff.main([str(bench_dir), "--vocab", "512", "--out", str(out), "--limit", "0"]) == 2
    assert "--limit" in capsys.readouterr().err and not out.exists()


def test_missing_folder_exits_2(tradeoff, tmp_path, capsys):
    assert tradeoff.main([str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
