"""allOf merges (refs.merge) and disjointness tests (combinators.disjoint) against the oracle:
every instance's acceptance by the compiled grammar, on the path `inferlab schema check` takes
(compile_machine, canonical_json, accepts), equals jsonschema's verdict (the schema's own
dialect, 2020-12 by default), valid and invalid instances alike. A schema whose compile records
a narrowing is held to soundness only (an accepted instance is valid). Each case was a hole:
the merge kept one side's keyword and dropped the other's, or gave a side's rule to a key that
side does not apply it to."""

import jsonschema
import pytest

from inferlab.constrain.schema import canonical_json
from inferlab.constrain.stack import compile_machine

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"


def verdicts(schema, instances):
    """[(instance, accepted, valid)] and whether the compile recorded a narrowing."""
    compiled, machine = compile_machine(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    v = cls(schema)
    return [(x, machine.accepts(canonical_json(x, schema)), v.is_valid(x)) for x in instances], bool(compiled.narrowed)


def agree(schema, instances):
    rows, narrowed = verdicts(schema, instances)
    unsound = [x for x, acc, valid in rows if acc and not valid]
    assert not unsound, ("invalid accepted", unsound)
    if not narrowed:
        incomplete = [x for x, acc, valid in rows if valid and not acc]
        assert not incomplete, ("valid rejected", incomplete)
    assert any(valid for _, _, valid in rows) and not all(valid for _, _, valid in rows), "a case needs both kinds"
    return rows, narrowed


X10 = {"patternProperties": {"x": {"type": "number", "minimum": 10}}}
Y3 = {"patternProperties": {"y": {"type": "number", "minimum": 3}}}
PATTERN_INSTANCES = [{"y": 2}, {"x": 15, "y": 2}, {"x": 15, "y": 3}, {"x": 9}, {}, {"xy": 12}, {"xy": 5},
                     {"z": "s"}, {"y": "s"}, {"ax": 10, "by": 3.5}]


@pytest.mark.parametrize("schema", [
    {"type": "object", "allOf": [X10, Y3]},                                  # the issue's minimal case
    {"type": "object", **X10, "allOf": [Y3]},
    {"type": "object", **X10, "anyOf": [Y3, {"required": ["q"], **Y3}]},    # anyOf: rest merged per branch
    {"type": "object", **X10, "oneOf": [{**Y3, "required": ["y"]}, {**Y3, "properties": {"y": False}}]},
    {"type": "object", "anyOf": [{"allOf": [X10, Y3]}, {"type": "object", "allOf": [Y3, X10], "required": ["x"]}]},
    {"type": "object", "oneOf": [{"allOf": [X10, Y3], "required": ["x"]}, {"allOf": [Y3, X10], "properties": {"x": False}}]},
    {"$defs": {"x": X10}, "type": "object", "$ref": "#/$defs/x", **Y3},      # 2020-12: $ref's siblings merged
    {"type": "object", "allOf": [{"patternProperties": {"x": {"minimum": 10}, "^a": {"type": "number"}}},
                                 {"patternProperties": {"x": {"maximum": 20}}, **Y3}]},
])
def test_patterns_of_both_sides_all_apply(schema):
    agree(schema, PATTERN_INSTANCES + [{"ax": 25}, {"ax": 15}, {"x": 21}, {"x": "a"}])


@pytest.mark.parametrize("schema, instances", [
    # a name one side declares, the other side's pattern matches: both schemas, no additionalProperties
    ({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
                {"properties": {"ab": {"minimum": 3}}, "additionalProperties": False}]},
     [{"ab": 5}, {"ab": 2}, {"ab": "s"}, {"ac": 1}, {}, {"b": 1}]),
    # additionalProperties false beside the other side's pattern: keys the false side admits only
    ({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
                {"patternProperties": {"b$": {"maximum": 7}}, "additionalProperties": False}]},
     [{"ab": 5}, {"ab": 8}, {"ab": "s"}, {"ac": 1}, {"b": 1.5}, {"zb": 9}, {}]),
    # a required name no side declares, matched by a pattern: the pattern's schema, not additionalProperties
    ({"type": "object", "required": ["xa"], "patternProperties": {"^x": {"type": "integer"}},
      "additionalProperties": {"type": "string"}},
     [{"xa": 1}, {"xa": "s"}, {"xa": 1, "q": "s"}, {"xa": 1, "q": 2}, {}]),
    # a declared name the other side's pattern matches beside a general additionalProperties (recorded)
    ({"allOf": [{"patternProperties": {"^a": {"type": "integer"}}},
                {"properties": {"ab": {"minimum": 3}}, "additionalProperties": {"type": "integer", "maximum": 10}}]},
     [{"ab": 5}, {"ab": 12}, {"ab": 2}, {"ac": 1}, {"ac": 11}, {"c": 1}, {"c": 11}, {}]),
])
def test_declared_names_meet_each_sides_own_rule(schema, instances):
    agree(schema, instances)
