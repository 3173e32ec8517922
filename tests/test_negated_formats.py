"""A format inside not / if / a oneOf's other branch: its complement is taken of a superset of
the format (formats.SUPERSETS), so it is sound, and the strings it leaves out are a narrowing the
grammar records. Oracle: jsonschema with its format checker, on hand-written texts."""

import json

import jsonschema
import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.stack import compile_machine

TEXTS = ['"12345678-1234-1234-1234-123456789abc"', '"12345678-1234-1234-1234-1234-5678abcd"', '"hello"', '"$ABC"',
         '"2024-01-01"', '"2024-13-01"', '"2024-01-01T10:00:00Z"', '"ab"', '"abcd"', '""', '"a.com"', '"a b"',
         '"1.2.3.4"', '"1.2.3.400"', '"::1"', '"a@b"', '"http://x"', '"x"', '"/a"', '5', 'null', '"a..b"']

SCHEMAS = [
    {"not": {"format": "uuid"}},
    {"type": "string", "oneOf": [{"format": "uuid"}, {"pattern": "^\\$[A-Z]"}]},
    {"type": "string", "if": {"format": "date"}, "then": {"maxLength": 10}, "else": {"minLength": 3}},
    {"type": "string", "not": {"anyOf": [{"format": "hostname"}, {"format": "ipv4"}, {"format": "ipv6"}]}},
    {"type": "string", "not": {"format": "uri"}},
    {"type": "string", "not": {"anyOf": [{"format": "email"}, {"format": "date-time"}, {"format": "json-pointer"}]}},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:50] for s in SCHEMAS])
def test_a_negated_format_is_sound_and_its_loss_recorded(schema):
    grammar = compile_grammar(schema)
    _, machine = compile_machine(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    ours = {t: machine.accepts(t) for t in TEXTS}
    valid = {t: validator.is_valid(json.loads(t)) for t in TEXTS}
    assert [t for t in TEXTS if ours[t] and not valid[t]] == []      # sound
    assert any(ours.values())
    assert any("not/if over format" in note and "the complement leaves out" in note for note in grammar.narrowed)


def test_what_the_complement_leaves_out_is_a_string_the_superset_takes():
    """"a..b" is no hostname (jsonschema agrees) but has a hostname's characters: not taken."""
    schema = {"type": "string", "not": {"format": "hostname"}}
    _, machine = compile_machine(schema)
    assert machine.accepts('"a b"') and not machine.accepts('"a.com"') and not machine.accepts('"a..b"')
    assert jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid("a..b")


def test_a_format_with_no_superset_is_still_refused_by_name_and_pointer():
    with pytest.raises(SchemaError, match=r"^format at #/not/format: a format inside a negated schema .*negated: date"):
        compile_grammar({"type": "string", "not": {"format": "regex"}})
