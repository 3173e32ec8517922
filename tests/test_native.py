"""The native mask engine (constrain/csrc/, bound by _native.cpp) against the Python engine, its reference.

The oracle is the Python engine (grammar.py: narrow walks, frame splits, kept walks), itself
checked against a brute-force stack interpreter in test_stack.py. Every filled step of each
walk is compared bit for bit, the written keys resolved by the same Python code on both sides.
Malformed tables and configurations must raise ValueError, never crash the process."""

import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.constrain import native
from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.grammar import _write
from inferlab.constrain.stack import StackGrammar, build_machine, compile_machine
from inferlab.constrain.tables import compiled_machine, config_arrays
from inferlab.errors import InferlabError
from oracles import FIXTURES, MAX_REFUSED, SCHEMAS, STRINGS, TREE, recursive_schemas, small_vocab

built = pytest.mark.skipif(not native.built(), reason="the native extension is not built (no C++ compiler)")

def pair(machine, vocab, narrow: int = 400):
    """(Python, native) grammars; narrow=0: no narrow walks (the Python engine splits every mask
    by frames, the native one walks every plain split through its shared shape)."""
    return (StackGrammar(machine.unbuilt(), vocab, engine="python", narrow_nodes=narrow),
            StackGrammar(machine.unbuilt(), vocab, engine="native", narrow_nodes=narrow))


def compare_walk(machine, vocab, rng: random.Random, steps: int = 30, narrow: int = 400) -> int:
    """Random token walk (allowed tokens, and now and then any token); both engines' masks
    compared at every filled step. Returns the steps compared."""
    py, nat = pair(machine, vocab, narrow)
    sp, sn, n = py.initial_state(), nat.initial_state(), 0
    for _ in range(steps):
        ids, got = py.allowed_ids(sp), nat.allowed_ids(sn)
        assert np.array_equal(ids, got), (py.machine.configs[sp.config], set(ids.tolist()) ^ set(got.tolist()))
        n += 1
        live = [t for t in ids.tolist() if t != vocab.eos_id]
        token = rng.randrange(vocab.vocab_size) if rng.random() < 0.1 or not live else rng.choice(live)
        sp, sn = py.advance(sp, token), nat.advance(sn, token)
        assert (sp is None) == (sn is None)
        if sp is None:
            break
        assert py.machine.configs[sp.config] == nat.machine.configs[sn.config] and sp.keys == sn.keys
    return n


@built
@pytest.mark.parametrize("schema", FIXTURES, ids=range(len(FIXTURES)))
def test_native_masks_equal_python_on_fixtures(schema):
    machine = compile_machine(schema)[1]
    for seed in range(3):
        assert compare_walk(machine, small_vocab(seed), random.Random(seed)) >= 1


@built
@pytest.mark.parametrize("schema", FIXTURES, ids=range(len(FIXTURES)))
def test_native_split_paths_equal_python_without_narrow_walks(schema):
    """Every mask through the frame splits on both sides: the native plain splits by their shared
    shapes, counted and map tops by their frame walks (a small vocabulary's walks are all narrow)."""
    machine = compile_machine(schema)[1]
    assert compare_walk(machine, small_vocab(1), random.Random(7), steps=20, narrow=0) >= 1


COUNTED = [  # counted frames near and far from their max, maps with bounds, each as a top frame
    {"type": "string", "minLength": 2, "maxLength": 6},
    {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}}},
    {"type": "object", "additionalProperties": {"type": "string", "maxLength": 4}, "maxProperties": 3},
    {"type": "object", "propertyNames": {"pattern": "^[a-c]+$"}, "additionalProperties": {"type": "integer"},
     "minProperties": 1, "maxProperties": 2},
]


@built
@pytest.mark.parametrize("schema", COUNTED, ids=range(len(COUNTED)))
@pytest.mark.parametrize("narrow", [400, 0])
def test_native_counted_and_map_frames_equal_python(schema, narrow):
    """Counted automata from two items on (count_min=2: a maxLength of 6 counts its characters),
    so that walks meet counted tops near their max, where only the tokens beginning few enough
    items stay inside (the native frame walk's items against token_split.counted_tokens)."""
    machine = build_machine(compile_grammar(schema, count_min=2))
    assert machine.numbered
    for seed in range(2):
        assert compare_walk(machine, small_vocab(seed), random.Random(seed), steps=25, narrow=narrow) >= 1


