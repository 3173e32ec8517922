"""The typed schema form (constrain.schema.typed) against jsonschema, the independent oracle.

- complement(S), where it has a positive form, holds on an instance exactly where S fails;
  complement_within(S, t) so among the instances of type t; part(S, t) holds on an instance of
  type t exactly where S does;
- multipleOf's intersection against hand-derived least common multiples, and against the
  definition (a multiple of both sides, read as exact decimals, iff one of the result);
- end to end, schemas drawn from the keyword families the merges, the disjointness test and
  the complement handle (allOf, oneOf, not over objects and arrays, required, properties,
  enum/const, dependentRequired, if/then/else, prefixItems/items, contains, counts, bounds,
  multipleOf, pattern): every instance the compiled grammar accepts is valid, and where the
  compile records no narrowing every valid instance is accepted. A refusal is allowed (it names
  its keyword); an unsound acceptance never is.
"""

from fractions import Fraction

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.constrain.schema import SchemaError
from inferlab.constrain.schema.typed import complement, complement_within, multiple_of, part
from inferlab.constrain.stack import compile_machine
from oracles import serializations

POOL = [None, True, False, 0, 1, 2, 6, -3, 2.5, 0.03, "", "a", "bc", "abc", "x1",
        [], [1], [2], ["a"], [1, "a"], ["a", 1], [1, 2], [1, 2, 3], [[]], [{}], [None, None],
        {}, {"a": 1}, {"a": 2}, {"a": "x"}, {"b": 1}, {"a": 1, "b": 1}, {"a": "x", "b": []},
        {"a": 1, "c": None}, {"c": 1}, {"a": [1]}, {"a": {"a": 1}}, {"b": "bc", "c": 2}]
NAMES = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from([None, 1, 2, "x", "a", [], [1], {}, {"a": 1}, [1, "a"], {"a": 1, "b": 1}])
TYPES = ["null", "boolean", "object", "array", "number", "string", "integer"]


def _valid(schema, x) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(x)


@st.composite
def leaf(draw):
    kind = draw(st.sampled_from(["type", "required", "count", "const", "enum", "dependentRequired", "items",
                                 "bounds", "multipleOf", "length", "pattern", "closed", "containsCount"]))
    if kind == "type":
        return {"type": draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True))}
    if kind == "required":
        return {"required": draw(st.lists(NAMES, min_size=1, max_size=2, unique=True))}
    if kind == "containsCount":  # (beside a contains where a schema of several keywords draws one)
        return {draw(st.sampled_from(["minContains", "maxContains"])): draw(st.integers(0, 2))}
    if kind == "count":
        return {draw(st.sampled_from(["minProperties", "maxProperties", "minItems", "maxItems"])): draw(st.integers(0, 2))}
    if kind == "const":
        return {"const": draw(VALUES)}
    if kind == "enum":
        return {"enum": draw(st.lists(VALUES, min_size=1, max_size=3))}
    if kind == "dependentRequired":
        return {"dependentRequired": {draw(NAMES): draw(st.lists(NAMES, min_size=1, max_size=2, unique=True))}}
    if kind == "items":
        return {"items": {"type": draw(st.sampled_from(["integer", "string"]))}}
    if kind == "bounds":
        return {draw(st.sampled_from(["minimum", "maximum", "exclusiveMinimum"])): draw(st.integers(-2, 3))}
    if kind == "multipleOf":
        return {"multipleOf": draw(st.sampled_from([2, 3, 0.5, 0.01]))}
    if kind == "length":
        return {draw(st.sampled_from(["minLength", "maxLength"])): draw(st.integers(0, 2))}
    if kind == "pattern":
        return {"pattern": draw(st.sampled_from(["^a", "c$", "^[a-z]+$", "[0-9]"]))}
    return {"properties": {draw(NAMES): True}, "additionalProperties": False}


