"""`inferlab kv` through inferlab.cli.main: JSON shapes, hand-derived figures, one-line errors, exit 2."""

from __future__ import annotations

import json

import pytest

from inferlab.cli import main


def run_json(capsys, *argv):
    assert main(["kv", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_size_json(capsys):
    r = run_json(capsys, "size", "llama-2-7b", "--ctx", "4096", "32768", "--batch", "2", "--dtype", "fp16")
    assert r["per_token_bytes"] == 524288 and r["dtype_bytes"] == 2
    assert r["formula"] == "2 * 32 * 32 * 128 * 1 * 2 = 524288 bytes = 512 KiB"
    assert r["totals"] == [{"ctx": 4096, "batch": 2, "bytes": 524288 * 4096 * 2},
                           {"ctx": 32768, "batch": 2, "bytes": 524288 * 32768 * 2}]


def test_size_text_shows_arithmetic_and_both_units(capsys):
    assert main(["kv", "size", "llama-2-7b", "--ctx", "4096"]) == 0
    out = capsys.readouterr().out
    assert "2 * 32 * 32 * 128 * 1 * 2 = 524288 bytes = 512 KiB" in out
    assert "2 GiB (2.147 GB)" in out                  # 2^31 bytes = 2.147e9


def test_size_int4_and_tp(capsys):
    r = run_json(capsys, "size", "llama-2-70b", "--dtype", "int4", "--scales", "none", "--tp", "16", "--ctx", "1")
    # one KV head per rank (8 heads, 16 ranks): 2 * 80 * 1 * 128 * 0.5 = 10240
    assert r["per_token_bytes"] == 10240 and r["dtype_bytes"] == 0.5
    assert r["tp"] == {"ranks": 16, "kv_heads_per_rank": 1, "replication": 2}


def test_size_quantized_group_override(capsys):
    # int4 in groups of 32 with scale + zero point: 64 payload bytes + 4 groups * 4 bytes = 80 per vector,
    # 2 * 32 * 32 = 2048 vectors per token -> 163840
    r = run_json(capsys, "size", "llama-2-7b", "--dtype", "int4", "--group", "32")
    assert r["per_token_bytes"] == 2048 * 80


def test_size_mla_note_compares_with_mha(capsys):
    r = run_json(capsys, "size", "deepseek-v2", "--ctx", "1")
    # MLA 60 * 576 * 2 = 69120; MHA of 128 heads of 128: 2 * 60 * 128 * 128 * 2 = 3932160, 56.9x
    assert r["per_token_bytes"] == 69120
    assert "3932160 bytes per token (56.9x more)" in r["notes"][0]


def test_size_from_config_file(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                               "hidden_size": 4096, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}))
    r = run_json(capsys, "size", "--config", str(cfg), "--ctx", "8192")
    assert r["per_token_bytes"] == 2 * 32 * 8 * 128 * 2           # 131072, as Llama-3-8B
    assert r["totals"][0]["bytes"] == 131072 * 8192               # 1 GiB


def test_max_context_json(capsys):
    r = run_json(capsys, "max-context", "llama-2-7b", "--memory", "40GB", "--weights", "14GiB", "--batch", "8")
    assert r == {"model": "llama-2-7b", "s_max": 5952, "free_bytes": 24967614464, "per_token_bytes": 524288,
                 "batch": 8, "max_position": 4096, "warnings": r["warnings"]}
    assert "exceeds the model's max_position_embeddings 4096" in r["warnings"][0]


def test_max_context_default_weights_from_params(capsys):
    # Llama-3-8B bf16 weights: 8030261248 * 2 = 16060522496 bytes; 80 GB leaves 63939477504;
    # per token 131072 -> floor(63939477504 / 131072) = 487819
    r = run_json(capsys, "max-context", "llama-3-8b", "--memory", "80GB")
    assert r["free_bytes"] == 80 * 10**9 - 16060522496 and r["s_max"] == 487819


def test_max_context_tensor_parallel(capsys):
    # Llama-2-70B fp16 over 4 ranks of 80 GB: weights 68976648192 * 2 / 4 = 34488324096 per rank,
    # free 45511675904; per rank per token 2 * 80 * (8 / 4) * 128 * 2 = 81920 -> floor(555562.45) = 555562
    r = run_json(capsys, "max-context", "llama-2-70b", "--memory", "80GB", "--tp", "4")
    assert (r["free_bytes"], r["per_token_bytes"], r["s_max"]) == (45511675904, 81920, 555562)


def test_gpus_json(capsys):
    r = run_json(capsys, "gpus", "gpt-3-175b", "--gpu", "H100-80GB", "--dtype", "fp16", "int8", "int4")
    # 350e9 / 80e9 = 4.375 -> 5; 175e9 -> 2.19 -> 3; 87.5e9 -> 1.09 -> 2
    assert [(g["dtype"], g["weights_bytes"], g["gpus_needed"]) for g in r["gpus"]] == \
        [("fp16", 350 * 10**9, 5), ("int8", 175 * 10**9, 3), ("int4", 875 * 10**8, 2)]


