"""JSON Schema -> regex: table-driven match / non-match cases, each label checked with jsonschema.

Every case states instances and whether they are valid; the test first confirms the label with
the jsonschema library (the oracle), then checks that the compiled regex accepts the canonical
text of exactly the valid ones.
"""

import itertools
import json
import re

import jsonschema
import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar, compile_schema
from inferlab.constrain.stack import build_machine
from inferlab.errors import InferlabError


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)



def test_the_oracle_checks_formats():
    """The jsonschema oracle runs with its format checker and the format packages (the test extra
    installs jsonschema[format-nongpl]): without them every string "conforms" to time, uri, ..."""
    checkers = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
    assert {"date", "time", "date-time", "email", "uuid", "uri", "uri-reference", "ipv4", "hostname"} <= set(checkers)
    assert not validator({"type": "string", "format": "time"}).is_valid("25:00:00Z")
    assert not validator({"type": "string", "format": "time"}).is_valid("25:00")
    assert validator({"type": "string", "format": "time"}).is_valid("23:59:59Z")
    assert not validator({"type": "string", "format": "hostname"}).is_valid("-a.example.com")

def check(schema, good, bad, **options):
    compiled = compile_schema(schema, **options)
    regex = re.compile(compiled.regex)
    v = validator(schema)
    for instance in good:
        assert v.is_valid(instance), f"test label wrong: {instance!r} is invalid"
        text = canonical_json(instance, schema)
        assert regex.fullmatch(text), f"valid {text} rejected"
    for instance in bad:
        assert not v.is_valid(instance), f"test label wrong: {instance!r} is valid"
        text = canonical_json(instance, schema)
        assert not regex.fullmatch(text), f"invalid {text} accepted"
    return compiled


