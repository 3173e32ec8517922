"""uniqueItems over arrays of strings (stack grammar: the matcher tracks the items written).

Oracles, none of them constrain.keys or the compiler:
- instances: arrays drawn from a small pool of strings (repeats, an escaped spelling of a pooled
  string, a "[" inside a string) against jsonschema with the format checker;
- masks: at every step of random token walks, the bitmask equals a brute force over every token:
  test_stack's reference interpreter of the automata, and a whole-text rescan in which no array
  holds one decoded string twice (every array of these schemas is unique; their item languages
  never run out, so every survivor can be completed);
- listed values (enum, booleans): every sequence of up to 4 values (3 from a pool of 5) (repeats included) against
  jsonschema, canonical texts;
- refusals: what stays inexact names uniqueItems and its JSON pointer.
"""

import itertools
import json
import random
import re

import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar, compile_schema
from inferlab.constrain.stack import StackGrammar, build_machine
from oracles import bitmask_ids, Reference, small_vocab, validator

STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
SCHEMAS = {
    "strings": STRINGS,
    "bounded": {**STRINGS, "minItems": 2, "maxItems": 3},
    "pattern": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "uniqueItems": True},
    "in-object": {"type": "object", "properties": {"tags": STRINGS, "n": {"type": "integer"}},
                  "required": ["tags"], "additionalProperties": False},
    "nested": {"type": "array", "items": STRINGS},
    "ref": {"$defs": {"tag": {"type": "string", "minLength": 1}},
            "type": "array", "items": {"$ref": "#/$defs/tag"}, "uniqueItems": True},
    "prefix": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"},
               "uniqueItems": True},
}
POOL = ["a", "b", "ab", "[", ""]


def arrays(max_len=3):
    for n in range(max_len + 1):
        yield from (list(t) for t in itertools.product(POOL, repeat=n))


def texts(value) -> list[str]:
    """The canonical text, then one with the first string spelled by \\u escapes (the same value)."""
    out = [json.dumps(value, ensure_ascii=False, separators=(",", ":"))]
    strings = value if isinstance(value, list) else value.get("tags", [])
    if strings and strings[0]:
        escaped = '"' + "".join(f"\\u{ord(c):04x}" for c in strings[0]) + '"'
        out.append(out[0].replace(json.dumps(strings[0]), escaped, 1))
    return out


@pytest.mark.parametrize("name", ["strings", "bounded", "pattern", "in-object", "ref", "prefix"])
def test_instances_agree_with_jsonschema(name):
    schema = SCHEMAS[name]
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    for value in arrays():
        instance = {"tags": value} if name == "in-object" else value
        canonical, *escaped = texts(instance)
        assert machine.accepts(canonical) == v.is_valid(instance), (name, canonical)
        for text in escaped:  # a pattern generates canonical spellings only: sound, not complete
            assert machine.accepts(text) <= v.is_valid(instance), (name, text)
    if name == "strings":
        assert not machine.accepts('["a","\\u0061"]') and machine.accepts('["\\u0061","b"]')


def test_nested_unique_arrays_are_tracked_apart():
    machine = build_machine(compile_grammar(SCHEMAS["nested"]))
    assert machine.accepts('[["a","b"],["a","b"]]')  # the outer array is not unique
    assert not machine.accepts('[["a","b"],["b","b"]]')
    assert machine.accepts('[["a"],[],["a","[","b"]]')


def test_a_non_unique_array_beside_is_not_constrained():
    schema = {"type": "object", "properties": {"u": STRINGS, "d": {"type": "array", "items": {"type": "string"}}}}
    machine = build_machine(compile_grammar(schema))
    assert machine.accepts('{"u":["a","b"],"d":["a","a"]}')
    assert not machine.accepts('{"u":["a","a"],"d":["a"]}')


