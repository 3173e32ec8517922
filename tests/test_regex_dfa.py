"""regex -> NFA -> byte DFA, checked against Python's `re` (re.ASCII) as the oracle."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.nfa import utf8_sequences
from inferlab.constrain import regex as rx
from inferlab.constrain.regex import CharSet, Concat, Repeat, fullmatch, parse
from inferlab.errors import InferlabError

# A small alphabet with 1-, 2-, 3- and 4-byte UTF-8 characters, so strings hit the patterns often.
ALPHABET = "ab1_ \n\"é€😀"

leaf = st.sampled_from([
    "a", "b", "1", "é", "€", "😀", r"\"", r"\n", r"\.", ".", r"\d", r"\w", r"\s", r"\D", r"\W",
    "[ab]", "[^a]", "[a-é]", "[é-😀]", r"[^\n\"]", r"[\d_]", r"[\x00-\x7f]", r"\u20ac", r"\xe9",
    "[]a]", "[a-]", "{", "}",
])


def _compose(children):
    quant = st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?", "{,2}"])
    return st.one_of(
        st.tuples(children, children).map(lambda t: t[0] + t[1]),
        st.tuples(children, children).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(children, quant).map(lambda t: f"(?:{t[0]}){t[1]}"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"(?:{c}|)"),
    )


patterns = st.recursive(leaf, _compose, max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns, texts=st.lists(st.text(alphabet=ALPHABET, max_size=6), max_size=25))
def test_dfa_agrees_with_re_on_random_strings(pattern, texts):
    dfa = compile_regex(pattern)
    oracle = re.compile(pattern, re.ASCII)
    for text in texts:
        assert dfa.fullmatch(text) == (oracle.fullmatch(text) is not None), (pattern, text)


# The default run draws 12 patterns, `pytest -m slow` 400: the default suite has a time budget, and
# a drawn pattern's cost varies a lot (hypothesis's from_regex enumerates a negated class over all
# of Unicode: 0.1-4.5 s for 25 draws, by `pytest tests/test_regex_dfa.py -k generated --durations=1`).
# The default's 12 draws are derandomized, so its cost is the same in every run (0.5 s; a random
# draw once took 37 s of a loaded xdist run); `-m slow` draws at random.
@pytest.mark.parametrize("examples", [12, pytest.param(400, marks=pytest.mark.slow)])
def test_dfa_accepts_strings_generated_from_the_pattern(examples):
    @settings(max_examples=examples, deadline=None, derandomize=examples < 100,
              suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data(), pattern=patterns)
    def prop(data, pattern):
        oracle = re.compile(pattern, re.ASCII)
        # codec="utf-8": no surrogates are drawn (they have no UTF-8 bytes), so nothing is discarded
        text = data.draw(st.from_regex(oracle, fullmatch=True, alphabet=st.characters(codec="utf-8")))
        assert compile_regex(pattern).fullmatch(text), (pattern, text)

    prop()


@settings(max_examples=100, deadline=None)
@given(pattern=patterns, texts=st.lists(st.text(alphabet=ALPHABET, max_size=8), max_size=30))
def test_minimised_dfa_equals_unminimised(pattern, texts):
    small, big = compile_regex(pattern), compile_regex(pattern, minimize=False)
    assert small.n_states <= big.n_states
    for text in texts:
        data = text.encode()
        # Compare every prefix too: liveness (not -1) must agree, not only acceptance.
        for k in range(len(data) + 1):
            a, b = small.walk(data[:k]), big.walk(data[:k])
            assert (a < 0) == (b < 0)
            if a >= 0:
                assert small.accepting[a] == big.accepting[b]


def _brute_force_equivalent_pairs(dfa) -> int:
    """Moore refinement from scratch (the oracle for minimality): count equivalent state pairs."""
    trans = np.where(dfa.trans >= 0, dfa.trans, dfa.n_states)  # explicit dead state S
    trans = np.vstack([trans, np.full((1, 256), dfa.n_states)])
    label = np.append(dfa.accepting.astype(np.int64), 2)
    while True:
        sig = np.column_stack([label, label[trans]])
        _, new = np.unique(sig, axis=0, return_inverse=True)
        new = new.ravel()
        if len(np.unique(new)) == len(np.unique(label)):
            break
        label = new
    live = label[:-1]
    return len(live) - len(np.unique(live))


@settings(max_examples=60, deadline=None)
@given(pattern=patterns)
def test_minimised_dfa_is_minimal(pattern):
    assert _brute_force_equivalent_pairs(compile_regex(pattern)) == 0


def test_every_state_is_live():
    dfa = compile_regex(r'"(?:[^"\\]|\\.){0,4}"')
    # From each state some accepting state is reachable (BFS over the byte graph).
    for s in range(dfa.n_states):
        seen, stack = {s}, [s]
        while stack:
            t = stack.pop()
            for u in set(dfa.trans[t][dfa.trans[t] >= 0].tolist()) - seen:
                seen.add(u)
                stack.append(u)
        assert dfa.accepting[sorted(seen)].any()


def test_tokens_that_split_a_character():
    dfa = compile_regex("é€😀")
    data = "é€😀".encode()  # 2 + 3 + 4 bytes
    s = dfa.start
    for k in range(len(data)):  # one byte at a time, every cut point mid-character
        s = dfa.walk(data[k:k + 1], s)
        assert s >= 0
    assert dfa.accepting[s]
    assert dfa.walk("é".encode()[:1] + b"a") == -1  # a broken sequence is dead


def test_utf8_sequences_of_the_whole_range():
    # regex-syntax's documented split of U+0000..U+10FFFF, derived by hand from the UTF-8 table.
    assert utf8_sequences(0, 0x10FFFF) == (
        ((0x00, 0x7F),),
        ((0xC2, 0xDF), (0x80, 0xBF)),
        ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
        ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
        ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
        ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
    )


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(0, 0x10FFFF), width=st.integers(0, 0x3000), probes=st.lists(st.integers(-0x100, 0x3100), max_size=40))
def test_utf8_sequences_match_exactly_the_range(lo, width, probes):
    hi = min(lo + width, 0x10FFFF)
    seqs = utf8_sequences(lo, hi)
    for off in probes + [0, hi - lo]:
        cp = lo + off
        if not 0 <= cp <= 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode()
        hits = sum(len(seq) == len(enc) and all(a <= b <= z for (a, z), b in zip(seq, enc)) for seq in seqs)
        assert hits == (1 if lo <= cp <= hi else 0), hex(cp)


def test_parse_ast_shapes():
    assert parse("ab") == Concat((CharSet(((97, 97),)), CharSet(((98, 98),))))
    assert parse("a{2,5}?") == Repeat(CharSet(((97, 97),)), 2, 5)
    assert parse(r"[\d_-]") == CharSet(((0x2D, 0x2D), (0x30, 0x39), (0x5F, 0x5F)))
    assert parse("x{,3}") == Repeat(CharSet(((120, 120),)), 0, 3)
    assert parse("a{") == Concat((CharSet(((97, 97),)), CharSet(((123, 123),))))  # literal brace
    # [^a] excludes the surrogate block: the DFA works on UTF-8, which cannot encode them.
    assert parse("[^a]") == CharSet(((0, 0x60), (0x62, 0xD7FF), (0xE000, 0x10FFFF)))


def test_literal_runs_parse_as_their_characters():
    """A run of literal characters is taken at once but for its last, which may carry a
    quantifier: hand-written ASTs, one CharSet per character."""
    c = lambda ch: CharSet(((ord(ch), ord(ch)),))  # noqa: E731
    assert parse('"name":') == Concat(tuple(c(ch) for ch in '"name":'))
    assert parse("abc*") == Concat((c("a"), c("b"), Repeat(c("c"), 0, None)))
    assert parse("ab{2}x") == Concat((c("a"), Repeat(c("b"), 2, 2), c("x")))
    assert parse("x]}é") == Concat((c("x"), c("]"), c("}"), c("é")))  # ] and } outside a class are literal
    assert parse("ab(?:cd)+") == Concat((c("a"), c("b"), Repeat(Concat((c("c"), c("d"))), 1, None)))
    assert parse("ab|cd") == rx.Alt((Concat((c("a"), c("b"))), Concat((c("c"), c("d")))))
    with pytest.raises(InferlabError, match="anchor '\\$' is not supported .* at position 3"):
        parse("abc$")


@pytest.mark.parametrize("pattern, construct, pos", [
    ("^ab", "anchor '^'", 0),
    ("ab$", "anchor '$'", 2),
    (r"a\bc", "word boundary \\b", 1),
    (r"(a)\1", "backreference", 3),
    ("a(?=b)", "lookahead", 1),
    ("(?<!a)b", "negative lookbehind", 0),
    ("(?i)a", "inline flags", 0),
    ("*a", "nothing to repeat", 0),
    ("a**", "multiple repeat", 2),
    ("a{3,2}", "min repeat greater than max repeat", 1),
    ("(ab", "missing ')'", 0),
    ("ab)", "unbalanced ')'", 2),
    ("[ab", "unterminated character set", 0),
    ("[z-a]", "bad character range", 1),
    (r"\q", "bad escape", 0),
    (r"\x4", "hex digits", 0),
])
def test_rejected_constructs_name_construct_and_position(pattern, construct, pos):
    with pytest.raises(InferlabError) as err:
        parse(pattern)
    msg = str(err.value)
    assert construct in msg and f"position {pos}" in msg and "\n" not in msg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns, texts=st.lists(st.text(alphabet=ALPHABET, max_size=6), max_size=25))
def test_ast_fullmatch_agrees_with_re_on_random_strings(pattern, texts):
    oracle = re.compile(pattern, re.ASCII)
    for text in texts:
        assert fullmatch(pattern, text) == (oracle.fullmatch(text) is not None), (pattern, text)


@pytest.mark.parametrize("pattern, text", [
    ("(?:a?){1000}", "aaaaa"), ("(?:a?){1000}", "b"), ("(?:a|){3,}", ""), ("(?:ab|a){2,3}", "aaba"),
    ("(?:ab|a){2,3}", "abababa"), ("(?:a*)*b", "aaab"), ("(?:a{2}){0,7}", "a" * 14), ("(?:a{2}){0,7}", "a" * 16),
    ("x(?:[^\\n]|\\n)*y", "x\\ny"),
])
def test_ast_fullmatch_on_repeats(pattern, text):
    assert fullmatch(pattern, text) == (re.fullmatch(pattern, text, re.ASCII) is not None)


def test_repeated_groups_parse_once_and_keep_the_nesting_limit(monkeypatch):
    node = parse("(?:a[bc])x(?:a[bc])")
    assert node.items[0] is node.items[2]  # one node for both occurrences of the group
    monkeypatch.setattr(rx, "MAX_REGEX_DEPTH", 3)
    parse("(?:(?:a))b(?:(?:a))")  # the group again at depth 0: within the limit
    with pytest.raises(InferlabError, match="nested deeper than 3"):
        parse("(?:(?:a))(?:(?:(?:(?:a))))")  # the same group text, entered at depth 2: 4 levels


def test_group_texts_are_parsed_once_across_patterns():
    rx.clear_memo()
    a, b = parse("(?:a[bc])x"), parse("y(?:a[bc])")
    assert a.items[0] is b.items[1] and a.items[0] == Concat((CharSet(((97, 97),)), CharSet(((98, 99),))))
    rx.clear_memo()
    assert parse("y(?:a[bc])").items[1] is not a.items[0] and parse("y(?:a[bc])") == b
    long = "(?:" + "ab" * rx._GROUP_MEMO_CHARS + ")"  # past the shared memo: kept within its pattern
    node = parse(f"{long}x{long}")
    assert node.items[0] is node.items[2] and long not in rx._GROUP_MEMO


def test_a_repeated_suffix_is_determinised_once():
    # Every branch ends in the same (char)* tail: built once for its continuation (nfa._Builder),
    # so the subset construction meets no copies for the minimiser to merge (ASCII classes: a
    # multi-byte class has trie states the minimiser merges anyway).
    pattern = "|".join(f"{c}(?:[b-z]|\\\\u00[0-9a-f]{{2}})*q" for c in "bcdefghijk")
    # start, the tail, after a backslash, u, 0, 0 and one hex digit of an escape, after q: 8 (the forward
    # construction gave 71 before minimising)
    assert compile_regex(pattern, minimize=False).n_states == compile_regex(pattern).n_states == 8


def test_max_states_is_a_clear_error():
    with pytest.raises(InferlabError, match="exceeds 10 states"):
        compile_regex("[ab]{20}", max_states=10)


def test_empty_language_has_no_accepting_state():
    dfa = compile_regex("[^\\x00-\\U0010ffff]")  # an empty class: matches nothing
    assert not dfa.accepting.any() and not dfa.fullmatch("")