CASES = {
    "integer bounds": (
        {"type": "integer", "minimum": -3, "exclusiveMaximum": 120},
        [-3, 0, 7, 119, 100], [-4, 120, 1000, 1.5, "7"]),
    "draft-4 boolean exclusives": (
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 0,
         "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": True},
        [1, 9], [0, 10, -1]),
    "number bounds": (
        {"type": "number", "minimum": 0, "maximum": 1},
        [0, 0.5, 1, 1.0, 0.999], [-0.001, 1.001, 2, -1]),
    "decimal number bounds": (
        {"type": "number", "minimum": -2.5, "exclusiveMaximum": 0.25},
        [-2.5, -2.49, 0, 0.2, 0.249, -1], [-2.51, 0.25, 0.3, 1, -3]),
    "exclusive bound and float precision": (
        {"type": "number", "exclusiveMinimum": 1},
        [1.5, 2, 1.0000000001], [1, 1.0, 0.5]),
    "multipleOf 1 on a number": ({"type": "number", "multipleOf": 1, "minimum": 2}, [2, 3.0, 40], [1, 2.5]),
    "string lengths count code points": (
        {"type": "string", "minLength": 2, "maxLength": 3},
        ["ab", "abc", "ñé", "a\"", "\n\t", "日本語", "😀😀"], ["a", "abcd", "", "😀"]),
    "boolean and null": ({"type": ["boolean", "null"]}, [True, False, None], [0, "true", []]),
    "enum of mixed values": (
        {"enum": ["a", 1, None, {"k": [1, 2]}, [True]]},
        ["a", 1, None, {"k": [1, 2]}, [True]], ["b", 2, True, {"k": [2, 1]}, [1]]),
    "const": ({"const": {"x": "y"}}, [{"x": "y"}], [{"x": "z"}, "y"]),
    "enum filtered by type": ({"type": "string", "enum": ["a", 1, "b"]}, ["a", "b"], [1, "c"]),
    "object, required and optional": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                          "c": {"type": "boolean"}},
         "required": ["b"], "additionalProperties": False},
        [{"b": "x"}, {"a": 1, "b": "x"}, {"b": "", "c": True}, {"a": 1, "b": "x", "c": False}],
        [{}, {"a": 1}, {"b": 1}, {"b": "x", "d": 1}, []]),
    "all optional properties": (
        {"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}}, "additionalProperties": False},
        [{}, {"a": None}, {"b": None}, {"a": None, "b": None}], [{"a": 1}, {"c": None}]),
    "additionalProperties schema": (
        {"type": "object", "properties": {"id": {"type": "integer"}},
         "additionalProperties": {"type": "string"}},
        [{"id": 1}, {"id": 1, "x": "a"}, {"x": "a", "y": "b"}, {}],
        [{"id": "1"}, {"x": 1}, {"id": 1, "y": 2}]),
    "required name only in required": (
        {"type": "object", "required": ["k"], "additionalProperties": {"type": "integer"}},
        [{"k": 1}, {"k": 1, "z": 2}], [{}, {"k": "a"}]),
    "arrays": (
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 3},
        [[0], [1, 2], [1, 2, 3]], [[], [1, 2, 3, 4], [-1], ["a"]]),
    "prefixItems": (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        [[], ["a"], ["a", 1]], [["a", 1, 2], [1], ["a", "b"]]),
    "tuple items (draft 7) with additionalItems": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
         "items": [{"type": "string"}], "additionalItems": {"type": "null"}},
        [[], ["a"], ["a", None, None]], [[1], ["a", 1]]),
    "anyOf": (
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 10}]},
        ["", "a", 10, 99], ["ab", 9, None]),
    "oneOf with disjoint types": (
        {"oneOf": [{"type": "string"}, {"type": "integer"}]}, ["a", 5], [1.5, None]),
    "oneOf discriminated by a const property": (
        {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
             "required": ["kind", "x"], "additionalProperties": False},
            {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
             "required": ["kind", "y"], "additionalProperties": False}]},
        [{"kind": "a", "x": 1}, {"kind": "b", "y": "s"}], [{"kind": "a", "y": "s"}, {"kind": "c", "x": 1}]),
    "allOf merged": (
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
                   {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}}]},
        [{"a": 0}, {"a": 5, "b": "x"}], [{"a": 6}, {"a": -1}, {"b": "x"}]),
    "allOf keeps each side's additionalProperties": (
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                   {"properties": {"b": {"type": "string"}}}]},
        [{}, {"a": 1}], [{"b": "x"}, {"a": 1, "b": "x"}]),
    "$ref and $defs": (
        {"$defs": {"pos": {"type": "integer", "minimum": 1}},
         "type": "object", "properties": {"n": {"$ref": "#/$defs/pos"}}, "required": ["n"]},
        [{"n": 1}], [{"n": 0}, {}]),
    "draft 7 definitions, siblings of $ref ignored": (
        {"$schema": "http://json-schema.org/draft-07/schema#",
         "definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s", "maxLength": 1},
        ["abc", ""], [1]),
    "format date": ({"type": "string", "format": "date"}, ["2024-02-29"], ["2023-02-29", "2024-13-01"]),
    "format with length bounds it already meets": (
        {"type": "string", "format": "date", "maxLength": 10}, ["2024-01-01"], ["2024-1-1"]),
    "pattern, anchored": ({"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"}, ["ab-12"], ["ab-1", "Ab-12", "xab-123"]),
    "pattern, unanchored is a search": ({"type": "string", "pattern": "[0-9]{3}"}, ["123", "ab123cd"], ["12", "a1b2c3"]),
    "pattern with quote, backslash and newline": (
        {"type": "string", "pattern": "^a\"b\\\\c\\nd$"}, ["a\"b\\c\nd"], ["a\"b\\cnd", "ab\\c\nd"]),
    "pattern with length bounds": (
        {"type": "string", "pattern": "^[A-Z][a-z]*$", "minLength": 2, "maxLength": 4},
        ["Ab", "Abcd"], ["A", "Abcde", "ab"]),
    "unanchored pattern as long as the string": (
        {"type": "string", "pattern": "[A-Z]{2}", "minLength": 2, "maxLength": 2}, ["AB"], ["ABC", "aB", "A"]),
    "pattern and length bounds, a subset": (
        {"type": "string", "pattern": "^\\d{2,5}-?\\d{1,4}-?\\d{4}$", "minLength": 10, "maxLength": 13},
        ["1234567890"], ["123456789", "12345678901234", "abcdefghij"]),
    "unanchored pattern with minLength keeps the padding": (
        {"type": "string", "pattern": "ab", "minLength": 5}, ["xyzab"], ["ab", "xyzwv"]),
    "pattern with \\d and negated classes": (
        {"type": "string", "pattern": "^\\d+[^\\d]$"}, ["12x", "1-"], ["12", "123", "x1"]),
    "no type: keywords of one family": ({"minLength": 2}, ["ab", 1, None, True, [], {}], ["a"]),
    "no type: a format constrains strings only": (
        {"format": "date"}, ["2024-02-29", 7, 1.5, None, False, ["x"], {"a": "b"}], ["2023-02-29", "x"]),
    "no type: object keywords, other types unconstrained": (
        {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
        [{"a": 1}, "s", 2, None, [1]], [{}, {"a": "x"}]),
    "type list": ({"type": ["string", "integer"], "minLength": 2, "minimum": 3}, ["ab", 3], ["a", 2, None]),
    "nested objects": (
        {"type": "object", "properties": {"o": {"type": "object", "properties": {
            "p": {"type": "array", "items": {"type": "object", "properties": {"q": {"enum": [1, 2]}},
                                              "required": ["q"], "additionalProperties": False}}},
            "required": ["p"], "additionalProperties": False}}, "required": ["o"], "additionalProperties": False},
        [{"o": {"p": []}}, {"o": {"p": [{"q": 1}, {"q": 2}]}}], [{"o": {"p": [{"q": 3}]}}, {"o": {}}]),
    "patternProperties on declared names": (
        {"type": "object", "properties": {"x_a": {"type": "integer"}, "b": {"type": "integer"}},
         "patternProperties": {"^x_": {"minimum": 10}}, "additionalProperties": False},
        [{"x_a": 10, "b": 1}], [{"x_a": 9}]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_cases(name, whitespace):
    schema, good, bad = CASES[name]
    check(schema, good, bad, whitespace=whitespace)


def test_extra_keys_never_repeat_a_declared_name():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True}
    regex = re.compile(compile_schema(schema).regex)
    assert regex.fullmatch('{"a":1,"b":"x"}')
    assert not regex.fullmatch('{"a":1,"a":"x"}')   # json.loads would keep the string: invalid
    assert not regex.fullmatch('{"a":"x"}')
    assert regex.fullmatch('{"ab":"x"}') and regex.fullmatch('{"":1}')


def test_flexible_whitespace_is_optional_and_bounded():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
              "required": ["a"], "additionalProperties": False}
    regex = re.compile(compile_schema(schema, whitespace="flexible").regex)
    assert regex.fullmatch('{"a":[1,2]}')
    assert regex.fullmatch(json.dumps({"a": [1, 2]}, indent=2))
    assert not regex.fullmatch('{"a":[1,2]}' + " " * 20)
    assert not re.fullmatch(compile_schema(schema).regex, '{"a": [1]}')


