"""A string's pattern with length bounds as one counted DFA (dfa_algebra.length_bounded), and the
schemas that compile through it, against independent oracles:

- the language, against Python: `re.fullmatch` of the pattern on the string's JSON text and
  `len(json.loads(text))` for its characters, over random strings;
- the same DFA, against the product with the regex of lo..hi characters built by the regex
  compiler (no counter): equal languages (each minus the other is empty);
- compiled schemas: masks along random token walks equal the brute-force walk of every token,
  and every finished text validates under jsonschema.
"""

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.dfa_algebra import AutomatonTooLarge, is_empty, length_bounded, product
from inferlab.constrain.schema import SchemaError, compile_grammar
from inferlab.constrain.schema.common import _CHAR, _repeat
from inferlab.constrain.stack import StackGrammar, build_machine, compile_machine
from oracles import random_walk, Reference, small_regex, small_vocab, validator

CHAR = compile_regex(_CHAR)
# content atoms: no raw quote or backslash (the pattern's text is JSON-escaped); "\\\\n" is the
# two-byte escape of a newline, one character
CONTENT_ATOMS = st.sampled_from(["a", "b", "é", "😀", "[ab]", "\\d", "\\\\n", "(?:ab)"])


def content_regex():
    return small_regex(atoms=CONTENT_ATOMS)


PIECES = ["a", "b", "é", "😀", "1", "x", "\\n"]  # JSON text pieces; "\\n" is one character
BOUNDS = st.tuples(st.integers(0, 4), st.one_of(st.none(), st.integers(0, 6))).filter(
    lambda b: b[1] is None or b[1] >= b[0])


@settings(max_examples=80, deadline=None)
@given(content_regex(), BOUNDS, st.lists(st.lists(st.sampled_from(PIECES), max_size=8), min_size=30, max_size=30))
def test_membership_is_the_pattern_and_the_decoded_length(regex, bounds, samples):
    lo, hi = bounds
    d = length_bounded(compile_regex(f'"{regex}"'), CHAR, lo, hi, max_states=10_000)
    for pieces in samples:
        content = "".join(pieces)
        n = len(json.loads(f'"{content}"'))
        want = re.fullmatch(regex, content) is not None and lo <= n and (hi is None or n <= hi)
        got = d.walk(f'"{content}"'.encode()) >= 0 and bool(d.accepting[d.walk(f'"{content}"'.encode())])
        assert got == want, (regex, bounds, content)


@settings(max_examples=40, deadline=None)
@given(content_regex(), BOUNDS)
def test_equals_the_product_with_the_regex_of_lo_to_hi_characters(regex, bounds):
    lo, hi = bounds
    d = compile_regex(f'"{regex}"')
    counted = length_bounded(d, CHAR, lo, hi, max_states=10_000)
    unrolled = product(d, compile_regex(f'"{_repeat(_CHAR, lo, hi)}"'), "and")
    assert is_empty(product(counted, unrolled, "minus")) and is_empty(product(unrolled, counted, "minus"))


def test_a_large_bound_stays_small_and_the_limit_is_an_error():
    d = compile_regex('"[a-z]+(?:-[a-z]+)*"')
    assert length_bounded(d, CHAR, 1, 255, max_states=10_000).n_states < 1_000  # (the unrolled regex: ~4,000)
    with pytest.raises(AutomatonTooLarge, match="exceeds 100 states"):
        length_bounded(d, CHAR, 1, 255, max_states=100)