def extend(children):
    both = st.tuples(children, children)
    return st.one_of(
        both.map(lambda ab: {**ab[0], **ab[1]}),                                 # a schema of several keywords
        st.builds(lambda n, s: {"properties": {n: s}}, NAMES, children),
        children.map(lambda s: {"not": s}),
        st.lists(children, min_size=2, max_size=3).map(lambda bs: {"oneOf": bs}),
        st.lists(children, min_size=2, max_size=2).map(lambda bs: {"anyOf": bs}),
        both.map(lambda ab: {"if": ab[0], "then": ab[1]}),
        children.map(lambda s: {"contains": s}),
        st.lists(children, min_size=1, max_size=2).map(lambda bs: {"prefixItems": bs}),
        children.map(lambda s: {"dependentSchemas": {"a": s}}),
    )


SCHEMAS = st.recursive(leaf(), extend, max_leaves=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS)
def test_complement_holds_exactly_where_the_schema_fails(neg):
    positive = complement(neg)
    if positive is None:
        return
    for x in POOL:
        assert _valid(positive, x) == (not _valid(neg, x)), (neg, positive, x)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS, st.sampled_from(["object", "array"]))
def test_complement_within_a_type_and_the_part_of_a_type(node, t):
    typed_part = part(node, t)
    positive = complement_within(node, t)
    for x in [x for x in POOL if isinstance(x, dict if t == "object" else list)]:
        assert _valid(typed_part, x) == _valid(node, x), (node, typed_part, x)
        if positive is not None:
            assert _valid(positive, x) == (not _valid(node, x)), (node, positive, x)


@pytest.mark.parametrize("a, b, want", [
    (2, 3, 6), (4, 6, 12), (2, 0.5, 2), (1.5, 2, 6), (0.01, 0.015, 0.03), (0.5, 0.25, 0.5), (0.02, 0.03, 0.06),
    (0.1, 3, 3), (0.25, 0.1, 0.5), (0, 2, None), (-2, 3, None), (float("inf"), 2, None), (True, 2, None),
])
def test_multiple_of_is_the_least_common_multiple_of_the_written_decimals(a, b, want):
    assert multiple_of(a, b) == want


@pytest.mark.parametrize("a", [1, 2, 3, 0.5, 0.25, 0.1, 0.01, 0.03, 0.015, 1.5, 0.2])
def test_multiple_of_holds_exactly_on_the_common_multiples(a):
    grid = [Fraction(k, 200) for k in range(-40, 1300)]  # every multiple of 1/200 up to 6.5
    for b in [1, 2, 3, 5, 0.5, 0.25, 0.1, 0.01, 0.02, 0.03, 0.015, 1.5, 2.5, 0.2]:
        m = multiple_of(a, b)
        fa, fb, fm = (Fraction(repr(x)) if isinstance(x, float) else Fraction(x) for x in (a, b, m))
        for x in grid:
            assert ((x / fa).denominator == 1 and (x / fb).denominator == 1) == ((x / fm).denominator == 1), (a, b, x)


def _drawn_instances(draw):
    json = st.recursive(st.none() | st.booleans() | st.integers(-3, 7) | st.sampled_from(["", "a", "x1", "abc"]),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(NAMES, c, max_size=3), max_leaves=5)
    return draw(st.lists(json, max_size=8))


@st.composite
def combined(draw):
    a, b = draw(SCHEMAS), draw(SCHEMAS)
    shape = draw(st.sampled_from(["allOf", "oneOf", "not", "beside"]))
    schema = {"allOf": [a, b]} if shape == "allOf" else {"oneOf": [a, b]} if shape == "oneOf" \
        else {"not": a} if shape == "not" else {**a, "not": b}
    return schema, POOL + _drawn_instances(draw)


def check_against_jsonschema(schema, instances):
    try:
        compiled, machine = compile_machine(schema)
    except SchemaError:
        return "refused"
    v = jsonschema.Draft202012Validator(schema)
    for x in instances:
        # sound: an invalid instance is accepted in no order of its keys; complete: a valid one
        # in some order (unless the compile records a narrowing)
        accepted, valid = any(machine.accepts(t) for t in serializations(x, schema)), v.is_valid(x)
        assert valid or not accepted, ("invalid accepted", schema, x)
        assert accepted or not valid or compiled.narrowed, ("valid rejected", schema, x)
    return "compiled"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(combined())
def test_merges_disjointness_and_complements_agree_with_jsonschema(case):
    check_against_jsonschema(*case)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(combined())
