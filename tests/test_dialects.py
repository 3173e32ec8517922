"""The dialect a schema names with $schema decides its keywords: a keyword its draft does not
define is ignored there, as the draft's validators ignore it (schema.common._NOT_IN_DIALECT).

Oracle: jsonschema's validator for the schema's own $schema (validator_for), on an instance that
the keyword alone would reject and one it accepts, under every draft from 4 to 2020-12."""

import jsonschema
import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar
from inferlab.constrain.schema.common import _NOT_IN_DIALECT, dialect_of
from inferlab.constrain.stack import build_machine

URIS = {"draft-04": "http://json-schema.org/draft-04/schema#", "draft-06": "http://json-schema.org/draft-06/schema#",
        "draft-07": "http://json-schema.org/draft-07/schema#", "2019-09": "https://json-schema.org/draft/2019-09/schema",
        "2020-12": "https://json-schema.org/draft/2020-12/schema"}
VALIDATORS = {"draft-04": jsonschema.Draft4Validator, "draft-06": jsonschema.Draft6Validator,
              "draft-07": jsonschema.Draft7Validator, "2019-09": jsonschema.Draft201909Validator,
              "2020-12": jsonschema.Draft202012Validator}

# keyword -> (schema without $schema, an instance it rejects, one it accepts)
CASES = {
    "const": ({"const": 1}, 2, 1),
    "propertyNames": ({"type": "object", "propertyNames": {"maxLength": 1}}, {"ab": 1}, {"a": 1}),
    "if": ({"if": {"type": "integer"}, "then": {"minimum": 5}}, 1, 7),
    "else": ({"if": {"type": "integer"}, "else": {"type": "null"}}, "s", None),
    "dependentRequired": ({"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}, {"a": 1, "b": 2}),
    "dependentSchemas": ({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}, {"a": 1}, {"b": 2}),
    "dependencies": ({"type": "object", "dependencies": {"a": ["b"]}}, {"a": 1}, {"a": 1, "b": 2}),
    "prefixItems": ({"type": "array", "prefixItems": [{"type": "integer"}]}, ["a"], [1, "a"]),
    "contains": ({"type": "array", "contains": {"type": "integer"}}, ["a"], ["a", 1]),
    "unevaluatedProperties": ({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False},
                              {"b": 1}, {"a": 1}),
}


def test_dialect_is_read_from_schema():
    assert dialect_of({"$schema": URIS["draft-04"]}) == "draft-04"
    assert dialect_of({"$schema": "http://json-schema.org/draft-07/schema"}) == "draft-07"  # no '#'
    assert dialect_of({"$schema": URIS["2019-09"]}) == "2019-09"
    assert dialect_of({"type": "object"}) is None and dialect_of(True) is None


@pytest.mark.parametrize("dialect", list(URIS))
def test_keywords_not_in_a_dialect_are_those_its_validator_ignores(dialect):
    """jsonschema's validator for the draft has no validator for each keyword listed (then/else
    and min/maxContains are read by `if` and `contains` there), and has one for each supported
    keyword not listed."""
    known = set(VALIDATORS[dialect].VALIDATORS)
    owners = {"then": "if", "else": "if", "minContains": "contains", "maxContains": "contains"}
    for k in _NOT_IN_DIALECT[dialect]:
        assert k not in known, k
        if k in owners and dialect in ("2019-09", "2020-12"):
            assert owners[k] in known, k
    for k in CASES:
        if k not in _NOT_IN_DIALECT[dialect] and k != "else":
            assert k in known, (dialect, k)


@pytest.mark.parametrize("dialect", list(URIS))
@pytest.mark.parametrize("keyword", list(CASES))
def test_grammar_agrees_with_the_dialects_validator(dialect, keyword):
    fragment, rejected, accepted = CASES[keyword]
    schema = {"$schema": URIS[dialect], **fragment}
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert validator.is_valid(accepted)
    ignored = keyword in _NOT_IN_DIALECT[dialect]
    assert validator.is_valid(rejected) == ignored  # the oracle itself: the keyword decides
    try:
        compiled = compile_grammar(schema)
    except SchemaError:  # a keyword the compiler refuses where it applies (contains, unevaluated*)
        assert not ignored, (dialect, keyword)
        return
    machine = build_machine(compiled)
    for instance in (rejected, accepted):
        assert machine.accepts(canonical_json(instance, schema)) == validator.is_valid(instance), (dialect, instance)
    assert any(note.startswith(f"{keyword} at #") for note in compiled.ignored) == ignored


def test_without_schema_every_keyword_applies():
    # no dialect named: the compiler's superset (dependencies too, which 2020-12 dropped)
    for keyword in ("const", "if", "dependencies", "dependentRequired", "prefixItems"):
        fragment, rejected, accepted = CASES[keyword]
        machine = build_machine(compile_grammar(fragment))
        assert not machine.accepts(canonical_json(rejected, fragment)), keyword
        assert machine.accepts(canonical_json(accepted, fragment)), keyword


def test_a_ref_into_an_ignored_keyword_still_resolves():
    # a JSON pointer may point anywhere in the document, into an ignored keyword's value too
    schema = {"$schema": URIS["draft-04"], "type": "object", "if": {"type": "string", "maxLength": 2},
              "properties": {"a": {"$ref": "#/if"}}}
    machine = build_machine(compile_grammar(schema))
    assert machine.accepts(canonical_json({"a": "xy"}, schema))
    assert not machine.accepts(canonical_json({"a": "xyz"}, schema))


def test_draft_3_format_names_are_custom_in_later_dialects():
    # "color" is a format of draft 3 alone: an annotation in a draft-04 schema (its validator
    # checks no such format), refused where no dialect is named (not implemented)
    schema = {"$schema": URIS["draft-04"], "type": "string", "format": "color"}
    compiled = compile_grammar(schema)
    assert any("'color'" in note for note in compiled.unenforced_formats)
    assert jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).is_valid("nope")
    assert build_machine(compiled).accepts(canonical_json("nope", schema))
    with pytest.raises(SchemaError, match="format"):
        compile_grammar({"type": "string", "format": "color"})
