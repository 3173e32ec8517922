"""Extra keys where additionalProperties is absent (JSON Schema: any other key, any value), the
default; extra_keys=False is the strict mode that forbids them.

Oracles: jsonschema (format checker on) on every object of up to three keys from a pool that
holds the declared names and their prefixes, each with a few values; a parser that raises on a
repeated key for generated outputs; test_map_keys' brute-force mask oracle on token walks.
"""

import itertools
import json
import re

import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar, compile_schema
from inferlab.constrain.stack import build_machine, compile_machine
from oracles import agrees_with_jsonschema, generate_checked, keyed_objects, no_repeats, validator, walk_against_oracle

DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
SCHEMAS = {
    "optional": {"type": "object", "properties": {"a": DIGIT, "ab": {"type": "null"}}},
    "required": {"type": "object", "properties": {"a": DIGIT, "b": {"type": "string", "maxLength": 2}},
                 "required": ["a"]},
    # exclusive through the one required key: extra keys never write a declared name
    "oneof-tag": {"oneOf": [{"type": "object", "properties": {"c": {"const": "a"}, "x": DIGIT}, "required": ["c"]},
                            {"type": "object", "properties": {"c": {"const": "b"}}, "required": ["c"]}]},
    # not exclusive once extra keys are written ({"a": 1, "b": 2} matches both): compiled exactly
    # (each branch without the other) or refused, never as anyOf
    "oneof-required": {"oneOf": [{"type": "object", "required": ["a"], "properties": {"a": {}}},
                                 {"type": "object", "required": ["b"], "properties": {"b": {}}}]},
    "nested": {"type": "object", "properties": {"o": {"type": "object", "properties": {"a": DIGIT}}},
               "required": ["o"]},
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_stack_grammar_agrees_with_jsonschema(name):
    assert agrees_with_jsonschema(SCHEMAS[name], keyed_objects()) > 10  # sound and complete on canonical texts


@pytest.mark.parametrize("name", ["optional", "required", "nested"])
def test_flat_regex_is_sound_and_complete_on_canonical_texts(name):
    schema = SCHEMAS[name]
    compiled = compile_schema(schema)
    regex = re.compile(compiled.regex)
    v = validator(schema)
    for instance in keyed_objects():
        text = canonical_json(instance, schema)
        if any(isinstance(x, dict) for x in instance.values()) and name != "nested":
            assert not regex.fullmatch(text) or v.is_valid(instance)  # any_depth 1: nested values may be cut
            continue
        assert (regex.fullmatch(text) is not None) == v.is_valid(instance), instance


def test_extra_keys_never_repeat_a_declared_name_or_each_other():
    schema = SCHEMAS["optional"]
    machine = build_machine(compile_grammar(schema))
    regex = re.compile(compile_schema(schema).regex)
    assert machine.accepts('{"a":1,"b":2}') and machine.accepts('{"b":2,"c":3}') and machine.accepts('{"":1}')
    for text in ('{"a":1,"a":2}', '{"b":2,"a":1}', '{"b":1,"b":2}', '{"ab":null,"ab":null}', '{"b":"x","\\u0061":1}',
                 '{"b":1,"a":"x"}'):
        assert not machine.accepts(text), text
    assert not regex.fullmatch('{"b":2,"a":1}') and not regex.fullmatch('{"ab":null,"a":"x"}')


def test_strict_mode_forbids_them_and_says_so():
    schema = SCHEMAS["required"]
    strict = compile_grammar(schema, extra_keys=False)
    assert any("additionalProperties absent at #" in n for n in strict.narrowed)
    machine = build_machine(strict)
    assert machine.accepts('{"a":1}') and not machine.accepts('{"a":1,"c":2}')
    assert not any("additionalProperties absent" in n for n in compile_grammar(schema).narrowed)


def test_a_pattern_accepting_everything_beside_open_extra_keys_changes_nothing():
    # (a map of keys up to 255 characters before, and keys outside the pattern were not generated)
    schema = {"type": "object", "patternProperties": {"^.{1,255}$": {}}}
    compiled, machine = compile_machine(schema)
    assert not compiled.narrowed
    assert machine.accepts('{"":[1],"' + "x" * 300 + '":{"y":null}}') and not machine.accepts('{"a":1,"a":2}')
    with pytest.raises(SchemaError, match="patternProperties"):  # a bad regex is still an error
        compile_grammar({"type": "object", "patternProperties": {"(": {}}})


@pytest.mark.parametrize("name", [pytest.param("optional", marks=pytest.mark.slow), "oneof-tag"])  # ~3.5 s, ~2 s
def test_masks_equal_brute_force_with_extra_keys(name):
    assert walk_against_oracle(SCHEMAS[name], seed=len(name)) > 0


@pytest.mark.parametrize("name", ["optional", "oneof-tag", "nested"])
def test_generation_never_repeats_a_key_and_validates(name, tok512):
    assert generate_checked(SCHEMAS[name], tok512, seeds=12, max_new_tokens=80) >= 6  # measured 9..12


@pytest.fixture(scope="module")
def tok512():
    from inferlab.model.tokenizer_loaders import load_vocab
    return load_vocab("512")


def test_no_repeats_parser_catches_repeats():  # the oracle above is only as good as this
    with pytest.raises(ValueError):
        json.loads('{"a":1,"a":2}', object_pairs_hook=no_repeats)


def test_canonical_text_of_an_anyof_follows_the_branch_the_instance_is_valid_against():
    # branch 0's flat regex (canonical_json's, recursion unrolled) is too large, and canonical_json
    # once needed it to pick that branch: it wrote branch 1's key order, and the grammar rejected it
    node = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/node"} for i in range(30)}}
    schema = {"$defs": {"node": {**node, "properties": {"n": {"$ref": "#/$defs/node"}, **node["properties"]}}},
              "anyOf": [{"type": "object", "properties": {"t": {"const": "a"}, "n": {"$ref": "#/$defs/node"}},
                         "required": ["t"]},
                        {"type": "object", "properties": {"n": {"type": "integer"}, "t": {"const": "b"}}}]}
    machine = build_machine(compile_grammar(schema))
    deep = {}
    for _ in range(6):
        deep = {"n": deep}
    for instance in ({"n": deep, "t": "a"}, {"t": "b", "n": 1}, {"n": deep, "t": "a", "z": None}):
        assert validator(schema).is_valid(instance)
        assert machine.accepts(canonical_json(instance, schema)), instance
    assert canonical_json({"n": {}, "t": "a"}, schema) == '{"t":"a","n":{}}'


def test_canonical_text_of_a_oneof_whose_branches_agree_needs_no_branch_regex():
    # JSON Schema Store's netlify.json: oneOf [{required: [files]}, {required: [folder]}] beside
    # properties with a recursive $ref. Both branches give one canonical text, but canonical_json
    # also built each branch's flat regex (recursion unrolled: too large) and, with none built,
    # wrote the instance's own key order, which the grammar rejects
    node = {"type": "object", "properties": {f"p{i}": {"$ref": "#/definitions/n"} for i in range(12)}}
    schema = {"definitions": {"n": node}, "type": "object", "required": ["name"],
              "properties": {"tree": {"$ref": "#/definitions/n"}, "folder": {"type": "string"},
                             "files": {"type": "array"}, "name": {"type": "string"}},
              "oneOf": [{"required": ["files"]}, {"required": ["folder"]}]}
    machine = build_machine(compile_grammar(schema))
    for instance in ({"name": "x", "folder": "f", "tree": {"p3": {}, "p1": {}}}, {"files": [], "name": "y"}):
        assert validator(schema).is_valid(instance)
        assert machine.accepts(canonical_json(instance, schema)), instance
    assert canonical_json({"name": "x", "folder": "f", "tree": {"p3": {}, "p1": {}}}, schema) == \
        '{"tree":{"p1":{},"p3":{}},"folder":"f","name":"x"}'


def test_oneof_exclusive_only_without_extra_keys_falls_back_to_closed_branches_and_says_so():
    # {"a": {"x1": 1}, "b": {"x1": 2}} is valid for both branches, so oneOf != anyOf; "each branch
    # without the other" needs `not` of a patternProperties schema (refused); without extra keys
    # the branches never write each other's required key: sound, and recorded as a narrowing
    pats = {"type": "object", "patternProperties": {"^x": {"type": "integer"}}}
    schema = {"oneOf": [{"type": "object", "properties": {"a": pats}, "required": ["a"]},
                        {"type": "object", "properties": {"b": pats}, "required": ["b"]}]}
    compiled = compile_grammar(schema)
    assert any(n.startswith("oneOf at #: its branches are exclusive only without extra keys") for n in compiled.narrowed)
    values = [{"x1": 1}, {"x1": "s"}, 1, None]
    instances = [inst for keys in [("a",), ("b",), ("a", "b"), ("a", "c"), ("b", "a")]
                 for inst in keyed_objects(keys, values, len(keys))]
    assert agrees_with_jsonschema(schema, instances, complete=lambda inst: set(inst) in ({"a"}, {"b"})) >= 2
    # with array values instead, "an array with a non-integer item" is contains: exact, no narrowing
    ints = {"type": "array", "items": {"type": "integer"}}
    exact = {"oneOf": [{"type": "object", "properties": {k: ints}, "required": [k]} for k in "ab"]}
    assert not any(n.startswith("oneOf") for n in compile_grammar(exact).narrowed)
    instances = [inst for keys in [("a",), ("b",), ("a", "b"), ("a", "c"), ("b", "a")]
                 for inst in keyed_objects(keys, [[1], ["x"], 1, None], len(keys))]
    assert agrees_with_jsonschema(exact, instances) >= 10
    # closed, branch 0 would be exclusive of closed branch 1, but not of branch 1 itself, which
    # accepts {"a": 1} (a as an extra key): the fallback must not apply
    loose = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                       {"type": "object", "properties": {"b": pats}}]}
    with pytest.raises(SchemaError, match="over objects has no exact form"):
        compile_grammar(loose)
    # additionalProperties given: no fallback; each branch without the other needs "an object
    # with an x-key that is not an integer" (refused)
    with pytest.raises(SchemaError, match="^not at #/oneOf/0/.*/properties/b/not: the negation of this schema "
                                          "over objects has no exact form"):
        compile_grammar({"oneOf": [{**b, "additionalProperties": True} for b in schema["oneOf"]]})


