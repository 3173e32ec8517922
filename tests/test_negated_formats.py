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


_FORMATS = ["date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "hostname", "uri", "iri", "json-pointer"]
_SEEDS = ["2024-02-29", "23:59:59Z", "2024-01-31T12:00:00+01:00", "a.b@example.com",
          "123e4567-e89b-12d3-a456-426614174000", "192.168.0.1", "fe80::1", "a-b.example.com",
          "https://example.com/a?b=c#d", "http://\u00e9.com/", "/a~1b", "$AB", "", "x", "a..b"]


def _negated_schemas():
    from hypothesis import strategies as st
    fmt = st.sampled_from(_FORMATS).map(lambda f: {"format": f})
    leaf = st.one_of(fmt, st.sampled_from([{"pattern": "^[a-z0-9.-]+$"}, {"maxLength": 12}, {"minLength": 3}]))
    inner = st.one_of(leaf, st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"anyOf": xs}),
                      st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"allOf": xs}))
    return st.one_of(
        inner.map(lambda s: {"type": "string", "not": s}),
        st.tuples(fmt, leaf, leaf).map(lambda t: {"type": "string", "if": t[0], "then": t[1], "else": t[2]}),
        st.tuples(fmt, leaf).map(lambda t: {"type": "string", "oneOf": list(t)}),
    )


def test_negated_formats_in_drawn_combinations_never_accept_what_jsonschema_rejects():
    """Soundness on drawn schemas (not over anyOf/allOf of formats, patterns and lengths; if with a
    format condition; oneOf of a format and another leaf) and drawn strings: seeds of every format
    and their one-character mutations. A refusal (size limits) is allowed; a narrowing is (the
    complement leaves out what the superset holds); an invalid string accepted is not."""
    import random

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    compiled = []

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(schema=_negated_schemas(), seed=st.integers(0, 2**16))
    def prop(schema, seed):
        try:
            _, machine = compile_machine(schema)
        except SchemaError:
            return
        compiled.append(schema)
        rng = random.Random(seed)
        texts = list(_SEEDS)
        for s in _SEEDS:
            t = list(s)
            if t:
                t[rng.randrange(len(t))] = rng.choice("0a.-:@/Z ")
            texts.append("".join(t))
        v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        for t in texts:
            if machine.accepts(json.dumps(t, ensure_ascii=False)):
                assert v.is_valid(t), (schema, t)

    prop()
    assert len(compiled) >= 30        # (48 of the 60 drawn compile: the rest hit a size limit)
