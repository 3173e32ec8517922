"""Integers and numbers: exact bounds as digit-range regexes (constrain.number_regex)."""

from __future__ import annotations

import math
from decimal import Decimal
from inferlab.constrain import formats, number_regex

from inferlab.constrain.schema.common import EXPONENT_CUT, _INTEGER, _NUMBER, _Unsat, _child
from inferlab.errors import InferlabError


LISTED_MULTIPLES = 2_000  # integer multipleOf whose residue regex is too long: a bounded range's multiples listed


class NumbersMixin:
    """Integers and numbers: exact bounds as digit-range regexes (constrain.number_regex) (mixed into _Compiler)."""

    def bounds(self, node, ptr):
        """(minimum, min_inclusive, maximum, max_inclusive) with draft-4 boolean exclusives read."""
        lo, lo_incl, hi, hi_incl = None, True, None, True
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            v = node.get(key)
            if v is not None and not isinstance(v, (bool, int, float)):
                raise self.error(key, _child(ptr, key), f"must be a number, got {v!r}")
        if node.get("minimum") is not None:
            lo, lo_incl = node["minimum"], node.get("exclusiveMinimum") is not True
        if node.get("maximum") is not None:
            hi, hi_incl = node["maximum"], node.get("exclusiveMaximum") is not True
        x = node.get("exclusiveMinimum")
        if x is not None and not isinstance(x, bool) and (lo is None or x >= lo):
            lo, lo_incl = x, False
        x = node.get("exclusiveMaximum")
        if x is not None and not isinstance(x, bool) and (hi is None or x <= hi):
            hi, hi_incl = x, False
        return lo, lo_incl, hi, hi_incl

    def numeric_format(self, node, ptr, *, integer: bool):
        """format on a number: OpenAPI int32/int64 as a range (a narrowing), double as nothing,
        string formats do not apply; anything else is refused."""
        name = node.get("format")
        if name is None or name in formats.FORMATS or (name in formats.NUMBER_FORMATS):
            return None
        if integer and name in formats.INTEGER_FORMATS:
            self.narrow(f"format {name} at #{ptr}: the OpenAPI range is enforced (JSON Schema ignores it)")
            return formats.INTEGER_FORMATS[name]
        if self.custom_format(name, _child(ptr, "format")):
            return None
        self.refuse("format", _child(ptr, "format"), f"unknown format {name!r} for a number")
        return None

    def compile_integer(self, node, ptr, stack) -> str:
        out = self.integer_range(node, ptr, stack)
        k = self.check_multiple_of(node, ptr, integer=True)
        if k is False or k is True:
            return out
        try:  # the range's texts that the residue automaton accepts
            both = self.intersection([out, number_regex.integer_multiples(k)], ptr)
        except InferlabError:  # the residues' regex is too long: a bounded range's multiples, listed
            both = self.listed_multiples(node, ptr, k, out)
        if both is None:
            m = node["multipleOf"]
            self.refuse("multipleOf", _child(ptr, "multipleOf"), f"multipleOf {m}{'' if m == k else f' (on integers, {k})'}: "
                        "its automaton (or the product with the bounds) is over the size limits")
            return out
        return both

    def listed_multiples(self, node, ptr, k: int, out: str) -> str | None:
        """The multiples of k within node's bounds as literals, where both bounds are set and
        there are at most LISTED_MULTIPLES (the residue automaton of 16 is 16 states, but its
        regex read back is 265,000 characters); None otherwise."""
        ilo, ihi = self.integer_bounds(node, ptr)
        if ilo is None or ihi is None:
            return None
        first = -(-ilo // k) * k
        if (ihi - first) // k >= LISTED_MULTIPLES:
            return None
        listed = [str(n) for n in range(first, ihi + 1, k)]
        if not listed:
            raise _Unsat(f"multipleOf at #{_child(ptr, 'multipleOf')}: no multiple of {k} in the range")
        return self.intersection([out, "(?:" + "|".join(listed) + ")"], ptr)

    def integer_range(self, node, ptr, stack) -> str:
        """The integers within node's bounds (and format range)."""
        fmt_range = self.numeric_format(node, ptr, integer=True)
        if fmt_range is not None:
            node = {**node, "allOf": [{"minimum": fmt_range[0], "maximum": fmt_range[1]}]}
            node = self.flatten(node, ptr, stack)[0]
        lo, _, hi, _ = self.bounds(node, ptr)
        if lo is None and hi is None:
            return _INTEGER
        out = number_regex.integer_range(*self.integer_bounds(node, ptr))
        if out is None:
            key = "minimum" if "minimum" in node else "exclusiveMinimum"
            raise self.error(key, _child(ptr, key), f"no integer in the range (lower {lo}, upper {hi})")
        return out

    def integer_bounds(self, node, ptr) -> tuple[int | None, int | None]:
        """The least and greatest integer within node's bounds (None: unbounded)."""
        lo, lo_incl, hi, hi_incl = self.bounds(node, ptr)
        return number_regex.integer_bounds(
            minimum=lo if lo_incl else None, exclusive_minimum=None if lo_incl else lo,
            maximum=hi if hi_incl else None, exclusive_maximum=None if hi_incl else hi)

    def check_multiple_of(self, node, ptr, *, integer: bool) -> bool | int | tuple[int, int]:
        """multipleOf, exactly on the decimal its JSON text writes (number_regex.decimal_step):
        False where absent (or refused); True where every integer is a multiple (1, or p/10^q
        dividing 1, on an integer); an integer k >= 2 where the integers must be multiples of k
        (a number then too: a multiple of k is an integer; on an integer, 1.5 is k = 3); on a
        number, (p, q) for the decimal step p * 10**-q (0.01 is (1, 2))."""
        m = node.get("multipleOf")
        if m is None:
            return False
        try:
            p, q = number_regex.decimal_step(m)
        except ValueError as exc:
            self.refuse("multipleOf", _child(ptr, "multipleOf"), str(exc))
            return False
        if q and not integer:
            return p, q
        k = p // math.gcd(p, 10**q)  # an integer n is a multiple of p/10^q iff k divides n
        return True if k == 1 else k

    def compile_number(self, node, ptr, stack) -> str:
        k = self.check_multiple_of(node, ptr, integer=False)
        if k is True or isinstance(k, int) and k:  # an integer-valued number: integer texts (multiples of k), or one with a zero fraction
            rest = {key: v for key, v in node.items() if key != "multipleOf" or k is not True}
            return f"{self.compile_integer(rest, ptr, stack)}(?:\\.0+)?"
        out = self.number_range(node, ptr)
        if not k:
            return out
        try:
            multiples = number_regex.decimal_multiples(*k)
            both = multiples if out == _NUMBER else self.intersection([out, multiples], ptr)
        except InferlabError:
            both = None
        if both is None:
            self.refuse("multipleOf", _child(ptr, "multipleOf"), f"multipleOf {node['multipleOf']}: its automaton "
                        "(or the product with the bounds) is over the size limits")
            return out
        if out == _NUMBER and not self.operand_depth:  # (a complement's texts have no exponent)
            self.narrow(f"multipleOf at #{ptr}: {EXPONENT_CUT}")
        return both

    def number_range(self, node, ptr) -> str:
        """The numbers within node's bounds: _NUMBER where it has none, else plain decimal texts."""
        self.numeric_format(node, ptr, integer=False)
        lo, lo_incl, hi, hi_incl = self.bounds(node, ptr)
        if lo is None and hi is None:
            return _NUMBER
        digits = self.fraction_digits(node, ptr, lo, lo_incl, hi, hi_incl)
        if digits == 0:
            return _NUMBER  # refused (lenient: unenforced)
        if self.operand_depth and digits is not None:
            # the operand of a complement: the complement's texts (algebra._UNIVERSE) hold at most
            # 15 significant digits, as the bound does (fraction_digits checked it), and distinct
            # such decimals stay distinct floats, so the exact decimal comparison is the float one
            digits = None
        out = number_regex.number_range(lo, lo_incl, hi, hi_incl, max_fraction_digits=digits)
        if out is None:
            key = next((k for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum") if k in node), "minimum")
            why = f"no number in the range (lower {lo}, upper {hi})"
            if lo is not None and hi is not None and lo < hi:  # numbers there are, but none this notation writes
                why += f" is written in plain decimal notation{f' with at most {digits} digits after the point' if digits else ''}"
            raise self.error(key, _child(ptr, key), why)
        self.narrow(f"bounded number at #{ptr}: {EXPONENT_CUT}"
                    + (f", at most {digits} digits after the point" if digits else ""))
        return out

    def fraction_digits(self, node, ptr, lo, lo_incl, hi, hi_incl) -> int | None:
        """Digits allowed after the point for a bounded number, so the regex's exact decimal
        comparison agrees with the float comparison a validator makes.

        Rounding to float is monotonic, so an inclusive bound holds for the float whenever it
        holds for the decimal. An exclusive one can fail (1.0000000000000001 > 1, but not as
        floats): there, texts near the bound keep at most 15 significant digits, which floats
        tell apart. None: no cap; 0: refused."""
        exclusive = [b for b, incl in ((lo, lo_incl), (hi, hi_incl)) if b is not None and not incl]
        if not exclusive:
            return None
        for b in exclusive:
            d = Decimal(repr(b) if isinstance(b, float) else b)
            if abs(d) >= 10**12 or len(d.normalize().as_tuple().digits) > 15:
                key = "exclusiveMinimum" if b is lo else "exclusiveMaximum"
                self.refuse(key, _child(ptr, key), f"exclusive bound {b} is beyond float precision for an exact regex")
                return 0
        widest = max(len(str(int(abs(Decimal(repr(b) if isinstance(b, float) else b))))) for b in exclusive)
        return 14 - widest

