"""The stack grammar (constrain.stack) against independent oracles.

- Masks: at every step of a random token walk, the grammar's bitmask equals a brute-force walk
  of every token's bytes through a reference interpreter of the automata (sets of explicit
  stacks, written here from the call encoding of nfa.call_bytes, not from stack.py).
- Language: texts drawn from the flat regex of a non-recursive schema are accepted; texts the
  grammar generates parse as JSON and validate under jsonschema (with the format checker).
- Recursion has no depth cap: a 20-level nested instance is accepted and generated.
"""

import json
import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.constrain import regex as rx
from inferlab.constrain import token_split
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.schema import SchemaError, compile_grammar, compile_schema
from inferlab.constrain.stack import NARROW_NODES, StackGrammar, StackMachine, build_machine
from inferlab.constrain.vocab import Vocabulary
from oracles import ANY, LIST, MAX_REFUSED, RECURSIVE, SCHEMAS, STRINGS, TREE, recursive_schemas, bitmask_ids, key_state, random_walk, Reference, run_in_threads, sample, small_vocab, validator



@pytest.fixture(autouse=True)
def python_engine(monkeypatch):
    """These tests read the Python engine's own paths and caches (narrow walks, frame splits,
    kept walks): it is the reference, against a brute-force interpreter here, and the native
    engine is held to it bit for bit in test_native.py."""
    monkeypatch.setenv("INFERLAB_ENGINE", "python")


# Both ways to a mask: the Python walk of a narrow configuration, and the split (no Python walk).
MASK_PATHS = [NARROW_NODES, 0]


@pytest.mark.parametrize("warm", [0, 60], ids=["lazy", "warmed"])
@pytest.mark.parametrize("narrow", MASK_PATHS, ids=["python-walk", "split"])
@pytest.mark.parametrize("schema", RECURSIVE, ids=["tree", "list", "any"])
def test_masks_equal_brute_force_on_recursive_schemas(schema, narrow, warm):
    vocab = small_vocab(1)
    machine = build_machine(compile_grammar(schema))
    assert machine.uses_stack
    grammar = StackGrammar(machine, vocab, narrow_nodes=narrow)
    assert grammar.warm(math.inf, configs=warm) == warm  # (recursive: more configurations than that)
    walks_equal_brute_force_and_validate(grammar, schema, 12)


def walks_equal_brute_force_and_validate(grammar, schema, walks: int) -> None:
    """`walks` random walks of `grammar`, each mask checked against the brute force (random_walk's
    Reference); every finished text validates against `schema`, and some walk finishes."""
    ref, v, rng = Reference(grammar.machine), validator(schema), random.Random(0)
    finished = 0
    for _ in range(walks):
        text, done = random_walk(grammar, rng, ref)
        if done:
            finished += 1
            assert v.is_valid(json.loads(text)), text
    assert finished > 0


def compile_counted(counts, compile_):
    """compile_(), or None when the compiler refuses (counted: assert_few_refused bounds them)."""
    counts["drawn"] += 1
    try:
        return compile_()
    except SchemaError:
        counts["refused"] += 1
        return None


def grammar_or_counted(schema, counts, vocab):
    """The schema's StackGrammar over `vocab`, or None when the compiler refuses it (counted)."""
    return compile_counted(counts, lambda: StackGrammar(build_machine(compile_grammar(schema)), vocab))


def check_masks_and_soundness(schema, rng, vocab_seed, counts, *, stack: bool = False):
    """Two random walks on the compiled schema: every mask equals the brute force, and every
    finished text validates under jsonschema. `counts` tallies the draws and the refusals."""
    grammar = grammar_or_counted(schema, counts, small_vocab(vocab_seed, n=120))
    if grammar is None:
        return
    grammar.narrow_nodes = rng.choice(MASK_PATHS)
    grammar.warm(math.inf, configs=rng.choice([0, 1, 30]))  # masks built before the walk, or on it
    assert grammar.machine.uses_stack or not stack
    ref = Reference(grammar.machine)
    v = validator(schema)
    for _ in range(2):
        text, done = random_walk(grammar, rng, ref, max_tokens=30)
        if done:
            assert v.is_valid(json.loads(text)), (schema, text)  # soundness


# 25 draws by default, 150 with `pytest -m slow` (the default suite has a time budget). The
# default's few draws are derandomized (a fixed sample): on some seeds over half of 25 random
# draws are refused schemas, and assert_few_refused would fail for the sample, not the code.
@pytest.mark.parametrize("examples", [25, pytest.param(150, marks=pytest.mark.slow)])
def test_masks_equal_brute_force_on_generated_schemas(examples):
    counts = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=examples < 100,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(SCHEMAS, st.randoms(use_true_random=False))
    def prop(schema, rng):
        check_masks_and_soundness(schema, rng, 2, counts)

    prop()
    assert_few_refused(counts, examples)