@pytest.mark.parametrize("schema,keyword,pointer", [
    ({"type": "string", "minLength": 3, "maxLength": 2}, "maxLength", "#/maxLength"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "minimum", "#/minimum"),
    ({"type": "integer", "enum": ["a"]}, "enum", "#/enum"),
    ({"properties": {"x": {"not": {"type": "object", "patternProperties": {"^a": {"type": "integer"}}}}}}, "not",
     "#/properties/x/not"),
    ({"type": "array", "uniqueItems": True}, "uniqueItems", "#/uniqueItems"),
    ({"type": "string", "format": "idn-email"}, "format", "#/format"),
    ({"type": "number", "exclusiveMinimum": 1e13}, "exclusiveMinimum", "#/exclusiveMinimum"),
    ({"type": "integer", "multipleOf": 9}, "multipleOf", "#/multipleOf"),  # (2, 3, 5, 7...: exact)
    ({"oneOf": [{"type": "object", "patternProperties": {"^a": {"type": "integer"}}},
                {"type": "object", "maxProperties": 2}]}, "oneOf", "#/oneOf"),
    ({"if": {"type": "object", "patternProperties": {"^a": {"type": "integer"}}}, "then": {"required": ["z"]}},
     "if", "#/if"),
    ({"type": "string", "pattern": "^(a(?=b))+$"}, "pattern", "#/pattern"),
    ({"$ref": "other.json#/x"}, "$ref", "#"),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 2}, "maxItems", "#/maxItems"),
])
def test_refusals_name_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(SchemaError) as err:
        compile_schema(schema)
    message = str(err.value)
    assert message.startswith(f"{keyword} at {pointer}"), message
    assert "\n" not in message
    assert isinstance(err.value, InferlabError)


def test_false_root_is_unsatisfiable():
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_schema(False)


def test_an_impossible_optional_property_is_left_out_exactly():
    schema = {"type": "object", "properties": {"mode": {"type": "object", "enum": ["a", "b"]},
                                               "n": {"type": "integer"}}, "additionalProperties": False}
    check(schema, [{}, {"n": 1}], [{"mode": "a"}, {"n": 1, "mode": "b"}])
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_schema({**schema, "required": ["mode"]})


