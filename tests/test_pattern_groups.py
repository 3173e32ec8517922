"""A pattern alternative that is one whole group, anchors inside ("(^[a-z]+$)", "(^a|^b)",
"([^,]|$)"), read as the alternatives inside it. Oracle: Python's re.search (what jsonschema runs)
and jsonschema itself, on random strings over a small alphabet; the stack grammar and the flat regex."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_class_escapes_match_what_ecma_262_matches():
    """JSON Schema's patterns are ECMA-262's: \\s is WhiteSpace and LineTerminator (U+FEFF and the
    Zs spaces included; U+001C and U+0085, Python's, not), \\S its complement; \\d and \\w ASCII,
    \\D and \\W everything else (a non-ASCII digit or letter, which Python's \\d \\w hold). Hand-listed
    code points (ECMA-262 22.2.2.9, WhiteSpace 12.2 and LineTerminator 12.3)."""
    import json

    from inferlab.constrain.stack import build_machine
    space, other = build_machine(compile_grammar({"pattern": "^\\s$"})), build_machine(compile_grammar({"pattern": "^\\S$"}))
    for ch, in_space, in_other in [(" ", True, False), ("\u00a0", True, False), ("\u2003", True, False),
                                   ("\u3000", True, False), ("\ufeff", True, False), ("\x1c", False, True),
                                   ("\x85", False, True), ("a", False, True), ("\u00e9", False, True),
                                   ("\u2028", True, False), ("\u180e", False, True)]:
        text = json.dumps(ch, ensure_ascii=False)
        assert (space.accepts(text), other.accepts(text)) == (in_space, in_other), repr(ch)


@pytest.mark.parametrize("pattern,ch,want", [
    ("^\\D$", "\u0663", True), ("^\\D$", "7", False), ("^\\d$", "\u0663", False),  # ARABIC-INDIC DIGIT THREE
    ("^\\W$", "\u00e9", True), ("^\\W$", "_", False), ("^\\w$", "\u00e9", False),
    ("^.$", "\r", False), ("^.$", "\u2028", False), ("^.$", "\u0085", True),  # `.`: no LineTerminator
    ("^a$", "a\n", False),  # `$` is the end of input, not before a final newline (Python's)
    ("^\\cC$", "\x03", True), ("^\\cc$", "\x03", True), ("^\\cC$", "\\cC", False),  # \cX: X mod 32
    ("^[\\cJ\\cM]+$", "\r\n", True), ("^\\\\cC$", "\\cC", True),  # in a class; an escaped backslash, then cC
])
def test_ecma_262_classes_dot_and_end(pattern, ch, want):
    import json

    import regress

    from inferlab.constrain.stack import build_machine
    assert (regress.Regex(pattern).find(ch) is not None) == want  # the oracle agrees with the hand value
    assert build_machine(compile_grammar({"type": "string", "pattern": pattern})).accepts(json.dumps(ch, ensure_ascii=False)) == want


_EDGE_CHARS = "a_Z09 \t\n\r\x0b\x0c\x1c\x85\xa0\u0663\u00e9\u2028\u2029\u3000\ufeff\u180e-."


@settings(max_examples=200, deadline=None)
@given(pattern=st.sampled_from(["^\\d+$", "^\\D*$", "^\\w\\W$", "^\\s+$", "^[^\\s]+$", "\\S", "^.$", "^[\\d\\s]+$",
                                "a.b", "^[\\W\\d]*$", "\\s$"]),
       text=st.text(alphabet=_EDGE_CHARS, max_size=4))
def test_patterns_against_regress(pattern, text):
    """Acceptance equals an ECMA-262 engine's search (regress), on strings drawn from the code
    points where ECMA-262 and Python's re disagree."""
    import json

    import regress

    from inferlab.constrain.stack import compile_machine
    _, machine = compile_machine({"type": "string", "pattern": pattern})
    assert machine.accepts(json.dumps(text, ensure_ascii=False)) == (regress.Regex(pattern).find(text) is not None)