@built
def test_native_masks_equal_python_on_drawn_schemas():
    counts = {"drawn": 0, "refused": 0}

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.one_of(SCHEMAS, recursive_schemas()), st.randoms(use_true_random=False))
    def prop(schema, rng):
        counts["drawn"] += 1
        try:
            machine = compile_machine(schema)[1]
        except (SchemaError, InferlabError):
            counts["refused"] += 1
            return
        compare_walk(machine, small_vocab(rng.randrange(3)), rng, steps=15)

    prop()
    assert counts["drawn"] >= 25 and counts["refused"] <= MAX_REFUSED * counts["drawn"], counts


@built
@pytest.mark.parametrize("seed", range(4))
def test_fuzz_random_bytes_mid_token(seed):
    """Configurations a token boundary never reaches: random bytes (mostly allowed ones, some
    not) fed to the machine; at every configuration reached, the native mask of its mask key
    equals the Python engine's row."""
    rng = random.Random(seed)
    vocab = small_vocab(seed)
    for schema in (TREE, STRINGS, FIXTURES[6], FIXTURES[8]):
        machine = compile_machine(schema)[1]
        py = StackGrammar(machine, vocab, engine="python")  # (one machine: the same configuration ids)
        nat = StackGrammar(machine, vocab, engine="native")
        cid = machine.start
        for _ in range(40):
            key = py._mask_key(cid)
            want = np.empty(py.words, dtype=np.int32)
            _write(want, py._row(key))
            got, allowed, _ = nat._native.row(key)
            assert np.array_equal(got, want) and allowed == min(1024, int(np.bitwise_count(want.view(np.uint32)).sum()))
            row = machine.row(cid)
            live = np.flatnonzero(row >= 0)
            b = rng.randrange(256) if rng.random() < 0.05 or not len(live) else int(rng.choice(live.tolist()))
            nxt = machine.step(cid, b)
            if nxt < 0:
                break
            cid = nxt


@built
def test_batch_fill_equals_rows_one_by_one():
    machine = compile_machine(TREE)[1]
    vocab = small_vocab(1)
    masks = native.NativeMasks(machine, vocab)
    cids = [machine.walk(text) for text in (b"", b'{"v":1', b'{"v":1,"kids":[', b'{"v":1,"kids":[{"v":2,"kids":[]')]
    assert min(cids) >= 0
    for threads in (1, 3):
        rows = masks.rows(cids, threads)
        assert all(np.array_equal(rows[i], masks.row(c)[0]) for i, c in enumerate(cids))
    g = StackGrammar(machine, vocab, engine="native")
    states = [g.advance(g.initial_state(), 0) or g.initial_state(), g.initial_state()]
    g.fill_rows(states, threads=2)
    want = StackGrammar(machine.unbuilt(), vocab, engine="python")
    for s in states:
        assert np.array_equal(g.allowed_ids(s), want.allowed_ids(s))


def _build(machine, vocab, tables):
    return native._module().build(tables, native.native_trie(vocab))