def test_lenient_lists_every_unenforced_constraint():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 9},
                                               "b": {"type": "array", "uniqueItems": True}},
              "additionalProperties": False}
    compiled = compile_schema(schema, lenient=True)
    assert compiled.unenforced == ("multipleOf at #/properties/a/multipleOf: multipleOf 9: its automaton (or the "
                                   "product with the bounds) is over the size limits",
                                   "uniqueItems at #/properties/b/uniqueItems: uniqueItems is not supported "
                                   "(only with maxItems <= 1, or over strings in the stack grammar, outside negations "
                                   "and enum checks)")
    assert re.fullmatch(compiled.regex, '{"a":3}')   # looser, and said so


def test_annotations_are_ignored():
    schema = {"title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c",
              "deprecated": True, "readOnly": True, "x-vendor": {"type": "string"}, "type": "integer"}
    assert compile_schema(schema).regex == compile_schema({"type": "integer"}).regex


def test_absent_additional_properties_allows_extra_keys_unless_strict():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    open_ = compile_schema(schema)  # JSON Schema: absent additionalProperties allows any other key
    assert all("additionalProperties absent" not in n for n in open_.narrowed)
    assert re.fullmatch(open_.regex, '{"a":1,"b":2}') and re.fullmatch(open_.regex, '{"b":"x"}')
    assert not re.fullmatch(open_.regex, '{"a":1,"a":"x"}')  # an extra key never repeats a declared name
    strict = compile_schema(schema, extra_keys=False)  # strict mode: a recorded narrowing
    assert any("additionalProperties absent at #" in n for n in strict.narrowed)
    assert not re.fullmatch(strict.regex, '{"a":1,"b":2}')


def test_recursion_is_unrolled_to_max_ref_depth_and_reported():
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                                 "additionalProperties": False}},
              "$ref": "#/$defs/node"}
    for depth in (1, 2, 4):
        compiled = compile_schema(schema, max_ref_depth=depth)
        assert compiled.ref_depth == depth
        nested = '{}'
        for _ in range(depth - 1):
            nested = '{"next":' + nested + '}'
        assert re.fullmatch(compiled.regex, nested)
        assert not re.fullmatch(compiled.regex, '{"next":' + nested + '}')
        assert any("cut" in n for n in compiled.narrowed)


def test_required_recursion_cannot_be_cut():
    schema = {"$defs": {"n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}},
              "$ref": "#/$defs/n"}
    with pytest.raises(SchemaError, match="max_ref_depth"):
        compile_schema(schema)


def test_canonical_json_orders_properties_as_the_schema():
    schema = {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "object", "properties": {
        "y": {"type": "string"}, "b": {"type": "string"}}}}}
    instance = {"a": {"b": "é", "y": "x"}, "extra": 1, "z": 2.0}
    assert canonical_json(instance, schema) == '{"z":2,"a":{"y":"x","b":"é"},"extra":1}'
    assert canonical_json(3.0, {"type": "integer"}) == "3"