SLUG = {"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "minLength": 3, "maxLength": 200}


def test_a_pattern_under_a_large_max_length_compiles_exactly():
    compiled = compile_grammar(SLUG)
    assert not compiled.narrowed and (3, 200) in compiled.lengths
    _, machine = compile_machine(SLUG)
    for text, want in (("ab-c", True), ("a" * 200, True), ("a" * 201, False), ("ab", False), ("ab--c", False),
                       ("a-" * 99 + "ab", True), ("a-" * 100 + "a", False)):
        assert machine.accepts(json.dumps(text)) == want, text


def test_the_bound_is_kept_inside_an_object_and_an_array():
    schema = {"type": "object", "properties": {"id": SLUG, "tags": {"type": "array", "items": SLUG, "maxItems": 3}},
              "required": ["id"], "additionalProperties": False}
    _, machine = compile_machine(schema)
    assert machine.accepts('{"id":"abc","tags":["ab-cd","xyz"]}')
    assert not machine.accepts('{"id":"abc","tags":["%s"]}' % ("a" * 201))
    assert not machine.accepts('{"id":"%s"}' % ("a" * 201))


def test_a_format_with_a_pattern_and_a_length():
    schema = {"type": "string", "format": "date", "pattern": "^2024-", "maxLength": 40}
    _, machine = compile_machine(schema)
    for text, want in (("2024-02-29", True), ("2023-02-28", False), ("2024-13-01", False)):
        assert machine.accepts(json.dumps(text)) == want, text


def test_no_string_of_those_lengths_is_unsatisfiable_not_a_dead_end():
    odd = {"type": "string", "pattern": "^a(bc)+$", "minLength": 40, "maxLength": 40}  # 1 + 2n characters
    with pytest.raises(SchemaError, match="unsatisfiable"):
        compile_grammar(odd)
    # optional: the property is left out, so no text writes its key and then dies
    _, machine = compile_machine({"type": "object", "properties": {"x": odd}, "additionalProperties": False})
    assert machine.accepts("{}")
    assert machine.walk(b'{"x"') < 0


def test_inside_a_negation_the_bound_is_still_refused():
    # an operand compiles with calls off: no automaton of its own, so the old refusal stands
    with pytest.raises(SchemaError, match="maxLength"):
        compile_grammar({"type": "string", "not": {"type": "string", "pattern": "^a(b|c)*$", "maxLength": 100}})


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^[ab]+(-[ab]+)*$", "minLength": 2, "maxLength": 18},
    {"type": "object", "properties": {"k": {"type": "string", "pattern": "^(ab|c)+(-[a-c]+)*$", "maxLength": 20}},
     "required": ["k"], "additionalProperties": False},
])
def test_masks_equal_brute_force_and_texts_validate(schema):
    compiled = compile_grammar(schema)
    assert any(compiled.lengths), "the bound is counted by the automaton"
    grammar = StackGrammar(build_machine(compiled), small_vocab(3, n=150))
    ref = Reference(grammar.machine)
    v = validator(schema)
    rng = random.Random(5)
    finished = 0
    for _ in range(12):
        text, done = random_walk(grammar, rng, ref, max_tokens=40)
        if done:
            finished += 1
            assert v.is_valid(json.loads(text)), text
    assert finished > 0


def test_past_the_product_limit_a_max_length_is_capped_and_named():
    """e-mail under maxLength 1024: the exact product is over LENGTH_STATES, so strings are
    generated up to a cap (a narrowing naming maxLength, its pointer and the cap), exact below
    it: every accepted text is valid (jsonschema with its format checker), none is longer."""
    import jsonschema

    schema = {"type": "object", "properties": {"e": {"type": "string", "format": "email", "maxLength": 1024}}}
    compiled = compile_grammar(schema)
    note, = [n for n in compiled.narrowed if n.startswith("maxLength at #/properties/e/maxLength")]
    cap = int(re.search(r"at most (\d+) characters are generated, not 1024", note).group(1))
    assert 64 <= cap < 1024
    _, machine = compile_machine(schema)
    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    local = "a" * (cap - len("@example.com"))
    for text, want in (("a@b.co", True), (local + "@example.com", True), ("a" + local + "@example.com", False),
                       ("no-at-sign", False)):
        doc = {"e": text}
        assert machine.accepts(json.dumps(doc, separators=(",", ":"))) == want, (len(text), text[:20])
        if want:
            assert check.is_valid(doc)


def test_a_cap_below_the_minimum_is_still_refused():
    # ~30 words of non-space characters within 300: the product fits only a few dozen characters
    with pytest.raises(SchemaError, match=r"^maxLength at #/maxLength: length bounds"):
        compile_grammar({"type": "string", "pattern": "^(?:\\S+\\s+){0,29}\\S+$", "maxLength": 300})
