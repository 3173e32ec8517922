"""Exact regexes for integer and decimal ranges (the number half of the schema compiler).

JSON numbers are text, so a bound such as `minimum: 18` becomes a regex over digit strings. Every
function here is exact: the regex matches a canonical JSON number text if and only if its value is
in the range. Canonical means what Python's json module writes for an int (no leading zeros, no
"-0", no fraction) or, for `number_range`, plain decimal notation (`12`, `12.5`, `-0.25`).

The algorithm is the classic one (as in `regex-range` / outlines' integer bounds): split a range
of non-negative integers by digit count, then split each equal-length range at the first digit
where the bounds differ, so each piece is `prefix [a-b] [0-9]{k}`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache

from inferlab.constrain.caches import CACHES

_DIGIT = "[0-9]"


def _digit_class(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if lo == 0 and hi == 9:
        return _DIGIT
    return f"[{lo}-{hi}]"


def _repeat(atom: str, n: int) -> str:
    if n == 0:
        return ""
    return atom if n == 1 else f"{atom}{{{n}}}"


def _alt(parts: list[str]) -> str:
    parts = [p for p in parts]
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _same_length(a: str, b: str) -> str:
    """Digit strings of equal length with a <= b -> regex for every digit string in [a, b]."""
    if a == b:
        return a
    n = len(a)
    if a[0] == b[0]:
        return a[0] + _same_length(a[1:], b[1:])
    rest = n - 1
    if a[1:] == "0" * rest and b[1:] == "9" * rest:  # the whole block [a0-b0][0-9]{rest}
        return _digit_class(int(a[0]), int(b[0])) + _repeat(_DIGIT, rest)
    parts = [a[0] + _same_length(a[1:], "9" * rest)]
    if int(b[0]) - int(a[0]) > 1:
        parts.append(_digit_class(int(a[0]) + 1, int(b[0]) - 1) + _repeat(_DIGIT, rest))
    parts.append(b[0] + _same_length("0" * rest, b[1:]))
    return _alt(parts)


def natural_range(lo: int, hi: int | None) -> str | None:
    """Regex for the decimal texts of the integers in [lo, hi] (0 <= lo; hi None = no upper bound).

    Returns None when the range is empty.
    """
    if lo < 0:
        raise ValueError("natural_range needs lo >= 0")
    if hi is not None and hi < lo:
        return None
    parts = []
    top = hi
    if hi is None:
        width = len(str(lo))
        top = 10**width - 1
        parts_tail = f"[1-9]{_DIGIT}{{{width},}}"  # every number with more digits than `top`
    for width in range(len(str(lo)), len(str(top)) + 1):
        a = max(lo, 10 ** (width - 1) if width > 1 else 0)
        b = min(top, 10**width - 1)
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(parts_tail)
    return _alt(parts)


def integer_range(lo: int | None, hi: int | None) -> str | None:
    """Regex for the canonical texts of the integers in [lo, hi] (None = unbounded); None if empty."""
    if lo is not None and hi is not None and hi < lo:
        return None
    parts = []
    # negative part: "-" and a magnitude in [max(1, -hi), -lo]
    if lo is None or lo < 0:
        mag_lo = 1 if hi is None or hi >= 0 else -hi
        mag = natural_range(mag_lo, None if lo is None else -lo)
        if mag is not None:
            parts.append("-" + mag)
    if hi is None or hi >= 0:
        nat = natural_range(max(lo, 0) if lo is not None else 0, hi)
        if nat is not None:
            parts.append(nat)
    if not parts:
        return None
    return _alt(parts)


def integer_bounds(minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None):
    """JSON-schema bounds (ints or floats, any mix) -> the integer interval [lo, hi] they allow."""
    lows = []
    highs = []
    if minimum is not None:
        lows.append(math.ceil(minimum))
    if exclusive_minimum is not None:
        lows.append(math.floor(exclusive_minimum) + 1)
    if maximum is not None:
        highs.append(math.floor(maximum))
    if exclusive_maximum is not None:
        highs.append(math.ceil(exclusive_maximum) - 1)
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _digits(k: int, lo: int = 0) -> str:
    """Regex for lo..k arbitrary digits (k None = unbounded)."""
    if k is None:
        return f"{_DIGIT}*" if lo == 0 else f"{_DIGIT}{{{lo},}}"
    if k < lo:
        return None
    return "" if k == 0 else (f"{_DIGIT}{{{k}}}" if lo == k else f"{_DIGIT}{{{lo},{k}}}")


def _rest(a: str, a_incl: bool, b: str | None, b_incl: bool, room: int | None, nonempty: bool) -> str | None:
    """Digit strings R (len <= room; non-empty if asked) with 0.a <(=) 0.R <(=) 0.b.

    a and b are digit strings without trailing zeros ("" = 0); b None = no upper bound (0.R < 1
    always holds). Recursion on the first digit c of R: a digit strictly between the bounds' first
    digits frees the rest; a digit equal to a bound's first digit passes the bound's tail down.
    """
    if room is not None and room <= 0:
        ok = (a == "" and a_incl) and (b is None or b != "" or b_incl)  # R is empty: value 0
        return "" if ok and not nonempty else None
    if a == "" and b is None:
        if a_incl:
            return _digits(room, 1 if nonempty else 0)
        # a non-zero digit somewhere: zeros, a non-zero digit, then anything
        parts = []
        for i in range(room if room is not None else 1):
            tail = _digits(None if room is None else room - i - 1)
            parts.append((f"0{{{i}}}" if room is not None and i else ("0*" if room is None else "")) + "[1-9]" + tail)
        return _alt_or_none(parts)
    if b == "":  # 0.R <= 0: R is all zeros
        if not (a == "" and a_incl and b_incl):
            return None
        if room is None:
            return "0+" if nonempty else "0*"
        return f"0{{{1 if nonempty else 0},{room}}}"
    parts = []
    if not nonempty and (a == "" and a_incl):
        parts.append("")  # R empty: value 0, above an inclusive lower bound 0 (upper b > 0 here)
    a0 = int(a[0]) if a else 0
    a_tail = a[1:].rstrip("0") if a else ""
    b0 = int(b[0]) if b is not None else 10
    b_tail = b[1:].rstrip("0") if b is not None else None
    sub_room = None if room is None else room - 1
    if a0 == b0:
        r = _rest(a_tail, a_incl, b_tail, b_incl, sub_room, False)
        if r is not None:
            parts.append(f"{a0}{r}")
    else:
        r = _rest(a_tail, a_incl, None, True, sub_room, False)  # c == a0: the lower bound's tail
        if r is not None:
            parts.append(f"{a0}{r}")
        if b0 - a0 > 1:
            free = _digits(sub_room)
            parts.append(_digit_class(a0 + 1, b0 - 1) + free)
        if b is not None:
            r = _rest("", True, b_tail, b_incl, sub_room, False)
            if r is not None:
                parts.append(f"{b0}{r}")
    parts = [p for p in parts if p is not None]
    if nonempty:
        parts = [p for p in parts if p != ""]
    return _alt_or_none(parts)


def _alt_or_none(parts: list[str]) -> str | None:
    if not parts:
        return None
    if parts == [""]:
        return ""
    if "" in parts:
        rest = [p for p in parts if p]
        return f"(?:{_alt(rest)})?" if len(rest) > 1 else f"(?:{rest[0]})?"
    return _alt(parts)


def _fraction(a: str, a_incl: bool, b: str | None, b_incl: bool, room: int | None) -> str | None:
    """The `(.F)?` part of a number text whose fraction 0.F is in the given bounds."""
    empty_ok = (a == "" and a_incl) and (b is None or b != "" or b_incl)
    r = _rest(a, a_incl, b, b_incl, room, True)
    if r is None:
        return "" if empty_ok else None
    return f"(?:\\.{r})?" if empty_ok else f"\\.{r}"


def _split(x: Decimal) -> tuple[int, str]:
    """A non-negative decimal -> (integer part, fraction digits without trailing zeros)."""
    text = format(x, "f")
    whole, _, frac = text.partition(".")
    return int(whole), frac.rstrip("0")


def _magnitude_range(lo: Decimal, lo_incl: bool, hi: Decimal | None, hi_incl: bool, room: int | None) -> str | None:
    """Plain decimal texts `I(.F)?` whose value m satisfies lo <(=) m <(=) hi (lo >= 0).

    m = I + 0.F, so the integer part decides except where it equals a bound's integer part; there
    the fraction is compared digit by digit (_rest)."""
    li, lf = _split(lo)
    parts = []
    if hi is None:
        hi_i, hf = None, None
    else:
        hi_i, hf = _split(hi)
    if hi_i is not None and hi_i == li:
        f = _fraction(lf, lo_incl, hf, hi_incl, room)
        return None if f is None else natural_range(li, li) + f
    inner = natural_range(li + 1, None if hi_i is None else hi_i - 1)
    if inner is not None:
        parts.append(inner + _fraction("", True, None, True, room))
    f = _fraction(lf, lo_incl, None, True, room)
    if f is not None:
        parts.append(natural_range(li, li) + f)
    if hi_i is not None:
        f = _fraction("", True, hf, hi_incl, room)
        if f is not None:
            parts.append(natural_range(hi_i, hi_i) + f)
    return _alt(parts) if parts else None


def number_range(lo, lo_inclusive: bool, hi, hi_inclusive: bool, *, max_fraction_digits: int | None = None) -> str | None:
    """Regex for plain-decimal number texts (no exponent) with lo <(=) x <(=) hi.

    Bounds are ints, floats (read as their shortest repr, the value Python compares with) or
    Decimals; None = unbounded. `max_fraction_digits` caps the digits after the point. Exponent
    forms are not produced (a narrowing the caller records). Returns None when empty.
    """
    lo = None if lo is None else Decimal(repr(lo) if isinstance(lo, float) else lo)
    hi = None if hi is None else Decimal(repr(hi) if isinstance(hi, float) else hi)
    if lo is not None and hi is not None and (hi < lo or (hi == lo and not (lo_inclusive and hi_inclusive))):
        return None
    parts = []
    # x >= 0, written without a sign
    if hi is None or hi > 0 or (hi == 0 and hi_inclusive):
        if lo is None or lo < 0:
            p = _magnitude_range(Decimal(0), True, hi, hi_inclusive, max_fraction_digits)
        else:
            p = _magnitude_range(lo, lo_inclusive, hi, hi_inclusive, max_fraction_digits)
        if p is not None:
            parts.append(p)
    # x < 0: "-" and a magnitude m = -x in (max(-hi, 0), -lo); m = 0 is already covered
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            m_lo, m_lo_incl = Decimal(0), False
        else:
            m_lo, m_lo_incl = -hi, hi_inclusive
        p = _magnitude_range(m_lo, m_lo_incl, None if lo is None else -lo, lo_inclusive, max_fraction_digits)
        if p is not None:
            parts.append("-" + p)
    if not parts:
        return None
    return _alt(parts)


MULTIPLE_REGEX_CHARS = 40_000  # multipleOf k on integers: the regex its residue automaton reads back as (7: 27,782; 9: 482,140)


@lru_cache(maxsize=64)
def integer_multiples(k: int) -> str:
    """Regex of the JSON integers (-?(0|[1-9][0-9]*)) divisible by the integer k >= 2: the
    minimal DFA over the residues mod k (reading digit d: r -> 10 r + d), read back as a regex;
    dfa_algebra.AutomatonTooLarge (an InferlabError) past MULTIPLE_REGEX_CHARS (state elimination
    makes the regex grow fast with k: 7 and 12 fit, 9, 11 and 16 do not)."""
    import numpy as np

    from inferlab.constrain.dfa import DFA
    from inferlab.constrain.dfa_algebra import AutomatonTooLarge, product, to_regex

    if k > 10_000:
        raise AutomatonTooLarge(f"multipleOf {k}: over 10,000 residues")
    # states: 0..k-1 residue after a non-zero first digit; k start; k+1 after "-"; k+2 a lone "0"
    trans = np.full((k + 3, 256), -1, dtype=np.int32)  # (S, 256)
    for r in range(k):
        for d in range(10):
            trans[r, ord("0") + d] = (10 * r + d) % k
    for s in (k, k + 1):
        for d in range(1, 10):
            trans[s, ord("0") + d] = d % k
    trans[k, ord("-")] = k + 1
    trans[k, ord("0")] = k + 2
    accepting = np.zeros(k + 3, dtype=bool)
    accepting[0] = accepting[k + 2] = True
    d = DFA(trans, k, accepting)
    return to_regex(product(d, d, "and"), max_chars=MULTIPLE_REGEX_CHARS)  # (the product is minimal)


def decimal_step(m) -> tuple[int, int]:
    """multipleOf's value as p * 10**-q exactly (p >= 1, q >= 0 the fewest fraction digits): the
    decimal its JSON text writes, read from the shortest repr of a float (0.01 -> (1, 2), 1.5 ->
    (15, 1), 1e-08 -> (1, 8), 16 -> (16, 0)). ValueError where m is not a number > 0."""
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not m > 0 or m != m or m == math.inf:
        raise ValueError(f"must be a number > 0, got {m!r}")
    sign, digits, exp = Decimal(repr(m) if isinstance(m, float) else m).normalize().as_tuple()
    p = int("".join(map(str, digits)))
    return (p * 10**exp, 0) if exp >= 0 else (p, -exp)


@lru_cache(maxsize=64)
def decimal_multiples(p: int, q: int) -> str:
    """Regex of the JSON numbers in plain decimal notation (-?(0|[1-9][0-9]*)(\\.[0-9]+)?, no
    exponent) whose exact decimal value is a multiple of p * 10**-q (q >= 1): v * 10**q is an
    integer (no non-zero digit past the q-th after the point) divisible by p. The minimal DFA
    over (residue mod p, fraction digits read), read back as a regex: after j <= q fraction
    digits with residue r, v * 10**q = r * 10**(q - j) (mod p). Exact on the text, as JSON
    Schema defines multipleOf (not Python jsonschema's float division, which rejects 0.07 as a
    multiple of 0.01). AutomatonTooLarge (an InferlabError) over 10,000 residues or past
    MULTIPLE_REGEX_CHARS."""
    import numpy as np

    from inferlab.constrain.dfa import DFA
    from inferlab.constrain.dfa_algebra import AutomatonTooLarge, product, to_regex

    if p > 10_000:
        raise AutomatonTooLarge(f"multipleOf {p}e-{q}: over 10,000 residues")
    # states: r (0..p-1) integer part read; (r, j) at p + r*(q+1) + j: the point and j fraction
    # digits read; then start, after "-", a lone "0", and the trailing zeros past the q-th digit
    frac = lambda r, j: p + r * (q + 1) + j  # noqa: E731
    start, minus, zero, tail = p * (q + 2), p * (q + 2) + 1, p * (q + 2) + 2, p * (q + 2) + 3
    trans = np.full((tail + 1, 256), -1, dtype=np.int32)  # (S, 256)
    accepting = np.zeros(tail + 1, dtype=bool)
    for r in range(p):
        for d in range(10):
            trans[r, ord("0") + d] = (10 * r + d) % p
        trans[r, ord(".")] = frac(r, 0)
        accepting[r] = r * 10**q % p == 0
        for j in range(q):
            for d in range(10):
                trans[frac(r, j), ord("0") + d] = frac((10 * r + d) % p, j + 1)
        for j in range(1, q + 1):
            accepting[frac(r, j)] = r * 10**(q - j) % p == 0
    trans[frac(0, q), ord("0")] = tail  # past the q-th fraction digit: zeros only
    trans[tail, ord("0")] = tail
    accepting[tail] = True
    for s in (start, minus):
        for d in range(1, 10):
            trans[s, ord("0") + d] = d % p
    trans[start, ord("-")] = minus
    trans[start, ord("0")] = trans[minus, ord("0")] = zero
    trans[zero, ord(".")] = frac(0, 0)
    accepting[zero] = True
    d = DFA(trans, start, accepting)
    return to_regex(product(d, d, "and"), max_chars=MULTIPLE_REGEX_CHARS)  # (the product is minimal)


# kept across compiles: the one owner names, sizes and clears them (caches.CACHES)
CACHES.register_lru(integer_multiples, "compile")
CACHES.register_lru(decimal_multiples, "compile")
