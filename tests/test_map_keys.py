"""Map keys in the stack grammar: no object repeats a key, and min/maxProperties on maps are exact.

Oracles, none of them constrain.keys or stack.py's map code:
- masks: at every step of random token walks, the bitmask equals a brute force over every token:
  test_stack's reference interpreter of the automata (with map frames, written from the
  CompiledGrammar.maps contract) and a whole-text rescan for repeated keys (a regex lexer and
  json.loads) give the survivors; a survivor is allowed iff a completion exists, found by a
  depth-first search over a small alphabet (run for every refused survivor and a sample of the
  allowed ones: the search is the slow part);
- generation: outputs of inferlab.model.generate under the grammar parse with a parser that
  raises on a repeated key, and validate under jsonschema (format checker on);
- counts: instances with 0..4 keys against jsonschema;
- the CLI: `inferlab schema check` exits 0/1 as jsonschema decides on a repeated-key file.
"""

import json
import random

import numpy as np
import pytest

from inferlab.cli import main
from inferlab.constrain import vocabulary_of
from inferlab.constrain.matcher import MatcherMask
from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.stack import StackGrammar, build_machine
from inferlab.constrain.vocab import Vocabulary
from inferlab.model.generate import generate
from inferlab.model.tokenizer_loaders import load_vocab
from test_schema_generate import ClosingBiasedModel
from test_schema_properties import validator
from test_stack import Reference, bitmask_ids, key_state

INT = {"type": "integer"}
DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
MAPS = {
    "max3": {"additionalProperties": INT, "maxProperties": 3},
    "min2max3": {"additionalProperties": DIGIT, "minProperties": 2, "maxProperties": 3},
    "pattern-finite-min1": {"patternProperties": {"^[ab]$": DIGIT}, "additionalProperties": False, "minProperties": 1},
    "pattern-finite": {"patternProperties": {"^[ab]$": INT}, "additionalProperties": False},
    "pattern-finite-all": {"patternProperties": {"^(a|bc)$": {"type": "null"}}, "additionalProperties": False,
                           "minProperties": 2},
    # 2 + 2 + 4 + 8 + 16 keys: "c" runs out along written keys alone (StackMachine.keys_plenty)
    "pattern-finite-plenty": {"patternProperties": {"^(ca|cb|[ab]{1,4})$": DIGIT}, "additionalProperties": False},
    "pattern-prefix-max2": {"patternProperties": {"^a": DIGIT}, "additionalProperties": False, "maxProperties": 2},
    "declared-and-extra": {"type": "object", "properties": {"x": DIGIT}, "required": ["x"],
                           "additionalProperties": {"type": "boolean"}, "maxProperties": 2},
    "extra-not-declared": {"type": "object", "properties": {"a": {"type": "null"}},
                           "additionalProperties": DIGIT},
    "nested": {"additionalProperties": {"additionalProperties": DIGIT, "maxProperties": 2}, "maxProperties": 2},
    "unconstrained": {"type": "object", "properties": {"x": True}, "required": ["x"]},
}


def key_vocab(seed: int) -> Vocabulary:
    """Every single byte, plus JSON-ish pieces over a few key letters (so walks try to repeat
    keys), some closing a key and opening the next, some holding a key twice."""
    rng = random.Random(seed)
    pieces = ['"a"', '"b"', '"a":', ',"a":', ',"b":', '"a":1,"a"', '"a":1,"b"', 'a":', 'b":', '":1,"',
              '":"a","', '{"a":1,"a', '":null,"', '{"', '":', '",', '"}', 'null', 'true', '"c":', 'c":', ',"bc":']
    pieces += ["".join(rng.choice('{}":,01abc') for _ in range(rng.randint(2, 6))) for _ in range(150)]
    toks = list(dict.fromkeys([bytes([b]) for b in range(256)] + [p.encode() for p in pieces]))
    eos = len(toks)
    return Vocabulary(tuple(toks) + (b"",), eos_id=eos, special_ids=frozenset([eos]))


