"""KV caches: cached decode equals full recompute; paged equals contiguous; nbytes by hand."""


import numpy as np
import pytest

from inferlab.errors import InferlabError
from inferlab.kv.formulas import kv_cache_bytes
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT
from inferlab.model.kv_cache import BlockPool, ContiguousKVCache, PagedKVCache

CONFIGS = {
    "mha": GPTConfig(vocab_size=71, d_model=32, n_heads=4, n_layers=2, context=48),
    "gqa": GPTConfig(vocab_size=71, d_model=32, n_heads=4, n_layers=2, context=48, n_kv_heads=2),
    "mqa": GPTConfig(vocab_size=71, d_model=32, n_heads=4, n_layers=3, context=48, n_kv_heads=1),
}


def ids_for(config, n, seed=0):
    return np.random.default_rng(seed).integers(0, config.vocab_size, n).tolist()


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("kind", ["contiguous", "paged"])
def test_cached_decode_equals_full_recompute(name, kind):
    config = CONFIGS[name]
    model = GPT.init(config, seed=5)
    ids = ids_for(config, config.context)
    full = model.forward(ids)                                    # (context, V)
    cache = model.new_cache(kind)
    # a prefill of 5, then steps of 1 and a chunk of 3, up to the last position of the context
    chunks = [ids[:5]] + [[t] for t in ids[5:20]] + [ids[20:23]] + [[t] for t in ids[23:]]
    pos = 0
    for chunk in chunks:
        logits = model.decode(chunk, cache)
        np.testing.assert_allclose(logits, full[pos:pos + len(chunk)], atol=1e-5, rtol=0)
        pos += len(chunk)
        assert cache.length == pos
    with pytest.raises(InferlabError, match="context"):
        model.decode([0], cache)


@pytest.mark.parametrize("name", CONFIGS)
def test_paged_and_contiguous_give_identical_logits(name):
    config = CONFIGS[name]
    model = GPT.init(config, seed=2)
    ids = ids_for(config, 37, seed=1)
    contiguous, paged = model.new_cache("contiguous"), model.new_cache("paged", block_size=4)
    for t in ids:
        np.testing.assert_array_equal(model.decode([t], contiguous), model.decode([t], paged))
    for layer in range(config.n_layers):
        for a, b in zip(contiguous.read(layer), paged.read(layer)):
            np.testing.assert_array_equal(a, b)


def hand_bytes(layers, kv_heads, d_head, seq):
    return 2 * layers * kv_heads * d_head * seq * 4               # K and V, float32


def test_nbytes_by_hand():
    c = CONFIGS["gqa"]                                             # 2 layers, 2 KV heads of 8
    assert ContiguousKVCache(c).nbytes == 2 * 2 * 2 * 8 * 48 * 4 == 12288
    paged = PagedKVCache(c, block_size=16)
    assert paged.nbytes == 0                                       # nothing until the first token
    k = np.ones((2, 17, 8), np.float32)
    for layer in range(2):
        paged.append(layer, k, k)
    assert len(paged.block_table) == 2                             # 17 tokens need two blocks of 16
    assert paged.nbytes == hand_bytes(2, 2, 8, 32) == 8192
    # MiniGPT default: 4 layers x 2 x 4 heads x 16 x 256 positions x 4 bytes = 512 KiB
    assert ContiguousKVCache(GPTConfig()).nbytes == 524288


def test_nbytes_equals_kv_calculator():
    for config in CONFIGS.values():
        args = dict(layers=config.n_layers, kv_heads=config.kv_heads, head_dim=config.d_head,
                    batch=1, dtype_bytes=4)
        assert ContiguousKVCache(config).nbytes == kv_cache_bytes(seq=config.context, **args)
        model = GPT.init(config, seed=0)
        paged = model.new_cache("paged")
        model.decode(ids_for(config, 21), paged)
        assert paged.nbytes == kv_cache_bytes(seq=32, **args)     # two blocks of 16


def test_paged_blocks_are_recycled_through_the_pool():
    c = CONFIGS["mha"]
    pool = BlockPool(c, block_size=8)
    a, b = PagedKVCache(c, pool=pool), PagedKVCache(c, pool=pool)
    k = np.zeros((4, 10, 8), np.float32)
    for layer in range(2):
        a.append(layer, k, k)
        b.append(layer, k, k)
    assert sorted(a.block_table + b.block_table) == [0, 1, 2, 3]   # interleaved on demand from one pool
    a.truncate(3)                                                  # keeps one block, frees one
    assert a.length == 3 and len(a.block_table) == 1
    for layer in range(2):
        b.append(layer, k[:, :7], k[:, :7])                        # 17 positions: reuses the freed block
    assert pool.nbytes == 4 * pool.block_nbytes


def test_truncate_then_decode_equals_recompute():
    c = CONFIGS["gqa"]
    model = GPT.init(c, seed=9)
    ids = ids_for(c, 12)
    for kind in ("contiguous", "paged"):
        cache = model.new_cache(kind, block_size=4) if kind == "paged" else model.new_cache(kind)
        model.decode(ids, cache)
        cache.truncate(6)
        np.testing.assert_allclose(model.decode([3, 4], cache), model.forward(ids[:6] + [3, 4])[6:], atol=1e-5)


def test_cache_refuses_overflow_and_bad_shapes():
    c = CONFIGS["mha"]
    cache = ContiguousKVCache(c, max_seq=4)
    with pytest.raises(InferlabError, match="full"):
        cache.append(0, np.zeros((4, 5, 8), np.float32), np.zeros((4, 5, 8), np.float32))
    with pytest.raises(InferlabError, match="fit"):
        cache.append(0, np.zeros((2, 1, 8), np.float32), np.zeros((2, 1, 8), np.float32))
