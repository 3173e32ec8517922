"""unevaluatedProperties and unevaluatedItems (schema.evaluated): the grammar accepts an instance's
canonical text iff jsonschema (2020-12, 2019-09) validates it, on every object over a few names
and values, and every array of up to 3 items from a small pool."""

import itertools

import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from oracles import assert_exact

D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
VALUES = [1, "s", None]


def objects() -> list:
    names = ["a", "b", "ab", "x"]
    out = []
    for combo in itertools.product([*VALUES, "absent"], repeat=len(names)):
        out.append({n: v for n, v in zip(names, combo) if v != "absent"})
    return out + [[], "s", 1]


def arrays() -> list:
    return [list(c) for n in range(4) for c in itertools.product(VALUES, repeat=n)] + [{}, "s"]


@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
    {"patternProperties": {"^a": {"type": ["integer", "null"]}}, "unevaluatedProperties": {"type": "string"}},
    {"properties": {"a": True}, "allOf": [{"properties": {"b": {"type": "null"}}}], "unevaluatedProperties": False},
    {"allOf": [{"properties": {"a": True}}, {"unevaluatedProperties": False}]},  # cousins see nothing
    {"properties": {"a": True}, "anyOf": [{"properties": {"b": True}, "required": ["b"]},
                                          {"properties": {"x": True}, "required": ["x"]}],
     "unevaluatedProperties": False},
    {"oneOf": [{"properties": {"a": {"const": 1}, "b": True}, "required": ["a"]},
               {"properties": {"a": {"const": "s"}, "x": True}, "required": ["a"]}],
     "unevaluatedProperties": {"type": "integer"}},
    # (then lists "a" too: the canonical text of an if/then writes then's names first)
    {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"properties": {"a": True, "b": True}},
     "else": {"properties": {"x": True}}, "unevaluatedProperties": False},
    {"properties": {"a": True}, "dependentSchemas": {"a": {"properties": {"b": True}}}, "unevaluatedProperties": False},
    {"$defs": {"d": {"properties": {"b": True}}}, "$ref": "#/$defs/d", "properties": {"a": True},
     "unevaluatedProperties": False},
    {"allOf": [{"properties": {"a": True}, "unevaluatedProperties": False}], "properties": {"b": True},
     "unevaluatedProperties": True},
    {"not": {"not": {"properties": {"a": True}}}, "unevaluatedProperties": {"type": "null"}},  # not evaluates nothing
], ids=["adjacent", "patterns", "allof", "cousins", "anyof", "oneof", "if", "dependent", "ref", "nested", "not"])
def test_unevaluated_properties_are_exact(schema):
    assert_exact({"$schema": D2020, **schema}, objects())


@pytest.mark.parametrize("schema", [
    {"prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "null"}},
    {"allOf": [{"prefixItems": [True, True]}], "unevaluatedItems": False},
    {"anyOf": [{"prefixItems": [{"const": 1}]}, {"prefixItems": [True, {"type": "string"}]}], "unevaluatedItems": False},
    {"items": {"type": "integer"}, "unevaluatedItems": False},
], ids=["prefix", "allof", "anyof", "items"])
def test_unevaluated_items_are_exact(schema):
    assert_exact({"$schema": D2020, **schema}, arrays())


def test_unevaluated_items_in_2019_09_read_its_tuple_form():
    """additionalItems evaluates only beside a tuple of items (alone it is ignored)."""
    assert_exact({"$schema": D2019, "items": [{"type": "integer"}], "unevaluatedItems": {"type": "null"}}, arrays())
    assert_exact({"$schema": D2019, "additionalItems": {"type": "integer"}, "unevaluatedItems": {"type": "string"}},
                 arrays())


def test_contains_evaluates_the_items_it_matches():
    assert_exact({"$schema": D2020, "contains": {"type": "integer"}, "unevaluatedItems": {"type": "string"}}, arrays())


def test_what_cannot_be_exact_is_refused_by_name():
    with pytest.raises(SchemaError, match=r"^\$dynamicRef at #/\$defs/a/\$dynamicRef: '#x': its target depends on"):
        compile_grammar({"$schema": D2020, "$id": "http://e/r", "$ref": "b",
                         "$defs": {"a": {"$id": "a", "$dynamicAnchor": "x", "$dynamicRef": "#x"},
                                   "b": {"$id": "b", "$dynamicAnchor": "x", "items": {"$ref": "a"}}},
                         "unevaluatedItems": False})


@pytest.mark.parametrize("schema", [
    {"not": {"prefixItems": [True, {"const": 1}]}},  # an array whose second item is not 1
    {"if": {"prefixItems": [{"const": "s"}]}, "then": {"maxItems": 1}, "else": {"minItems": 2}},
    {"prefixItems": [{"const": 1}], "oneOf": [{"prefixItems": [True, {"const": "s"}]}, {"prefixItems": [True, {"type": "null"}]}],
     "unevaluatedItems": {"type": "integer"}},  # (oneOf: each branch without the other, the negation above)
    {"allOf": [{"items": {"multipleOf": 2}}, {"items": {"multipleOf": 3}}], "items": {"type": "integer"}},  # lcm 6
], ids=["not-prefix", "if-prefix", "oneof-prefix", "lcm"])
def test_negated_prefix_items_and_merged_multiples_are_exact(schema):
    pool = [1, "s", None, 6, 4]
    instances = [list(c) for n in range(4) for c in itertools.product(pool, repeat=n)] + [{}, "s"]
    assert_exact({"$schema": D2020, **schema}, instances)
