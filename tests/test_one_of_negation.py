"""oneOf whose branches overlap, compiled as "each branch without the others" (exact), where the
negation of a branch has a positive form only in the context of the branch it is taken beside:

- closed objects (additionalProperties false): "a name past the declared ones" is one of the
  finitely many names the context's objects may hold;
- arrays: "an item that fails the items schema" is "at least one item" where the context's items
  all fail it (array of numbers against array of strings);
- a schema is the conjunction of its keywords: not (required and not X) is "misses a required
  name, or X"; count bounds negate to the other side;
- string branches (patterns) by automaton complement.

Oracles: jsonschema on every instance of a small product (the compiled grammar accepts an
instance's canonical text iff jsonschema accepts it), and `_negation` itself against jsonschema:
among the values the context admits, the positive form holds exactly where the negated schema
fails.
"""

import itertools

import jsonschema
import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.schema.typed import NegationContext, complement as _negation
from inferlab.constrain.schema.common import _NOT_IN_DIALECT, document_dicts
from inferlab.constrain.schema.values import ValueChecker
from oracles import all_objects, assert_exact

BOOL_OR_CONST = {
    # o90946's shape: {} is valid for both, so it is in neither; a discriminator or the own key picks one
    "oneOf": [{"type": "object", "properties": {"kind": {"const": "first"}, "first": {"type": "boolean"}},
               "additionalProperties": False},
              {"type": "object", "properties": {"kind": {"const": "second"}, "second": {"type": "boolean"}},
               "additionalProperties": False}]}
NEXT_OR_PREVIOUS = {  # no type, no required (o10092): non-objects satisfy both
    "oneOf": [{"additionalProperties": False, "properties": {"next": {"type": "string"}}},
              {"additionalProperties": False, "properties": {"previous": {"type": "string"}}}]}
PARTITIONS = {  # required beside closed objects, values that overlap (o27348)
    "oneOf": [{"type": "object", "properties": {"root": {"type": "integer"}, "type": {"enum": ["none", "gpt"]}},
               "required": ["root"], "additionalProperties": False},
              {"type": "object", "properties": {"root": {"type": "integer"}, "boot": {"type": "integer"},
                                                "type": {"enum": ["msdos", "gpt"]}},
               "required": ["root"], "additionalProperties": False}]}
SHAPES = {  # not required beside required (Glaiveai's calculate_area, satisfiable)
    "type": "object", "properties": {"radius": {"type": "number"}, "length": {"type": "number"},
                                     "width": {"type": "number"}},
    "oneOf": [{"not": {"required": ["radius"]}, "required": ["length", "width"]},
              {"not": {"required": ["length", "width"]}, "required": ["radius"]}]}
ADDITIONAL_SCHEMA = {  # additionalProperties a schema, beside keywords that close the objects
    "type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False,
    "oneOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
              {"properties": {"b": {"type": "integer"}}, "additionalProperties": {"type": "string"}}]}


@pytest.mark.parametrize("schema", [BOOL_OR_CONST, NEXT_OR_PREVIOUS, PARTITIONS, SHAPES, ADDITIONAL_SCHEMA],
                         ids=["const-or-key", "no-type", "required", "not-required", "additional-schema"])
def test_overlapping_object_branches_are_exact(schema):
    values = {"kind": ["first", "second"], "first": [True], "second": [False], "next": ["n", "m"], "previous": ["p", "q"],
              "root": [1], "boot": [2], "type": ["none", "gpt", "msdos"], "radius": [1.5], "length": [2],
              "width": [3], "a": [1, "x"], "b": ["s", 2]}
    names = sorted({n for b in schema["oneOf"] for n in b.get("properties", {})} | set(schema.get("properties", {})))
    assert_exact(schema, all_objects({n: values[n] for n in names}))


def arrays(values: list, most: int) -> list:
    """Every array of up to `most` items from `values`, and non-arrays."""
    out = [list(c) for n in range(most + 1) for c in itertools.product(values, repeat=n)]
    return out + [None, 1, "s", {}]


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "string"}}]},
    {"oneOf": [{"type": "array", "minItems": 1, "items": {"type": "string"}},
               {"type": "array", "minItems": 1, "items": {"type": "number"}}, {"type": "null"}]},
    {"oneOf": [{"type": "array", "items": {"type": "string"}, "maxItems": 2},
               {"type": "array", "items": {"type": "number"}, "minItems": 1}]},
    # count bounds: 2 or 3 items are both
    {"oneOf": [{"type": "array", "minItems": 2}, {"type": "array", "maxItems": 3}]},
], ids=["items", "items-min", "items-bounds", "counts"])
def test_overlapping_array_branches_are_exact(schema):
    assert_exact(schema, arrays([1, "s", 2.5], 3))


def test_overlapping_string_branches_by_complement():
    # o65510: unanchored patterns; a non-string matches all of them (none is "exactly one")
    schema = {"oneOf": [{"pattern": "ab"}, {"pattern": "ba"}, {"pattern": "c"}]}
    strings = ["".join(c) for n in range(5) for c in itertools.product("abc", repeat=n)]
    assert_exact(schema, strings + [None, 1, [], {}])


