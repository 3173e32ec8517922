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


@pytest.mark.parametrize("schema, instances", [
    # a keyword that does nothing on its own side (then without if, additionalItems without a
    # tuple, minContains without contains, a draft-04 exclusive flag without its bound) must not
    # reach the other side's keyword it would pair with there
    ({"allOf": [{"if": {"type": "integer"}, "then": {"maximum": 100}}, {"else": {"type": "string"}}]},
     [1, 700, "a", None]),
    ({"allOf": [{"if": {"type": "integer"}, "else": {"type": "string"}}, {"then": {"minimum": 5}}]}, [1, 7, "a", None]),
    ({"allOf": [{"contains": {"type": "integer"}}, {"minContains": 3}]}, [[1], [1, 2, 3], ["a"]]),
    ({"$schema": D7, "allOf": [{"items": [{"type": "integer"}]}, {"additionalItems": False}]}, [[1], [1, 2], ["a"]]),
    ({"$schema": D4, "allOf": [{"minimum": 10}, {"exclusiveMinimum": True}]}, [5, 10, 11]),
    # draft-04 bounds: the tighter (bound, exclusive) pair, exclusive at an equal bound where either is
    ({"$schema": D4, "allOf": [{"minimum": 5, "exclusiveMinimum": True}, {"minimum": 10}]}, [5, 6, 10, 11]),
    ({"$schema": D4, "allOf": [{"minimum": 10}, {"minimum": 5, "exclusiveMinimum": True}]}, [5, 6, 10, 11]),
    ({"$schema": D4, "allOf": [{"minimum": 10, "exclusiveMinimum": True}, {"minimum": 10}]}, [9, 10, 11]),
    ({"$schema": D4, "allOf": [{"maximum": 10, "exclusiveMaximum": True}, {"maximum": 12}]}, [9, 10, 11]),
    # tuple-form items merged position by position, with additionalItems past each side's list
    ({"$schema": D7, "allOf": [{"items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
                               {"items": {"type": ["integer", "boolean"]}}]}, [[1], [1, True], [1, "a"], [True]]),
    ({"$schema": D7, "allOf": [{"items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
                               {"items": [{"minimum": 3}], "additionalItems": {"type": "string"}}]},
     [[3], [2], [3, "a"], [3, 4], [3, "a", "b"], []]),
    # keywords that were refused when they differed, merged exactly
    ({"allOf": [{"propertyNames": {"maxLength": 2}}, {"propertyNames": {"pattern": "^a"}}]},
     [{"ab": 1}, {"abc": 1}, {"b": 1}, {}]),
    ({"allOf": [{"uniqueItems": True}, {"uniqueItems": False}], "items": {"type": "string"}}, [["a"], ["a", "a"], ["a", "b"]]),
    ({"allOf": [{"dependentRequired": {"a": ["b"]}}, {"dependentRequired": {"a": ["c"], "d": ["a"]}}]},
     [{"a": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1}, {"d": 1}, {}]),
    ({"$schema": D7, "allOf": [{"dependencies": {"a": ["b"]}}, {"dependencies": {"a": {"required": ["c"]}}}]},
     [{"a": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "c": 1}, {}]),
    # one name under two dependency keywords, side by side or merged from allOf: both hold (the
    # typed form's slow test accepted {"a": 1} here: one name's keyword replaced the other's)
    ({"dependentSchemas": {"a": {"minItems": 1}}, "dependentRequired": {"a": ["b"]}},
     [{"a": 1}, {"a": 1, "b": 1}, {"b": 1}, {}]),
    ({"allOf": [{"dependentSchemas": {"a": {"contains": {"type": ["null"]}}}}, {"dependentRequired": {"a": ["a", "b"]}}]},
     [{"a": 1}, {"a": 1, "b": 1}, [None], []]),
    ({"dependentSchemas": {"a": {"required": ["c"]}}, "dependentRequired": {"a": ["b"]}},
     [{"a": 1}, {"a": 1, "b": 1}, {"a": 1, "c": 1}, {"a": 1, "b": 1, "c": 1}]),
])
def test_merged_keywords_mean_what_both_sides_mean(schema, instances):
    agree(schema, instances)


@pytest.mark.parametrize("schema, instances", [
    # two nots under allOf: not anyOf of two types, which admits no object or array: those are
    # kept as the rest says, where the complement of an object operand was refused
    ({"allOf": [{"not": {"type": "string"}}, {"not": {"type": "integer"}}]}, [1, "a", None, 1.5, {"a": 1}, [1]]),
    ({"type": ["object", "string"], "not": {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "integer"}]}},
     ["a", "b", {"a": 1}, 1]),
])
def test_a_negation_that_admits_no_value_of_a_type_keeps_that_type(schema, instances):
    agree(schema, instances)