# 15 draws keep the default suite in its time budget (a recursive draw costs ~0.1 s of walks);
# `pytest -m slow` draws 100. The default's are derandomized, as above.
@pytest.mark.parametrize("examples", [15, pytest.param(100, marks=pytest.mark.slow)])
def test_masks_equal_brute_force_on_generated_recursive_schemas(examples):
    counts = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=examples < 100,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(recursive_schemas(), st.randoms(use_true_random=False))
    def prop(schema, rng):
        check_masks_and_soundness(schema, rng, 10, counts, stack=True)

    prop()
    assert_few_refused(counts, examples)


def assert_few_refused(counts, examples):
    """At least `examples` draws reached the check, and at most MAX_REFUSED of them were refused."""
    assert counts["drawn"] >= examples, counts
    assert counts["refused"] <= MAX_REFUSED * counts["drawn"], counts


@pytest.mark.slow  # ~2 s cross-check of the two compile paths
def test_grammar_accepts_the_flat_regex_language():
    """Non-recursive schemas: whatever the flat regex matches with no repeated key (the flat
    regex cannot forbid repeats), the stack grammar accepts."""
    counts, examples = Counter(), 60

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.data_too_large])
    @given(SCHEMAS, st.randoms(use_true_random=False))
    def prop(schema, rng):
        both = compile_counted(counts, lambda: (compile_schema(schema), compile_grammar(schema)))
        if both is None:
            return
        flat, compiled = both
        machine = build_machine(compiled)
        ast = rx.parse(flat.regex)
        for _ in range(10):
            text = sample(ast, rng)
            assert machine.accepts(text) == (key_state(text.encode()) is not None), (schema, text)

    prop()
    assert_few_refused(counts, examples)


def nested_tree(depth):
    return {"v": depth % 10} if depth == 0 else {"v": depth % 10, "kids": [nested_tree(depth - 1)]}


def test_a_state_waiting_only_on_a_call_that_cannot_be_made_is_a_dead_end():
    """Automaton 1 calls itself before any byte: no text completes it. After "a", automaton 0
    waits on that call alone, so its closure holds no stack (closures leave out stacks whose top
    reads nothing and cannot end), and the row refuses every byte. Hand-derived, not read off
    the code: neither "a" nor "ax" is a text of the grammar."""
    m = StackMachine([compile_regex("a(?&1)"), compile_regex("(?&1)x")])
    assert m.productive == [False, False]
    after = m.walk(b"a")
    assert m.closure(after) == ()
    assert (m.row(after) == -1).all()
    assert not m.accepts("a") and not m.accepts("ax")


def test_productive_follows_calls_of_productive_automata_only():
    """Hand-derived: 0 calls 1 then accepts, 1 calls 2, 2 reads "b" and ends; 3 calls itself
    before any byte, and 4 reaches its end only through 3. Productive: 0, 1, 2, not 3, 4."""
    m = StackMachine([compile_regex("a(?&1)c"), compile_regex("(?&2)"), compile_regex("[b-d]+"),
                      compile_regex("(?&3)x"), compile_regex("y(?&3)|z(?&3)")])
    assert m.productive == [True, True, True, False, False]
    from inferlab.constrain.machine import _text_targets

    trans = np.full((2, 256), -1, dtype=np.int32)
    trans[0, ord("a"):ord("z") + 1] = 1   # one range: its target once
    trans[0, ord("0")] = 1                # the same target again, apart: kept (the search dedupes)
    trans[1, 0] = 0
    assert _text_targets(trans) == [[1, 1], [0]]


def test_recursion_has_no_depth_cap():
    machine = build_machine(compile_grammar(TREE))
    text = json.dumps(nested_tree(20), separators=(",", ":"))
    assert machine.accepts(text)
    assert not machine.accepts(text[:-1])
    assert not machine.accepts(text.replace('"v":0', '"v":10'))
    # token by token through the grammar: every token of the text is in its mask
    vocab = small_vocab(3)
    grammar = StackGrammar(machine, vocab)
    state = grammar.initial_state()
    lookup = {b: t for t, b in enumerate(vocab.token_bytes) if b}
    for byte in text.encode():
        t = lookup[bytes([byte])]
        assert t in bitmask_ids(grammar, state)
        state = grammar.advance(state, t)
    assert grammar.can_end(state) and vocab.eos_id in bitmask_ids(grammar, state)


