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


_FRACTION = r"\.[0-9]+"
_NONZERO_FRACTION = r"\.[0-9]*[1-9][0-9]*"
_ZERO_FRACTION = r"(?:\.0+)?"


def _magnitude_range(lo: int, lo_inclusive: bool, hi: int | None, hi_inclusive: bool) -> str | None:
    """Plain decimal texts `I(.F)?` whose value m satisfies lo <(=) m <(=) hi; lo, hi integers >= 0.

    m = I + f with 0 <= f < 1, so m >= lo iff I >= lo; m > lo iff I > lo or (I == lo and f > 0);
    m <= hi iff I < hi or (I == hi and f == 0); m < hi iff I < hi.
    """
    if hi is not None and (hi < lo or (hi == lo and not (lo_inclusive and hi_inclusive))):
        return None
    if hi is not None and hi == lo:
        return natural_range(lo, lo) + _ZERO_FRACTION
    parts = []
    inner = natural_range(lo + 1, None if hi is None else hi - 1)  # any fraction
    if inner is not None:
        parts.append(inner + f"(?:{_FRACTION})?")
    lo_text = natural_range(lo, lo)
    parts.append(lo_text + (f"(?:{_FRACTION})?" if lo_inclusive else _NONZERO_FRACTION))
    if hi is not None and hi_inclusive:
        parts.append(natural_range(hi, hi) + _ZERO_FRACTION)
    return _alt(parts)


def number_range(lo: int | None, lo_inclusive: bool, hi: int | None, hi_inclusive: bool) -> str | None:
    """Regex for plain-decimal number texts (no exponent) with integer bounds lo <(=) x <(=) hi.

    Exponent forms are not produced (a narrowing the caller records). Returns None when empty.
    """
    parts = []
    # x >= 0 part, written without a sign
    if hi is None or hi > 0 or (hi == 0 and hi_inclusive):
        if lo is None or lo < 0:
            p = _magnitude_range(0, True, hi, hi_inclusive)
        else:
            p = _magnitude_range(lo, lo_inclusive, hi, hi_inclusive)
        if p is not None:
            parts.append(p)
    # x < 0 part: "-" and a magnitude m = -x in (max(-hi, 0), -lo); m = 0 is already covered
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            m_lo, m_lo_incl = 0, False
        else:
            m_lo, m_lo_incl = -hi, hi_inclusive
        p = _magnitude_range(m_lo, m_lo_incl, None if lo is None else -lo, lo_inclusive)
        if p is not None:
            parts.append("-" + p)
    if not parts:
        return None
    return _alt(parts)
