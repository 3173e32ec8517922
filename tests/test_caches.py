"""The cache owner (caches.CACHES) and the grammar's bounded caches: an oracle of masks, not of
sizes. The same walks with every bound shrunk to one entry (each cache evicting at every step)
give the same masks, and the same states, as with the default bounds; CACHES.clear() empties
what it owns."""

import random

import numpy as np
import pytest

from inferlab.constrain import grammar, machine, native
from inferlab.constrain.caches import CACHES
from inferlab.constrain.stack import StackGrammar, compile_machine
from oracles import FIXTURES, small_vocab

ENGINES = ["python"] + (["native"] if native.built() else [])


def walk(schema, engine: str, seed: int, **options) -> list[tuple[int, ...]]:
    g = StackGrammar(compile_machine(schema)[1], small_vocab(seed), engine=engine, **options)
    rng, state, out = random.Random(seed), g.initial_state(), []
    for _ in range(25):
        ids = g.allowed_ids(state).tolist()
        out.append(tuple(ids))
        live = [t for t in ids if t != g.eos_id]
        if not live:
            break
        token = rng.choice(live)
        again = g.advance(state, token)
        assert g.advance(state, token) == again  # (the advance cache's answer, or a fresh one)
        state = again
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_tiny_bounds_give_the_same_masks(engine, monkeypatch):
    schemas = [FIXTURES[i] for i in (0, 6, 7)]
    want = {(i, seed): walk(s, engine, seed) for i, s in enumerate(schemas) for seed in range(2)}
    for module, name in ((grammar, "ADVANCE_STEPS"), (grammar, "CLEARED_CACHE_STATES"), (grammar, "ROW_LISTS"),
                         (grammar, "QUOTED_ROWS"), (grammar, "KEPT_ROWS"), (machine, "STEPS_KEPT")):
        monkeypatch.setattr(module, name, 1)
    CACHES.clear()
    got = {(i, seed): walk(s, engine, seed, cache_rows=1) for i, s in enumerate(schemas) for seed in range(2)}
    assert got == want


def test_clear_empties_what_the_owner_holds():
    g = StackGrammar(compile_machine(FIXTURES[3])[1], small_vocab(0), engine="python", narrow_nodes=0)
    state = g.initial_state()
    for _ in range(6):
        ids = [t for t in g.allowed_ids(state).tolist() if t != g.eos_id]
        state = g.advance(state, ids[len(ids) // 2])
    assert CACHES.sizes()["small_dfas"] > 0 and CACHES.sizes()["frame_splits"] > 0
    CACHES.clear("compile")
    assert CACHES.sizes()["small_dfas"] == 0 and CACHES.sizes()["frame_splits"] > 0
    CACHES.clear()
    assert not any(CACHES.sizes()[name] for name in ("small_dfas", "bounded_dfas", "region_shapes", "frame_splits"))
    before = g.allowed_ids(state)
    g.clear()
    assert len(g._masks) == len(g._advance) == 0 and np.array_equal(g.allowed_ids(state), before)


def test_every_lru_cache_of_the_grammar_package_has_the_one_owner():
    """Issue 49: one owner holds every cache kept across compiles. Found by walking the package's
    modules for functools caches, not from the owner's own list; each is bounded (a maxsize) or
    keyed by a fixed set of names, and CACHES.clear() empties it."""
    import importlib
    import pkgutil

    import inferlab.constrain as package

    found = {}
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] in ("hf", "_native"):  # (torch; the extension)
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if callable(obj) and hasattr(obj, "cache_info") and getattr(obj, "__module__", None) == info.name:
                found[f"{info.name.rsplit('.', 1)[-1]}.{name}"] = obj
    owned = CACHES.bounds()
    lone = {"values._jsonschema", "common._known_keywords", "regex._parsed"}  # one value each, or cleared by regex_classes
    assert set(found) - lone <= set(owned), set(found) - lone - set(owned)
    for name, fn in found.items():
        fn.cache_info()
    CACHES.clear()
    assert all(found[n].cache_info().currsize == 0 for n in found if n in owned)