def test_generation_reaches_deep_nesting():
    """Forcing '"kids":[' at every chance generates a 20-level instance that validates."""
    machine = build_machine(compile_grammar(TREE))
    vocab = small_vocab(4)
    grammar = StackGrammar(machine, vocab)
    lookup = {b: t for t, b in enumerate(vocab.token_bytes) if b}
    state, text = grammar.initial_state(), b""
    plan = [b'{"v":', b"7", b',"kids":['] * 20 + [b'{"v":', b"1", b"}"] + [b"]}"] * 20
    for piece in plan:
        t = lookup[piece]
        assert t in bitmask_ids(grammar, state), text
        state = grammar.advance(state, t)
        text += piece
    assert grammar.can_end(state)
    instance = json.loads(text)
    assert validator(TREE).is_valid(instance)
    depth = 0
    while "kids" in instance:
        instance, depth = instance["kids"][0], depth + 1
    assert depth == 20


def test_unconstrained_values_nest_without_limit():
    machine = build_machine(compile_grammar(ANY))
    deep = '{"x":' + "[" * 30 + '{"a":null}' + "]" * 30 + ',"y":[[[[1]]]]}'
    assert machine.accepts(deep)
    assert not machine.accepts('{"x":[[1]}')


def test_forced_bytes_and_eos():
    machine = build_machine(compile_grammar(TREE))
    grammar = StackGrammar(machine, small_vocab(5))
    assert grammar.forced_bytes(grammar.initial_state()) == b'{"v":'
    assert not grammar.can_end(grammar.initial_state())
    assert grammar.advance(grammar.initial_state(), grammar.eos_id) is None


def walk_pair(a, b, rng, steps=80):
    """Random token walk on grammar a; at every step b's mask must equal a's."""
    sa, sb = a.initial_state(), b.initial_state()
    for _ in range(steps):
        ids = bitmask_ids(a, sa)
        assert ids == bitmask_ids(b, sb)
        assert a.can_end(sa) == b.can_end(sb)
        ids.discard(a.eos_id)
        if not ids:
            return
        t = rng.choice(sorted(ids))
        sa, sb = a.advance(sa, t), b.advance(sb, t)
        assert sa is not None and sb is not None


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 15, "maxLength": 40},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 30}, "b": {"type": ["string", "null"], "minLength": 3, "maxLength": 12}},
     "required": ["a"]},
    {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 9}, "maxItems": 3},
])
def test_counted_strings_equal_unrolled(schema):
    """A counted automaton (the frame counts characters) against the unrolled flat DFA."""
    vocab = small_vocab(6)
    counted = StackGrammar(build_machine(compile_grammar(schema, count_min=2)), vocab)
    flat_compiled = compile_grammar(schema, count_min=10**9)
    assert any(counted.machine.counts) and not any(flat_compiled.counts)
    flat = StackGrammar(build_machine(flat_compiled), vocab)
    rng = random.Random(7)
    for _ in range(15):
        walk_pair(counted, flat, rng)


def test_counted_string_masks_at_every_count_equal_unrolled():
    """A string of maxLength 30 written one character at a time: at every count, the counted
    grammar's mask equals the unrolled flat DFA's. The tokens that cross its closing quote are at
    most 7 bytes and the longest token is 24, so its kept walks (_kept_walk) are shared by the
    counts that those 7 bytes cannot tell apart, and must part within 9 characters of the max."""
    pieces = [b'x"', b'xx",', b'xxx"}', b'xxxx",', b'xxxxx"}', b'xxxxxx",', b'",', b'"}', b'"b":"', b"x" * 24, b"x" * 5]
    toks = list(dict.fromkeys([bytes([b]) for b in range(256)] + pieces))
    vocab = Vocabulary(tuple(toks) + (b"",), eos_id=len(toks), special_ids=frozenset([len(toks)]))
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 30}, "b": {"type": "string"}},
              "required": ["a"]}
    counted = StackGrammar(build_machine(compile_grammar(schema, count_min=2)), vocab, narrow_nodes=0)
    flat = StackGrammar(build_machine(compile_grammar(schema, count_min=10**9)), vocab, narrow_nodes=0)
    assert any(counted.machine.counts) and not any(flat.machine.counts)
    sa, sb = counted.initial_state(), flat.initial_state()
    for t in [toks.index(bytes([b])) for b in b'{"a":"'] + [toks.index(b"x")] * 30 + [toks.index(b'"}')]:
        assert bitmask_ids(counted, sa) == bitmask_ids(flat, sb)
        sa, sb = counted.advance(sa, t), flat.advance(sb, t)
    assert counted.can_end(sa) and flat.can_end(sb)
    assert 0 < len(counted._kept) <= 13  # a kept walk per count of the last 10 or so, one for all before


