"""Exact integer and decimal range regexes, checked against Python's own comparisons."""

import re
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from inferlab.constrain.number_regex import integer_bounds, integer_range, natural_range, number_range


def matches(regex, text):
    return regex is not None and re.fullmatch(regex, text) is not None


@pytest.mark.parametrize("lo,hi,expected", [
    (0, 9, "[0-9]"),          # one digit, every value
    (10, 99, "[1-9][0-9]"),   # every two-digit number
    (3, 3, "3"),
    (5, 7, "[5-7]"),
])
def test_natural_range_hand_derived_text(lo, hi, expected):
    assert natural_range(lo, hi) == expected


def test_natural_range_12_to_345_hand_cases():
    r = natural_range(12, 345)
    for ok in ["12", "19", "20", "99", "100", "299", "300", "339", "340", "345"]:
        assert matches(r, ok), ok
    for bad in ["0", "1", "11", "346", "350", "400", "999", "012", "1000", ""]:
        assert not matches(r, bad), bad


def test_unbounded_above():
    r = natural_range(7, None)
    assert not matches(r, "6") and matches(r, "7") and matches(r, "9")
    assert matches(r, "10") and matches(r, "123456789012345678901234567890")
    assert not matches(r, "07") and not matches(r, "00")


def test_empty_ranges_are_none():
    assert natural_range(5, 4) is None
    assert integer_range(1, 0) is None
    assert number_range(3, True, 3, False) is None   # [3, 3) is empty
    assert number_range(3, False, 3, True) is None


def test_integer_range_across_zero():
    r = integer_range(-5, 12)
    for x in range(-20, 30):
        assert matches(r, str(x)) == (-5 <= x <= 12), x
    for bad in ["-0", "00", "012", "+3", "1.0", "-"]:
        assert not matches(r, bad), bad


def test_integer_range_only_negative():
    r = integer_range(-300, -17)
    assert matches(r, "-17") and matches(r, "-300") and matches(r, "-99")
    assert not matches(r, "-16") and not matches(r, "-301") and not matches(r, "17") and not matches(r, "0")


def test_integer_range_unbounded_below():
    r = integer_range(None, -3)
    assert matches(r, "-3") and matches(r, "-1000000000000") and not matches(r, "-2") and not matches(r, "5")


@pytest.mark.parametrize("bounds,expected", [
    (dict(minimum=2.5), (3, None)),
    (dict(exclusive_minimum=2), (3, None)),
    (dict(exclusive_minimum=2.5), (3, None)),
    (dict(maximum=-0.5), (None, -1)),
    (dict(exclusive_maximum=2.5), (None, 2)),
    (dict(exclusive_maximum=-2), (None, -3)),
    (dict(minimum=0, exclusive_minimum=4), (5, None)),   # the tighter one wins
])
def test_integer_bounds_hand_derived(bounds, expected):
    assert integer_bounds(**bounds) == expected


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.integers(-10**6, 10**6)), st.one_of(st.none(), st.integers(-10**6, 10**6)),
       st.lists(st.integers(-2 * 10**6, 2 * 10**6), min_size=1, max_size=30))
def test_integer_range_matches_comparison(lo, hi, xs):
    r = integer_range(lo, hi)
    for x in xs + [v for v in (lo, hi) if v is not None] + [v + d for v in (lo, hi) if v is not None for d in (-1, 1)]:
        want = (lo is None or x >= lo) and (hi is None or x <= hi)
        assert matches(r, str(x)) == want, (lo, hi, x, r)


@pytest.mark.parametrize("text,ok", [
    ("0", True), ("0.0", True), ("9.999", True), ("5", True), ("10", False), ("10.0", False),
    ("-0.1", False), ("-1", False), ("00", False), ("1e1", False),
])
def test_number_range_zero_to_ten_exclusive(text, ok):
    assert matches(number_range(0, True, 10, False), text) == ok


@pytest.mark.parametrize("text,ok", [
    ("0", False), ("0.0", False), ("0.000", False), ("0.01", True), ("1", True), ("1.0", True),
    ("1.000", True), ("1.01", False), ("2", False),
])
def test_number_range_zero_exclusive_to_one(text, ok):
    assert matches(number_range(0, False, 1, True), text) == ok


decimals = st.builds(lambda i, f, neg: ("-" if neg else "") + str(i) + (("." + f) if f else ""),
                     st.integers(0, 60), st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=4)),
                     st.booleans())


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.integers(-40, 40)), st.booleans(), st.one_of(st.none(), st.integers(-40, 40)),
       st.booleans(), st.lists(decimals, min_size=1, max_size=20))