def test_overlap_without_a_positive_negation_is_still_refused():
    # "an object with a name past a and b" among objects that may hold any name: no positive form
    schema = {"oneOf": [{"type": "object", "properties": {"a": {}}, "additionalProperties": False},
                        {"type": "object", "properties": {"a": {"type": "integer"}}}]}
    with pytest.raises(SchemaError, match="^oneOf at #/oneOf: branches /oneOf/0 and /oneOf/1 are not provably"):
        compile_grammar(schema)
    # (arrays whose items overlap: an item that fails the others' items, by contains: test_contains.py)


POOL = [None, True, 0, 1.5, "s", [], [1], ["s", 1], {}, {"a": 1}, {"a": "s"}, {"b": None}, {"a": 1, "b": 2},
        {"c": []}, {"a": 1, "c": 0}]


@pytest.mark.parametrize("neg, ctx, context_schema", [
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}, NegationContext(), True),
    ({"not": {"required": ["a"]}, "required": ["b"]}, NegationContext(), True),
    ({"anyOf": [{"minItems": 2}, {"maxProperties": 0}]}, NegationContext(), True),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     NegationContext(keys=frozenset("abc")), {"additionalProperties": False, "properties": dict.fromkeys("abc", True)}),
    ({"additionalProperties": {"type": "integer"}, "x-note": "an annotation"},
     NegationContext(keys=frozenset("abc")), {"additionalProperties": False, "properties": dict.fromkeys("abc", True)}),
    ({"items": {"type": "string"}, "maxItems": 1},
     NegationContext(items_disjoint=lambda x: x == {"type": "string"}), {"items": {"type": "number"}}),
], ids=["object", "not-required", "counts", "closed", "additional", "items"])
def test_negation_holds_exactly_where_the_schema_fails(neg, ctx, context_schema):
    positive = _negation(neg, ctx)
    assert positive is not None
    inside = [x for x in POOL if jsonschema.Draft202012Validator(context_schema).is_valid(x)]
    for x in inside:
        fails = not jsonschema.Draft202012Validator(neg).is_valid(x)
        assert jsonschema.Draft202012Validator({"anyOf": [positive]}).is_valid(x) == fails, (x, positive)
    assert len(inside) >= 5


def test_negation_without_the_context_it_needs_is_unknown():
    assert _negation({"additionalProperties": False, "properties": {"a": {}}}) is None
    assert _negation({"patternProperties": {"^a": {"type": "string"}}}) is None
    assert _negation({"uniqueItems": True}) is None


def test_not_of_an_object_with_a_count_is_exact_in_the_stack_grammar():
    # not (a string "a" and at least 2 names): another type, a non-string "a", or at most 1 name
    schema = {"type": "object", "properties": {"x": {"not": {"type": "object", "properties": {"a": {"type": "string"}},
                                                               "minProperties": 2}}}}
    inner = all_objects({"a": ["s", 1], "b": [True], "c": [None]})
    assert_exact(schema, [{"x": v} for v in inner] + [{}])


DRAFT4 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("beside", [{"z": {"type": "string"}}, {"x": {"enum": [[1], ["s"], [1, "s"], 3]}}],
                         ids=["other-key", "enum-beside"])
def test_a_built_negation_keeps_its_keywords_in_an_older_dialect(beside):
    """Github_easy---o78062: a draft-04 oneOf whose negation of `items` is built as `contains`,
    a keyword draft 4 lacks. The document's own contains stays ignored, as its validators do;
    the compiler's must constrain (dropped, {"x": [1], "y": 1} matched both branches and was
    accepted)."""
    schema = {"$schema": DRAFT4, "allOf": [{"oneOf": [
        {"properties": {"y": {"type": "integer"}}, "required": ["y"]},
        {"properties": {"x": {"type": "array", "items": {"type": "integer"}}}, "required": ["x"]}]},
        {"properties": beside}]}  # (the merge re-reads the built negation)
    assert_exact(schema, all_objects({"x": [[1], ["s"], [1, "s"], 3], "y": [1, "s"]}))


def test_the_documents_own_contains_stays_ignored_in_draft_4():
    schema = {"$schema": DRAFT4, "oneOf": [
        {"properties": {"x": {"type": "array", "items": {"type": "integer"}, "contains": {"const": 5}}},
         "required": ["x"]},
        {"properties": {"y": {"type": "integer"}}, "required": ["y"]}]}
    assert_exact(schema, all_objects({"x": [[1], ["s"], [5]], "y": [1, "s"]}))


def test_the_value_checker_reads_built_nodes_in_the_compilers_terms():
    """enum beside other keywords is checked by jsonschema in the document's dialect; a node the
    compiler built may hold a keyword that dialect lacks, and there it constrains."""
    root = {"$schema": DRAFT4, "definitions": {"own": {"contains": {"type": "string"}}}}
    lacking = _NOT_IN_DIALECT["draft-04"]
    check = ValueChecker(root, lacking, document_dicts(root))
    arrays = [[1], ["s"], [1, "s"]]
    assert check.kept(root["definitions"]["own"], arrays) == arrays           # draft 4: ignored
    built = {"type": "array", "contains": {"not": {"type": "integer"}}}
    assert check.kept(built, arrays) == [["s"], [1, "s"]]                     # built: an item not an integer
