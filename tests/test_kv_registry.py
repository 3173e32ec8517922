"""The registry holds the published configs; units and config.json parsing are strict."""

from __future__ import annotations

import json
import math

import pytest

from inferlab.errors import InferlabError
from inferlab.kv.formulas import cache_bytes, default_format
from inferlab.kv.hf_config import load_config, spec_from_config
from inferlab.kv.registry import get_gpu, get_model, model_names
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import param_shapes
from inferlab.units import fmt_binary, parse_bytes, parse_dtype

# ---------------------------------------------------------------- published shapes


@pytest.mark.parametrize("name, layers, heads, kv_heads, head_dim, hidden, max_position", [
    ("llama-3-8b", 32, 32, 8, 128, 4096, 8192),
    ("llama-3-70b", 80, 64, 8, 128, 8192, 8192),
    ("llama-2-70b", 80, 64, 8, 128, 8192, 4096),
    ("mistral-7b", 32, 32, 8, 128, 4096, 32768),
    ("mixtral-8x7b", 32, 32, 8, 128, 4096, 32768),
    ("qwen2.5-7b", 28, 28, 4, 128, 3584, 131072),
    ("gemma-2-9b", 42, 16, 8, 256, 3584, 8192),
    ("gpt-3-175b", 96, 96, 96, 128, 12288, 2048),
])
def test_published_shapes(name, layers, heads, kv_heads, head_dim, hidden, max_position):
    s = get_model(name)
    assert (s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden, s.max_position) == \
        (layers, heads, kv_heads, head_dim, hidden, max_position)


def test_windows_and_mla_as_published():
    assert get_model("mistral-7b").sliding_window == 4096
    assert len(get_model("mistral-7b").sliding_layers) == 32
    assert get_model("mixtral-8x7b").sliding_window is None          # null in the final HF config
    assert get_model("qwen2.5-7b").sliding_window is None            # use_sliding_window false
    g = get_model("gemma-2-9b")
    assert g.head_dim * g.heads != g.hidden                           # 4096 vs 3584
    assert (g.sliding_window, len(g.sliding_layers)) == (4096, 21)
    for name, layers in (("deepseek-v2", 60), ("deepseek-v3", 61)):
        d = get_model(name)
        assert (d.attention, d.layers, d.kv_lora_rank, d.rope_dim) == ("MLA", layers, 512, 64)


def _llama_params(vocab, d, ff, layers, kv_dim, untied=True):
    """Hand count of a Llama-style decoder: embeddings (+ untied head), q/o (d x d), k/v (d x kv_dim),
    SwiGLU (3 d ff), two RMSNorms per layer, the final norm."""
    per_layer = 2 * d * d + 2 * d * kv_dim + 3 * d * ff + 2 * d
    return vocab * d * (2 if untied else 1) + layers * per_layer + d


@pytest.mark.parametrize("name, expected", [
    ("llama-2-7b", _llama_params(32000, 4096, 11008, 32, 4096)),
    ("llama-2-13b", _llama_params(32000, 5120, 13824, 40, 5120)),
    ("llama-2-70b", _llama_params(32000, 8192, 28672, 80, 1024)),
    ("llama-2-70b-mha", _llama_params(32000, 8192, 28672, 80, 8192)),
    ("mistral-7b", _llama_params(32000, 4096, 14336, 32, 1024)),
    ("llama-3-8b", _llama_params(128256, 4096, 14336, 32, 1024)),
    ("llama-3-70b", _llama_params(128256, 8192, 28672, 80, 1024)),
])
def test_param_counts_match_an_architecture_count(name, expected):
    assert get_model(name).params == expected


@pytest.mark.parametrize("name, d, layers, heads, published", [
    ("gpt2", 768, 12, 12, 124439808), ("gpt2-medium", 1024, 24, 16, 354823168),
    ("gpt2-large", 1280, 36, 20, 774030080), ("gpt2-xl", 1600, 48, 25, 1557611200),
])
def test_gpt2_params_match_the_engines_layout(name, d, layers, heads, published):
    # The engine's param_shapes is GPT-2's layout, so GPT-2's published count is an independent check.
    shapes = param_shapes(GPTConfig(vocab_size=50257, d_model=d, n_heads=heads, n_layers=layers, context=1024))
    count = sum(math.prod(s) for s in shapes.values())
    assert count == published == get_model(name).params