def test_twin_automata_share_their_splits_and_counted_walks_exactly():
    """Strings of one character class with different bounds are twin automata (the same frames):
    one split and one counted walk serve all of them. The masks along random walks still equal
    the unrolled flat DFA's, where no automaton is counted or shared."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20},
                                               "b": {"type": "string", "minLength": 2, "maxLength": 5},
                                               "c": {"type": "string", "maxLength": 11}},
              "required": ["a", "b", "c"], "additionalProperties": False}
    vocab = small_vocab(6)
    counted = StackGrammar(build_machine(compile_grammar(schema, count_min=2)), vocab)
    m = counted.machine
    strings = [a for a in range(m.n_automata) if m.counts[a] is not None]
    assert len(strings) == 3 and {counted._twin(a) for a in strings} == {strings[0]}
    flat = StackGrammar(build_machine(compile_grammar(schema, count_min=10**9)), vocab)
    rng = random.Random(11)
    for _ in range(25):
        walk_pair(counted, flat, rng)


@pytest.mark.slow  # ~2-3 s; the fixed counted cases run by default
def test_counted_equals_unrolled_on_generated_schemas():
    counts, examples = Counter(), 40
    vocab = small_vocab(8, n=100)

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.data_too_large])
    @given(SCHEMAS, st.randoms(use_true_random=False))
    def prop(schema, rng):
        both = compile_counted(counts, lambda: (compile_grammar(schema, count_min=2),
                                                compile_grammar(schema, count_min=10**9)))
        if both is None:
            return
        counted_grammar, flat = (StackGrammar(build_machine(c), vocab) for c in both)
        for _ in range(3):
            walk_pair(counted_grammar, flat, rng, steps=30)

    prop()
    assert_few_refused(counts, examples)


def test_flat_schema_is_one_automaton():
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
    compiled = compile_grammar(closed)
    assert len(compiled.automata) == 1
    assert not build_machine(compiled).uses_stack
    # absent additionalProperties: extra keys, whose values nest without a bound, call the any-value automaton
    assert build_machine(compile_grammar({k: v for k, v in closed.items() if k != "additionalProperties"})).uses_stack


@pytest.mark.slow  # compiles a 1,000-member object and a dozen 40..100-member ones: ~10 s
def test_many_members_compile_in_blocks_exactly():
    """Objects over MEMBER_BLOCK members are compiled a block at a time (no RecursionError at
    1,000 optional properties); on 40..100 members the language equals the flat regex's."""
    import re
    from inferlab.constrain.schema import MEMBER_BLOCK
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(1000)}}
    machine = build_machine(compile_grammar(big))
    assert machine.accepts('{"p3":"a","p999":"b"}') and machine.accepts("{}")
    assert not machine.accepts('{"p999":"b","p3":"a"}') and not machine.accepts('{"p3":"a","p3":"a"}')
    rng = random.Random(0)
    for _ in range(12):
        n = rng.randint(MEMBER_BLOCK + 1, 100)
        props = {f"p{i}": {"type": "integer"} for i in range(n)}
        schema = {"type": "object", "properties": props,
                  "required": [p for p in props if rng.random() < 0.05]}
        if rng.random() < 0.5:
            schema["additionalProperties"] = {"type": "boolean"}
        if rng.random() < 0.3:
            schema["minProperties"] = 1
        machine = build_machine(compile_grammar(schema))
        flat = re.compile(compile_schema(schema).regex)
        for _ in range(30):
            keys = [k for k in props if k in schema["required"] or rng.random() < rng.choice([0, 0.03, 0.2])]
            if keys and rng.random() < 0.3:
                keys = keys[1:]
            obj = {k: 1 for k in keys}
            if rng.random() < 0.4:
                obj["zz"] = True
            text = json.dumps(obj, separators=(",", ":"))
            assert machine.accepts(text) == bool(flat.fullmatch(text)), (schema, text)


def split_equals_full_walk(grammar, rng, steps=25):
    """A random token walk: at every step the split mask (token_split) and the Python walk (where
    the configuration is narrow enough for it) equal one walk of the whole trie through the
    configurations (StackGrammar._walk_mask, the mask before the split)."""
    state = grammar.initial_state()
    budget = grammar.narrow_nodes
    for _ in range(steps):
        key = grammar.machine.mask_key(state[0], grammar.reach)
        full = grammar._walk_mask(key)
        narrow = grammar._narrow_mask(key)
        if isinstance(narrow, tuple):  # a narrow mask of few tokens is kept as their ids
            bits = np.zeros(len(full) * 32, dtype=bool)
            bits[list(narrow)] = True
            narrow = np.packbits(bits, bitorder="little").view(np.int32)
        assert narrow is None or np.array_equal(narrow, full)
        grammar.narrow_nodes = 0
        split = grammar._build_mask(key)
        grammar.narrow_nodes = budget
        assert np.array_equal(split, full)
        ids = np.flatnonzero(np.unpackbits(split.view(np.uint8), count=grammar.vocab_size, bitorder="little"))
        ids = [t for t in ids.tolist() if t != grammar.eos_id]
        if not ids:
            return
        nxt = grammar.advance(state, rng.choice(ids))
        if nxt is None:  # the written keys refuse it (resolved after the cached row)
            return
        state = nxt


