"""A pattern alternative that is one whole group, anchors inside ("(^[a-z]+$)", "(^a|^b)",
"([^,]|$)"), read as the alternatives inside it. Oracle: Python's re.search (what jsonschema runs)
and jsonschema itself, on random strings over a small alphabet; the stack grammar and the flat regex."""

import json
import random
import re

import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar, compile_schema
from inferlab.constrain.stack import build_machine
from test_schema_properties import validator

PATTERNS = ["(^[a-c.()-]+$)", "(^a|^b)", "([^,]|$)", "(^$)", "(^ab)", "(b$)", "([0-9]{2}(-[0-9])?$)",
            r"(a[0-9]b$|\%V\%)", "((^a))", "(?:^ab|c$)", "(^a)|b$", "(a)(b)"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_whole_group_patterns_agree_with_re_search(pattern):
    schema = {"type": "string", "pattern": pattern}
    machine = build_machine(compile_grammar(schema))
    flat = re.compile(compile_schema(schema).regex)
    v = validator(schema)
    rng = random.Random(pattern)
    matched = 0
    for _ in range(1500):
        text = "".join(rng.choice("abc01-,%V.()") for _ in range(rng.randint(0, 5)))
        ok = re.search(pattern, text) is not None
        assert v.is_valid(text) == ok
        assert machine.accepts(json.dumps(text)) == ok, (pattern, text)
        assert bool(flat.fullmatch(json.dumps(text))) == ok, (pattern, text)
        matched += ok
    assert matched > 0


@pytest.mark.parametrize("pattern", ["(a$)*", "(^a)+", "x(^a)", "(?=^a)b"])
def test_anchors_inside_a_repeated_or_later_group_are_still_refused(pattern):
    with pytest.raises(SchemaError, match="^pattern at #/pattern"):
        compile_grammar({"type": "string", "pattern": pattern})
