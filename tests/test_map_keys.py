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

import pytest

from inferlab.cli import main
from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.stack import StackGrammar, build_machine
from inferlab.model.tokenizer_loaders import load_vocab
from oracles import bitmask_ids, generate_checked, key_vocab, Oracle, Reference, validator, walk_against_oracle

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
