"""Schemas where the compiler once accepted the text of an invalid instance, found by an
adversarial audit: each is now compiled soundly or refused with one line naming keyword and
pointer. Oracle: jsonschema's validator for the schema's own dialect (validator_for), on the
instance each text parses to; a text the grammar accepts must be valid, and a refusal must be a
SchemaError, never another exception."""

import json

import jsonschema
import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.stack import build_machine

D3 = "http://json-schema.org/draft-03/schema#"
D4 = "http://json-schema.org/draft-04/schema#"


def _machine(schema):
    return build_machine(compile_grammar(schema))


def _valid(schema, text: str) -> bool:
    return jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(text))


def _sound(schema, texts) -> None:
    """Every text the grammar accepts is valid; returns the accepted ones."""
    m = _machine(schema)
    accepted = [t for t in texts if m.accepts(t)]
    assert all(_valid(schema, t) for t in accepted), [t for t in accepted if not _valid(schema, t)]
    return accepted


# A listed number in a negated or exclusive operand: its canonical spelling (2, 0.0000001) is the
# complement universe's, and the listed one (2.0, 1e-07) alone let the value through.
@pytest.mark.parametrize("schema, texts, must_accept", [
    ({"type": "integer", "not": {"const": 2.0}}, ["2", "3", "2.0"], ["3"]),
    ({"type": "number", "not": {"const": 1.0}}, ["1", "1.0", "2", "1.5"], ["2", "1.5"]),
    ({"oneOf": [{"enum": [2.0]}, {"type": "integer"}]}, ["2", "2.0", "3"], ["3"]),
    ({"if": {"const": 1.0}, "then": {"type": "string"}, "else": {"type": "number"}}, ["1", "1.0", "2", '"a"'], ["2"]),
    ({"$schema": D4, "type": "number", "not": {"enum": [1.0]}}, ["1", "1.0", "2"], ["2"]),
    ({"type": "number", "not": {"const": 1e20}}, ["100000000000000000000", "1e+20", "1"], ["1"]),
    ({"type": "number", "not": {"const": 1e-7}}, ["0.0000001", "1e-07", "0.5"], ["0.5"]),
    ({"oneOf": [{"const": 1e-7}, {"type": "number"}]}, ["0.0000001", "1e-07", "0.5"], ["0.5"]),
    ({"type": "number", "not": {"const": -0.0}}, ["0", "-0", "1"], ["1"]),
])
def test_a_listed_number_is_taken_out_in_every_spelling(schema, texts, must_accept):
    accepted = _sound(schema, texts)
    assert set(must_accept) <= set(accepted)


def test_a_listed_number_is_generated_in_either_spelling():
    """enum [2.0, 1e-07]: its own spellings (the canonical texts of those instances) and the
    equal canonical ones are accepted, no other number."""
    m = _machine({"enum": [2.0, 1e-7]})
    assert all(m.accepts(t) for t in ("2.0", "2", "1e-07", "0.0000001"))
    assert not any(m.accepts(t) for t in ("3", "2.00", "1e-7"))


