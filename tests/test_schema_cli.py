"""`inferlab schema compile|check`: answers, exit codes 0/1/2, one stderr line on bad input."""

import json

import jsonschema
import pytest

from inferlab.cli import main

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}


def nested(depth):
    return {"v": depth} if depth == 0 else {"v": depth, "kids": [nested(depth - 1), {"v": 0}]}


@pytest.fixture
def files(tmp_path):
    def write(name, obj):
        path = tmp_path / name
        path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return str(path)
    return write


def test_compile_reports_automata_and_stack(files, capsys):
    assert main(["schema", "compile", files("s.json", TREE), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["uses_stack"] and len(info["automata"]) == 2
    assert 1 in info["automata"][1]["calls"]  # the node calls itself: recursion without a cap


@pytest.mark.parametrize("instance", [nested(0), nested(20), {"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]},
                                      {"v": "x"}, {"v": 1, "kids": [{"w": 1}]}, {"v": 1, "extra": 2}, [1]])
def test_check_agrees_with_jsonschema(files, capsys, instance):
    valid = jsonschema.Draft202012Validator(TREE).is_valid(instance)
    rc = main(["schema", "check", files("s.json", TREE), files("i.json", instance), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == (0 if valid else 1)
    assert out["accepted"] == valid


def test_bad_input_and_refusals_exit_2(files, capsys):
    schema = files("s.json", TREE)
    assert main(["schema", "check", schema, files("i.json", "{")]) == 2
    assert main(["schema", "compile", files("r.json", {"type": "object", "not": {"patternProperties": {"^a": {"type": "integer"}}}})]) == 2
    assert main(["schema", "compile", files("x.json", TREE) + "-nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [line.split(": error:")[0] for line in err] == ["inferlab schema check"] + ["inferlab schema compile"] * 2
    assert "#/not" in err[1] and "Traceback" not in "".join(err)


def test_compile_lists_custom_formats_as_unenforced(files, capsys):
    schema = {"type": "object", "properties": {"p": {"type": "string", "format": "path"},
                                               "d": {"type": "string", "format": "date"}}}
    assert main(["schema", "compile", files("s.json", schema), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert len(info["unenforced_formats"]) == 1 and "'path'" in info["unenforced_formats"][0]
    # the known format stays enforced: a non-date is rejected
    assert main(["schema", "check", files("s.json", schema), files("i.json", {"d": "yesterday"})]) == 1
    assert main(["schema", "check", files("s.json", schema), files("i.json", {"d": "2024-02-29", "p": "~"})]) == 0


def test_compile_lists_keywords_the_dialect_lacks_as_ignored(files, capsys):
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"k": {"type": "string", "const": "a"}}}
    assert main(["schema", "compile", files("s.json", schema), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ignored"] == ["const at #/properties/k: not a draft-04 keyword (ignored, as its validators do)"]
    assert main(["schema", "compile", files("s.json", schema)]) == 0
    assert "  ignored: const at #/properties/k" in capsys.readouterr().out
    assert main(["schema", "check", files("s.json", schema), files("i.json", {"k": "b"})]) == 0  # as draft-04 says


def test_check_extra_keys_by_default_and_strict_with_no_extra_keys(files, capsys):
    schema = files("s.json", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    instance = files("i.json", {"a": 1, "b": [{"c": None}]})  # valid: additionalProperties is absent
    assert main(["schema", "check", schema, instance]) == 0
    assert main(["schema", "check", schema, instance, "--no-extra-keys"]) == 1
    capsys.readouterr()
    assert main(["schema", "compile", schema, "--no-extra-keys", "--json"]) == 0
    assert any("additionalProperties absent" in n for n in json.loads(capsys.readouterr().out)["narrowed"])


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "array", "uniqueItems": "yes"}, "uniqueItems"),   # was compiled without uniqueness: [1,1] accepted
    ({"type": "array", "uniqueItems": 1}, "uniqueItems"),
    ({"minimum": True}, "minimum"),
    ({"const": 1, "$schema": 5}, "$schema"),
    ({"dependentRequired": {"a": 5}}, "dependentRequired"),    # was named as an allOf deep in its expansion
])
def test_keywords_of_the_wrong_type_are_refused_by_name(tmp_path, capsys, schema, keyword):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    assert main(["schema", "compile", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{keyword} at #/{keyword}" in err[0]