def test_conjugation_schema_compiles_exactly():
    from importlib import resources
    schema = json.loads((resources.files("inferlab") / "data" / "conjugation.schema.json").read_text())
    compiled = check(schema, [{"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "hablo"}],
                     [{"verbo": "hablar", "tiempo": "pasado", "persona": "yo", "forma": "hablo"},
                      {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "x" * 21}])
    assert compiled.unenforced == () and compiled.narrowed == ()


def test_regex_is_in_the_automaton_dialect_and_the_dfa_agrees():
    from inferlab.constrain.dfa import compile_regex
    schema, good, bad = CASES["oneOf discriminated by a const property"]
    compiled = compile_schema(schema)
    dfa = compile_regex(compiled.regex)
    for instance in good + bad:
        text = canonical_json(instance, schema)
        assert dfa.fullmatch(text) == bool(re.fullmatch(compiled.regex, text))


EXTRA_CASES = {
    "minProperties 1 with nothing required": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "minProperties": 1, "additionalProperties": False},
        [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}], [{}]),
    "property dependencies (draft 7)": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "name": {"type": "string"}},
         "dependencies": {"card": ["billing"]}, "additionalProperties": False},
        [{}, {"name": "x"}, {"billing": "b"}, {"card": "c", "billing": "b"}], [{"card": "c"}, {"card": "c", "name": "x"}]),
    # undeclared names: the canonical text orders them as the compiled alternatives require them
    # (the dependent name, then what it requires), not in the instance's order (an audit's case)
    "dependentRequired over undeclared names": (
        {"type": "object", "dependentRequired": {"x": ["a"]}},
        [{}, {"a": None}, {"a": None, "x": None}, {"x": None, "a": None}], [{"x": None}]),
    "dependentSchemas over undeclared names": (
        {"type": "object", "dependentSchemas": {"x": {"required": ["a"]}}},
        [{"a": None, "x": None}], [{"x": 1}]),
    "dependentSchemas": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "dependentSchemas": {"a": {"properties": {"b": {"minimum": 10}}, "required": ["b"]}},
         "additionalProperties": False},
        [{}, {"b": 1}, {"a": 1, "b": 10}], [{"a": 1}, {"a": 1, "b": 9}]),
    "not with a type": ({"not": {"type": ["string", "null"]}, "type": ["string", "integer", "null"]}, [1], ["a", None]),
    "oneOf of shapes told apart by a required key": (
        {"oneOf": [{"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
                   {"type": "object", "properties": {"id": {"type": "string"}, "ok": {"type": "boolean"}},
                    "required": ["id"]}]},
        [{"error": "e"}, {"id": "1"}, {"id": "1", "ok": True}], [{"error": "e", "id": "1"}, {}, {"ok": True}]),
    "oneOf of arrays told apart by length": (
        {"oneOf": [{"type": "array", "maxItems": 0}, {"type": "array", "minItems": 1, "items": {"type": "integer"}}]},
        [[], [1, 2]], [["a"]]),
    "oneOf with an anyOf branch": (
        {"oneOf": [{"anyOf": [{"type": "boolean"}, {"type": "string"}]}, {"type": "array", "items": {"type": "null"}}]},
        [True, "s", [None]], [1, [1]]),
    "int32 format": ({"type": "integer", "format": "int32"}, [2147483647, -2147483648, 0], []),
    "patternProperties as a map": (
        {"type": "object", "patternProperties": {"^[a-z]+$": {"type": "object", "properties": {
            "n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n"], "additionalProperties": False}},
         "additionalProperties": False},
        [{}, {"ab": {"n": 1}}, {"ab": {"s": "x", "n": 1}, "cd": {"n": 2}}], [{"Ab": {"n": 1}}, {"ab": {"s": "x"}}]),
    "patternProperties matching every key": (
        {"type": "object", "properties": {"basic": {"type": "string", "minLength": 1}},
         "patternProperties": {".*": {"type": "string"}}, "required": ["basic"]},
        [{"basic": "x"}, {"basic": "x", "more": "y"}], [{"basic": ""}, {"basic": "x", "more": 1}, {"basic": 1}]),
    "maxProperties 0": ({"type": "object", "maxProperties": 0}, [{}], [{"a": 1}]),
    # an integral float is written as the integer (draft-06 on): inside a oneOf's complements too
    "integral floats under oneOf": ({"oneOf": [{"minimum": 2}, {"maxLength": 1}]}, [1.0, 1, -0.0], [3.0, 3]),
    # a non-integral float in plain decimal wherever it stands: a oneOf's branch lies beside the
    # others' complements (the slow property test's falsifying case: 1e-05 was written "1e-05")
    "a float beside a oneOf's complement": ({"oneOf": [{"type": "integer", "maximum": -2}, {"type": "number"}]},
                                            [1e-05, 0.5, 1.25], [-3]),
    "oneOf over disjoint integer ranges": (
        {"type": "integer", "oneOf": [{"minimum": -1, "maximum": -1}, {"minimum": 50, "maximum": 100}]},
        [-1, 50, 100], [0, 49, 101, -2]),
}


@pytest.mark.parametrize("name", list(EXTRA_CASES))
def test_extra_cases(name):
    schema, good, bad = EXTRA_CASES[name]
    check(schema, good, bad)


def test_exclusive_bound_rejects_texts_that_round_onto_it():
    # 1.0000000000000001 > 1 as a decimal, but float("1.0000000000000001") == 1.0: invalid
    regex = compile_schema({"type": "number", "exclusiveMinimum": 1}).regex
    assert not re.fullmatch(regex, "1.0000000000000001")
    assert re.fullmatch(regex, "1.0000000000001")
    assert float("1.0000000000001") > 1


def test_oneof_shapes_with_extra_keys_allowed_are_each_without_the_other():
    # {"a": 1, "b": 2} matches both branches once extra keys are allowed: each branch is then
    # written without the other's required name
    schema = {"oneOf": [{"type": "object", "required": ["a"], "properties": {"a": {}}, "additionalProperties": True},
                        {"type": "object", "required": ["b"], "properties": {"b": {}}, "additionalProperties": True}]}
    check(schema, [{"a": 1}, {"b": 2}, {"a": 1, "c": 3}], [{"a": 1, "b": 2}, {}, {"c": 1}, 1])


