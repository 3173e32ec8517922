"""schema-bench on a folder of tiny JSONSchemaBench-format files written here; the real folder
only in a slow test (skipped when ../shared/jsonschemabench is absent)."""

import json
from pathlib import Path

import pytest

from inferlab.cli import main
from inferlab.constrain.bench import DEFAULT_DIR, BenchConfig, list_cases, run_bench


def write_case(folder: Path, name: str, schema, tests):
    doc = {"description": name, "meta": {}, "schema": schema,
           "tests": [{"description": "", "valid": valid, "data": data} for valid, data in tests]}
    (folder / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")


@pytest.fixture
def bench_dir(tmp_path):
    write_case(tmp_path, "Alpha---int", {"type": "integer", "minimum": 0},
               [(True, 1), (False, -1), (False, "x")])
    write_case(tmp_path, "Alpha---unique", {"type": "array", "uniqueItems": True}, [(True, [1])])
    # valid with an extra key (absent additionalProperties allows any): rejected only in strict mode
    write_case(tmp_path, "Beta---obj", {"type": "object", "properties": {"a": {"type": "integer"}}},
               [(True, {"a": 1}), (True, {"a": 1, "b": 2}), (False, {"a": "x"})])
    return tmp_path


def test_summary_by_category_hand_counted(bench_dir):
    results = run_bench(BenchConfig(directory=bench_dir))
    s = results["summary"]
    assert (s["Alpha"]["schemas"], s["Alpha"]["compiled"]) == (2, 1)
    assert s["Alpha"]["coverage"] == 0.5
    assert (s["Alpha"]["valid_accepted"], s["Alpha"]["valid"]) == (1, 1)
    assert (s["Alpha"]["invalid_rejected"], s["Alpha"]["invalid"]) == (2, 2)
    assert list(s["Alpha"]["refusals"].values()) == [1]
    assert next(iter(s["Alpha"]["refusals"])).startswith("uniqueItems: uniqueItems is not supported (only with maxItems <= ")
    assert (s["Beta"]["valid_accepted"], s["Beta"]["valid"]) == (2, 2)
    assert s["Beta"]["completeness"] == 1.0 and s["Beta"]["soundness"] == 1.0
    assert s["all"]["schemas"] == 3 and s["all"]["soundness"] == 1.0
    by_name = {r["name"]: r for r in results["schemas"]}
    assert by_name["Alpha---unique"]["reason"].startswith("uniqueItems at #/uniqueItems")
    assert by_name["Alpha---int"]["compile_ms"] > 0 and by_name["Alpha---int"]["dfa_states"] >= 2


def test_stratified_sample_is_round_robin(tmp_path):
    for k in range(5):
        write_case(tmp_path, f"A---{k}", {"type": "null"}, [])
    for k in range(2):
        write_case(tmp_path, f"B---{k}", {"type": "null"}, [])
    def counts(limit):
        picked = list_cases(tmp_path, limit, seed=0)
        return sum(p.name.startswith("A") for p in picked), sum(p.name.startswith("B") for p in picked)
    assert counts(4) == (2, 2)
    assert counts(5) == (3, 2)
    assert counts(6) == (4, 2)   # B ran out
    assert list_cases(tmp_path, 4, seed=0) == list_cases(tmp_path, 4, seed=0)
    assert len(list_cases(tmp_path, None, seed=0)) == 7


def test_cli_json_and_bad_folder(bench_dir, tmp_path, capsys):
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experiment"] == "schema-bench" and out["summary"]["all"]["compiled"] == 2
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--no-extra-keys", "--json"]) == 0
    beta = json.loads(capsys.readouterr().out)["summary"]["Beta"]  # strict: {"a": 1, "b": 2} is rejected
    assert (beta["valid_accepted"], beta["valid"], beta["invalid_rejected"]) == (1, 2, 1)
    assert main(["schema-bench", str(tmp_path / "missing"), "--vocab", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("inferlab schema-bench: error:") and "\n" not in err


def test_cli_out_writes_results_and_refuses_to_overwrite(bench_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"results.json", "summary.png", "manifest.json"}
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="../shared/jsonschemabench is not here")
def test_real_benchmark_sample_is_sound():
    results = run_bench(BenchConfig(directory=DEFAULT_DIR, limit=20))
    total = results["summary"]["all"]
    assert total["schemas"] == 20
    assert total["soundness"] in (None, 1.0), [r["unsound"] for r in results["schemas"] if r["unsound"]]


def test_refusal_histogram_keeps_names_and_limits():
    from inferlab.constrain.bench import _reason_key
    assert _reason_key("the regex for #/definitions/a exceeds 1,000,000 characters: simplify") == \
        "the regex for #… exceeds 1,000,000 characters: simplify"
    assert _reason_key("oneOf at #/x/oneOf: branches /x/oneOf/0 and /x/oneOf/1 are not provably disjoint") == \
        "oneOf: branches #… and #… are not provably disjoint"
    assert _reason_key("format at #/f: unknown format 'ipv6' (maxProperties 3)") == \
        "format: unknown format 'ipv6' (maxProperties N)"


@pytest.mark.slow  # the peers run at Qwen-free 512 tokens still takes seconds each
def test_peers_run_on_the_same_instances(bench_dir):
    """--peers: each installed peer compiles, and its accept/reject counts are over our instances;
    hand-checked: every peer accepts 1 (valid) and rejects -1 and "x" (invalid) for Alpha---int."""
    pytest.importorskip("llguidance")
    from inferlab.cli.schema_bench import _load_vocab
    results = run_bench(BenchConfig(directory=bench_dir, peers=True, mask_samples=1, mask_min_sample_s=0.001),
                        vocab=_load_vocab("512"))
    by_name = {r["name"]: r for r in results["schemas"]}
    peers = by_name["Alpha---int"]["peers"]
    assert "llguidance" in peers
    for name, p in peers.items():
        assert p["compiled"], (name, p)
        assert (p["valid_accepted"], p["valid_total"], p["invalid_total"]) == (1, 1, 2), name
        if name == "outlines-core":  # it does not enforce minimum: -1 is accepted, and shown
            assert p["invalid_rejected"] == 1 and p["unsound"] == ["-1"]
        else:
            assert p["invalid_rejected"] == 2 and p["unsound"] == [], name
        assert p["mask_us_per_token"] > 0 and p["first_mask_ms"] >= 0
    assert set(results["summary"]["all"]["peers"]) == set(peers)
    assert results["summary"]["all"]["peers"]["llguidance"]["schemas"] == 3


@pytest.mark.slow  # the peers run at Qwen-free 512 tokens still takes seconds each
def test_cli_peers_flag(bench_dir, capsys):
    pytest.importorskip("llguidance")
    assert main(["schema-bench", str(bench_dir), "--vocab", "512", "--peers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["peers"] is True and out["peers"]["llguidance"]["available"]
    assert "llguidance" in out["summary"]["all"]["peers"]
