"""Array items counted by their frame (arrays.repeated_items): maxItems/minItems >= COUNT_MIN of a
call-free item are one counted automaton instead of the item unrolled. Checked against
jsonschema on arrays of lengths around the bounds, and the masks along random token walks
against those of the same schema with its items unrolled (the grammar before counting)."""

import json
import random

import pytest

from inferlab.constrain.schema import compile_grammar
from inferlab.constrain.stack import StackGrammar, build_machine, compile_machine
from oracles import bitmask_ids, small_vocab, validator

HEX_IDS = {"type": "array", "items": {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"}, "maxItems": 1000}


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
@pytest.mark.parametrize("schema,item", [
    (HEX_IDS, "a1" * 12),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 10}, 7),
    ({"type": "array", "items": {"enum": [1, "x"]}, "minItems": 9, "maxItems": 12}, "x"),
])
def test_lengths_around_the_bounds_agree_with_jsonschema(schema, item, whitespace):
    compiled, machine = compile_machine(schema, whitespace=whitespace)
    assert any(compiled.counts), "the items are counted by a frame"
    v = validator(schema)
    for n in (0, 1, 8, 9, 10, 11, 12, 13, 999, 1000, 1001):
        doc = [item] * n
        sep = (", ", ": ") if whitespace == "flexible" else (",", ":")
        assert machine.accepts(json.dumps(doc, separators=sep)) == v.is_valid(doc), n
    assert not machine.accepts(json.dumps(["z" * 24], separators=(",", ":")))


def test_a_counted_item_stays_unique():
    schema = {"type": "array", "items": {"type": "string", "pattern": "^a+b*$"}, "maxItems": 10, "uniqueItems": True}
    compiled, machine = compile_machine(schema)
    assert any(compiled.counts) and machine.accepts('["ab","a","aab"]') and not machine.accepts('["ab","a","ab"]')


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "string", "pattern": "^[ab]{2}$"}, "minItems": 2, "maxItems": 9},
    {"type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 12}}},
])
def test_masks_equal_the_unrolled_grammar_and_texts_validate(schema):
    """Along random walks, each mask equals that of the same schema with its items unrolled
    (count_min out of reach: the automaton per item count, as before), and finished texts validate."""
    vocab = small_vocab(3, n=150)
    counted = compile_grammar(schema)
    assert any(counted.counts)
    unrolled = compile_grammar(schema, count_min=10**9)
    assert not any(unrolled.counts)
    a, b = StackGrammar(build_machine(counted), vocab), StackGrammar(build_machine(unrolled), vocab)
    v, rng, finished = validator(schema), random.Random(7), 0
    for _ in range(12):
        sa, sb, out = a.initial_state(), b.initial_state(), b""
        for _ in range(60):
            ids = bitmask_ids(a, sa)
            assert ids == bitmask_ids(b, sb), out
            if vocab.eos_id in ids and (len(ids) == 1 or rng.random() < 0.3):
                finished += 1
                assert v.is_valid(json.loads(out)), out
                break
            ids.discard(vocab.eos_id)
            t = rng.choice(sorted(ids))
            sa, sb, out = a.advance(sa, t), b.advance(sb, t), out + vocab.token_bytes[t]
    assert finished > 0