def test_length_subset_is_recorded_as_a_narrowing():
    # (up to INTERSECT_LENGTH_MAX the intersection is exact: tests/test_schema_algebra.py)
    compiled = compile_schema({"type": "string", "pattern": "[0-9a-f]+", "minLength": 4, "maxLength": 40})
    assert re.fullmatch(compiled.regex, '"beef"') and not re.fullmatch(compiled.regex, '"xbeef"')
    assert any("a subset is generated" in n for n in compiled.narrowed)


def test_int32_range_is_enforced_and_recorded():
    compiled = compile_schema({"type": "integer", "format": "int32"})
    assert not re.fullmatch(compiled.regex, "2147483648") and not re.fullmatch(compiled.regex, "-2147483649")
    assert any("int32" in n for n in compiled.narrowed)


def test_overlapping_integer_ranges_in_oneof_are_complemented():
    check({"type": "integer", "oneOf": [{"maximum": 5}, {"minimum": 5}]}, [-12, 0, 4, 6, 10, 123],
          [5, 5.5, "5", None])
    check({"oneOf": [{"type": "integer"}, {"minimum": 3}]}, [2, -7, 3.5, 100.25, "s", None, [], {}], [3, 4, 1.5])


def test_too_large_recursion_falls_back_to_a_shallower_depth(monkeypatch):
    from inferlab.constrain.schema import compiler as schema_module
    tree = {"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}},
                                                              "name": {"type": "string"}},
                            "additionalProperties": False}}, "$ref": "#/$defs/t"}
    sizes = {d: len(compile_schema(tree, max_ref_depth=d).regex) for d in (2, 3)}
    assert sizes[2] < sizes[3]
    monkeypatch.setattr(schema_module, "MAX_REGEX_CHARS", (sizes[2] + sizes[3]) // 2)
    compiled = compile_schema(tree, max_ref_depth=3)
    assert compiled.ref_depth == 2
    assert any("recursion unrolled to depth 2" in n for n in compiled.narrowed)
    monkeypatch.setattr(schema_module, "MAX_REGEX_CHARS", 10)
    with pytest.raises(schema_module.SchemaTooLarge):
        compile_schema(tree, max_ref_depth=3)


NOT_CASES = {
    "not {} forbids a property": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "old": {"not": {}}}},
        [{"a": 1}, {}], [{"old": 1}, {"a": 1, "old": None}]),
    "not required": (
        {"type": "object", "properties": {"image": {"type": "string"}, "build": {"type": "string"}},
         "not": {"required": ["image", "build"]}, "additionalProperties": False},
        [{}, {"image": "x"}, {"build": "y"}], [{"image": "x", "build": "y"}]),
    "not anyOf of required": (
        {"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}},
         "not": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, "additionalProperties": False},
        [{}, {"c": None}], [{"a": None}, {"b": None, "c": None}]),
    "not type": ({"not": {"type": ["array", "object", "null"]}}, ["s", 1, True], [None, [], {}]),
}


@pytest.mark.parametrize("name", list(NOT_CASES))
def test_not_forms(name):
    schema, good, bad = NOT_CASES[name]
    check(schema, good, bad)


def test_oneof_of_required_keys_means_exactly_one():
    schema = {"type": "object", "properties": {"tags": {"type": "string"}, "ids": {"type": "string"}},
              "oneOf": [{"required": ["tags"]}, {"required": ["ids"]}], "additionalProperties": False}
    check(schema, [{"tags": "a"}, {"ids": "b"}], [{}, {"tags": "a", "ids": "b"}])


def test_oneof_of_types_that_overlap_is_rewritten_exactly():
    check({"oneOf": [{"type": "string"}, {"type": ["string", "null"]}]}, [None], ["s", 1])
    # "a number but not an integer", by automaton complement
    check({"oneOf": [{"type": "number"}, {"type": ["integer", "string"]}]}, [1.5, -0.25, "s"], [1, 0, None, []])


def test_allof_pattern_keys_still_meet_the_other_sides_additional_properties():
    # found by hypothesis: "b" forbids every key, the pattern schema allows any key with an int
    inner = {"type": "object", "properties": {}, "additionalProperties": False,
             "patternProperties": {".*": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"b": {"type": "object", "properties": {}, "additionalProperties": False}},
              "patternProperties": {".*": inner}, "additionalProperties": False}
    check(schema, [{}, {"b": {}}, {"x": {"k": 1}}], [{"b": {"k": 1}}, {"x": {"k": "s"}}])


