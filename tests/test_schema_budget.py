"""The compiler's work budget and its cheaper exact routes, against independent oracles.

- schema equality without serialising (common._json_equal) against a canonical JSON text
  written here (sorted keys, integral floats as integers, booleans apart from numbers);
- oneOf split by JSON type (combinators.one_of_by_type): every instance of a small product of
  property values, accepted by the compiled grammar iff jsonschema (format checker on) accepts
  it;
- oneOf whose exclusive form would distribute past MAX_SUBSCHEMAS is refused by counting, one
  line naming oneOf and its pointer;
- the automaton algebra's budget: `not` over nested anyOf whose operand would blow up is one
  refusal line naming keyword, pointer and limit (library and CLI), and the same shape with a
  small operand is exact on every string of a small alphabet up to length 6 (jsonschema);
- a compile, which pauses the cyclic GC, leaves it as the caller had it (built or refused).
"""

import gc
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import all_objects, assert_exact

from inferlab.cli import main
from inferlab.bench.schema_bench import _size_refusal
from inferlab.constrain.dfa_algebra import MAX_PRODUCT_STATES
from inferlab.constrain.schema import MAX_SUBSCHEMAS, SchemaError
from inferlab.constrain.schema.common import _json_equal
from inferlab.constrain.stack import compile_machine
from inferlab.errors import InferlabError

# --- equality of JSON values -----------------------------------------------------------------

SCALAR_VALUES = st.sampled_from([0, 1, 1.0, 2.5, -1, True, False, None, "", "a", "1", "true"])
JSON_VALUES = st.recursive(SCALAR_VALUES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from("abc"), inner, max_size=3), max_leaves=8)


def canonical_text(value) -> str:
    """JSON-Schema equality as text: 1 == 1.0, true != 1, key order irrelevant."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + canonical_text(value[k]) for k in sorted(value)) + "}"
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_json_equality_is_json_schema_equality(a, b):
    assert _json_equal(a, b) == (canonical_text(a) == canonical_text(b))
    assert _json_equal(a, a) and _json_equal([a, b], [a, b])  # shared parts are equal at once
    assert _json_equal({"x": a, "y": b}, {"y": b, "x": a})


# --- oneOf, one JSON type at a time ------------------------------------------------------------


TAGGED = {"oneOf": [  # branches without "type": each admits every non-object
    {"properties": {"kind": {"enum": ["a"]}, "n": {"type": "integer"}}, "required": ["kind"],
     "additionalProperties": False},
    {"properties": {"kind": {"enum": ["b"]}, "n": {"type": "string"}, "tags": {"type": "array", "items":
                    {"type": "string"}}}, "required": ["kind", "n"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"type": "string", "pattern": "^x"}, "n": {"type": "null"}},
     "required": ["kind"], "additionalProperties": False},
    {"type": ["string", "null"], "maxLength": 3}]}


@pytest.mark.parametrize("schema", [TAGGED, {"type": ["object", "string", "null"], **TAGGED},
                                    {"oneOf": TAGGED["oneOf"][:2] + [{"type": "integer", "minimum": 1}]}])
def test_one_of_by_type_is_exact(schema):
    """Objects: disjoint by their enum or pattern tags (the pattern branch by jsonschema checking
    the listed values). Other types: two branches admit every value, so none matches exactly one,
    except where only one does (the last schema's integers)."""
    assert_exact(schema, all_objects({"kind": ["a", "b", "xy", "z", 1], "n": [1, "s", None],
                                  "tags": [["t"], [1]]}) + ["abcd", "ab", 2, 0])


def test_one_of_over_array_properties_compiles_where_negation_would_be_refused():
    """Twelve object kinds, each with an array property: `not` of a branch would be refused (it
    constrains arrays), but the branches are disjoint as objects and overlap completely on the
    other types, so the oneOf is exact without any negation."""
    kinds = [f"k{i}" for i in range(12)]
    schema = {"oneOf": [{"properties": {"kind": {"const": k}, "ids": {"type": "array", "items": {"type": "integer"}}},
                         "required": ["kind"], "additionalProperties": False} for k in kinds]}
    assert_exact(schema, all_objects({"kind": kinds[:3] + ["k99"], "ids": [[1], ["x"], []]}))


def test_an_exclusive_one_of_past_the_expansion_limit_is_refused_by_counting():
    """Eight object kinds told apart by optional properties only: each branch without the
    others is an allOf of seven negations of six alternatives each, 8 * 6^7 in all."""
    props = [f"p{i}" for i in range(6)]
    schema = {"oneOf": [{"properties": {p: {"enum": [k]} for p in props}} for k in range(8)]}
    with pytest.raises(SchemaError) as exc:
        compile_machine(schema)
    message = str(exc.value)
    assert message.startswith("oneOf at #/oneOf: ") and f"{8 * 6 ** 7:,} alternatives" in message
    assert f"{MAX_SUBSCHEMAS:,}" in message and "\n" not in message
    assert _size_refusal(message)  # schema-bench counts it among the size refusals


# --- the algebra's budget --------------------------------------------------------------------

def negated_code(pattern: str) -> dict:
    """A string property whose `not` holds nested anyOf; its operand's automaton grows with the
    pattern (a search for "a" followed by n letters needs 2^n states)."""
    return {"type": "object", "properties": {"code": {"type": "string", "not": {"anyOf": [
        {"maxLength": 1}, {"anyOf": [{"pattern": "^x"}, {"anyOf": [{"pattern": pattern}]}]}]}}},
        "required": ["code"], "additionalProperties": False}


def test_an_operand_over_the_budget_is_one_refusal_line(tmp_path, capsys):
    schema = negated_code("a[ab]{16}$")
    with pytest.raises(SchemaError) as exc:
        compile_machine(schema)
    message = str(exc.value)
    assert message.startswith("not at #/properties/code/not: ") and "\n" not in message
    assert f"exceeds {MAX_PRODUCT_STATES:,} states" in message and _size_refusal(message)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    assert main(["schema", "compile", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "#/properties/code/not" in err[0] and f"{MAX_PRODUCT_STATES:,} states" in err[0]


def test_the_complement_of_nested_any_of_is_exact():
    schema = negated_code("a[ab]{2}$")
    codes = ["".join(p) for n in range(7) for p in itertools.product("abx", repeat=n)]
    assert_exact(schema, [{"code": c} for c in codes] + [{}, {"code": 1}])


@pytest.mark.parametrize("was_enabled", [True, False])
def test_a_compile_leaves_the_gc_as_it_found_it(was_enabled):
    """The compile pauses the cyclic GC; after it, whether it built a machine or refused the
    schema, the collector is back to the state the caller had."""
    schema_ok = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema_bad = {"type": "number", "multipleOf": 0.123456789}
    try:
        if not was_enabled:
            gc.disable()
        compile_machine(schema_ok)
        assert gc.isenabled() == was_enabled
        with pytest.raises(InferlabError):
            compile_machine(schema_bad)
        assert gc.isenabled() == was_enabled
    finally:
        gc.enable()
