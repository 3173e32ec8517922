"""patternProperties beside extra keys (additionalProperties a schema, true, or absent): each
extra key gets the schema of the pattern it matches, or additionalProperties when it matches none. Oracle: jsonschema on every object of up to two keys
from a pool (pattern matches, Unicode digits that only Python's \\d matches, declared names),
each key with each of three values."""

import pytest

from test_extra_keys import agrees_with_jsonschema, objects

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
    # complete but for keys only Unicode \d matches
    instances = objects(KEYS, [1, "s", True], 2)
    assert agrees_with_jsonschema(SCHEMAS[name], instances, complete=lambda inst: "\u0661" not in inst) > 20