def test_allof_items_hold_inside_the_other_sides_prefix():
    # found by hypothesis (a soundness bug since prefixItems): property "b" wants strings, the
    # pattern ".*" wants [positive integer, integers...]; merged, "items" covered only the indices
    # past the pattern's prefix, so {"b": [1]} was generated
    schema = {"type": "object", "additionalProperties": False, "not": {"required": ["a", "b"]},
              "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string", "format": "date"}}},
              "patternProperties": {".*": {"type": "array", "items": {"type": "integer"}, "minItems": 1,
                                           "prefixItems": [{"type": "integer", "exclusiveMinimum": 0}]}}}
    check(schema, [{}, {"zz": [3]}, {"id": [5, 6]}], [{"b": [1]}, {"b": ["2024-01-01"]}, {"a": [1]}, {"zz": [0]}])
    machine = build_machine(compile_grammar(schema))
    assert not machine.accepts('{"b":[1]}') and machine.accepts('{"zz":[3]}')


ARRAYS = [{"items": {"type": "integer"}}, {"prefixItems": [{"type": "string"}]},
          {"prefixItems": [{"type": "integer"}, {"type": "boolean"}], "items": {"type": "null"}},
          {"prefixItems": [{"const": 1}], "items": False}, {"items": {"type": ["integer", "string"]}, "maxItems": 3}]


@pytest.mark.parametrize("a,b", list(itertools.combinations(ARRAYS, 2)))
def test_allof_of_prefix_and_item_schemas_agrees_with_jsonschema(a, b):
    schema = {"type": "array", "allOf": [a, b]}
    v = validator(schema)
    machine = build_machine(compile_grammar(schema))
    regex = re.compile(compile_schema(schema).regex)
    values = [1, "s", True, None]
    for n in range(4):
        for items in itertools.product(values, repeat=n):
            text = canonical_json(list(items), schema)
            assert machine.accepts(text) == v.is_valid(list(items)) == bool(regex.fullmatch(text)), (a, b, items)


@pytest.mark.parametrize("schema", [{"format": "date"}, {"format": "positiveInteger"}, {"minLength": 2, "minimum": 3},
                                    {"properties": {"a": {"type": "integer"}}, "required": ["a"], "maxLength": 1}])
def test_no_type_in_the_stack_grammar_leaves_other_types_unconstrained(schema):
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    for value in ("2024-02-29", "x", "ab", 2, 3, 1.5, None, True, [], [1, "x"], {}, {"a": 1}, {"a": "x"}):
        assert machine.accepts(canonical_json(value, schema)) == v.is_valid(value), value


@pytest.mark.parametrize("schema", [
    {"type": "string", "oneOf": [{"maxLength": 0}, {"format": "html-selector", "minLength": 1}]},
    {"type": "object", "oneOf": [{"maxProperties": 1}, {"minProperties": 2, "additionalProperties": {"type": "integer"}}]},
])
def test_one_of_with_disjoint_length_or_count_bounds_is_any_of(schema):
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    for value in ("", "a", "abc", 1, {}, {"a": 1}, {"a": 1, "b": 2}, {"a": "x", "b": 2}, {"a": 1, "b": 2, "c": 3}):
        assert machine.accepts(canonical_json(value, schema)) == v.is_valid(value), value


def test_one_of_with_overlapping_length_bounds_is_complemented():
    check({"type": "string", "oneOf": [{"maxLength": 2}, {"minLength": 2}]}, ["", "a", "abc", "abcdef"],
          ["ab", "xy", 1])


FOUR = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}, "d": {"type": "boolean"}}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": FOUR, "minProperties": 2, "additionalProperties": False},
    {"type": "object", "properties": FOUR, "maxProperties": 2, "required": ["b"], "additionalProperties": False},
    {"type": "object", "properties": FOUR, "minProperties": 2, "maxProperties": 3, "required": ["a"],
     "additionalProperties": False},
    {"type": "object", "properties": FOUR, "minProperties": 4, "additionalProperties": False},
])
def test_property_counts_over_declared_members_are_exact_in_the_stack_grammar(schema):
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    values = {"a": 1, "b": "x", "c": None, "d": True}
    valid = 0
    for n in range(5):
        for names in itertools.combinations("abcd", n):
            value = {k: values[k] for k in names}
            assert machine.accepts(canonical_json(value, schema)) == v.is_valid(value), value
            valid += v.is_valid(value)
    assert valid > 0