def test_oneof_beside_a_type_branch_is_exact():
    # not {"type": "null"} is written as the other types, so "each branch without the others" compiles
    schema = {"oneOf": [{"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
                        {"type": "object", "properties": {"r": {"type": "integer", "minimum": 5}}, "required": ["r"]},
                        {"type": "null"}]}
    compiled, machine = compile_machine(schema)
    assert not any("exclusive only without extra keys" in n for n in compiled.narrowed)  # not the fallback
    v = validator(schema)
    for instance in ({"k": "x"}, {"r": 5}, {"k": "x", "r": 5}, {"k": "x", "r": 4}, {"r": 7, "z": 1}, None, {"k": 1}):
        assert machine.accepts(canonical_json(instance, schema)) == v.is_valid(instance), instance


@pytest.mark.parametrize("names", [("a",), ("", "a"), ("ab", "a", "abc", "b"), ('x"y', "é", "\u0001"), ("",),
                                   ("ab", "ac"), ("a\\", '""')])
def test_extra_key_language_is_every_canonical_key_but_the_names(names):
    from inferlab.constrain.schema.objects import _key_not_in
    key = re.compile(_key_not_in(names))
    alphabet = ["a", "b", "c", "é", '"', "\u0001", "x", "\\", "\n", "\U0001f600"]
    words = {"".join(t) for n in range(4) for t in itertools.product(alphabet, repeat=n)} | set(names)
    for word in words:
        assert (key.fullmatch(json.dumps(word, ensure_ascii=False)) is not None) == (word not in names), word
    assert not key.fullmatch('"\\u0061"')  # a key is written canonically (no needless escape)