# closers first, so a completion is found early; continuation bytes end a split character
ALPHABET = b'"}]0:,{[abcxnultrefs\x80\x90\xa0'


class Oracle:
    """Allowed tokens: the reference walk survives, no key repeats, and a completion exists
    (searched byte by byte over ALPHABET, memoized on what can matter)."""

    def __init__(self, ref, vocab):
        self.ref, self.vocab = ref, vocab
        self.memo = {}

    def live(self, stacks, text, depth=40):
        if not stacks:
            return False
        ks = key_state(text)
        if ks is None:
            return False
        key = (frozenset(stacks), ks)
        if key not in self.memo:
            self.memo[key] = False  # a loop back here adds nothing
            self.memo[key] = self.ref.can_end(stacks) or depth > 0 and any(
                self.live(self.ref.step(stacks, b), text + bytes([b]), depth - 1) for b in ALPHABET)
        return self.memo[key]

    def check(self, ids, stacks, text, rng, sample=12):
        """The mask `ids` against the brute force: every token whose reference walk survives with
        no repeated key is allowed iff a completion exists (checked for every refused survivor
        and for `sample` allowed tokens)."""
        survivors = {t for t, data in enumerate(self.vocab.token_bytes)
                     if data and t not in self.vocab.special_ids
                     and self.ref.walk(stacks, data) and key_state(text + data) is not None}
        assert ids - {self.vocab.eos_id} <= survivors, (text, sorted(ids - survivors))
        for t in survivors - ids:
            data = self.vocab.token_bytes[t]
            assert not self.live(self.ref.walk(stacks, data), text + data), (text, data)
        for t in rng.sample(sorted(ids - {self.vocab.eos_id}), min(sample, len(ids) - 1)):
            data = self.vocab.token_bytes[t]
            assert self.live(self.ref.walk(stacks, data), text + data), (text, data)
        assert (self.vocab.eos_id in ids) == (self.ref.can_end(stacks) and key_state(text) is not None), text


def walk_against_oracle(schema, seed, walks=5, max_tokens=30):
    compiled = compile_grammar(schema)
    machine = build_machine(compiled)
    vocab = key_vocab(seed)
    grammar = StackGrammar(machine, vocab)
    oracle = Oracle(Reference(machine), vocab)
    rng = random.Random(seed)
    v = validator(schema)
    finished = 0
    for _ in range(walks):
        state, stacks, text = grammar.initial_state(), {((0, machine.dfas[0].start),)}, b""
        for _ in range(max_tokens):
            ids = bitmask_ids(grammar, state)
            assert ids, f"dead end after {text!r}"
            oracle.check(ids, stacks, text, rng)
            if vocab.eos_id in ids and (len(ids) == 1 or rng.random() < 0.2):
                instance = json.loads(text, object_pairs_hook=no_repeats)
                assert v.is_valid(instance), text
                finished += 1
                break
            choices = sorted(ids - {vocab.eos_id})
            closing = [t for t in choices if any(c in vocab.token_bytes[t] for c in b'"}:,0123456789')]
            t = rng.choice(closing if closing and rng.random() < 0.7 else choices)  # so walks end
            state = grammar.advance(state, t)
            stacks = oracle.ref.walk(stacks, vocab.token_bytes[t])
            text += vocab.token_bytes[t]
    return finished


def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"repeated key in {pairs}")
    return dict(pairs)


FAST = ("max3", "pattern-finite-min1", "pattern-finite-all", "pattern-finite-plenty", "declared-and-extra", "unconstrained")


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in MAPS])
def test_masks_equal_brute_force_on_maps(name):  # the slow ones: ~5 s together
    assert walk_against_oracle(MAPS[name], seed=len(name)) > 0


def test_maps_are_map_automata_and_finite_keys_are_found():
    for name in ("max3", "min2max3", "pattern-finite", "pattern-prefix-max2", "declared-and-extra"):
        assert any(compile_grammar(MAPS[name]).maps), name
    finite = build_machine(compile_grammar(MAPS["pattern-finite"]))
    assert finite.key_margin == 2 - 1  # keys "a" and "b", less max(1, minProperties 0)
    assert build_machine(compile_grammar(MAPS["pattern-finite-plenty"])).key_margin == 2 + 2 + 4 + 8 + 16 - 1
    prefix = build_machine(compile_grammar(MAPS["pattern-prefix-max2"]))
    assert finite.finite_maps and not prefix.finite_maps