def test_gpus_with_kv_load(capsys):
    r = run_json(capsys, "gpus", "llama-2-70b", "--gpu", "A100-80GB", "--dtype", "int8", "--ctx", "4096", "--batch", "32")
    # KV: 327680 * 4096 * 32 = 42949672960 (40 GiB); weights 68976648192; sum 111926321152 -> 2 GPUs of 80e9
    assert r["kv_load"]["bytes"] == 42949672960
    assert r["gpus"] == [{"dtype": "int8", "weights_bytes": 68976648192, "gpus_needed": 1, "gpus_needed_with_kv": 2}]


def test_compare_gqa_claim(capsys):
    r = run_json(capsys, "compare", "mistral-7b", "llama-2-7b", "--claim", "4x", "--dtype", "fp16")
    assert r["ratio"] == 0.25 and r["per_token_bytes"] == [131072, 524288]
    assert r["claim"]["verdict"] == "exact"
    r = run_json(capsys, "compare", "mistral-7b", "llama-2-7b", "--claim", "4x", "--ctx", "32768", "--dtype", "fp16")
    assert r["at_ctx"]["ratio"] == 1 / 32 and r["claim"]["verdict"] == "wrong"
    # Llama-3-8B vs Llama-2-7B is exactly 4x as well; "3.8x" is approximate (within 10 %), "2x" wrong
    assert run_json(capsys, "compare", "llama-3-8b", "llama-2-7b", "--claim", "3.8x")["claim"]["verdict"] == "approximate"
    assert run_json(capsys, "compare", "llama-3-8b", "llama-2-7b", "--claim", "2x")["claim"]["verdict"] == "wrong"


def test_waste_json(capsys):
    r = run_json(capsys, "waste", "llama-2-7b", "--max-len", "32768", "--mean-len", "1024", "--batch", "32",
                 "--dtype", "fp16")
    assert r["waste_fraction"] == 1 - 1024 / 32768                 # 0.96875
    assert r["wasted_bytes"] == (32768 - 1024) * 32 * 524288 == 496 * 2**30
    assert r["paged_wasted_bytes"] == 15 * 32 * 524288 == 240 * 2**20
    assert r["paged_wasted_bytes_at_mean"] == 0                    # 1024 is a whole number of 16-blocks
    r = run_json(capsys, "waste", "llama-2-7b", "--max-len", "2048", "--mean-len", "1000", "--batch", "2")
    assert r["paged_wasted_bytes_at_mean"] == (1008 - 1000) * 2 * 524288


def test_list(capsys):
    assert main(["kv", "list"]) == 0
    out = capsys.readouterr().out
    assert "deepseek-v3" in out and "MLA" in out and "gemma-2-9b" in out


@pytest.mark.parametrize("argv, needle", [
    (["size", "llama2-7"], "unknown model 'llama2-7'; did you mean llama-2-7b"),
    (["size", "llama-2-7b", "--ctx", "0"], "--ctx 0: must be positive"),
    (["size", "llama-2-7b", "--ctx", "-5"], "--ctx -5: must be positive"),
    (["size", "llama-2-7b", "--batch", "two"], "--batch 'two': expected a positive whole number"),
    (["size", "llama-2-7b", "--dtype", "16"], "reads as bits"),
    (["size", "llama-2-70b", "--tp", "3"], "--tp 3 does not divide"),
    (["size"], "no model"),
    (["max-context", "llama-2-7b", "--memory", "40G", "--weights", "14GiB"], "ambiguous unit 'G'"),
    (["max-context", "llama-2-7b", "--memory", "40", "--weights", "14GiB"], "has no unit"),
    (["max-context", "llama-2-7b", "--memory", "40GB", "--weights", "0GB"], "must be positive"),
    (["max-context", "llama-2-7b", "--memory", "10GB", "--weights", "14GiB"], "weights alone do not fit"),
    (["gpus", "gpt-3-175b", "--gpu", "H100"], "unknown GPU"),
    (["size", "llama-2-7b", "--scales", "token"], "--scales token applies to a quantized cache"),
    (["size", "llama-2-7b", "--dtype", "int8", "--group", "32"], "--group sets the elements per scale of --scales block"),
    (["size", "llama-2-7b", "--dtype", "int4", "--group", "0"], "--group 0: must be positive"),
    (["compare", "mistral-7b"], "exactly two models"),
    (["compare", "mistral-7b", "llama-2-7b", "--claim", "lots"], "--claim 'lots'"),
    (["waste", "llama-2-7b", "--max-len", "100", "--mean-len", "200", "--batch", "1"], "longer than --max-len"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    assert main(["kv", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inferlab kv {argv[0]}: error: ") and needle in err
    assert err.count("\n") == 1


def test_config_missing_field_exit_2(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 4096}))
    assert main(["kv", "size", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "missing required field /num_hidden_layers" in err and err.count("\n") == 1


def test_gpus_config_needs_params(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
                               "max_position_embeddings": 16}))
    assert main(["kv", "gpus", "--config", str(cfg), "--gpu", "L4-24GB"]) == 2
    assert "--params" in capsys.readouterr().err
    r = run_json(capsys, "gpus", "--config", str(cfg), "--gpu", "L4-24GB", "--params", "30e9", "--dtype", "fp16")
    assert r["gpus"][0]["gpus_needed"] == 3                        # 60e9 / 24e9 = 2.5 -> 3