def test_number_range_matches_exact_fractions(lo, lo_incl, hi, hi_incl, texts):
    r = number_range(lo, lo_incl, hi, hi_incl)
    for text in texts:
        v = Fraction(text)
        want = (lo is None or (v >= lo if lo_incl else v > lo)) and (hi is None or (v <= hi if hi_incl else v < hi))
        if matches(r, text):  # soundness: never a value outside the bounds
            assert want, (lo, lo_incl, hi, hi_incl, text)
        elif want:  # completeness holds except for "-0..." spellings of zero
            assert v == 0 and text.startswith("-"), (lo, lo_incl, hi, hi_incl, text)


@pytest.mark.parametrize("text,ok", [
    ("0.25", True), ("0.250", True), ("0.2500001", True), ("0.3", True), ("1.75", True),
    ("0.24999", False), ("0.2", False), ("1.75001", False), ("1.8", False), ("2", False), ("-0.25", False),
])
def test_decimal_bounds_hand_cases(text, ok):
    assert matches(number_range(0.25, True, 1.75, True), text) == ok


def test_negative_decimal_bounds_exclusive():
    r = number_range(-1.5, False, -0.5, False)
    for text, ok in [("-1.5", False), ("-1.49", True), ("-1", True), ("-0.51", True), ("-0.5", False),
                     ("-0.4", False), ("0", False), ("-1.6", False), ("-0.50", False)]:
        assert matches(r, text) == ok, text


def test_max_fraction_digits_caps_the_fraction():
    r = number_range(0, False, 1, False, max_fraction_digits=3)
    assert matches(r, "0.001") and matches(r, "0.999") and matches(r, "0.5")
    assert not matches(r, "0.0001") and not matches(r, "0.9999") and not matches(r, "0.000")


bounds = st.one_of(st.none(), st.integers(-30, 30), st.decimals(-30, 30, places=2).map(lambda d: float(d)))


@settings(max_examples=100, deadline=None)
@given(bounds, st.booleans(), bounds, st.booleans(), st.one_of(st.none(), st.integers(1, 4)),
       st.lists(decimals, min_size=1, max_size=20))
def test_decimal_range_matches_exact_fractions(lo, lo_incl, hi, hi_incl, digits, texts):
    r = number_range(lo, lo_incl, hi, hi_incl, max_fraction_digits=digits)
    extra = [repr(b) + tail for b in (lo, hi) if b is not None for tail in ("", "0", "01", "9")]
    for text in texts + [t for t in extra if not t.startswith(("-0", "0")) or "." in t]:
        if re.fullmatch(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", text) is None:
            continue
        v = Fraction(text)
        n_frac = len(text.partition(".")[2])
        want = ((lo is None or (v >= Fraction(repr(lo)) if lo_incl else v > Fraction(repr(lo))))
                and (hi is None or (v <= Fraction(repr(hi)) if hi_incl else v < Fraction(repr(hi))))
                and (digits is None or n_frac <= digits))
        if text.startswith("-") and v == 0:
            assert not matches(r, text)  # "-0.0" is never generated (zero is written unsigned)
            continue
        assert matches(r, text) == want, (lo, lo_incl, hi, hi_incl, digits, text)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 100])
def test_integer_multiples_match_exactly_the_multiples(k):
    from inferlab.constrain.number_regex import integer_multiples
    regex = re.compile(integer_multiples(k))
    assert all(bool(regex.fullmatch(str(i))) == (i % k == 0) for i in range(-2_000, 2_000))
    assert not any(regex.fullmatch(t) for t in ("", "-", "00", "-0", "010", "2.0"))


def test_multiple_of_an_integer_is_exact_and_past_the_size_limit_refused():
    import jsonschema

    from inferlab.constrain.schema import SchemaError, canonical_json, compile_grammar
    from inferlab.constrain.stack import build_machine
    values = [*range(-40, 130), 10.0, -4.0, 7.5, 2.5, "s", None]
    for schema in ({"multipleOf": 2}, {"type": "integer", "multipleOf": 3, "minimum": -10, "maximum": 40},
                   {"type": "number", "multipleOf": 5, "exclusiveMaximum": 100}, {"type": "integer", "not": {"multipleOf": 4}}):
        machine, v = build_machine(compile_grammar(schema)), jsonschema.Draft202012Validator(schema)
        assert [machine.accepts(canonical_json(x, schema)) for x in values] == [v.is_valid(x) for x in values], schema
    with pytest.raises(SchemaError, match=r"^multipleOf at #/multipleOf: multipleOf 9: its automaton"):
        compile_grammar({"type": "integer", "multipleOf": 9})