def instances(n_keys):
    return {f"k{i}": i for i in range(n_keys)}


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("schema", [
    {"additionalProperties": INT, "maxProperties": 3},
    {"additionalProperties": INT, "minProperties": 2},
    {"additionalProperties": INT, "minProperties": 1, "maxProperties": 2},
    {"patternProperties": {"^k": INT}, "additionalProperties": False, "minProperties": 2, "maxProperties": 3},
    {"type": "object", "properties": {"k0": INT}, "required": ["k0"], "additionalProperties": INT, "maxProperties": 3},
])
def test_property_counts_on_maps_are_exact(schema):
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    for n in range(6):
        text = compact(instances(n))
        assert machine.accepts(text) == v.is_valid(instances(n)), (schema, text)
    assert not machine.accepts('{"k0":1,"k0":2}') and not machine.accepts('{"k0":1,"k1":2,"k0":3}')


def test_max_properties_map_compiles_with_no_false_reason():
    machine = build_machine(compile_grammar({"additionalProperties": INT, "maxProperties": 3}))
    assert [machine.accepts(compact(instances(n))) for n in range(5)] == [True] * 4 + [False]
    two = build_machine(compile_grammar({"additionalProperties": INT, "minProperties": 2}))
    assert [two.accepts(compact(instances(n))) for n in range(4)] == [False, False, True, True]


def test_too_few_keys_for_min_properties_is_unsatisfiable():
    schema = {"patternProperties": {"^[ab]$": INT}, "additionalProperties": False, "minProperties": 3}
    with pytest.raises(SchemaError, match="minProperties"):
        compile_grammar({"type": "object", **schema})
    machine = build_machine(compile_grammar(schema))  # without "type", the other types are valid
    for value in ("x", 1, None, [], {"a": 1}):
        assert machine.accepts(compact(value)) == validator(schema).is_valid(value), value


def test_repeated_keys_are_rejected_however_spelled():
    machine = build_machine(compile_grammar({"type": "object", "properties": {"x": True}}))
    assert machine.accepts('{"x":{"a":1,"b":{"a":2}}}')
    assert not machine.accepts('{"x":{"a":1,"b":2,"a":3}}')
    assert not machine.accepts('{"x":{"a":1,"\\u0061":2}}')
    assert not machine.accepts('{"x":[{"a":1},{"b":1,"b":1}]}')


@pytest.fixture(scope="module")
def tok512():
    return load_vocab("512")


def generate_checked(schema, tok, seeds: int, max_new_tokens: int, noise: float = 0.0) -> int:
    """Generate under the grammar; every complete output has no repeated key and validates.
    Returns how many were complete. noise: fixed random logits added, for other outputs."""
    grammar = StackGrammar(build_machine(compile_grammar(schema)), vocabulary_of(tok))
    mask = MatcherMask(grammar)
    v = validator(schema)
    model = ClosingBiasedModel(tok)
    model.logits = model.logits + np.random.default_rng(0).normal(0, noise, model.logits.shape).astype(np.float32)
    complete = 0
    for seed in range(seeds):
        g = generate(model, tok, "", mask=mask, max_new_tokens=max_new_tokens, seed=seed)
        if g.complete:
            complete += 1
            assert v.is_valid(json.loads(g.text, object_pairs_hook=no_repeats)), g.text
    return complete


@pytest.mark.parametrize("name", ["max3", "min2max3", "pattern-finite-min1", "nested", "unconstrained"])
def test_generation_never_repeats_a_key(name, tok512):
    assert generate_checked(MAPS[name], tok512, seeds=12, max_new_tokens=80) >= 6


