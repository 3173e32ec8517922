"""propertyNames: keys intersected with the names' string language (exact), checked by jsonschema.

Oracle: jsonschema with the format checker, on every object of up to two keys drawn from a
small pool (valid and invalid names, declared and undeclared), in the flat regex and the stack
grammar alike.
"""

import itertools
import json
import re

import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar, compile_schema
from inferlab.constrain.stack import build_machine
from oracles import validator

SCHEMAS = {
    "pattern": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
    "length-map": {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": {"type": "integer"}},
    "declared": {"type": "object", "properties": {"a": {"type": "integer"}, "Bad": {"type": "integer"}},
                 "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": False},
    "pattern-map": {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False,
                    "propertyNames": {"enum": ["xa", "xb", "y"]}},
    "false": {"type": "object", "propertyNames": False},
    "ref-format": {"type": "object", "propertyNames": {"$ref": "#/$defs/n"},
                   "$defs": {"n": {"type": "string", "format": "email"}}},
    "no-type": {"propertyNames": {"minLength": 2}},
}
KEYS = ["a", "b", "ab", "abc", "Bad", "xa", "xb", "x", "y", "a@b.co", ""]
VALUES = [1, "s"]


def instances():
    for n in range(3):
        for keys in itertools.permutations(KEYS, n):
            for value in VALUES:
                yield {k: value for k in keys}
    yield from ("s", 1, None, [])


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "ref-format" else n for n in SCHEMAS])
def test_stack_grammar_agrees_with_jsonschema(name):
    schema = SCHEMAS[name]
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    valid = 0
    for instance in instances():
        ok = v.is_valid(instance)
        assert machine.accepts(canonical_json(instance, schema)) == ok, (name, instance)
        valid += ok
    assert valid > 0


@pytest.mark.parametrize("name", ["pattern", "declared", "pattern-map", "false"])
def test_flat_regex_agrees_with_jsonschema(name):
    schema = SCHEMAS[name]
    regex = re.compile(compile_schema(schema).regex)
    v = validator(schema)
    for instance in instances():
        text = canonical_json(instance, schema)
        assert bool(regex.fullmatch(text)) == v.is_valid(instance), (name, text)


def test_a_required_name_propertynames_rejects_is_unsatisfiable():
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_grammar({"type": "object", "required": ["Bad"], "propertyNames": {"pattern": "^[a-z]+$"}})


def test_propertynames_beside_a_map_keeps_keys_unique():
    machine = build_machine(compile_grammar(SCHEMAS["length-map"]))
    assert machine.accepts('{"a":1,"b":2}') and not machine.accepts('{"a":1,"a":2}')
    assert not machine.accepts(json.dumps({"abc": 1}, separators=(",", ":")))