# RFC 6901 in a URI fragment: percent-decoded first, then split at "/"
@pytest.mark.parametrize("schema, texts", [
    ({"$defs": {"/": {"type": "integer"}, "~1": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/%7E1"}}},
     ['{"x":"a"}', '{"x":1}']),
    ({"$defs": {"a/b": {"type": "integer"}, "a": {"b": {"type": "string"}}}, "properties": {"x": {"$ref": "#/$defs/a%2Fb"}}},
     ['{"x":"a"}', '{"x":1}']),
    ({"$defs": {"é": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/%C3%A9"}}}, ['{"x":"a"}', '{"x":1}']),
])
def test_a_percent_encoded_pointer_resolves_as_jsonschema_resolves_it(schema, texts):
    accepted = _sound(schema, texts)
    assert len(accepted) == 1                           # the valid one of the two


def test_an_index_with_a_leading_zero_does_not_resolve():
    with pytest.raises(SchemaError, match=r"\$ref at #/properties/x: '#/\$defs/l/01' does not resolve"):
        compile_grammar({"$defs": {"l": [{"type": "integer"}, {"type": "string"}]},
                         "properties": {"x": {"$ref": "#/$defs/l/01"}}})


@pytest.mark.parametrize("schema", [
    {"$defs": {"i": {"type": "integer"}},
     "properties": {"x": {"$id": "http://example.com/s", "$defs": {"i": {"type": "string"}},
                          "properties": {"y": {"$ref": "#/$defs/i"}}}}},
    {"properties": {"x": {"$id": "http://e/s", "type": "object", "properties": {"y": {"$ref": "#"}}}}},
    {"$schema": D4, "definitions": {"i": {"type": "integer"}},
     "properties": {"x": {"id": "http://e/s", "definitions": {"i": {"type": "string"}},
                          "properties": {"y": {"$ref": "#/definitions/i"}}}}},
])
def test_a_reference_under_a_nested_id_resolves_against_its_resource(schema):
    """Its "#..." resolves against the embedded resource, not the document (jsonschema: {"x":{"y":1}}
    is invalid in each, and the document's reading accepted it; refused until schema.resources)."""
    texts = ['{"x":{"y":1}}', '{"x":{"y":"a"}}', '{"x":{"y":{}}}', '{"x":{"y":{"y":"b"}}}']
    accepted = _sound(schema, texts)
    assert accepted == [t for t in texts if _valid(schema, t)]


def test_ids_that_name_no_other_resource_change_nothing():
    """Up to draft-07 a bare-fragment $id (an anchor's name); the root's $id; an "id" that is
    data or a property name: references resolve against the document, as before."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://e/root", "$defs": {"i": {"type": "integer"}},
              "properties": {"id": {"type": "string"}, "x": {"$id": "#frag", "properties": {"y": {"$ref": "#/$defs/i"}}},
                             "z": {"default": {"$id": "http://q"}, "$ref": "#/$defs/i"}}}
    accepted = _sound(schema, ['{"x":{"y":1}}', '{"x":{"y":"a"}}', '{"z":1}', '{"z":"a"}'])
    assert accepted == ['{"x":{"y":1}}', '{"z":1}']
    # from 2019-09 on (and without $schema) a fragment $id starts a resource too, for jsonschema
    del schema["$schema"]
    with pytest.raises(SchemaError, match=r"^\$id at #/properties/x: "):
        compile_grammar(schema)


@pytest.mark.parametrize("keyword, schema", [
    ("required", {"$schema": D3, "type": "object", "properties": {"a": {"type": "integer", "required": True}}}),
    ("divisibleBy", {"$schema": D3, "type": "integer", "divisibleBy": 2}),
    ("disallow", {"$schema": D3, "disallow": "string"}),
    ("extends", {"$schema": D3, "extends": {"type": "integer"}}),
    ("format", {"$schema": D3, "type": "string", "format": "time"}),
    ("type", {"$schema": D3, "type": [{"type": "integer"}, "string"]}),
])
def test_draft3_keywords_are_refused_by_name(keyword, schema):
    """Read as draft-04 they were dropped, and draft-03's validator enforces them."""
    with pytest.raises(SchemaError, match=rf"^{keyword} at #/"):
        compile_grammar(schema)
    lenient = compile_grammar(schema, lenient=True)       # told what was dropped
    assert any(u.startswith(f"{keyword} at #/") for u in lenient.unenforced)


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "object", "properties": {"a": {"required": True}}}, "required at #/properties/a/required"),
    ({"type": [{"type": "integer"}, "string"]}, "type at #"),
    ({"type": "object", "required": "a"}, "required at #/required"),
    # each once a TypeError or AttributeError deep in the compiler (a CLI audit's fuzz of keyword values)
    ({"prefixItems": 5}, "prefixItems at #/prefixItems"),
    ({"not": 5}, "not at #/not"),
    ({"propertyNames": 5}, "propertyNames at #/propertyNames"),
    ({"type": "array", "minItems": "x"}, "minItems at #/minItems"),
    ({"type": "array", "maxItems": "x"}, "maxItems at #/maxItems"),
    ({"type": "string", "minLength": None}, "minLength at #/minLength"),
    ({"type": "string", "format": []}, "format at #/format"),
    ({"type": "object", "minProperties": "x"}, "minProperties at #/minProperties"),
    ({"type": "object", "minProperties": -1}, "minProperties at #/minProperties"),
    ({"type": "object", "maxProperties": 1.5}, "maxProperties at #/maxProperties"),
    ({"patternProperties": "x"}, "patternProperties at #/patternProperties"),
    ({"patternProperties": 5}, "patternProperties at #/patternProperties"),
    ({"properties": {"a": {"items": 3}}}, "items at #/properties/a/items"),
])
def test_a_keyword_of_the_wrong_shape_is_an_error_naming_it(schema, keyword):
    with pytest.raises(SchemaError, match=f"^{keyword}: must be"):
        compile_grammar(schema)


def test_a_boolean_exclusive_bound_outside_draft_4_is_refused():
    """Without $schema (or from draft-06 on) exclusiveMinimum is a number; jsonschema reads a
    boolean there as 0 or 1 ({"exclusiveMinimum": true} rejects 0.5), the draft-04 reading as a
    flag beside minimum: the meaning is ambiguous, so it is refused naming the keyword. Under a
    draft-04 $schema it is the flag."""
    with pytest.raises(SchemaError, match=r"^exclusiveMinimum at #/exclusiveMinimum: a boolean is draft-04's"):
        compile_grammar({"type": "number", "exclusiveMinimum": True})
    schema = {"$schema": D4, "type": "integer", "minimum": 3, "exclusiveMinimum": True}
    assert _sound(schema, ["2", "3", "4"]) == ["4"]