def test_schema_check_refuses_a_file_that_repeats_a_key(tmp_path, capsys):
    """An instance file whose object repeats a key is ambiguous JSON (parsers keep the first, the
    last, or refuse): one line naming the key, exit 2, never a guess. The grammar itself never
    accepts a text that repeats a key."""
    schema = {"additionalProperties": INT, "maxProperties": 1}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    for text in ('{"a":1,"a":2}', '{"a":1,"b":2,"a":3}'):
        (tmp_path / "i.json").write_text(text)
        assert main(["schema", "check", str(tmp_path / "s.json"), str(tmp_path / "i.json")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and 'the key "a" is repeated in one object' in err[0]
    assert not build_machine(compile_grammar(schema)).accepts('{"a":1,"a":2}')  # the text itself repeats


@pytest.mark.slow  # many seeds of generation: ~10 s
@pytest.mark.parametrize("name", list(MAPS))
def test_generation_never_repeats_a_key_many_seeds(name, tok512):
    assert generate_checked(MAPS[name], tok512, seeds=100, max_new_tokens=120, noise=1.0) >= 40  # measured 47..100


def test_maps_with_flexible_whitespace():
    finite = {"patternProperties": {"^[ab]$": INT}, "additionalProperties": False, "maxProperties": 2}
    machine = build_machine(compile_grammar(finite, whitespace="flexible"))
    assert machine.accepts('{ "a" : 1 ,\n "b":2 }') and machine.accepts("{ }")
    assert not machine.accepts('{ "a" : 1 , "a" : 2 }') and not machine.accepts('{"a":1, "b":2, "c":3}')
    grammar = StackGrammar(machine, key_vocab(0))
    state = grammar.advance(grammar.initial_state(), ord("{"))
    for piece in b'"a":1 , "b" :2':
        state = grammar.advance(state, piece)
    assert bitmask_ids(grammar, state) & {ord(","), ord(" ")} == {ord(" ")}  # no key is left: no comma


@pytest.mark.parametrize("name", ["max3", "unconstrained", "pattern-finite-min1"])
def test_masks_kept_per_state_equal_fresh_masks(name):
    """fill_bitmask keeps the tokens the written keys refuse per state: a state seen again gets
    the row and those tokens from the cache; they equal a fresh grammar's mask of that state."""
    machine = build_machine(compile_grammar(MAPS[name]))
    vocab = key_vocab(3)
    grammar = StackGrammar(machine, vocab)
    rng = random.Random(3)
    seen = []
    for _ in range(6):
        state = grammar.initial_state()
        for _ in range(30):
            ids = bitmask_ids(grammar, state)
            seen.append((state, ids))
            choices = sorted(ids - {vocab.eos_id})
            if not choices:
                break
            quoting = [t for t in choices if b'"' in vocab.token_bytes[t]]  # keys get written, and repeated
            state = grammar.advance(state, rng.choice(quoting if quoting and rng.random() < 0.7 else choices))
    assert any(cleared for _, cleared in grammar._cleared.values())  # the written keys refused some
    for state, ids in seen:
        assert bitmask_ids(grammar, state) == ids
        assert bitmask_ids(StackGrammar(machine, vocab), state) == ids


@pytest.mark.parametrize("text", [b'{"ca":1,"cb":2,', b'{"ca":1,"cb":2,"', b'{"ca":1,"c', b'{"cb":1,"a":2,"c'])
def test_keys_running_out_along_written_keys_with_plenty_left(text):
    """Keys beginning with c run out once "ca" and "cb" are written, while the map has many keys
    left: every allowed token is checked against the brute force at these states."""
    machine = build_machine(compile_grammar(MAPS["pattern-finite-plenty"]))
    vocab = key_vocab(3)
    grammar = StackGrammar(machine, vocab)
    state = machine.feed(grammar.initial_state(), text)
    assert state is not None and machine.keys_plenty(state[1], grammar.reach)
    oracle = Oracle(Reference(machine), vocab)
    ids = bitmask_ids(grammar, state)
    oracle.check(ids, oracle.ref.walk({((0, machine.dfas[0].start),)}, text), text, random.Random(0), sample=len(ids))
