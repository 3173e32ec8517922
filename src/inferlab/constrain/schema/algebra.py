"""`not` over regular operands: the complement of the operand's automaton, per JSON type.

`rest and not neg` is split by type. A type neg admits no value of is compiled from rest alone;
a type neg admits every value of (no keyword of neg constrains it) is left out; for a scalar type
(null, boolean, string, integer, number) the language is

    L(rest) and (U_type minus L(neg)),

on byte DFAs (constrain.dfa_algebra), read back as a regex. U_type is the canonical texts of that
type (constrain.schema.canonical): strings with the escapes json.dumps writes, integers without
"-0", other numbers in plain decimal notation with at most 15 significant digits. The complement
is sound only where neg's regex is exact on U_type (a text outside L(neg) then really fails
neg), so neg is compiled with calls off and any narrowing it triggers is a refusal; the one
exception is "no exponent", which concerns texts outside U_type. Inside the operand, patterns
mean a superset of their ECMA-262 and Python meanings (Unicode classes, Python's `.` and `$`),
formats (subsets by design) are refused, and so is a negation (it would need the opposite
polarity); enum values beside other keywords must be checked by jsonschema. Objects and arrays
have no such complement (their texts have many key orders and may repeat keys, which no
complement of a regex can account for): there `not` is the positive complement of neg's part of
that type (schema.typed), and refused where that has none.
"""

from __future__ import annotations

from functools import lru_cache

from inferlab.constrain import dfa_algebra
from inferlab.constrain.lru import LRU
from inferlab.constrain.schema.common import EXPONENT_CUT, _CHAR, _TYPES, SchemaError, _Unsat, _constrains, _group
from inferlab.errors import InferlabError
from inferlab.constrain.caches import CACHES

# canonical texts per type (what canonical_json writes); see the module docstring
_FRACTION = "|".join([r"-?0\.0{0,15}[1-9](?:[0-9]{0,13}[1-9])?"]
                     + [fr"-?[1-9][0-9]{{{a}}}\.(?:[0-9]{{0,{13 - a}}}[1-9])" for a in range(14)])
_UNIVERSE = {
    "null": "null",
    "boolean": "true|false",
    "string": r'"(?:[^"\\\u0000-\u001f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*"',
    "integer": "0|-?[1-9][0-9]*",
    "number": "0|-?[1-9][0-9]*|" + _FRACTION,
}


class AlgebraMixin:
    """`not` by automaton complement within the canonical texts of each type (mixed into _Compiler)."""

    def compile_complement(self, rest: dict, neg, ptr: str, neg_ptr: str, stack, keyword: str = "not") -> str:
        """rest and not neg (neg flattened), type by type (see the module docstring)."""
        types = self.types_of(rest, ptr)
        if types == ["any"]:
            types = [t for t in _TYPES if t != "number"] + ["number"]
        parts = []
        for t in types:
            try:
                rest_t = self.merge(rest, {"type": t}, ptr, stack)
                parts.append(self.complement_part(rest_t, neg, t, ptr, neg_ptr, stack, keyword))
            except _Unsat as exc:
                self.note_cut(exc)
        if not parts:
            raise _Unsat(f"not at #{ptr}: nothing is valid")
        return _group(parts)

    def complement_part(self, rest_t, neg, t: str, ptr: str, neg_ptr: str, stack, keyword: str) -> str:
        """The regex of rest_t (a schema of type t) and not neg."""
        try:
            neg_t = self.merge(neg, {"type": t}, neg_ptr, stack)
        except _Unsat:
            return self.compile(rest_t, ptr, stack)  # neg admits no value of type t
        if self.disjoint(neg_t, {"type": t}, stack, stack):  # nor where its top does not show it (anyOf of other types)
            return self.compile(rest_t, ptr, stack)
        if isinstance(neg_t, dict) and not _constrains(neg_t, t):
            raise _Unsat(f"not at #{ptr}: no {t} is left")
        if self.operand_depth:  # the complement of a complement would need the other polarity
            self.refuse(keyword, neg_ptr, "a negation inside a negated schema is not supported")
            return self.compile(rest_t, ptr, stack)
        if t in ("object", "array"):  # no regex complement: the typed form's positive one
            return self.compile_typed_complement(rest_t, neg_t, t, ptr, neg_ptr, stack, keyword)
        negated = self.exact_operand(neg_t, neg_ptr, stack, keyword)
        if negated is None:
            return self.compile(rest_t, ptr, stack)  # refused (lenient), or neg is empty for t
        if t == "number":
            self.narrow(f"{keyword} at #{neg_ptr}: numbers are generated in plain decimal notation with at most 15 "
                        "significant digits")
        self.inline += 1
        try:
            kept = self.compile(rest_t, ptr, stack)
        finally:
            self.inline -= 1
        try:
            regex = _combined((_UNIVERSE[t], negated, kept), ("minus", "and"))
        except InferlabError as exc:
            self.refuse(keyword, neg_ptr, f"{exc} (complement of the operand)")
            return kept
        if regex is None:
            raise _Unsat(f"{keyword} at #{ptr}: no {t} is left")
        return regex

    def intersection(self, regexes: list[str], ptr: str) -> str | None:
        """The regex of the texts all the (flat) regexes match, by automaton product; None where
        that is over the size limits (the caller refuses or falls back)."""
        try:
            out = _combined(tuple(regexes), ("and",) * (len(regexes) - 1))
        except InferlabError:
            return None
        if out is None:
            raise _Unsat(f"no text at #{ptr} satisfies all of its constraints")
        return out

    def exact_operand(self, node, ptr: str, stack, keyword: str) -> str | None:
        """The flat regex of an operand to complement, or None where it has no value. A narrowing
        there (the regex smaller than the schema) would make the complement looser: refused. A
        superset there (a format's, formats.SUPERSETS) makes it tighter: a narrowing, recorded."""
        saved, self.operand_losses = self.operand_losses, []
        try:
            regex, inexact = self.operand_regex(node, ptr, stack)
            losses = self.operand_losses
        finally:
            self.operand_losses = saved
        if inexact:
            self.refuse(keyword, ptr, f"its operand is not compiled exactly ({inexact[0]})")
            return None
        for note in losses:
            self.narrow(note)
        return regex

    def operand_regex(self, node, ptr: str, stack) -> tuple[str | None, list[str]]:
        """(the flat regex of node in operand mode, a superset of its texts where nothing
        narrowed it; None where it has no value) and the narrowings that make it no superset."""
        saved, self.narrowed = self.narrowed, []
        self.inline += 1
        self.operand_depth += 1
        try:
            regex = self.compile(node, ptr, stack)
        except _Unsat as exc:
            regex = None
            if exc.cut:
                self.narrowed.append(str(exc))
        finally:
            self.inline -= 1
            self.operand_depth -= 1
            narrowed, self.narrowed = self.narrowed, saved
        return regex, [m for m in narrowed if EXPONENT_CUT not in m or "digits after the point" in m]  # (U has no exponents)

    def superset_regex(self, node, ptr: str, stack) -> str | None:
        """A regex of every canonical text of node's values (operand mode), or None where that
        is not known: a narrowing, a refusal (rolled back), or no value at all (the caller's
        intersection then sees the empty language as no regex: unknown, never wrong)."""
        saved = self.checkpoint()
        lenient, self.lenient = self.lenient, False
        try:
            regex, inexact = self.operand_regex(node, ptr, stack)
        except SchemaError:
            self.rollback(saved)
            return None
        finally:
            self.lenient = lenient
        return None if inexact else regex


