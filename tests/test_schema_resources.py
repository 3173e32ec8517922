"""Where a $ref points (schema.resources): $id bases, embedded resources, anchors, other documents
from a local registry (ref_dir) and the draft metaschemas; and the format policy. Oracle:
jsonschema with a referencing.Registry holding the same documents (validator_for the schema's
dialect), on instances written by hand."""

import json

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from inferlab.cli import main
from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar
from inferlab.constrain.stack import build_machine

D2020 = "https://json-schema.org/draft/2020-12/schema"
D7 = "http://json-schema.org/draft-07/schema#"


def agree(schema, instances, ref_dir=None, registry=None) -> None:
    """The grammar accepts each instance's canonical text iff jsonschema validates it, and both
    verdicts occur."""
    machine = build_machine(compile_grammar(schema, ref_dir=ref_dir))
    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema, registry=registry) if registry is not None else cls(schema)
    verdicts = [v.is_valid(x) for x in instances]
    assert [machine.accepts(canonical_json(x, schema, ref_dir=ref_dir)) for x in instances] == verdicts
    assert True in verdicts and False in verdicts


@pytest.mark.parametrize("schema", [
    # a relative $ref resolved against a nested $id (an embedded resource)
    {"$schema": D2020, "$id": "http://e.com/root.json", "properties": {"a": {"$ref": "item.json"}},
     "$defs": {"x": {"$id": "item.json", "type": "integer"}}},
    # an anchor, and a pointer inside an embedded resource
    {"$schema": D2020, "$id": "http://e.com/r", "properties": {"a": {"$ref": "#int"}, "b": {"$ref": "n#/$defs/s"}},
     "$defs": {"i": {"$anchor": "int", "type": "integer"},
               "n": {"$id": "n", "$defs": {"s": {"type": "string"}}}}},
    # draft-07: a bare-fragment $id is an anchor, and $ref's sibling $id changes no base
    {"$schema": D7, "properties": {"a": {"$ref": "#int"}, "b": {"$id": "http://q/", "$ref": "#/definitions/s"}},
     "definitions": {"i": {"$id": "#int", "type": "integer"}, "s": {"type": "string"}}},
])
def test_references_resolve_against_their_base(schema):
    agree(schema, [{"a": 1}, {"a": "x"}, {"b": "s"}, {"b": 2}, {"a": 3, "b": "t"}, {}])


def test_other_documents_come_from_the_registry_only(tmp_path):
    (tmp_path / "types").mkdir()
    (tmp_path / "types" / "int.json").write_text(json.dumps({"type": "integer", "minimum": 3}))
    (tmp_path / "named.json").write_text(json.dumps({"$id": "urn:example:word", "type": "string", "maxLength": 2}))
    schema = {"$schema": D2020, "properties": {"a": {"$ref": "http://x.org/types/int.json"},
                                               "b": {"$ref": "urn:example:word"}}}
    registry = Registry().with_resources([
        ("http://x.org/types/int.json", Resource({"type": "integer", "minimum": 3}, specification=DRAFT202012)),
        ("urn:example:word", Resource.from_contents({"$schema": D2020, "$id": "urn:example:word", "type": "string",
                                                     "maxLength": 2}))])
    agree(schema, [{"a": 3}, {"a": 2}, {"b": "ab"}, {"b": "abc"}, {"a": 5, "b": "x"}], ref_dir=tmp_path,
          registry=registry)
    # without a registry: refused, naming the reference; nothing is downloaded
    with pytest.raises(SchemaError, match=r"^\$ref at #/properties/a: 'http://x.org/types/int.json' names "
                                          r"another document .*no registry"):
        compile_grammar(schema)
    with pytest.raises(SchemaError, match=r"not in the registry"):
        compile_grammar({"$ref": "http://x.org/missing.json"}, ref_dir=tmp_path)
    with pytest.raises(SchemaError, match=r"not in the registry"):  # never outside the folder
        compile_grammar({"$ref": "http://x.org/../../etc/passwd"}, ref_dir=tmp_path)