def test_minigpt_params_by_hand():
    # wte 512*64 + wpe 256*64 + 4 layers * (12 d^2 + 13 d) + ln_f 2d, d = 64
    assert get_model("minigpt").params == 512 * 64 + 256 * 64 + 4 * (12 * 64 * 64 + 13 * 64) + 2 * 64


def test_minigpt_row_is_the_engines_defaults():
    # kv/ sits below the engine, so models.json writes MiniGPT's row; the engine is the oracle.
    c, spec = GPTConfig(), get_model("minigpt")
    assert (spec.layers, spec.heads, spec.kv_heads, spec.head_dim, spec.hidden, spec.max_position) == (
        c.n_layers, c.n_heads, c.kv_heads, c.d_head, c.d_model, c.context)
    assert spec.params == sum(math.prod(s) for s in param_shapes(c).values())


def test_every_entry_cites_sources():
    for name in model_names():
        s = get_model(name)
        assert s.sources.get("config") and s.sources.get("params"), name


def test_lookup_aliases_and_suggestions():
    assert get_model("Mistralai/Mistral-7B-v0.1").name == "mistral-7b"
    assert get_model("GPT2-small").name == "gpt2"
    with pytest.raises(InferlabError, match="did you mean llama-2-7b"):
        get_model("llama2-7")


def test_gpu_catalogue_vendor_gb():
    assert get_gpu("h100-80gb").memory_bytes == 80 * 10**9
    assert get_gpu("H200-141GB").memory_bytes == 141 * 10**9
    with pytest.raises(InferlabError, match="did you mean A100-40GB"):
        get_gpu("A100-40")


# ---------------------------------------------------------------- units


