"""contains (at least one item valid against it), beside items and min/maxItems, and the
negations that use it (not items: an item that fails them; not contains: every item fails it).
Oracle: jsonschema on every array of up to 4 items from a small pool, flat regex and stack
grammar alike."""

import itertools
import re

import pytest

from inferlab.constrain.schema import SchemaError, canonical_json, compile_schema
from oracles import assert_exact, validator

POOL = [1, 7, "s", None, 2.5]


def arrays(most: int = 4) -> list:
    return [list(c) for n in range(most + 1) for c in itertools.product(POOL, repeat=n)] + [None, "s", {}]


@pytest.mark.parametrize("schema", [
    {"contains": {"type": "string"}},
    {"type": "array", "items": {"type": ["integer", "string"]}, "contains": {"minimum": 5}},
    {"type": "array", "contains": {"type": "integer"}, "minItems": 3},
    {"type": "array", "contains": {"type": "null"}, "maxItems": 2},
    {"type": "array", "contains": {"type": "number"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "not": {"items": {"type": "integer"}}},
    {"type": "array", "not": {"contains": {"type": "string"}}},
    {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "number"}}]},
    {"oneOf": [{"type": "array", "maxItems": 1}, {"type": "array", "items": {"type": "number"}}]},
], ids=["alone", "items", "min", "max", "min-max", "not-items", "not-contains", "one-of-items", "one-of-max"])
def test_contains_is_exact(schema):
    assert_exact(schema, arrays())  # the stack grammar
    regex, v = re.compile(compile_schema(schema).regex), validator(schema)  # the flat regex
    for instance in arrays(3):
        assert bool(regex.fullmatch(canonical_json(instance, schema))) == v.is_valid(instance), instance


def test_contains_that_no_item_can_satisfy_leaves_no_array():
    with pytest.raises(SchemaError, match="contains at #/contains: no item can satisfy it"):
        compile_schema({"type": "array", "items": {"type": "string"}, "contains": {"type": "integer"}})
    # where the array may be absent, it is dropped
    compiled = compile_schema({"type": "object", "properties": {"a": {"type": "array", "contains": False}}})
    assert re.fullmatch(compiled.regex, "{}") and not re.fullmatch(compiled.regex, '{"a":[]}')


@pytest.mark.parametrize("extra, why", [({"uniqueItems": True}, "uniqueItems"), ({"prefixItems": [{}]}, "prefixItems"),
                                        ({"maxItems": 40}, "up to 16")])
def test_contains_beside_what_it_cannot_count_is_refused(extra, why):
    with pytest.raises(SchemaError, match=f"^contains at #/contains: .*{why}"):
        compile_schema({"type": "array", "contains": {"type": "integer"}, **extra})


D2020 = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("schema", [
    {"contains": {"const": 1}, "minContains": 2},
    {"contains": {"const": 1}, "maxContains": 1},
    {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
    {"type": "array", "contains": {"const": 1}, "minContains": 0},
    {"contains": {"type": "string"}, "minContains": 0, "maxContains": 1},
    {"type": "array", "items": {"type": ["integer", "null"]}, "contains": {"minimum": 5}, "maxContains": 1},
    # under allOf: contains' default minContains 1 holds beside a sibling's minContains 0, and a
    # count without its own contains counts nothing
    {"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 1}, "minContains": 0}]},
    {"allOf": [{"contains": {"const": 1}, "minContains": 2}, {"maxContains": 0}]},
], ids=["min", "max", "min-max", "min-0", "min-0-max", "items-max", "allof-default", "allof-no-contains"])
def test_min_and_max_contains_are_exact(schema):
    """Between minContains and maxContains items satisfy contains (2019-09 on)."""
    assert_exact({"$schema": D2020, **schema}, arrays())


def test_min_contains_beside_item_counts_is_refused_by_name():
    with pytest.raises(SchemaError, match=r"^minContains at #: minContains/maxContains beside maxItems"):
        compile_schema({"$schema": D2020, "contains": {"const": 1}, "minContains": 2, "maxItems": 4})