@pytest.fixture(scope="module")
def qwen_vocab():
    from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed
    if not vocab_installed("qwen"):
        pytest.skip("qwen vocabulary not installed")
    return Vocabulary.from_tokenizer(load_vocab("qwen"))


@pytest.mark.slow
@pytest.mark.parametrize("schema", RECURSIVE, ids=["tree", "list", "any"])
def test_split_masks_equal_full_walk_at_qwen_on_recursive_schemas(schema, qwen_vocab):
    grammar = StackGrammar(build_machine(compile_grammar(schema)), qwen_vocab)
    for seed in range(3):
        split_equals_full_walk(grammar, random.Random(seed))
    assert any(f.keep is not None for f in grammar._frames.values())  # the split itself ran


@pytest.mark.slow
def test_split_masks_equal_full_walk_at_qwen_on_generated_schemas(qwen_vocab):
    counts, examples = Counter(), 15

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.data_too_large])
    @given(st.one_of(SCHEMAS, recursive_schemas()), st.randoms(use_true_random=False))
    def prop(schema, rng):
        grammar = grammar_or_counted(schema, counts, qwen_vocab)
        if grammar is None:
            return
        split_equals_full_walk(grammar, rng, steps=12)  # (the split's regions share their shapes)
        shared_splits_equal_unshared(grammar, 4, rng)

    prop()
    assert_few_refused(counts, examples)


def shared_splits_equal_unshared(grammar, states_per_automaton=None, rng=None):
    """Every (automaton, state), or a sample of them: the split with the regions' walks shared
    through one shape cache for the whole grammar equals the split walked alone (no shapes).
    States with a delta_base: their delta_frame equals it too. Returns (states with a region,
    shapes built, delta states)."""
    m, trie = grammar.machine, grammar.vocab.trie()
    shapes: dict = {}
    regions = deltas = 0
    for a in range(m.n_automata):
        trans = m.frame_table(a)
        if trans is None:
            continue
        states = list(range(m.dfas[a].n_states))
        if states_per_automaton is not None and len(states) > states_per_automaton:
            states = rng.sample(states, states_per_automaton)
        for s in states:
            alone = token_split.frame_tokens(trie, trans, m.exits(a), s, grammar.words)
            shared = token_split.frame_tokens(trie, trans, m.exits(a), s, grammar.words, shapes)
            assert np.array_equal(alone.accepted, shared.accepted), (a, s)
            assert (alone.keep is None) == (shared.keep is None), (a, s)
            assert alone.keep is None or np.array_equal(alone.keep, shared.keep), (a, s)
            regions += token_split.region(trans, s) is not None
            either = token_split.frame_tokens(trie, trans, m.exits(a), s, grammar.words, shapes,  # a cached
                split_of=lambda b: token_split.frame_tokens(trie, trans, m.exits(a), b, grammar.words))  # shape or a delta
            assert_derived_split(alone, either, (a, s))
            base = token_split.delta_base(trans, s)
            if base is not None:  # derived from the base's split: the same as walked alone
                split = token_split.frame_tokens(trie, trans, m.exits(a), base, grammar.words)
                delta = token_split.delta_frame(trie, trans, m.exits(a), s, base, split, grammar.words)
                assert_derived_split(alone, delta, (a, s))
                deltas += 1
    return regions, len(shapes), deltas


def assert_derived_split(alone, derived, where):
    """A split derived from another state's (delta_frame) against the state's walked alone: the
    same tokens decided inside the automaton, and context-dependent paths that hold all of its
    own (more is walked for naught, never wrong; None: the whole trie is walked)."""
    assert np.array_equal(alone.accepted, derived.accepted), where
    if derived.keep is not None:
        assert alone.keep is not None and np.isin(alone.keep, derived.keep).all(), where


@pytest.mark.parametrize("schema", [STRINGS, *RECURSIVE], ids=["strings", "tree", "list", "any"])
def test_shared_region_shapes_equal_unshared_splits(schema):
    regions, shapes, deltas = shared_splits_equal_unshared(StackGrammar(build_machine(compile_grammar(schema)), small_vocab(4)))
    if schema is STRINGS:
        assert shapes < regions  # string contents share one walk
        assert deltas > 0        # the states of "any key but a..g" are derived from the content loop


