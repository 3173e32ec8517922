"""Integers and numbers: exact bounds as digit-range regexes (constrain.number_regex)."""

from __future__ import annotations

from decimal import Decimal
from inferlab.constrain import formats, number_regex

from inferlab.constrain.schema.common import EXPONENT_CUT, _INTEGER, _NUMBER, _child
from inferlab.errors import InferlabError


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
        except InferlabError:
            both = None
        if both is None:
            self.refuse("multipleOf", _child(ptr, "multipleOf"), f"multipleOf {k}: its automaton (or the product "
                        "with the bounds) is over the size limits")
            return out
        return both

    def integer_range(self, node, ptr, stack) -> str:
        """The integers within node's bounds (and format range)."""
        fmt_range = self.numeric_format(node, ptr, integer=True)
        if fmt_range is not None:
            node = {**node, "allOf": [{"minimum": fmt_range[0], "maximum": fmt_range[1]}]}
            node = self.flatten(node, ptr, stack)[0]
        lo, lo_incl, hi, hi_incl = self.bounds(node, ptr)
        if lo is None and hi is None:
            return _INTEGER
        ilo, ihi = number_regex.integer_bounds(
            minimum=lo if lo_incl else None, exclusive_minimum=None if lo_incl else lo,
            maximum=hi if hi_incl else None, exclusive_maximum=None if hi_incl else hi)
        out = number_regex.integer_range(ilo, ihi)
        if out is None:
            key = "minimum" if "minimum" in node else "exclusiveMinimum"
            raise self.error(key, _child(ptr, key), f"no integer in the range (lower {lo}, upper {hi})")
        return out

    def check_multiple_of(self, node, ptr, *, integer: bool) -> bool | int:
        """multipleOf: False where absent (or refused); True where every integer is a multiple (1,
        or 1/n on an integer); an integer k >= 2 where the integers must be multiples of k (a
        number then too: a multiple of k is an integer). Other values are refused."""
        m = node.get("multipleOf")
        if m is None:
            return False
        if m == 1 or (integer and isinstance(m, (int, float)) and m > 0 and 1 % m == 0):
            return True
        if isinstance(m, (int, float)) and m > 1 and m == int(m):
            return int(m)
        self.refuse("multipleOf", _child(ptr, "multipleOf"), f"multipleOf {m} is not supported")
        return False

    def compile_number(self, node, ptr, stack) -> str:
        k = self.check_multiple_of(node, ptr, integer=False)
        if k:  # an integer-valued number: integer texts (multiples of k), or one with a zero fraction
            rest = {key: v for key, v in node.items() if key != "multipleOf" or k is not True}
            return f"{self.compile_integer(rest, ptr, stack)}(?:\\.0+)?"
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

