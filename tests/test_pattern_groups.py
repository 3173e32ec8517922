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


def test_class_escapes_match_what_both_ecma_262_and_python_match():
    """\\s: the white space of both (ECMA-262's U+FEFF is not Python's, U+001C is not ECMA's),
    so NBSP and the Zs spaces are generated; \\S: neither's white space (U+FEFF was matched).
    Hand-listed code points (ECMA-262 22.2.2.9 WhiteSpace and LineTerminator; Python's str.isspace)."""
    import json

    from inferlab.constrain.stack import build_machine
    space, other = build_machine(compile_grammar({"pattern": "^\\s$"})), build_machine(compile_grammar({"pattern": "^\\S$"}))
    for ch, in_space, in_other in [(" ", True, False), ("\u00a0", True, False), ("\u2003", True, False),
                                   ("\u3000", True, False), ("\ufeff", False, False), ("\x1c", False, False),
                                   ("\x85", False, False), ("a", False, True), ("\u00e9", False, True)]:
        text = json.dumps(ch, ensure_ascii=False)
        assert (space.accepts(text), other.accepts(text)) == (in_space, in_other), repr(ch)