# fixed-length patterns, each used twice (an alphanumeric position reads 62 bytes: a wide state)
CHAINS = {"type": "object", "properties": {
    "a": {"type": "string", "pattern": "^[A-Za-z0-9]{6}$"}, "b": {"type": "string", "pattern": "^[A-Za-z0-9]{6}$"},
    "c": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9]{3}-[A-Za-z0-9]{2}$"}},
    "d": {"type": "string", "pattern": "^[A-Za-z0-9]{3}-[A-Za-z0-9]{2}$"}}, "required": ["a"]}


def test_fixed_length_chains_share_a_shape_per_position():
    """A fixed-length pattern's states form a chain with no loop: each position's region is the
    rest of the chain, a shape that the pattern's other uses share, and the splits through it
    equal those walked alone."""
    grammar = StackGrammar(build_machine(compile_grammar(CHAINS)), small_vocab(4))
    m = grammar.machine
    chained = [(a, s) for a in range(m.n_automata) if m.frame_table(a) is not None
               for s in range(m.dfas[a].n_states) if np.count_nonzero(m.frame_table(a)[s] >= 0) >= 62
               and token_split.region(m.frame_table(a), s) is not None]
    assert len(chained) >= 2 * (6 + 5)  # every alphanumeric position of both uses of both patterns
    regions, shapes, _ = shared_splits_equal_unshared(grammar)
    assert 0 < shapes < regions


@pytest.mark.parametrize("narrow", MASK_PATHS, ids=["python-walk", "split"])
def test_masks_equal_brute_force_through_chain_shapes(narrow):
    """Walks of CHAINS, whose frames take their chains' shapes: every mask equals the brute force,
    and every finished text validates."""
    grammar = StackGrammar(build_machine(compile_grammar(CHAINS)), small_vocab(2), narrow_nodes=narrow)
    walks_equal_brute_force_and_validate(grammar, CHAINS, 8)


@pytest.mark.parametrize("kept_py_nodes", [0, 10**9], ids=["numpy-levels", "python-nodes"])
@pytest.mark.parametrize("schema", RECURSIVE + [CHAINS], ids=["tree", "list", "any", "chains"])
def test_keep_walks_in_numpy_and_in_python_equal_brute_force(schema, kept_py_nodes, monkeypatch):
    """Every keep walk (a configuration's context-dependent tokens) level by level in numpy
    (token_split.walk_nodes) or node by node in Python (kept_tokens): at the small vocabularies
    of these tests the default walks all in Python, so numpy's is forced here. Masks equal the
    brute force, and the path forced is the one taken."""
    import inferlab.constrain.grammar as stack_module
    monkeypatch.setattr(stack_module, "KEPT_PY_NODES", kept_py_nodes)
    calls = Counter()
    for name in ("walk_nodes", "kept_tokens"):
        def counted(*args, _f=getattr(token_split, name), _name=name):
            calls[_name] += 1
            return _f(*args)
        monkeypatch.setattr(token_split, name, counted)
    grammar = StackGrammar(build_machine(compile_grammar(schema)), small_vocab(3), narrow_nodes=0)
    walks_equal_brute_force_and_validate(grammar, schema, 8)
    assert calls["walk_nodes" if kept_py_nodes == 0 else "kept_tokens"] > 0
    assert calls["kept_tokens" if kept_py_nodes == 0 else "walk_nodes"] == 0


# 20 draws by default, 100 with `pytest -m slow` (the default suite has a time budget); the
# default's are derandomized, as above.
@pytest.mark.parametrize("examples", [20, pytest.param(100, marks=pytest.mark.slow)])
def test_shared_region_shapes_equal_unshared_splits_on_generated_schemas(examples):
    counts = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=examples < 100,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.one_of(SCHEMAS, recursive_schemas()))
    def prop(schema):
        grammar = grammar_or_counted(schema, counts, small_vocab(5, n=120))
        if grammar is not None:
            shared_splits_equal_unshared(grammar)

    prop()
    assert_few_refused(counts, examples)


@pytest.mark.slow
def test_shared_region_shapes_equal_unshared_splits_at_qwen_on_strings(qwen_vocab):
    regions, shapes, deltas = shared_splits_equal_unshared(StackGrammar(build_machine(compile_grammar(STRINGS)), qwen_vocab),
                                                           12, random.Random(0))
    assert regions > 0


