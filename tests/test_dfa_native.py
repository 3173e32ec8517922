"""The compile path's C++ construction (_dfa_native.cpp: NFA -> minimal DFA) against dfa.py's Python
one, its reference: the same arrays (transitions, accepting states, start) on drawn regexes, the
same state limit, and malformed NFAs refused with ValueError, never a crash."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.constrain import dfa
from inferlab.constrain import regex as rx
from inferlab.constrain.nfa import build_nfa
from oracles import small_regex

native = pytest.importorskip("inferlab.constrain._dfa_native")

ATOMS = st.sampled_from(["a", "b", "é", "😀", "[ab]", "[^a]", ".", "(?:ab)", "\\d", "[a-z0-9_]", '"', "(?&3)", "(?&40)"])


def same(pattern: str, max_states: int = dfa.DEFAULT_MAX_STATES) -> int:
    ast = rx.parse(pattern)
    try:
        ours = dfa.compile_ast(ast, max_states=max_states)
    except dfa.StateLimit as exc:
        with pytest.raises(dfa.StateLimit, match=str(exc)):
            dfa.compile_ast(ast, max_states=max_states, native=False)
        return -1
    ref = dfa.compile_ast(ast, max_states=max_states, native=False)
    assert ours.start == ref.start
    np.testing.assert_array_equal(ours.trans, ref.trans)
    np.testing.assert_array_equal(ours.accepting, ref.accepting)
    assert ours.trans.dtype == np.int32 and ours.accepting.dtype == bool
    ours.trans[0, 0] = ours.trans[0, 0]  # writable, as the Python construction's
    return ours.n_states


@settings(max_examples=100, deadline=None)
@given(small_regex(depth=3, atoms=ATOMS))
def test_same_dfa_as_python(pattern):
    same(pattern)


@pytest.mark.parametrize("pattern", ["", "a", "(?:a|b)*abb", '"(?:[^"\\\\]|\\\\.)*"', "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?",
                                     "(?:ab|ac|ad)*(?:x{2,5})?", "[^\\x00-\\x1f]{0,3}", "(?:\\{(?&1)\\})?"])
def test_same_dfa_on_fixed_patterns(pattern):
    assert same(pattern) >= 1


def test_state_limit_the_same():
    pattern = "(?:a|b)*a(?:a|b){7}"  # 2^8 states
    assert same(pattern) == 256
    assert same(pattern, max_states=100) == -1
    assert same(pattern, max_states=600) == 256


def test_malformed_nfa_refused():
    nfa = build_nfa(rx.parse("ab"))
    good = (nfa.eps, nfa.edges, nfa.start, nfa.final, 100)
    assert native.minimal_dfa(*good) is not None
    bad = [
        ([], [], 0, 0, 100),                                            # no states
        (nfa.eps, nfa.edges[:-1], nfa.start, nfa.final, 100),           # lengths differ
        (nfa.eps, nfa.edges, len(nfa.eps), nfa.final, 100),             # start out of range
        (nfa.eps[:-1] + [[len(nfa.eps)]], nfa.edges, nfa.start, nfa.final, 100),   # epsilon target out of range
        (nfa.eps, nfa.edges[:-1] + [[(0, 300, 0)]], nfa.start, nfa.final, 100),    # byte out of range
        (nfa.eps, nfa.edges[:-1] + [[(9, 3, 0)]], nfa.start, nfa.final, 100),      # hi below lo
        (nfa.eps, nfa.edges[:-1] + [[(0, 1)]], nfa.start, nfa.final, 100),         # not a triple
        (nfa.eps, nfa.edges[:-1] + [[("a", 1, 0)]], nfa.start, nfa.final, 100),    # not an int
        (nfa.eps[:-1] + [None], nfa.edges, nfa.start, nfa.final, 100),            # not a list
    ]
    for args in bad:
        with pytest.raises(ValueError):
            native.minimal_dfa(*args)