def _corruptions(name: str, arr):
    """Ways to break one array: wrong length, wrong dtype, values out of range. `trans`, a tuple
    of per-automaton tables: one table missing, one concatenated array, then each way of breaking
    one array applied to its middle table."""
    if isinstance(arr, tuple):
        yield "a table short", arr[:-1]
        yield "not a tuple", np.concatenate(arr)
        k = len(arr) // 2
        for how, bad in _corruptions(name, arr[k]):
            yield f"table {k}: {how}", arr[:k] + (bad,) + arr[k + 1:]
        return
    yield "short", arr[:-1].copy() if len(arr) else np.zeros(3, dtype=arr.dtype)
    yield "dtype", arr.astype(np.float64)
    if len(arr):
        for value in (-7, 2**31 - 1):
            bad = arr.copy()
            flat = bad.reshape(-1)
            flat[len(flat) // 2] = value if np.issubdtype(arr.dtype, np.signedinteger) else 255
            yield f"value {value}", bad


@built
def test_malformed_tables_raise_never_crash():
    """Each array of a CompiledMachine corrupted in turn (length, dtype, a value out of range):
    building the engine raises ValueError, or, where the corruption leaves a well-formed table
    (a flag's value), a mask is still computed. Never a crash."""
    machine = compile_machine(FIXTURES[6])[1]
    vocab = small_vocab(0)
    arrays = compiled_machine(machine).arrays()
    cfg = config_arrays(machine.configs[machine.start])
    raised = 0
    for i, (name, arr) in enumerate(arrays.items()):
        for how, bad in _corruptions(name, arr):
            tables = list(arrays.values())
            tables[i] = bad
            try:
                engine = _build(machine, vocab, tuple(tables))
            except ValueError:
                raised += 1
                continue
            out = np.zeros((vocab.vocab_size + 31) // 32, dtype=np.int32)
            try:  # well-formed after all (a flag, a bound): a mask or a ValueError, nothing else
                native._module().fill(engine, *cfg, out)
            except ValueError:
                pass
    assert raised >= 2 * len(arrays)  # every length and dtype corruption at least


@built
def test_malformed_trie_and_configurations_raise():
    machine = compile_machine(TREE)[1]
    vocab = small_vocab(0)
    mod = native._module()
    tables = tuple(compiled_machine(machine).arrays().values())
    trie = native.trie_arrays(vocab.trie())
    for i in range(5):
        for bad in (trie[i][:-1], trie[i].astype(np.float32)):
            broken = list(trie)
            broken[i] = bad
            with pytest.raises(ValueError):
                mod.trie(tuple(broken), vocab.vocab_size, vocab.eos_id)
    cycle = list(trie)
    cycle[0] = np.zeros_like(trie[0])  # every node its own child's parent: no tree
    cycle[1] = np.ones_like(trie[1])
    with pytest.raises(ValueError):
        mod.trie(tuple(cycle), vocab.vocab_size, vocab.eos_id)
    with pytest.raises(ValueError):
        mod.trie(trie, vocab.vocab_size, vocab.vocab_size + 5)
    unsorted = list(trie)  # (the frame walks find a child by its byte: children sorted, one per byte)
    unsorted[2] = trie[2].copy()
    first = next(v for v in range(len(trie[1])) if trie[1][v] >= 2)
    lo = int(trie[0][first])
    unsorted[2][lo], unsorted[2][lo + 1] = trie[2][lo + 1], trie[2][lo]
    with pytest.raises(ValueError, match="sorted"):
        mod.trie(tuple(unsorted), vocab.vocab_size, vocab.eos_id)
    with pytest.raises(ValueError):  # (not a trie)
        mod.build(tables, mod.build(tables, native.native_trie(vocab)))
    engine = mod.build(tables, mod.trie(trie, vocab.vocab_size, vocab.eos_id))
    out = np.zeros((vocab.vocab_size + 31) // 32, dtype=np.int32)
    frames, offset = config_arrays(machine.configs[machine.start])
    for bad_frames, bad_offset in ((frames + 1000, offset), (frames, offset + 1), (frames[:, :2], offset),
                                   (frames, np.array([0, 0, len(frames)])), (-frames - 2, offset)):
        with pytest.raises(ValueError):
            mod.fill(engine, np.ascontiguousarray(bad_frames, dtype=np.int32), bad_offset.astype(np.int64), out)
    with pytest.raises(ValueError):
        mod.fill(engine, frames, offset, out[:-1])
    with pytest.raises(ValueError):
        mod.fill_next_token_bitmask_par(engine, [(frames, offset)], out.reshape(1, -1), np.array([3]), 2)
    with pytest.raises(ValueError):  # (two threads would write one row)
        mod.fill_next_token_bitmask_par(engine, [(frames, offset)] * 2, np.zeros((2, len(out)), np.int32), np.array([1, 1]), 2)


@built
@pytest.mark.parametrize("seed", range(3))
def test_fuzz_random_configurations_never_crash(seed):
    """Random stacks of random frames (in range or not, counts up to the int32 limits) fed to the
    engine: a mask or a ValueError, never a crash (the sanitizer job runs this too)."""
    rng = np.random.default_rng(seed)
    machine = compile_machine(FIXTURES[rng.integers(len(FIXTURES))])[1]
    vocab = small_vocab(seed)
    mod, n = native._module(), np.array([d.n_states for d in machine.dfas])
    engine = mod.build(tuple(compiled_machine(machine).arrays().values()), native.native_trie(vocab))
    out = np.zeros((vocab.vocab_size + 31) // 32, dtype=np.int32)
    for _ in range(200):
        k = int(rng.integers(1, 5))
        sizes = rng.integers(1, 6, size=k)
        a = rng.integers(-1, len(n) + 1, size=sizes.sum())
        s = rng.integers(-1, n[np.clip(a, 0, len(n) - 1)] + 1)
        c = rng.choice([-2, -1, 0, 1, 5, 2**30, 2**31 - 1], size=sizes.sum())
        frames = np.stack([a, s, c], axis=1).astype(np.int32)
        offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        stacks = tuple(tuple(tuple(f) for f in frames[lo:hi].tolist()) for lo, hi in zip(offset[:-1], offset[1:]))
        for args in ((frames, offset), (stacks, None)):  # (the layout's arrays; the machine's tuples)
            try:
                mod.fill(engine, *args, out)
            except ValueError:
                pass
    for bad in ((), ((),), (((0,),),), (((0, "x"),),), (((0, 2**40),),), [((0, 0),)], (((0, 0, 0, 0),),)):
        if bad != ():
            with pytest.raises(ValueError):
                mod.fill(engine, bad, None, out)


def test_engine_selection(monkeypatch):
    monkeypatch.setenv("INFERLAB_ENGINE", "python")
    assert native.requested() == "python" and native.in_use() == "python"
    monkeypatch.setenv("INFERLAB_ENGINE", "fortran")
    with pytest.raises(InferlabError, match="INFERLAB_ENGINE"):
        native.requested()
    monkeypatch.delenv("INFERLAB_ENGINE")
    assert native.requested() == "native"  # the default: native where built, else python
    assert native.in_use() == ("native" if native.built() else "python")
    monkeypatch.setenv("INFERLAB_ENGINE", "native")
    assert native.in_use() == ("native" if native.built() else "python")


def test_fallback_says_so_once_at_the_first_mask(monkeypatch, capsys):
    """Where native masks are asked for and not built: one stderr line at the first mask, not
    at import, and masks equal the Python engine's."""
    monkeypatch.setattr(native, "built", lambda: False)
    monkeypatch.setattr(native, "_notice", type(native._notice)())
    monkeypatch.setenv("INFERLAB_ENGINE", "native")
    machine = compile_machine(TREE)[1]
    vocab = small_vocab(0)
    g = StackGrammar(machine, vocab)  # (INFERLAB_ENGINE asks for native)
    assert g.engine == "python" and capsys.readouterr().err == ""
    g.allowed_ids(g.initial_state())
    g.allowed_ids(g.advance(g.initial_state(), vocab.token_bytes.index(b"{")))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Python engine" in err
    # the environment kept whole: under .ci/sanitize.sh the child needs LD_PRELOAD's sanitizer runtimes
    out = subprocess.run([sys.executable, "-c", "import inferlab.constrain.stack"], capture_output=True, text=True,
                         env={**os.environ, "INFERLAB_ENGINE": "native", "PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0 and out.stderr == ""


@built
def test_engines_are_freed_with_their_grammars_and_splits_with_the_owner():
    import gc

    from inferlab.constrain.caches import CACHES

    before = native._module().engines()
    vocab = small_vocab(2)
    for schema in FIXTURES[:4]:
        g = StackGrammar(compile_machine(schema)[1], vocab, engine="native", narrow_nodes=0)  # (shared shapes)
        g.allowed_ids(g.initial_state())
        assert native._module().engines() == before + 1
        del g
        gc.collect()
    assert native._module().engines() == before
    assert CACHES.sizes()["native_splits"] > 0
    CACHES.clear("masks")
    assert CACHES.sizes()["native_splits"] == 0


@built
@settings(max_examples=60, deadline=None)
@given(words=st.integers(1, 40), data=st.data())
def test_write_row_equals_the_python_write_and_clear(words, data):
    """The warm fill's one native call (write_row) against grammar._write and the cleared bits
    cleared in Python (fill_bitmask's readable path): dense rows and narrow ones (a tuple of ids)."""
    n = 32 * words
    ids = st.lists(st.integers(0, n - 1), max_size=12, unique=True).map(tuple)
    if data.draw(st.booleans(), label="narrow"):
        row = data.draw(ids, label="row ids")
    else:
        row = np.array(data.draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=words, max_size=words)), dtype=np.int32)
    cleared = data.draw(ids, label="cleared")
    want = np.full(words, 7, dtype=np.int32)
    _write(want, row)
    view = want.view(np.uint32)
    for t in cleared:
        view[t >> 5] &= ~np.uint32(1 << (t & 31))
    got = np.full(words, -1, dtype=np.int32)
    native.write_row()(got, row, cleared)
    assert np.array_equal(got, want)


@built
def test_write_row_refuses_bad_input_before_writing():
    write_row, out = native.write_row(), np.full(4, 5, dtype=np.int32)
    row = np.arange(4, dtype=np.int32)
    for args, error in (((row, (128,)), ValueError), ((row, (-1,)), ValueError), (((128,), ()), ValueError),
                        ((row, ("a",)), TypeError), ((row[:3], ()), ValueError), ((row.astype(np.float32), ()), ValueError),
                        ((row, [1]), TypeError), (((1.5,), ()), TypeError)):
        with pytest.raises(error):
            write_row(out, *args)
        assert (out == 5).all()
    with pytest.raises(TypeError):
        write_row(out, row)
    with pytest.raises(ValueError):  # (read-only out)
        ro = out.copy()
        ro.flags.writeable = False
        write_row(ro, row, ())
