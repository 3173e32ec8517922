"""constrain.lru: the locked LRU cache the decoder keeps across schemas and grammars."""

import random
from types import SimpleNamespace
from oracles import run_in_threads

from inferlab.constrain.lru import LRU


def test_lru_is_bounded_and_least_recently_used_first_out():
    cache = LRU(250, lambda v: v.nbytes)
    a, b, c = (SimpleNamespace(nbytes=100) for _ in range(3))
    cache[b"a"], cache[b"b"] = a, b
    assert cache.get(b"a") is a         # a is now the most recently used
    cache[b"c"] = c                     # 300 bytes > 250: b goes
    assert cache.get(b"b") is None and cache.get(b"a") is a and cache.get(b"c") is c
    assert len(cache) == 2 and cache.weight == 200


def test_lru_counts_a_replaced_entry_once_and_holds_under_threads():
    cache = LRU(1000, lambda v: v.nbytes)
    cache[b"a"] = SimpleNamespace(nbytes=100)
    cache[b"a"] = SimpleNamespace(nbytes=30)  # (two grammars built the same entry)
    assert len(cache) == 1 and cache.weight == 30

    def hammer(seed: int) -> None:  # gets and sets over a few keys, evicting all the time
        rng = random.Random(seed)
        for _ in range(3000):
            key = rng.randrange(40)
            if cache.get(key) is None:
                cache[key] = SimpleNamespace(nbytes=rng.randrange(1, 200))

    errors = run_in_threads(hammer)
    assert not errors and cache.weight == sum(v.nbytes for v in cache.values()) <= 1000


def test_lru_counts_entries_by_default():
    cache = LRU(2)
    for key in "abc":
        cache[key] = key.upper()
    assert cache.get("a") is None and cache.values() == ["B", "C"] and cache.weight == 2
    cache.clear()
    assert len(cache) == 0 and cache.weight == 0