@pytest.mark.parametrize("text, expected", [
    ("40GB", 40 * 10**9), ("14GiB", 14 * 2**30), ("1.5GB", 1_500_000_000), ("512 MiB", 512 * 2**20),
    ("2TB", 2 * 10**12), ("1TiB", 2**40), ("100MB", 10**8), ("4096B", 4096), ("0.5KiB", 512),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text, flag="--memory") == expected


@pytest.mark.parametrize("text, needle", [
    ("40", "no unit"), ("40G", "ambiguous unit 'G'"), ("40Gi", "ambiguous"), ("40gb", "ambiguous"),
    ("40Gb", "bits"), ("0GB", "positive"), ("-5GB", "positive"), ("1.3B", "whole number of bytes"),
    ("forty GB", "expected a number"), ("40 parsecs", "unknown unit"),
])
def test_parse_bytes_refuses(text, needle):
    with pytest.raises(InferlabError, match=needle) as exc:
        parse_bytes(text, flag="--memory")
    assert "\n" not in str(exc.value) and "--memory" in str(exc.value)


def test_parse_dtype():
    assert parse_dtype("bfloat16") == "bf16" and parse_dtype("FP16") == "fp16"
    with pytest.raises(InferlabError, match="reads as bits .*fp16 = 2 bytes"):
        parse_dtype("16")
    with pytest.raises(InferlabError, match="unknown dtype"):
        parse_dtype("fp12")


def test_binary_formatting():
    assert fmt_binary(524288) == "512 KiB"
    assert fmt_binary(1152 * 2**20) == "1.125 GiB"
    assert fmt_binary(512) == "512 bytes"


# ---------------------------------------------------------------- config.json


def _write(tmp_path, obj, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


GEMMA2 = {"model_type": "gemma2", "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
          "head_dim": 256, "hidden_size": 3584, "max_position_embeddings": 8192, "sliding_window": 4096,
          "torch_dtype": "float32"}


def test_config_gemma2_matches_registry(tmp_path):
    spec = load_config(_write(tmp_path, GEMMA2))
    reg = get_model("gemma-2-9b")
    assert (spec.layers, spec.kv_heads, spec.head_dim, spec.sliding_window, spec.sliding_layers, spec.dtype) == \
        (reg.layers, reg.kv_heads, reg.head_dim, reg.sliding_window, reg.sliding_layers, reg.dtype)


def test_config_defaults_gpt2_names_and_mha(tmp_path):
    spec = load_config(_write(tmp_path, {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024}))
    assert (spec.layers, spec.heads, spec.kv_heads, spec.head_dim, spec.dtype) == (12, 12, 12, 64, "fp32")


def test_config_mla_and_disabled_window(tmp_path):
    spec = spec_from_config({"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
                             "hidden_size": 7168, "max_position_embeddings": 163840, "kv_lora_rank": 512,
                             "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "torch_dtype": "bfloat16"}, name="v3")
    assert (spec.attention, spec.kv_lora_rank, spec.rope_dim, spec.dtype) == ("MLA", 512, 64, "bf16")
    qwen = spec_from_config({"model_type": "qwen2", "num_hidden_layers": 28, "num_attention_heads": 28,
                             "num_key_value_heads": 4, "hidden_size": 3584, "max_position_embeddings": 131072,
                             "sliding_window": 131072, "use_sliding_window": False}, name="q")
    assert qwen.sliding_window is None


@pytest.mark.parametrize("drop", ["num_hidden_layers", "num_attention_heads", "hidden_size", "max_position_embeddings"])
def test_config_missing_field_is_named(tmp_path, drop):
    cfg = {k: v for k, v in GEMMA2.items() if k != drop}
    with pytest.raises(InferlabError, match=f"missing required field /{drop}"):
        load_config(_write(tmp_path, cfg))


def test_config_bad_values(tmp_path):
    with pytest.raises(InferlabError, match="/num_key_value_heads must be a positive integer"):
        load_config(_write(tmp_path, GEMMA2 | {"num_key_value_heads": 0}))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InferlabError, match="not JSON"):
        load_config(tmp_path / "bad.json")
    with pytest.raises(InferlabError, match="no such file"):
        load_config(tmp_path / "absent.json")


BASE = {"num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128,
        "hidden_size": 1024, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}


def test_config_sliding_window_pattern_every_sixth_layer_full():
    """Gemma 3 (and Cohere 2) say which layers are full by sliding_window_pattern: with 6, layers
    5 and 11 of 12 attend to every token, the other ten to the last 1,024. By hand, at 4,096
    tokens in bf16: 2 (K, V) x 4 heads x 128 x 2 bytes = 2,048 bytes a token a layer, so
    2,048 x (10 x 1,024 + 2 x 4,096) = 2,048 x 18,432 = 37,748,736 bytes."""
    for cfg in (BASE | {"sliding_window": 1024, "sliding_window_pattern": 6},
                BASE | {"sliding_window": 1024, "model_type": "gemma3_text"}):   # its default pattern
        spec = spec_from_config(cfg, name="g3")
        assert spec.sliding_layers == (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)
        assert cache_bytes(spec, seq=4096, batch=1, fmt=default_format(spec.dtype)) == 37_748_736


@pytest.mark.parametrize("extra, needle", [
    ({"layer_types": ["linear_attention", "full_attention"] * 6}, "/layer_types/0 is 'linear_attention'"),
    ({"layer_types": ["full_attention"] * 11 + ["chunked_attention"]}, "/layer_types/11 is 'chunked_attention'"),
    ({"layer_types": ["sliding_attention"] * 12}, "sliding_attention layers but /sliding_window is absent"),
    ({"layers_block_type": ["mamba", "attention"] * 6}, "/layers_block_type is set"),
    ({"hybrid_override_pattern": "M-M*"}, "/hybrid_override_pattern is set"),
    ({"attention_chunk_size": 8192}, "/attention_chunk_size is set"),
    ({"num_kv_shared_layers": 4}, "/num_kv_shared_layers is 4"),
])
def test_config_layers_that_are_not_attention_are_refused(extra, needle):
    """A hybrid's linear-attention or Mamba layers, or chunked attention, were sized as full
    attention over every token (Qwen3-Next-like: 4x its cache), with nothing said."""
    with pytest.raises(InferlabError, match=needle):
        spec_from_config(BASE | extra, name="hybrid")


@pytest.mark.slow   # importing transformers takes several seconds
def test_config_layer_types_follow_transformers():
    transformers = pytest.importorskip("transformers")
    # transformers' own Gemma2Config decides which layers slide; our reading must agree with it.
    cfg = transformers.Gemma2Config(num_hidden_layers=42, num_attention_heads=16, num_key_value_heads=8,
                                    head_dim=256, hidden_size=3584, sliding_window=4096).to_dict()
    expected = tuple(i for i, t in enumerate(cfg["layer_types"]) if t == "sliding_attention")
    assert spec_from_config(cfg, name="g").sliding_layers == expected
    assert spec_from_config({k: v for k, v in cfg.items() if k != "layer_types"}, name="g").sliding_layers == expected
    # and the models whose configs say it by layer_types: each reading is transformers' own (an
    # older transformers lacks some of these classes)
    sized = ("Gemma3TextConfig", "Cohere2Config", "GptOssConfig", "Olmo3Config", "Qwen2Config", "MistralConfig")
    for name in (n for n in sized if hasattr(transformers, n)):
        cfg = getattr(transformers, name)().to_dict()
        types = cfg.get("layer_types") or ["sliding_attention"] * cfg["num_hidden_layers"]
        expected = tuple(i for i, t in enumerate(types) if t == "sliding_attention") if cfg.get("sliding_window") else ()
        assert spec_from_config(cfg, name=name).sliding_layers == expected, name
    refused = ("Qwen3NextConfig", "Llama4TextConfig", "JambaConfig", "Gemma3nTextConfig")  # linear, chunked, Mamba, shared
    for name in (n for n in refused if hasattr(transformers, n)):
        with pytest.raises(InferlabError, match="inferlab kv"):
            spec_from_config(getattr(transformers, name)().to_dict(), name=name)


@pytest.mark.parametrize("extra, needle", [
    ({"sliding_window": 4096, "model_type": "qwen2", "max_window_layers": "a"}, "/max_window_layers must be an integer >= 0, got a"),
    ({"sliding_window": 4096, "model_type": "qwen2", "max_window_layers": 1.5}, "/max_window_layers must be an integer >= 0"),
    ({"num_hidden_layers": 10 ** 10, "sliding_window": 4096}, "/num_hidden_layers is 10000000000, more than any model's (100,000)"),
    ({"num_hidden_layers": 10 ** 30}, "/num_hidden_layers is 1000000000000000000000000000000, more than any model's"),
])
def test_config_fields_out_of_any_models_range_are_one_line(tmp_path, extra, needle):
    """A CLI audit's configs: a TypeError, a MemoryError (a per-layer table of 10^10 layers) and a
    hang (10^30 layers, walked one by one) before."""
    from inferlab.kv.hf_config import load_config

    base = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 4096}
    (tmp_path / "config.json").write_text(json.dumps({**base, **extra}))
    with pytest.raises(InferlabError, match="config.json: ") as exc:
        load_config(tmp_path / "config.json")
    assert needle in str(exc.value)


@pytest.mark.parametrize("argv, needle", [
    (["kv", "max-context", "llama-2-7b", "--memory", "40GB", "--params", "nan"], "--params 'nan'"),
    (["kv", "max-context", "llama-2-7b", "--memory", "40GB", "--params", "inf"], "--params 'inf'"),
    (["kv", "max-context", "llama-2-7b", "--memory", "40GB", "--params", "1e20"], "more than 1e+15 parameters"),
    (["kv", "compare", "llama-2-7b", "mistral-7b", "--claim", "infx"], "--claim 'infx'"),
    (["kv", "compare", "llama-2-7b", "mistral-7b", "--claim", "1e400x"], "above 1,000,000x"),
])
def test_kv_numbers_out_of_range_are_one_line(argv, needle, capsys):
    from inferlab.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