@pytest.mark.parametrize("seed", range(4))
def test_context_dependent_paths_equal_a_brute_force_over_the_trie(seed):
    """token_split._paths against its definition, node by node: the seeds' children by an exit
    byte with all their descendants, and the ancestors-or-self of the seeds with such a child."""
    trie = small_vocab(seed, n=400).trie()
    rng = random.Random(seed)
    levels, offsets = trie.levels, token_split.level_offsets(trie)
    kids = {}   # global id -> its children's global ids, and each one's byte
    up = {}     # global id -> its parent's global id
    for d in range(len(levels) - 1):
        for n in range(len(levels[d].byte)):
            lo, k = int(levels[d].child_start[n]), int(levels[d].child_count[n])
            kids[offsets[d] + n] = [(offsets[d + 1] + c, int(levels[d + 1].byte[c])) for c in range(lo, lo + k)]
            for c in range(lo, lo + k):
                up[offsets[d + 1] + c] = offsets[d] + n
    for _ in range(20):
        exit_bytes = np.array([[rng.random() < 0.3 for _ in range(256)] for _ in range(3)])
        seeds, want = [], set()
        for d in range(min(len(levels) - 1, 4)):
            nodes = np.array(sorted(rng.sample(range(len(levels[d].byte)), min(3, len(levels[d].byte)))), np.int64)
            rows = np.array([rng.randrange(3) for _ in nodes], np.int64)
            seeds.append((nodes, rows))
            for n, r in zip(nodes.tolist(), rows.tolist()):
                hit = [c for c, b in kids.get(offsets[d] + n, []) if exit_bytes[r, b]]
                stack = list(hit)
                while stack:                      # descendants-or-self
                    g = stack.pop()
                    want.add(g)
                    stack += [c for c, _ in kids.get(g, [])]
                g = offsets[d] + n if hit else None
                while g is not None:              # ancestors-or-self
                    want.add(g)
                    g = up.get(g)
        got = token_split._paths(trie, seeds, exit_bytes)
        if got is None:
            assert len(want) > offsets[-1] // token_split.DENSE_SHARE
        else:
            assert got.tolist() == sorted(want)


def test_warm_builds_the_masks_nearest_the_start_breadth_first():
    """A warm-up builds the masks of the configurations nearest the start by bytes (their
    distances found here by a breadth-first walk over machine.row; configurations compared by
    their stacks, since masks intern others in between), and warm(configs=n) replays a timed
    warm-up that did n."""
    vocab = small_vocab(1)
    machine = build_machine(compile_grammar(TREE))
    grammar = StackGrammar(machine, vocab)
    assert grammar.warmed == 0 and grammar.stats().narrow_masks + grammar.stats().split_masks == 0
    assert grammar.warm(0.0) == 0
    depth = {machine.start: 0}
    order = [machine.start]
    for cid in order:  # (grows as it goes)
        for nxt in set(machine.row(cid).tolist()) - {-1}:
            if nxt not in depth and depth[cid] < 150:
                depth[nxt] = depth[cid] + 1
                order.append(nxt)
    distance = {machine.configs[machine.mask_key(c, grammar.reach)]: d for c, d in depth.items()}

    def fresh(**kw):
        return StackGrammar(machine.unbuilt(), vocab, **kw)

    def built(g):
        return {g.machine.configs[k] for k in g._masks}

    for g in (fresh(warm_ms=2), fresh(warm_ms=0.2)):
        assert 1 <= len(g._masks) <= g.warmed  # (configurations may share a mask key, or a narrow walk's top)
        done = built(g)
        far = max(distance[c] for c in done)  # (KeyError: a warmed configuration beyond 150 bytes)
        assert far < 150 and {c for c, d in distance.items() if d < far} <= done
        again = fresh()
        assert again.warm(math.inf, configs=g.warmed) == g.warmed and built(again) == done


