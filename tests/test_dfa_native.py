"""The compile path's C++ construction (csrc/ in the extension _native: NFA -> minimal DFA) against
dfa.py's Python one, its reference: the same arrays (transitions, accepting states, start) on drawn
regexes, the same state limit, and malformed NFAs refused with ValueError, never a crash."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.constrain import dfa
from inferlab.constrain import regex as rx
from inferlab.constrain.nfa import build_nfa
from inferlab.errors import InferlabError
from oracles import small_regex

native = pytest.importorskip("inferlab.constrain._native")

ATOMS = st.sampled_from(["a", "b", "é", "😀", "[ab]", "[^a]", ".", "(?:ab)", "\\d", "[a-z0-9_]", '"', "(?&3)", "(?&40)"])


def same(pattern: str, max_states: int = dfa.DEFAULT_MAX_STATES) -> int:
    ast = rx.parse(pattern)
    try:
        ours = dfa.compile_ast(ast, max_states=max_states)
    except dfa.StateLimit as exc:
        with pytest.raises(dfa.StateLimit, match=re.escape(str(exc))):
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


def test_subset_entries_bound_the_same(monkeypatch):
    """Both constructions stop where the NFA states summed over the DFA states' sets pass
    MAX_SUBSET_ENTRIES (the C++ holds the same constant). (?:a?){k} makes k + 1 states whose
    sets sum to (k + 1)(k + 2)/2 NFA states: 1,326 at k = 50, counted by hand."""
    assert native.MAX_SUBSET_ENTRIES == dfa.MAX_SUBSET_ENTRIES
    ast = rx.parse("(?:a?){50}")
    assert dfa.compile_ast(ast, native=False).n_states == 51
    monkeypatch.setattr(dfa, "MAX_SUBSET_ENTRIES", 1_325)
    with pytest.raises(dfa.StateLimit, match="1,325 NFA states summed"):
        dfa.compile_ast(ast, native=False)
    monkeypatch.setattr(dfa, "MAX_SUBSET_ENTRIES", 1_326)
    assert dfa.compile_ast(ast, native=False).n_states == 51


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


def test_limits_and_fallbacks_as_python():
    """Past the NFA limit both raise the same NfaLimit; an AST deeper than the extension's
    recursion, or a call target past the marker digits, is left to nfa.py (the same DFA, the same
    error)."""
    from inferlab.constrain.nfa import NfaLimit
    from inferlab.errors import InferlabError

    # 1.1 M NFA states (the Python construction's refusal of it takes ~10 s: only the count is checked there)
    with pytest.raises(NfaLimit, match="NFA exceeds 1000000 states"):
        dfa.compile_ast(rx.parse("(?:a{1100}){1000}"), max_states=1000)
    assert same("(?:a{100}){10}") == 1001
    deep = "a"
    for k in range(1200):  # Alt inside Concat inside Alt ...: 2,400 AST levels
        deep = f"(?:b{k % 7}|{deep}c)"
    assert same(deep) > 1
    for native_ in (True, False):
        with pytest.raises(InferlabError, match="call target"):
            dfa.compile_ast(rx.parse("(?&99999999)"), native=native_)


# --- the pattern parsed in C++ (pattern_dfa): the same DFA as regex.parse's AST, errors left to it ---

# Characters that reach every branch of regex.py's parser: metacharacters, braces in and out of
# quantifiers, classes with ranges, escapes of each kind, non-ASCII and surrogates, calls, names.
PARSER_PIECES = ["a", "b", "é", "😀", "\ud800", "|", "(", ")", "(?:", "(?P<n_1>", "(?&2)", "(?&", "*", "+", "?",
                 "{", "}", "{2}", "{1,3}", "{,2}", "{2,}", "{3,1}", "{9999999999}", "{é}", "[", "]", "^", "$", "-",
                 "[a-c]", "[^\\d]", "[]a]", "[^]b]", "[a-]", "[\\b]", "[z-a]", "\\", "\\d", "\\W", "\\s", "\\x41",
                 "\\u00e9", "\\U0001F600", "\\U00110000", "\\x4", "\\b", "\\1", "\\q", "\\.", "\\é", "\\٣", ".", ",",
                 "(?=", "(?i)", "(?P<é>", "(?P<>"]


def native_pattern(pattern: str, max_states: int = dfa.DEFAULT_MAX_STATES, estimate: int = -1):
    from inferlab.constrain.nfa import charset_sequences

    return native.pattern_dfa(pattern, dfa._max_nfa(max_states), max_states, charset_sequences, estimate)


def same_as_parse(pattern: str) -> str:
    """pattern_dfa against regex.parse and the Python construction: the same arrays where both
    build; where regex.parse refuses, the extension leaves the pattern to it (3). Returns which."""
    got = native_pattern(pattern)
    try:
        ast = rx.parse(pattern)
    except InferlabError:
        assert got == 3, pattern
        return "refused"
    if got == 3:
        return "left to Python"
    ref = dfa.compile_ast(ast, native=False)
    np.testing.assert_array_equal(np.frombuffer(got[0], dtype=np.int32).reshape(-1, 256), ref.trans)
    np.testing.assert_array_equal(np.frombuffer(got[1], dtype=bool), ref.accepting)
    assert ref.start == 0
    return "same"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PARSER_PIECES), max_size=8))
def test_pattern_parse_same_as_regex_parse(pieces):
    same_as_parse("".join(pieces))


@settings(max_examples=100, deadline=None)
@given(small_regex(depth=3, atoms=ATOMS))
def test_pattern_parse_same_on_drawn_regexes(pattern):
    assert same_as_parse(pattern) == "same"


@pytest.mark.parametrize("pattern, outcome", [
    ("", "same"), ("(?:)", "same"), ("a|", "same"), ("(?P<name>ab)+?", "same"), ("x{,}", "same"),
    ("a{2}{3}", "refused"), ("a**", "refused"), ("ab)", "refused"), ("(ab", "refused"), ("[ab", "refused"),
    ("^a", "refused"), ("a\\Z", "refused"), ("(?<=a)b", "refused"), ("\\x4g", "refused"), ("[b-a]", "refused"),
    ("(?P<é>a)", "left to Python"),  # a Unicode group name: regex.parse's isidentifier decides
    ("a{99999999999}", "left to Python"),  # past nine digits
    ("(?:" * 1001 + "a" + ")" * 1001, "left to Python"),  # nesting past the extension's depth
])
def test_pattern_parse_fixed_cases(pattern, outcome):
    assert same_as_parse(pattern) == outcome


def test_pattern_estimate_and_compile_regex():
    """The estimate in C++ equals nfa.size_estimate's; over the limit it refuses before any NFA
    (EstimateLimit, the same from either side), and compile_regex's refusals are regex.parse's
    own words. Hand count: (?:ab|c){3} is 3 x (Alt(Concat(a, b) = 2 + 2 + 1, c = 2) + 1 = 8) + 1 = 25."""
    from inferlab.constrain.nfa import size_estimate

    pattern = "(?:ab|c){3}"
    assert size_estimate(rx.parse(pattern)) == 25
    assert native_pattern(pattern, estimate=24) == (4, 25)
    assert native_pattern(pattern, estimate=25) not in (1, 2, 3)
    for native_ in (True, False):
        if not native_:
            dfa._NATIVE, saved = None, dfa._NATIVE
        try:
            with pytest.raises(dfa.EstimateLimit, match="~25 NFA states \\(limit 24\\)"):
                dfa.compile_regex(pattern, max_nfa_estimate=24)
            assert dfa.compile_regex(pattern, max_nfa_estimate=25).fullmatch("abcab")
            with pytest.raises(InferlabError, match="anchor '\\$' is not supported .* at position 1"):
                dfa.compile_regex("a$")
        finally:
            if not native_:
                dfa._NATIVE = saved


def test_pattern_estimate_saturates():
    """Nested counted repeats past 2^63 (an int64's range): the C++ estimate stops at 2^62, still
    over any limit, where nfa.size_estimate counts on in Python's integers."""
    from inferlab.constrain.nfa import size_estimate

    huge = "(?:" * 6 + "a" + "){9999}" * 6        # ~10^24 states
    pattern = f"{huge}b{huge}"                       # a sum of two saturated terms
    assert size_estimate(rx.parse(pattern)) > 2 ** 63
    assert native_pattern(pattern, estimate=10 ** 6) == (4, 2 ** 62)
