"""KV formulas against hand arithmetic (written out here) and against the engine's real arrays."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import InferlabError
from inferlab.kv.formulas import (KVFormat, cache_bytes, constant_bytes, default_format, formula_text,
                                  kv_cache_bytes, max_context, mla_cache_bytes, per_token_bytes, tp_split)
from inferlab.kv.registry import get_model
from inferlab.model.config import GPTConfig
from inferlab.model.kv_cache import ContiguousKVCache, PagedKVCache

FP16 = KVFormat("fp16")


def test_llama_2_7b_per_token_by_hand():
    # 2 (K,V) * 32 layers * 32 KV heads * 128 dims * 2 bytes = 524288 = 512 KiB
    assert kv_cache_bytes(layers=32, kv_heads=32, head_dim=128, seq=1, batch=1, dtype_bytes=2) == 524288
    assert per_token_bytes(get_model("llama-2-7b"), FP16) == 524288
    assert formula_text(get_model("llama-2-7b"), batch=1, fmt=FP16) == \
        "2 * 32 * 32 * 128 * 1 * 2 = 524288 bytes = 512 KiB"


@pytest.mark.parametrize("name, dtype, per_token", [
    ("minigpt", "fp32", 2 * 4 * 4 * 16 * 4),            # 2048: 4 layers, 4 heads of 16, fp32
    ("gpt2", "fp16", 2 * 12 * 12 * 64 * 2),             # 36864 = 36 KiB
    ("llama-2-13b", "fp16", 2 * 40 * 40 * 128 * 2),     # 819200 = 800 KiB
    ("llama-2-70b", "fp16", 2 * 80 * 8 * 128 * 2),      # 327680 = 320 KiB (GQA, 8 KV heads)
    ("llama-2-70b-mha", "fp16", 2 * 80 * 64 * 128 * 2),  # 2621440 = 2.5 MiB
    ("gpt-3-175b", "fp16", 2 * 96 * 96 * 128 * 2),      # 4718592 = 4.5 MiB
    ("llama-3-8b", "bf16", 2 * 32 * 8 * 128 * 2),       # 131072
    ("qwen2.5-7b", "bf16", 2 * 28 * 4 * 128 * 2),       # 57344
    ("gemma-2-9b", "bf16", 2 * 42 * 8 * 256 * 2),       # 344064: head_dim 256, not 3584 / 16
])
def test_per_token_bytes_by_hand(name, dtype, per_token):
    assert per_token_bytes(get_model(name), KVFormat(dtype)) == per_token


def test_totals_at_4k_and_32k_by_hand():
    spec = get_model("gpt-3-175b")
    assert cache_bytes(spec, seq=4096, batch=1, fmt=FP16) == 18 * 2**30      # 4.5 MiB * 4096
    assert cache_bytes(spec, seq=32768, batch=1, fmt=FP16) == 144 * 2**30    # 4.5 MiB * 32768
    assert cache_bytes(get_model("llama-2-7b"), seq=4096, batch=8, fmt=FP16) == 16 * 2**30


def test_mla_deepseek_no_factor_two():
    # V3: 61 layers * (512 latent + 64 rope) * 2 bytes = 70272; V2: 60 * 576 * 2 = 69120
    assert per_token_bytes(get_model("deepseek-v3"), KVFormat("bf16")) == 70272
    assert per_token_bytes(get_model("deepseek-v2"), KVFormat("bf16")) == 69120
    assert mla_cache_bytes(layers=61, kv_lora_rank=512, rope_dim=64, seq=1000, batch=3, dtype_bytes=2) == 70272 * 3000
    assert formula_text(get_model("deepseek-v3"), batch=1, fmt=KVFormat("bf16")).startswith("61 * (512 + 64) * 1 * 2 = 70272")


def test_sliding_window_mistral_caps_every_layer():
    spec = get_model("mistral-7b")
    # per layer per position: 2 * 8 * 128 * 2 = 4096 bytes; 32 layers keep min(S, 4096) positions
    assert cache_bytes(spec, seq=2000, batch=1, fmt=FP16) == 32 * 4096 * 2000
    assert cache_bytes(spec, seq=32768, batch=1, fmt=FP16) == 32 * 4096 * 4096      # 512 MiB
    assert cache_bytes(spec, seq=32768, batch=1, fmt=FP16) == cache_bytes(spec, seq=4096, batch=1, fmt=FP16)


def test_sliding_window_gemma_alternating_layers():
    spec = get_model("gemma-2-9b")
    assert spec.sliding_layers == tuple(range(0, 42, 2))            # 21 local layers, local first
    # per layer per position 2 * 8 * 256 * 2 = 8192; 21 layers keep 4096, 21 keep 32768
    assert cache_bytes(spec, seq=32768, batch=1, fmt=KVFormat("bf16")) == 8192 * (21 * 4096 + 21 * 32768)
    assert cache_bytes(spec, seq=32768, batch=1, fmt=KVFormat("bf16")) == 6341787648


def test_max_context_floor_a100_by_hand():
    spec = get_model("llama-2-7b")
    free = 40 * 10**9 - 14 * 2**30                  # 24967614464
    assert free == 24967614464
    # 24967614464 / 524288 = 47621.96..., / (524288 * 8) = 5952.7...
    assert max_context(spec, free_bytes=free, batch=1, fmt=FP16) == 47621
    assert max_context(spec, free_bytes=free, batch=8, fmt=FP16) == 5952


def test_max_context_with_windows_by_hand():
    gemma = get_model("gemma-2-9b")
    # 10 GiB: the first 4096 positions cost 42 * 8192 each (1409286144 in all, fits); past them only the
    # 21 global layers grow: (10737418240 - 21 * 8192 * 4096) // (21 * 8192) = 10032775168 // 172032 = 58319
    assert max_context(gemma, free_bytes=10 * 2**30, batch=1, fmt=KVFormat("bf16")) == 58319
    mistral = get_model("mistral-7b")
    assert max_context(mistral, free_bytes=256 * 2**20, batch=1, fmt=FP16) == 2048   # 256 MiB / 128 KiB
    assert max_context(mistral, free_bytes=512 * 2**20, batch=1, fmt=FP16) is None   # the whole window fits


def test_tensor_parallel_split_and_replication():
    spec = get_model("llama-2-70b")                 # 8 KV heads
    assert tp_split(spec, 4).kv_heads_per_rank == 2
    assert per_token_bytes(spec, FP16, tp=4) == 2 * 80 * 2 * 128 * 2           # 81920 per rank
    split = tp_split(spec, 16)
    assert (split.kv_heads_per_rank, split.replication) == (1, 2)
    assert per_token_bytes(spec, FP16, tp=16) == 2 * 80 * 1 * 128 * 2          # 40960 per rank
    with pytest.raises(InferlabError, match="--tp 3"):
        tp_split(spec, 3)
    with pytest.raises(InferlabError, match="--tp 12"):
        tp_split(spec, 12)                          # > 8 and not a multiple of 8
    mla = get_model("deepseek-v3")                  # the latent is whole on every rank
    assert per_token_bytes(mla, KVFormat("bf16"), tp=8) == 70272
    assert tp_split(mla, 8).replication == 8


def test_quantized_formats_by_hand():
    spec = get_model("llama-2-7b")                  # 2 * 32 * 32 = 2048 cached vectors of 128 per token
    # int8, one fp16 scale + one fp16 zero point per vector: 128 + 4 = 132 bytes per vector
    assert per_token_bytes(spec, default_format("int8")) == 2048 * 132               # 270336
    # int4, groups of 64: 64 bytes payload + 2 groups * (2 + 2) bytes = 72 per vector
    assert per_token_bytes(spec, default_format("int4")) == 2048 * 72                # 147456
    # fp8 with per-tensor scales: 128 bytes per vector and a constant 2 * 32 * 4 bytes of fp32 scales
    fp8 = default_format("fp8")
    assert per_token_bytes(spec, fp8) == 2048 * 128
    assert constant_bytes(spec, fp8) == 256
    assert cache_bytes(spec, seq=10, batch=2, fmt=fp8) == 2048 * 128 * 20 + 256
    # int4 without scales is exactly a quarter of fp16
    assert per_token_bytes(spec, KVFormat("int4")) * 4 == per_token_bytes(spec, FP16)
    # block scales on the MLA latent: 576 / 64 = 9 groups
    assert per_token_bytes(get_model("deepseek-v3"), KVFormat("int4", scales="block", group=64)) == 61 * (288 + 9 * 2)


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_engine_contiguous_cache_nbytes_equals_formula(n_kv_heads):
    config = GPTConfig(n_kv_heads=n_kv_heads)
    cache = ContiguousKVCache(config, max_seq=200)
    assert cache.nbytes == kv_cache_bytes(layers=config.n_layers, kv_heads=config.kv_heads,
                                          head_dim=config.d_head, seq=200, batch=1, dtype_bytes=4)


def test_engine_paged_cache_nbytes_is_whole_blocks():
    import numpy as np

    config = GPTConfig(n_kv_heads=2)
    cache = PagedKVCache(config, max_seq=100, block_size=16)
    k = np.zeros((2, 37, config.d_head), np.float32)            # 37 positions -> 3 blocks of 16
    for layer in range(config.n_layers):
        cache.append(layer, k, k)
    assert cache.nbytes == kv_cache_bytes(layers=config.n_layers, kv_heads=2, head_dim=config.d_head,
                                          seq=48, batch=1, dtype_bytes=4)


def test_minigpt_row_is_the_engine_config():
    spec, c = get_model("minigpt"), GPTConfig()
    assert (spec.layers, spec.kv_heads, spec.head_dim, spec.max_position) == (c.n_layers, c.kv_heads, c.d_head, c.context)


@pytest.mark.parametrize("bad", [{"seq": 0}, {"batch": -1}, {"layers": 0}, {"dtype_bytes": 0}, {"seq": 1.5}])
def test_bad_values_rejected(bad):
    args = dict(layers=2, kv_heads=2, head_dim=4, seq=3, batch=1, dtype_bytes=2) | bad
    with pytest.raises(InferlabError):
        kv_cache_bytes(**args)


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 100), heads=st.sampled_from([1, 2, 4, 8]), head_dim=st.integers(1, 256),
       seq=st.integers(1, 10**6), batch=st.integers(1, 64), dtype=st.sampled_from(["fp32", "fp16", "fp8"]))
def test_model_formula_matches_contract_without_windows(layers, heads, head_dim, seq, batch, dtype):
    spec = replace(get_model("llama-2-7b"), layers=layers, heads=heads, kv_heads=heads, head_dim=head_dim)
    fmt = KVFormat(dtype)
    expected = kv_cache_bytes(layers=layers, kv_heads=heads, head_dim=head_dim, seq=seq, batch=batch,
                              dtype_bytes={"fp32": 4, "fp16": 2, "fp8": 1}[dtype])
    assert cache_bytes(spec, seq=seq, batch=batch, fmt=fmt) == expected


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["llama-2-7b", "mistral-7b", "gemma-2-9b", "deepseek-v2", "qwen2.5-7b"]),
       free=st.integers(1, 2 * 10**11), batch=st.integers(1, 32), dtype=st.sampled_from(["fp16", "int8", "int4"]))
def test_max_context_is_the_floor(name, free, batch, dtype):
    spec, fmt = get_model(name), default_format(dtype)
    s = max_context(spec, free_bytes=free, batch=batch, fmt=fmt)
    if s is None:                                   # unbounded: the capped cache fits for any S
        assert cache_bytes(spec, seq=10**9, batch=batch, fmt=fmt) <= free
        return
    if s > 0:
        assert cache_bytes(spec, seq=s, batch=batch, fmt=fmt) <= free
    assert cache_bytes(spec, seq=s + 1, batch=batch, fmt=fmt) > free