@pytest.mark.parametrize("schema,why", [
    ({"type": "array", "items": {"enum": list("abcdefghij")}, "uniqueItems": True}, "over 10 listed values: 847 sets"),
    ({"type": "array", "items": {"type": "string", "format": "uuid"}, "uniqueItems": True}, "finitely many"),
    ({"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True}, "finitely many"),
    ({"type": "array", "items": {"type": "object"}, "uniqueItems": True}, "not only strings"),
    ({"type": "array", "items": {"type": ["string", "null"]}, "uniqueItems": True}, "not only strings"),
    ({"type": "array", "uniqueItems": True}, "not only strings"),
])
def test_inexact_unique_items_are_refused_with_pointer(schema, why):
    with pytest.raises(SchemaError, match=f"^uniqueItems at #/uniqueItems: .*{why}"):
        compile_grammar(schema)


def test_flat_regex_still_refuses_unique_items():
    with pytest.raises(SchemaError, match="^uniqueItems at #/uniqueItems"):
        compile_schema(STRINGS)


_LEX = re.compile(rb'(?P<s>"(?:[^"\\]|\\.)*")|(?P<u>"(?:[^"\\]|\\.)*\\?\Z)|(?P<p>[\[\]{},:])', re.S)


def no_repeated_item(text: bytes) -> bool:
    """Rescan: no array holds one decoded string twice (the texts of these schemas hold arrays
    and strings only, every string an item)."""
    arrays = []
    for m in _LEX.finditer(text):
        if m.lastgroup == "u":  # a string still open at the end
            break
        if m.group() == b"[":
            arrays.append(set())
        elif m.group() == b"]":
            arrays.pop()
        elif m.lastgroup == "s":
            value = json.loads(m.group())
            if value in arrays[-1]:
                return False
            arrays[-1].add(value)
    return True


def brute_force(ref, vocab, stacks, text):
    ids = {t for t, data in enumerate(vocab.token_bytes)
           if data and t not in vocab.special_ids and ref.walk(stacks, data) and no_repeated_item(text + data)}
    if ref.can_end(stacks):
        ids.add(vocab.eos_id)
    return ids


def unique_vocab(seed):
    vocab = small_vocab(seed, n=60)
    pieces = [b'"a"', b'"a",', b',"a"', b'"a","a"', b'["a","', b'a"', b'",', b'"]', b'\\u0061"', b'["', b'"a"]']
    return type(vocab)(vocab.token_bytes[:-1] + tuple(pieces) + (b"",), eos_id=vocab.eos_id + len(pieces),
                       special_ids=frozenset([vocab.eos_id + len(pieces)]))


@pytest.mark.parametrize("name", ["strings", "nested"])
def test_masks_equal_brute_force(name):
    schema = SCHEMAS[name]
    machine = build_machine(compile_grammar(schema))
    vocab = unique_vocab(len(name))
    grammar, ref = StackGrammar(machine, vocab), Reference(machine)
    rng, v, finished = random.Random(0), validator(schema), 0
    for _ in range(4):
        state, stacks, text = grammar.initial_state(), {((0, machine.dfas[0].start),)}, b""
        for _ in range(25):
            ids = bitmask_ids(grammar, state)
            assert ids == brute_force(ref, vocab, stacks, text), text
            if vocab.eos_id in ids and (len(ids) == 1 or rng.random() < 0.25):
                assert v.is_valid(json.loads(text)), text
                finished += 1
                break
            choices = sorted(ids - {vocab.eos_id})
            closing = [t for t in choices if any(c in vocab.token_bytes[t] for c in b'"],')]
            t = rng.choice(closing if closing and rng.random() < 0.7 else choices)
            state = grammar.advance(state, t)
            stacks = ref.walk(stacks, vocab.token_bytes[t])
            text += vocab.token_bytes[t]
    assert finished > 0


LISTED = {
    "enum": ({"type": "array", "items": {"type": "string", "enum": ["GET", "POST", "PUT"]}, "uniqueItems": True},
             ["GET", "POST", "PUT", "get"]),
    "bounded-mixed": ({"type": "array", "items": {"enum": ["a", 1, None, {"x": [1]}]}, "uniqueItems": True,
                       "minItems": 2, "maxItems": 3}, ["a", 1, None, {"x": [1]}, 2]),
    "boolean": ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, [True, False, None]),
    "enum-beside-not": ({"type": "array", "items": {"enum": ["a", "b", "c"], "not": {"const": "b"}},
                         "uniqueItems": True, "minItems": 1}, ["a", "b", "c"]),
}


@pytest.mark.parametrize("name", list(LISTED))
def test_listed_values_agree_with_jsonschema(name):
    schema, pool = LISTED[name]
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    valid = 0
    for n in range(5 if len(pool) <= 4 else 4):
        for seq in itertools.product(pool, repeat=n):
            ok = v.is_valid(list(seq))
            assert machine.accepts(canonical_json(list(seq), schema)) == ok, (name, seq)
            valid += ok
    assert valid > 0


def test_more_distinct_values_than_max_items_allows_is_unsatisfiable():
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_grammar({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 3})


def test_nine_listed_values_and_more_under_a_small_max_items_are_exact():
    """9 values: 381 sets written (C(9,1) + ... + C(9,5), those with more than 3 values left: 9 +
    36 + 84 + 126 + 126), within MAX_UNIQUE_AUTOMATA; 19 values under maxItems 4: 19 sets."""
    import itertools
    import json

    import jsonschema
    for values, hi, pool in ((list("abcdefghi"), None, "abcdefghi"), ([f"v{i}" for i in range(19)], 4, ["v0", "v7", "v18"])):
        schema = {"type": "array", "items": {"enum": values}, "uniqueItems": True}
        if hi is not None:
            schema["maxItems"] = hi
        machine, v = build_machine(compile_grammar(schema)), jsonschema.Draft202012Validator(schema)
        docs = [list(p) for n in range(4) for p in itertools.product(pool, repeat=n)] + [values, values[::-1][:5]]
        for doc in docs:
            assert machine.accepts(json.dumps(doc, separators=(",", ":"))) == v.is_valid(doc), doc