@pytest.mark.parametrize("narrow", MASK_PATHS, ids=["python-walk", "split"])
def test_a_frame_split_serves_every_grammar_over_the_vocabulary(monkeypatch, narrow):
    """A frame split is cached per vocabulary by its automaton's digest (token_split.frame_cache):
    a later schema holding an earlier one's automaton reuses its splits instead of walking them
    again, but not where the automaton's exits differ (a string that an array's `,` or `]`
    follows, then one that an object's `,` or `}` follows). Every schema's masks equal the brute
    force at every step, with narrow masks walked in Python or not."""
    vocab = small_vocab(9)
    rng = random.Random(3)
    walked = []
    frame_tokens = token_split.frame_tokens
    monkeypatch.setattr(token_split, "frame_tokens", lambda *a, **k: walked.append(a[3]) or frame_tokens(*a, **k))
    reused = 0
    for schema in ({"type": "array", "items": {"type": "string"}},
                   {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                   {"type": "array", "items": {"type": "integer"}},
                   {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   STRINGS, {"type": "array", "items": STRINGS}):
        grammar = StackGrammar(build_machine(compile_grammar(schema)), vocab, narrow_nodes=narrow)
        ref = Reference(grammar.machine)
        walked.clear()
        for _ in range(6):
            random_walk(grammar, rng, ref)
        reused += len(grammar._frames) - len(walked)
    assert reused > 0


# One vocabulary for every draw, so that the frame splits cached by digest carry from schema to
# schema: a digest missing something a split depends on would hand a wrong split to a later one.
@pytest.mark.parametrize("examples", [20, pytest.param(100, marks=pytest.mark.slow)])
def test_masks_equal_brute_force_with_splits_shared_across_generated_schemas(examples):
    vocab = small_vocab(12, n=120)
    counts = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=examples < 100,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.one_of(SCHEMAS, recursive_schemas()), st.randoms(use_true_random=False))
    def prop(schema, rng):
        grammar = grammar_or_counted(schema, counts, vocab)
        if grammar is not None:
            grammar.narrow_nodes = rng.choice(MASK_PATHS)  # (masks by frame splits alone, or narrow ones too)
            ref = Reference(grammar.machine)
            for _ in range(2):
                random_walk(grammar, rng, ref, max_tokens=30)

    prop()
    assert_few_refused(counts, examples)
    assert len(token_split.frame_cache(vocab.trie())) > 0


def masks_along_a_walk(grammar, seed: int, steps: int = 25) -> list[tuple[int, ...]]:
    """The allowed ids at each step of a random walk (tokens drawn by `seed`)."""
    rng = random.Random(seed)
    state, out = grammar.initial_state(), []
    for _ in range(steps):
        ids = sorted(bitmask_ids(grammar, state) - {grammar.vocab.eos_id})
        out.append(tuple(ids))
        if not ids:
            break
        state = grammar.advance(state, rng.choice(ids))
    return out


def test_grammars_in_threads_share_the_process_caches_safely(monkeypatch):
    """Different grammars may run in different threads (one grammar and its matchers in one
    thread at a time): what they share, the compile's small and length-bounded DFAs and the
    vocabulary's shapes and frame splits, is locked. Four threads compile and walk the same
    schemas with those caches shrunk so that they evict all the time, thread switches forced
    often: every mask equals the one a lone thread reads, and no thread raises. (The race the
    locks close is checked directly in test_lru: here it is the masks.)"""
    from inferlab.constrain import stack as stack_module
    from inferlab.constrain.schema import algebra
    from inferlab.constrain.stack import compile_machine

    schemas = [STRINGS, TREE, LIST, {"type": "array", "items": {"type": "string", "maxLength": 5}},
               {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 4},
                                                 "b": {"type": "string", "maxLength": 3}}}]
    cases = [(i, seed) for i in range(len(schemas)) for seed in range(2)]
    alone = {(i, seed): masks_along_a_walk(StackGrammar(compile_machine(schemas[i])[1], small_vocab(4)), seed)
             for i, seed in cases}
    monkeypatch.setattr(stack_module._SMALL_DFAS, "limit", 2)
    monkeypatch.setattr(algebra._BOUNDED, "limit", 1)
    monkeypatch.setattr(token_split, "SHAPE_CACHE_BYTES", 50_000)
    monkeypatch.setattr(token_split, "FRAME_CACHE_BYTES", 50_000)
    vocab = small_vocab(4)  # (a new trie: its caches made with the limits above)
    got = {}

    def run(k: int) -> None:
        for i, seed in cases[k:] + cases[:k]:
            grammar = StackGrammar(compile_machine(schemas[i])[1], vocab)
            got[k, i, seed] = masks_along_a_walk(grammar, seed)

    errors = run_in_threads(run, interval=1e-5)
    assert not errors, errors
    assert len(got) == 4 * len(cases) and all(masks == alone[i, seed] for (_, i, seed), masks in got.items())


def test_region_search_is_breadth_first_by_byte_as_a_plain_walk_of_the_rows():
    """token_split._bfs (successor lists per block of states) against a walk of the rows byte by
    byte, level by level: random tables of up to 300 states (several blocks), any cap."""
    def plain(trans, state, cap):
        order, seen, level = [state], {state}, [state]
        while level and len(order) < cap:
            nxt = []
            for q in level:
                for b in range(256):
                    t = int(trans[q, b])
                    if b != token_split.QUOTE and t >= 0 and t not in seen and len(order) < cap:
                        seen.add(t)
                        order.append(t)
                        nxt.append(t)
            level = nxt
        return order
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        trans = np.where(rng.random((n, 256)) < rng.random() ** 3, rng.integers(0, n, (n, 256)), -1).astype(np.int32)
        for state in rng.integers(0, n, 3).tolist():
            cap = int(rng.integers(1, 80))
            assert token_split._bfs(trans, state, cap).tolist() == plain(trans, state, cap)