def _combined(regexes: tuple[str, ...], ops: tuple[str, ...]) -> str | None:
    """((r0 op0 r1) op1 r2) ... on byte DFAs ("and", "or", "minus"), read back as one regex;
    None: the empty language. Raises InferlabError past the size limits (dfa_algebra's)."""
    out = _combined_or_error(regexes, ops)
    if isinstance(out, InferlabError):
        raise out
    return out


@lru_cache(maxsize=256)
def _combined_or_error(regexes: tuple[str, ...], ops: tuple[str, ...]) -> str | InferlabError | None:
    """_combined, its refusal cached too: conditionals distributed over allOf meet the same
    operands many times, and an operand over the limits must not be built again each time."""
    try:
        d = _dfa(regexes[0])
        for regex, op in zip(regexes[1:], ops):
            d = dfa_algebra.product(d, _dfa(regex), op)
        return dfa_algebra.to_regex(d)
    except InferlabError as exc:
        return exc.with_traceback(None)  # the cache keeps the message, not the frames


@lru_cache(maxsize=256)
def _dfa(regex: str):
    return dfa_algebra.operand(regex)


def operand_dfa(regex: str):
    """The minimal DFA of a flat regex, as the products here build it (kept: _dfa's cache)."""
    return _dfa(regex)


# A string's pattern or format with length bounds over INTERSECT_LENGTH_MAX (stack mode): the
# pattern's DFA times a character counter (dfa_algebra.length_bounded), an automaton of its own
# built from the DFA, never read back as a regex; refused past this many states of the product.
LENGTH_STATES = 20_000


BOUNDED_CACHE_BYTES = 64 * 2**20  # the DFAs (S, 256) int32 kept between the compiler and the builder
_BOUNDED = LRU(BOUNDED_CACHE_BYTES, lambda d: 0 if isinstance(d, InferlabError) else d.trans.nbytes)
#          (regex, lo, hi) -> DFA or its refusal


def bounded_dfa(regex: str, lo: int, hi: int | None):
    """The DFA of the JSON strings `regex` matches (quotes included) whose content holds lo to hi
    characters; raises InferlabError (AutomatonTooLarge) over the size limits. Kept (by bytes,
    BOUNDED_CACHE_BYTES): the compiler checks that it builds, the machine builder then takes it."""
    key = (regex, lo, hi)
    out = _BOUNDED.get(key)
    if out is None:
        try:
            out = dfa_algebra.length_bounded(_dfa(regex), _dfa(_CHAR), lo, hi, max_states=LENGTH_STATES)
        except InferlabError as exc:
            out = exc.with_traceback(None)  # the cache keeps the message, not the frames
        else:  # shared by every machine built from this text: none may write to it
            out.trans.flags.writeable = False
            out.accepting.flags.writeable = False
        _BOUNDED[key] = out
    if isinstance(out, InferlabError):
        raise out
    return out


def clear_bounded() -> None:
    """Forget the kept length-bounded DFAs (stack.clear_compile_caches: a cold compile)."""
    _BOUNDED.clear()


# kept across compiles: the one owner names, sizes and clears them (caches.CACHES)
CACHES.register_lru(_combined_or_error, "compile")
CACHES.register_lru(_dfa, "compile")
