"""patternProperties beside extra keys (additionalProperties a schema, true, or absent): each extra key gets the schema of the pattern it matches, or
additionalProperties when it matches none. Oracle: jsonschema on every object of up to two keys
from a pool (pattern matches, Unicode digits that only Python's \\d matches, declared names),
each key with each of three values."""

import itertools

import pytest

from inferlab.constrain.schema import canonical_json, compile_grammar
from inferlab.constrain.stack import build_machine
from test_schema_properties import validator

SCHEMAS = {
    "one-pattern": {"type": "object", "patternProperties": {"^x": {"type": "integer"}},
                    "additionalProperties": {"type": "string"}},
    "two-patterns-declared": {"type": "object", "properties": {"xa": {"type": "null"}},
                              "patternProperties": {"^x": {"type": "integer"}, "^\\d": {"type": "boolean"}},
                              "additionalProperties": True},
    "absent": {"type": "object", "properties": {"a": {"type": "null"}}, "patternProperties": {"^x": {"type": "integer"}}},
}
KEYS = ["xa", "a", "1", "x1", "b", "\u0661"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "two-patterns-declared" else n
                                  for n in SCHEMAS])  # the slow one: ~1 s (two patterns' key regions)
def test_extra_keys_beside_patterns_agree_with_jsonschema(name):
    schema = SCHEMAS[name]
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    accepted = 0
    for n in range(3):
        for keys in itertools.permutations(KEYS, n):
            for values in itertools.product([1, "s", True], repeat=n):
                instance = dict(zip(keys, values))
                ok = machine.accepts(canonical_json(instance, schema))
                assert ok <= v.is_valid(instance), instance  # sound
                if all(k != "\u0661" for k in keys):  # complete but for keys only Unicode \d matches
                    assert ok == v.is_valid(instance), instance
                accepted += ok
    assert accepted > 20
