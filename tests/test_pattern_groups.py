"""A pattern alternative that is one whole group, anchors inside ("(^[a-z]+$)", "(^a|^b)",
"([^,]|$)"), read as the alternatives inside it. Oracle: Python's re.search (what jsonschema runs)
and jsonschema itself, on random strings over a small alphabet; the stack grammar and the flat regex."""

import random

import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from oracles import assert_agrees_with_re_search

PATTERNS = ["(^[a-c.()-]+$)", "(^a|^b)", "([^,]|$)", "(^$)", "(^ab)", "(b$)", "([0-9]{2}(-[0-9])?$)",
            r"(a[0-9]b$|\%V\%)", "((^a))", "(?:^ab|c$)", "(^a)|b$", "(a)(b)",
            "^([^,]|$)", r"^([0-9a]+\.[0-9]*$|\%V\%)", "^(a|b$)$", "(^a|b)$", "^((^a)|(b))", "^(a)$"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_whole_group_patterns_agree_with_re_search(pattern):
    rng = random.Random(pattern)
    assert_agrees_with_re_search(pattern, ["".join(rng.choice("abc01-,%V.()") for _ in range(rng.randint(0, 5)))
                                           for _ in range(1500)])


@pytest.mark.parametrize("pattern", ["(a$)*", "(^a)+", "x(^a)", "(?=^a)b", "^(a$)*", "^([^,]+(,|$)){3,}$"])
def test_anchors_inside_a_repeated_or_later_group_are_still_refused(pattern):
    with pytest.raises(SchemaError, match="^pattern at #/pattern"):
        compile_grammar({"type": "string", "pattern": pattern})