@pytest.mark.slow  # ~1 s: 9 alternatives of merged objects
def test_many_exclusive_conditionals_under_all_of_are_exact():
    names = [f"n{i}" for i in range(8)]
    schema = {"allOf": [{"type": "object", "properties": {"name": {"enum": names}, "v": {}}, "required": ["name"],
                         "additionalProperties": False}]
              + [{"if": {"properties": {"name": {"const": n}}}, "then": {"properties": {"v": {"minimum": i}}},
                  **({"else": {"properties": {"v": {"type": "integer"}}}} if i == 7 else {})}
                 for i, n in enumerate(names)]}
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    valid = 0
    for name in names + ["x"]:
        for value in (None, 0, 3, 7, 2.5, "s"):
            for instance in ({"name": name}, {"name": name, "v": value}):
                assert machine.accepts(canonical_json(instance, schema)) == v.is_valid(instance), instance
                valid += v.is_valid(instance)
    assert valid > 10


def test_many_overlapping_conditionals_are_refused():
    schema = {"allOf": [{"if": {"properties": {"a": {"const": i}}}, "then": {"required": ["b"]}} for i in range(8)]}
    with pytest.raises(SchemaError, match="^if at #/allOf: 8 conditionals"):
        compile_grammar(schema)


@pytest.mark.parametrize("dialect, integer", [("http://json-schema.org/draft-04/schema#", False),
                                              ("https://json-schema.org/draft/2020-12/schema", True)])
def test_a_float_with_a_zero_fraction_is_an_integer_from_draft_06_on(dialect, integer):
    """Draft 4 defines an integer as a number written without a fraction; draft 6 on, as any
    number with a zero fractional part. The grammar must answer for 12345.0 as the dialect does."""
    schema = {"$schema": dialect, "type": "object", "properties": {"n": {"type": "integer"}}}
    instance = {"n": 12345.0}
    assert jsonschema.validators.validator_for(schema)(schema).is_valid(instance) is integer  # the oracle agrees
    text = canonical_json(instance, schema)
    assert text == ('{"n":12345}' if integer else '{"n":12345.0}')
    assert build_machine(compile_grammar(schema)).accepts(text) is integer


def test_a_pattern_python_would_warn_about_compiles_silently_as_ecma():
    """`[[a-z]+` is, in ECMA-262, one or more of "[" or a-z; Python's re only checks its syntax and
    warns (FutureWarning: possible nested set), which a user of the compiler must not see."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        machine = build_machine(compile_grammar({"type": "string", "pattern": "[[a-z]+"}))
    assert machine.accepts('"[ab["') and machine.accepts('"z"')
    assert not machine.accepts('""') and not machine.accepts('"]"') and not machine.accepts('"A"')


def test_listed_values_checked_without_jsonschema_report_a_narrowing_only_where_it_cut_one(monkeypatch):
    """Without jsonschema, the values beside other keywords are kept by those keywords' regex. An
    untyped `pattern` compiles as any JSON value with its nesting cut (narrowed): that cut is
    reported only where it dropped a listed value, here a value nested deeper than any_depth."""
    from inferlab.constrain.schema import values

    monkeypatch.setattr(values, "_jsonschema", lambda: None)
    compiled = check({"enum": ["ab", "cd"], "pattern": "^a"}, ["ab"], ["cd"])
    assert compiled.narrowed == ()
    compiled = compile_schema({"enum": [1, "a", 3], "minimum": 2})
    assert compiled.narrowed == () and re.fullmatch(compiled.regex, '"a"') and not re.fullmatch(compiled.regex, "1")
    deep = {"enum": ["a", [[["b"]]]], "pattern": "^a"}  # the array is valid: no string in it is checked
    compiled = compile_schema(deep, any_depth=1)
    assert re.fullmatch(compiled.regex, '"a"') and compiled.narrowed  # [[["b"]]] cut by the nesting limit: said
    # 1e300 is valid: its text "1e+300" is cut by the check's plain notation, but its other
    # spelling (common.number_spellings), the integer equal to the double, passes: kept, nothing
    # narrowed. That integer is the double's exact value, not 10**300, which differs from it
    compiled = compile_schema({"enum": [1e300, "a"], "minimum": 2})
    exact = str(int(1e300))
    assert exact.startswith("10000000000000000525") and len(exact) == 301 and int(exact) == 1e300 != 10**300
    assert compiled.narrowed == () and re.fullmatch(compiled.regex, exact) and not re.fullmatch(compiled.regex, "1" + "0" * 300)
    with pytest.raises(SchemaError, match="enum at #/enum: no listed value passes .* narrowed"):
        compile_schema({"enum": [[[["b"]]]], "pattern": "^a"}, any_depth=1)  # not "unsatisfiable": the check cannot tell
