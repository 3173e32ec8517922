"""Patterns with lookaheads outside groups, exact by automaton product; oracle: Python's
re.search (what jsonschema runs) and jsonschema itself on random strings over a small alphabet."""

import random

import pytest

from inferlab.constrain.schema import SchemaError, compile_grammar
from oracles import assert_agrees_with_re_search

PATTERNS = [
    r"(?!io\.papermc\.)([a-zA-Z_$][a-zA-Z0-9_$]*\.)*[a-zA-Z_$][a-zA-Z0-9_$]*",  # unanchored (search)
    r"^(?!abc)[a-c]+$",
    r"^(?=.*[0-9])[a-z0-9]{2,4}$",
    r"^a(?!b)",
    r"x(?=y)|^q",
    r"^(?!.*--)[a-z-]+$",
    r"^(?!a$)[ab]*$",
    r"^(?=a)(?!ab)[a-c]{1,3}$",
]
ALPHABET = "abcxyq01-.io_$"


def strings(seed, n=1500):
    rng = random.Random(seed)
    for _ in range(n):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6)))
        yield "io.papermc." + text if rng.random() < 0.1 else text


@pytest.mark.parametrize("pattern", PATTERNS)
def test_lookahead_patterns_agree_with_re_search(pattern):
    assert_agrees_with_re_search(pattern, strings(len(pattern)))


def test_an_unsatisfiable_lookahead_is_unsatisfiable():
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_grammar({"type": "string", "pattern": "^(?=a)b$"})


@pytest.mark.parametrize("pattern", ["^(a(?=b))+$", "^(?=(?!a)b)b$", "a(?=^b)"])
def test_lookaheads_that_cannot_be_exact_are_refused(pattern):
    with pytest.raises(SchemaError, match="^pattern at #/pattern"):
        compile_grammar({"type": "string", "pattern": pattern})