def test_a_draft_metaschema_comes_from_jsonschema_specifications():
    schema = {"$schema": D7, "properties": {
        "n": {"$ref": "http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger"}}}
    agree(schema, [{"n": 0}, {"n": 7}, {"n": -1}, {"n": "x"}])


def test_an_id_with_a_fragment_is_refused_from_2019_09_on():
    with pytest.raises(SchemaError, match=r"^\$id at #/properties/x: '#frag'"):
        compile_grammar({"$schema": D2020, "properties": {"x": {"$id": "#frag"}}})


def test_format_policy_annotate_lists_every_format_it_leaves_out():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"},
                                               "e": {"type": "string", "format": "idn-email"}}}
    with pytest.raises(SchemaError, match="format"):  # assert, the default: idn-email is not implemented
        compile_grammar(schema)
    compiled = compile_grammar(schema, format="annotate")
    assert compiled.unenforced_formats == (
        "format 'date' at #/properties/d/format: not enforced (format policy: annotate)",
        "format 'idn-email' at #/properties/e/format: not enforced (format policy: annotate)")
    machine = build_machine(compiled)
    assert machine.accepts('{"d":"not a date","e":"x"}')
    assert build_machine(compile_grammar({"format": "date"})).accepts('"2024-02-29"')
    assert not build_machine(compile_grammar({"type": "string", "format": "date"})).accepts('"x"')
    with pytest.raises(SchemaError, match="format must be one of assert, annotate"):
        compile_grammar(schema, format="ignore")


def test_cli_flags(tmp_path, capsys):
    (tmp_path / "int.json").write_text('{"type": "integer"}')
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"properties": {"a": {"$ref": "http://h/int.json"}, "d": {"format": "date"}}}))
    instance = tmp_path / "i.json"
    instance.write_text('{"a": 1, "d": "x"}')
    assert main(["schema", "check", str(schema), str(instance), "--ref-dir", str(tmp_path), "--format", "annotate"]) == 0
    assert main(["schema", "check", str(schema), str(instance), "--ref-dir", str(tmp_path)]) == 1  # assert
    capsys.readouterr()
    assert main(["schema", "check", str(schema), str(instance)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'http://h/int.json' names another document" in err
    assert main(["schema", "compile", str(schema), "--ref-dir", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip().endswith(f"--ref-dir {tmp_path / 'nope'}: not a folder")


@pytest.mark.parametrize("vocabularies, one_valid", [
    (["applicator", "core"], True),                  # no validation vocabulary: minimum is an annotation
    (["applicator", "core", "validation"], False),   # listed (true or false): an assertion
])
def test_a_metaschema_without_the_validation_vocabulary_makes_its_keywords_annotations(tmp_path, vocabularies,
                                                                                       one_valid):
    """Hand cases after the suite's vocabulary group: a registry metaschema whose $vocabulary lacks
    https://json-schema.org/draft/2020-12/vocab/validation; the applicator keywords still assert
    (false rejects), the validation ones do not, and each one ignored is listed with the reason."""
    meta = {"$schema": D2020, "$id": "http://localhost:1234/meta.json",
            "$vocabulary": {f"https://json-schema.org/draft/2020-12/vocab/{v}": v != "validation" or False
                            for v in vocabularies}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    schema = {"$schema": "http://localhost:1234/meta.json",
              "properties": {"bad": False, "n": {"minimum": 10, "type": "integer"}}}
    grammar = compile_grammar(schema, ref_dir=tmp_path)
    machine = build_machine(grammar)
    assert machine.accepts('{"n":20}') and not machine.accepts('{"bad":1}')
    assert machine.accepts('{"n":1}') == one_valid and machine.accepts('{"n":"x"}') == one_valid
    assert any(note.startswith("minimum at #/properties/n: an annotation") for note in grammar.ignored) == one_valid
    # without the registry the metaschema is not read: the keywords assert, as in its URI's draft
    assert not build_machine(compile_grammar(schema)).accepts('{"n":1}')