def test_merges_disjointness_and_complements_agree_with_jsonschema_slow(case):
    check_against_jsonschema(*case)


@pytest.mark.parametrize("schema, instances", [
    # not over objects: a listed object (every way an object differs from it)
    ({"type": "object", "not": {"const": {"a": 1, "b": "x"}}},
     [{"a": 1, "b": "x"}, {"a": 1}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 1, "b": "x", "c": 0}, {}]),
    # not over arrays: a listed array (length, or an item, differs)
    ({"type": "array", "not": {"enum": [[1, 2], []]}}, [[1, 2], [], [1], [2, 1], [1, 2, 3], [1, "2"]]),
    # not dependentRequired: the name present and a name it requires absent
    ({"type": "object", "not": {"dependentRequired": {"a": ["b", "c"]}}},
     [{"a": 1}, {"a": 1, "b": 1}, {"a": 1, "b": 1, "c": 1}, {}, {"b": 1}]),
    # not oneOf: none or both
    ({"type": "object", "not": {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}},
     [{}, {"a": 1}, {"b": 1}, {"a": 1, "b": 1}, {"c": 1}]),
    # not if/then/else over arrays
    ({"type": "array", "not": {"if": {"minItems": 2}, "then": {"items": {"type": "integer"}},
                               "else": {"maxItems": 0}}},
     [[], [1], [1, 2], [1, "a"], ["a"], [1, 2, 3]]),
    # not beside another type's keywords: the object part alone is negated among objects
    ({"type": ["object", "string"], "not": {"required": ["a"], "minLength": 2}},
     [{"a": 1}, {}, {"b": 1}, "", "a", "ab"]),
    # oneOf of overlapping object branches, each without the others (their parts of type object)
    ({"oneOf": [{"type": "object", "required": ["a"]}, {"type": ["object", "string"], "required": ["b"]}]},
     [{"a": 1}, {"b": 1}, {"a": 1, "b": 1}, {}, "s", 1]),
    # allOf of patterns: both, as lookaheads at the start (search semantics, anchors kept)
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}, {"pattern": "x|^y"}]},
     ["ab", "axb", "ayb", "yab", "b", "a\nxb", "a\ufeffxb", "axbc", "xab"]),
    # a key that several patternProperties match meets every matching schema (its own key language)
    ({"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 3}, "^c": {"type": "string"}},
      "additionalProperties": False},
     [{"ab": 3}, {"ab": 2}, {"ab": "x"}, {"a": 1.5}, {"b": 1.5}, {"ca": 1}, {"cb": "s"}, {"cb": 4}, {"x": 1}, {}]),
    ({"type": "object", "allOf": [{"patternProperties": {"^x": {"minimum": 10}}},
                                  {"patternProperties": {"y$": {"maximum": 20}}}]},
     [{"xy": 15}, {"xy": 5}, {"xy": 25}, {"x": 5}, {"y": 25}, {"xay": 10}, {"q": 0}]),
    # not contains with minContains/maxContains: fewer or more items satisfy it
    ({"type": "array", "not": {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}},
     [[], [1], ["a"], [1, 2], [1, "a", 2], [1, 2, 3], [1, 2, 3, 4], ["a", 1, 1, 1, 1]]),
    # allOf of multipleOf: their lcm
    ({"type": "integer", "allOf": [{"multipleOf": 2}, {"multipleOf": 3}]}, [0, 12, 24, 4, 6, 8, 18, -12, 7, 3]),
])
def test_cases_compile_exactly(schema, instances):
    assert check_against_jsonschema(schema, instances) == "compiled"
    compiled, _ = compile_machine(schema)
    assert not [m for m in compiled.narrowed if "plain decimal" not in m], compiled.narrowed


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"allOf": [{"contains": {"type": "integer"}}, {"contains": {"type": "string"}}]}, "contains", "#/allOf/1/contains"),
    ({"type": "string", "allOf": [{"pattern": "^(?!x)"}, {"pattern": "b$"}]}, "pattern", "#/allOf/1/pattern"),
])
def test_a_merge_without_an_exact_form_is_refused_by_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(SchemaError) as exc:
        compile_machine(schema)
    assert str(exc.value).startswith(f"{keyword} at {pointer}"), str(exc.value)
