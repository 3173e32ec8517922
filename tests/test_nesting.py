"""Deep nesting (issue 15: "A schema nested thousands of levels deep compiles, or is refused with
one line, never a traceback. Neither pass depends on Python's recursion limit."): schemas nested
3,000 levels (arrays, properties, anyOf, allOf, a $ref chain), a pattern nesting 5,000 groups
and a JSON file nesting 6,000 arrays go through `inferlab schema compile`; each gives exit 0, or
exit 2 with one stderr line naming the nesting limit, and the same output under a recursion
limit of 400 and of 100,000. A schema within the limits compiles under the low one."""

import json
import sys

import pytest

from inferlab.cli import main
from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.nesting import MAX_JSON_DEPTH, MAX_SCHEMA_DEPTH, check_json_nesting, short_pointer
from inferlab.errors import InferlabError

DEEP = 3_000


def nest(depth: int) -> dict:
    node = {"type": "integer"}
    for _ in range(depth):
        node = {"type": "array", "items": node}
    return node


def ref_chain(depth: int) -> dict:
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}, "maxItems": 1} for i in range(depth)}
    defs[f"d{depth}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


# Each level as text around the one below (json.dumps itself recurses per level).
WRAPS = {
    "items": ('{"type":"array","items":', "}"),
    "properties": ('{"type":"object","properties":{"a":', "}}"),
    "anyOf": ('{"anyOf":[', ',{"type":"null"}]}'),
    "allOf": ('{"allOf":[', "]}"),
}
KINDS = [*WRAPS, "ref_chain", "pattern", "file"]


def write_nested(path, depth: int, kind: str) -> None:
    if kind in WRAPS:
        head, tail = WRAPS[kind]
        text = head * depth + '{"type":"integer"}' + tail * depth
    elif kind == "ref_chain":
        text = json.dumps(ref_chain(depth))
    elif kind == "pattern":
        text = json.dumps({"type": "string", "pattern": "(" * 5_000 + "a" + ")" * 5_000})
    else:                                   # a JSON file deeper than the reader's limit
        text = "[" * (2 * depth) + "]" * (2 * depth)
    path.write_text(text)


def run_compile(capsys, path, limit: int):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        rc = main(["schema", "compile", str(path)])
    finally:
        sys.setrecursionlimit(old)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("kind", KINDS)
def test_deep_schema_compiles_or_is_refused_in_one_line_under_any_recursion_limit(kind, tmp_path, capsys):
    path = tmp_path / "deep.json"
    write_nested(path, DEEP, kind)
    low = run_compile(capsys, path, 400)
    high = run_compile(capsys, path, 100_000)
    assert low == high
    rc, out, err = low
    assert rc in (0, 2) and "Traceback" not in err
    if rc == 2:
        assert out == "" and len(err.strip().splitlines()) == 1 and "nesting limit" in err, err
        assert len(err) < 400  # the pointer is shortened in the middle


# Just within MAX_SCHEMA_DEPTH (properties, anyOf, allOf: two arrays/objects a level; a $ref
# chain: two compiles a level); items at 200 levels, as 999 of them take ~9 s to compile.
@pytest.mark.parametrize("kind, depth", [("items", 200), ("properties", 499), ("anyOf", 499), ("allOf", 499),
                                         ("ref_chain", 480)])
def test_within_the_limit_compiles_under_a_low_recursion_limit(kind, depth, tmp_path, capsys):
    path = tmp_path / "deep.json"
    write_nested(path, depth, kind)
    rc, out, err = run_compile(capsys, path, 400)
    assert rc == 0, err


def test_refusal_names_the_pointer_and_the_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        with pytest.raises(SchemaError) as exc:
            compile_grammar(nest(DEEP))
    finally:
        sys.setrecursionlimit(old)
    message = str(exc.value)
    assert f"{MAX_SCHEMA_DEPTH:,}" in message and "#/items/items/items/items/…(" in message
    with pytest.raises(InferlabError, match=r"nested deeper than 2 arrays/objects at #/a/1 \(the nesting limit\)"):
        check_json_nesting('{"a": [0, {"b": [[]]}]}', "x", limit=2)
    check_json_nesting("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "x")     # at the limit: fine
    assert short_pointer(["a/b", "c~"]) == "#/a~1b/c~0"