# multipleOf a decimal, exactly on the number's text (issue 46). Python's jsonschema divides
# floats (0.07 / 0.01 = 7.000000000000001: it rejects 0.07 as a multiple of 0.01); inferlab follows
# the specification's exact division, as jsonschema-rs does, and the oracle here is Fraction.
_PLAIN = st.from_regex(r"-?(0|[1-9][0-9]{0,6})(\.[0-9]{1,6})?", fullmatch=True)


def _exact_multiple(text: str, m: str) -> bool:
    return (Fraction(text) / Fraction(m)).denominator == 1


@pytest.mark.parametrize("m,p_q", [(0.01, (1, 2)), (1.5, (15, 1)), (1e-08, (1, 8)), (0.25, (25, 2)),
                                   (16, (16, 0)), (2.5e-05, (25, 6)), (1000.0, (1000, 0))])
def test_decimal_step_reads_the_schema_text(m, p_q):
    from inferlab.constrain.number_regex import decimal_step
    assert decimal_step(m) == p_q


def test_multiple_of_decimal_hand_cases():
    from inferlab.constrain.stack import compile_machine
    _, m = compile_machine({"type": "number", "multipleOf": 0.1})
    # 0.3 = 3 x 0.1; the text 0.30000000000000004 is not (its value has 17 fraction digits)
    for text, ok in [("0.3", True), ("0.30000000000000004", False), ("3", True), ("0.30", True),
                     ("-2.5", True), ("0.05", False), ("0", True), ("1e1", False)]:
        assert m.accepts(text) == ok, text
    _, m = compile_machine({"type": "number", "multipleOf": 1.5, "minimum": -3, "maximum": 3})
    for text, ok in [("-3", True), ("-1.5", True), ("0", True), ("1.50", True), ("3.0", True),
                     ("4.5", False), ("0.75", False), ("1", False)]:
        assert m.accepts(text) == ok, text
    _, m = compile_machine({"type": "integer", "multipleOf": 1.5})  # integers: the multiples of 3
    assert [m.accepts(t) for t in ("3", "-6", "4", "0")] == [True, True, False, True]


@settings(max_examples=300, deadline=None)
@given(text=_PLAIN, m=st.sampled_from(["0.01", "0.25", "1.5", "0.0001", "2.5"]),
       bounds=st.sampled_from([{}, {"minimum": 0}, {"minimum": -10, "exclusiveMaximum": 100.5}]))
def test_multiple_of_decimal_against_fractions(text, m, bounds):
    import jsonschema_rs

    from inferlab.constrain.stack import compile_machine
    assume(not (text.startswith("-") and Fraction(text) == 0 and bounds))  # range regexes never write -0
    schema = {"type": "number", "multipleOf": float(m), **bounds}
    _, machine = compile_machine(schema)
    lo, hi = bounds.get("minimum"), bounds.get("exclusiveMaximum")
    in_range = (lo is None or Fraction(text) >= lo) and (hi is None or Fraction(text) < Fraction(str(hi)))
    assert machine.accepts(text) == (_exact_multiple(text, m) and in_range), (text, schema)
    if machine.accepts(text):  # the second oracle, on the value the text parses to
        assert jsonschema_rs.validator_for(schema).is_valid(float(text))


def test_multiple_of_decimal_beside_not_and_its_refusal():
    from inferlab.constrain.schema import SchemaError, compile_grammar
    from inferlab.constrain.stack import compile_machine
    _, m = compile_machine({"type": "number", "not": {"multipleOf": 0.01}})
    assert [m.accepts(t) for t in ("0.07", "0.071", "1", "-0.005")] == [False, True, False, True]
    with pytest.raises(SchemaError, match=r"^multipleOf at #/multipleOf: multipleOf 0.123456789: its automaton"):
        compile_grammar({"type": "number", "multipleOf": 0.123456789})


def test_integer_multiple_of_past_the_residue_regex_listed_within_bounds():
    from inferlab.constrain.stack import compile_machine
    _, m = compile_machine({"type": "integer", "multipleOf": 16, "minimum": -2032, "maximum": 2031})
    assert all(m.accepts(str(n)) == (n % 16 == 0 and -2032 <= n <= 2031) for n in range(-2100, 2100, 3))
