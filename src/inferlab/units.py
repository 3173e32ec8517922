"""Byte units and element dtypes, parsed strictly.

Vendors quote memory in decimal GB (an "A100 40GB" holds 40e9 bytes) while tools and allocators
report binary GiB (2^30 bytes); the two differ by 7.4% at this scale, which is exactly the size of
the error the lab warns about. So a memory size must carry its unit: "40GB" or "40GiB", never
"40" or the ambiguous "40G".
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from inferlab.errors import InferlabError

MAX_BYTES = 2 ** 64   # 16 EiB: past any machine's memory (and Decimal sizes stay far from float overflow)

UNITS = {
    "B": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
# Prefixes people type without saying decimal or binary; each gets a message naming both readings.
_AMBIGUOUS = {"K", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "kb", "mb", "gb", "tb", "Kb", "Mb", "Gb", "Tb"}

# Bits per stored element. int4 packs two elements per byte, hence Fraction byte sizes below.
DTYPE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
_DTYPE_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
                  "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}

_SIZE = re.compile(r"^(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-z]*)$")


def parse_bytes(text: str, *, flag: str) -> int:
    """'40GB' -> 40_000_000_000, '14GiB' -> 15_032_385_536. Whole bytes only, positive, unit required."""
    s = str(text).strip()
    if s.startswith("-"):
        raise InferlabError(f"{flag} {text!r}: a memory size must be positive")
    m = _SIZE.match(s)
    if not m:
        raise InferlabError(f"{flag} {text!r}: expected a number and a unit, such as 40GB or 14GiB")
    unit = m["unit"]
    if not unit:
        raise InferlabError(f"{flag} {text!r} has no unit: write {s}GB (vendor, 1e9 bytes) "
                            f"or {s}GiB (2^30 bytes)")
    if unit in _AMBIGUOUS:
        head = unit[0].upper()
        raise InferlabError(f"{flag} {text!r}: ambiguous unit {unit!r}; write {head}B (10^n bytes, as vendors do) "
                            f"or {head}iB (2^n bytes); lower-case b would be bits")
    if unit not in UNITS:
        raise InferlabError(f"{flag} {text!r}: unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    value = Decimal(m["num"]) * UNITS[unit]          # the regex admits only decimal literals
    if value <= 0:
        raise InferlabError(f"{flag} {text!r}: a memory size must be positive")
    if value > MAX_BYTES:
        raise InferlabError(f"{flag} {text!r}: over 16 EiB (2^64 bytes), past any machine's memory")
    if value != value.to_integral_value():
        raise InferlabError(f"{flag} {text!r} is {value} bytes, not a whole number of bytes")
    return int(value)


def parse_dtype(text: str, *, flag: str = "--dtype") -> str:
    """'fp16' / 'bfloat16' -> canonical name. A bare bit count such as '16' is refused: the formula
    needs bytes per element (s = 2 for fp16), and 16 is the bit count, an 8x error."""
    s = str(text).strip()
    if s.isdigit():
        bits = int(s)
        hint = ", ".join(f"{n} = {Fraction(b, 8)} byte{'s' if b != 8 else ''}"
                         for n, b in DTYPE_BITS.items() if b == bits) or "no cache dtype has that many bits"
        raise InferlabError(f"{flag} {s!r} is a number, not a dtype: the formula needs bytes per element, "
                            f"and {s} reads as bits ({hint}); write one of {', '.join(DTYPE_BITS)}")
    name = _DTYPE_ALIASES.get(s.lower(), s.lower())
    if name not in DTYPE_BITS:
        raise InferlabError(f"{flag} {s!r}: unknown dtype; use one of {', '.join(DTYPE_BITS)}")
    return name


def dtype_bytes(dtype: str) -> Fraction:
    """Bytes per element as an exact fraction: fp16 -> 2, int4 -> 1/2."""
    return Fraction(DTYPE_BITS[dtype], 8)


def fmt_number(x) -> str:
    """An exact integer as '524288', a fraction as a short decimal ('0.5')."""
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    return f"{float(x):.6g}"


def _scaled(n: int, step: int, names: tuple[str, ...]) -> str:
    value, unit = Fraction(n), names[0]
    for name in names[1:]:
        if value < step:
            break
        value, unit = value / step, name
    if value.denominator == 1:
        return f"{value.numerator} {unit}"
    return f"{float(value):.3f}".rstrip("0").rstrip(".") + f" {unit}"


def fmt_binary(n: int) -> str:
    """524288 -> '512 KiB'; exact when the value is a whole number of the unit, else 3 decimals."""
    return _scaled(n, 1024, ("bytes", "KiB", "MiB", "GiB", "TiB"))


def fmt_decimal(n: int) -> str:
    """4294967296 -> '4.295 GB' (vendor units)."""
    return _scaled(n, 1000, ("bytes", "kB", "MB", "GB", "TB"))

