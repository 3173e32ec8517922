"""JSON Schema -> regular expression: the first stage of constrained decoding.

`compile_schema(schema)` returns a regex (the dialect of `constrain.regex`, Python-`re`
compatible, whole-string match) that matches JSON texts. The guarantee is soundness: every text
the regex matches parses as JSON and validates against the schema. The regex is complete on
canonical texts (`canonical_json`) except where a documented narrowing applies; each narrowing
that a schema triggers is listed in `CompiledSchema.narrowed`. A constraint is never loosened
silently: what cannot be enforced exactly raises `SchemaError` naming the keyword and its JSON
pointer ("minimum at #/properties/age: ..."), or, with `lenient=True`, is listed in
`CompiledSchema.unenforced` (and the regex is then looser than the schema at that place).

Supported keywords
- type (a name or a list; "integer" is a subset of "number"); boolean schemas true / false;
- enum, const: any JSON values, written canonically (compact, ensure_ascii=False); values that
  fail the schema's other keywords are dropped;
- object: properties (emitted in schema order; an optional property may be omitted), required
  (a required name missing from properties gets the additionalProperties schema),
  additionalProperties false / schema / true: extra keys come after the declared ones and never
  repeat a declared name. Absent additionalProperties: extra keys are not generated unless
  `allow_extra_keys=True` or no property is declared (a narrowing, recorded).
  patternProperties: applied to the declared names it matches when no extra key can be
  generated; a single pattern with no declared properties is a map (its keys match the pattern);
  a single pattern every key matches (".*") applies to every key. minProperties 1, maxProperties
  0, and otherwise only where the generated objects always satisfy them. dependencies,
  dependentRequired, dependentSchemas (at most MAX_DEPENDENCIES): "without the key, or with it
  and what it needs", as exact alternatives;
- array: items (a schema, or a list in drafts 4-2019 with additionalItems), prefixItems with
  items (2020-12), minItems, maxItems; uniqueItems only where maxItems <= 1;
- string: minLength, maxLength (code points of the decoded string: an escape counts as one),
  pattern (ECMA-262 patterns in the subset below), format (constrain.formats: date, time,
  date-time, email, uuid, uri, uri-reference, ipv4, hostname). Length bounds with a pattern or
  format: intersected exactly where the shape allows (one repeated part), else a recorded subset
  (search padding dropped, the length budget split over repeated parts of fixed width), else an
  error;
- integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft-4 booleans)
  as exact digit-range regexes (constrain.numbers); multipleOf 1; format int32 / int64 (the
  OpenAPI ranges, enforced: a narrowing, recorded); format double on a number is no constraint;
- number: the same bounds (any decimal values), exactly, in plain decimal notation (exponents
  are not generated for a bounded number, and next to an exclusive bound at most 15 significant
  digits, so the float comparison a validator makes agrees: narrowings, recorded); multipleOf 1;
- boolean, null;
- anyOf; oneOf when no text generated for one branch validates another (types, enum/const
  values, numeric ranges, array lengths, a required key the other branch never writes or with
  values it cannot take), since then oneOf == anyOf on what is generated;
- not: not {} (nothing), not {type}, not {required: [...]} (an object missing one of them), not
  {anyOf: [{required}...]}; other forms are errors;
  allOf, merged into one schema (type sets intersected, bounds tightened, properties merged with
  each side's additionalProperties, anyOf/oneOf distributed);
- $ref to "#" or "#/json/pointer" ($defs, definitions, any local path); recursion is unrolled to
  `max_ref_depth` levels of the same target (deeper branches are cut where the schema lets them
  be absent: an optional property, an anyOf branch, an empty array; recorded); in drafts 4-7 the
  siblings of $ref are ignored, as those drafts say; from 2019-09 on they apply (merged);
- annotations and unknown keywords (title, description, default, examples, $schema, $id,
  $comment, deprecated, readOnly, x-..., ...) are ignored: they constrain nothing.

Everything else that constrains instances (other `not`s, if/then/else, multipleOf other than 1,
contains, uniqueItems, propertyNames, unevaluated*, $dynamicRef, formats not listed, ...) is an
error unless lenient. Contradictions inside one schema object (minLength > maxLength, minimum >
maximum, minItems > maxItems) are errors; a subschema nothing satisfies (false, an enum with no
value of the type, an empty merge) is left out exactly where the schema allows absence (an
optional property, an anyOf branch, an empty array) and is an error elsewhere.

Pattern subset (ECMA-262 as JSON Schema says, checked to mean the same under Python's `re`, which
jsonschema uses): the dialect of `constrain.regex` (literals, escapes, classes, groups, `|`,
quantifiers), `^` at the start and `$` at the end of a top-level alternative, named groups
`(?<name>...)`. `\\d \\w \\s` mean ASCII digits, word characters and white space (a narrowing of
Python's Unicode meanings) and `\\D \\W \\S` the complements of the Unicode classes, so a match
is a match under both ECMA-262 and Python. `.` excludes all four ECMA line terminators.

Whitespace: "compact" generates none (`{"a":1}`); "flexible" allows up to FLEXIBLE_WS_MAX
characters of JSON whitespace (space, tab, newline, carriage return) around every structural
token (`{ } [ ] : ,`).

Unconstrained values (a true schema, an array without items, an extra key's value when allowed)
are generated up to `any_depth` levels of nested arrays/objects (JSON nesting is not regular; a
narrowing, recorded).

Stack mode (`compile_grammar`, run by constrain.stack): the same keywords, compiled into automata
that call each other, which lifts these narrowings and limits:
- $ref (whose siblings do not constrain, or in drafts 4-7) is a call of its target's automaton,
  compiled once: recursion is exact, with no depth cap (max_ref_depth does not apply);
- unconstrained values are one recursive automaton: any nesting (any_depth does not apply);
- a string's maxLength >= COUNT_MIN without pattern/format is counted by the frame;
- a subschema regex over OUTLINE_CHARS is an automaton of its own, and objects over
  MEMBER_BLOCK members are compiled a block at a time, so size grows with the schema, not with
  nesting times uses;
- format policy: a format the specification does not define is an annotation (listed in
  CompiledGrammar.unenforced_formats); the formats above are enforced; other specification
  formats are errors.
Extra keys (additionalProperties, a patternProperties map) may still repeat a key, as in the
regex: tracking written keys in the frame is not done yet.
"""

from __future__ import annotations

import json
import math
import re
import sys
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from inferlab.constrain import formats, numbers
from inferlab.constrain import regex as rx
from inferlab.errors import InferlabError

FLEXIBLE_WS_MAX = 12
# Bigger regexes mean an unrolled blow-up (a $ref used in many places, a deep recursion); the
# DFA stage has its own state limit, this stops the string from eating the memory first.
MAX_REGEX_CHARS = 1_000_000
MAX_SUBSCHEMAS = 50_000  # compiled subschemas (after unrolling and distribution) per schema
# Stack mode: a subschema regex longer than this becomes an automaton of its own, called where it
# is used, so nesting and repeated use add calls instead of multiplying the text.
OUTLINE_CHARS = (4_000, 400, 60)  # tried in turn while an automaton is over the size limits
MAX_AUTOMATA = 20_000
COUNT_MIN = 64  # stack mode: a string maxLength from here on is counted by the frame, not unrolled
MEMBER_BLOCK = 32  # stack mode: objects with more members are compiled a block at a time
_NOTHING = "[^\\x00-\\U0010ffff]"  # the empty language (an automaton whose schema is unsatisfiable)

_TYPES = ("null", "boolean", "object", "array", "number", "string")  # "integer" is within number
_FAMILY_KEYWORDS = {
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
              "contains", "minContains", "maxContains", "unevaluatedItems"),
    "object": ("properties", "required", "additionalProperties", "patternProperties",
               "minProperties", "maxProperties", "propertyNames", "dependencies",
               "dependentRequired", "dependentSchemas", "unevaluatedProperties"),
}
# keywords that constrain instances but are not translated (for any type)
_UNSUPPORTED = {
    "not": "negation is not expressible in a regex built by this compiler",
    "if": "conditional schemas (if/then/else) are not supported",
    "contains": "contains is not supported",
    "minContains": "minContains is not supported",
    "maxContains": "maxContains is not supported",
    "propertyNames": "propertyNames is not supported",
    "unevaluatedProperties": "unevaluatedProperties is not supported",
    "unevaluatedItems": "unevaluatedItems is not supported",
    "$dynamicRef": "$dynamicRef is not supported",
    "$recursiveRef": "$recursiveRef is not supported",
}
_DEPENDENCY_KEYWORDS = ("dependencies", "dependentRequired", "dependentSchemas")
MAX_DEPENDENCIES = 4  # each one doubles the alternatives (present or absent)
_OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")

_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_INTEGER = r"-?(?:0|[1-9][0-9]*)"
# one character of a JSON string: unescaped, a short escape, or a \u escape outside the
# surrogates (a surrogate pair would be two escapes for one code point and break length counts)
_CHAR = (r'(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]'
         r"|\\u(?:[0-9a-ce-fA-CE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))")
_STRING = f'"{_CHAR}*"'
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class SchemaError(InferlabError):
    """A schema the compiler cannot translate exactly; the message names keyword and pointer."""


class SchemaTooLarge(SchemaError):
    """The regex would exceed MAX_REGEX_CHARS or MAX_SUBSCHEMAS (an unrolled blow-up)."""


@dataclass(frozen=True)
class CompiledSchema:
    regex: str
    unenforced: tuple[str, ...]  # "keyword at #/pointer: reason", only with lenient=True
    ref_depth: int               # deepest nesting of one $ref target that was unrolled (0: no $ref)
    narrowed: tuple[str, ...]    # documented narrowings this schema triggered
    whitespace: str


class _Unsat(Exception):
    """A subschema no instance satisfies; dropped exactly where the schema allows absence."""

    def __init__(self, reason: str, *, cut: bool = False):
        super().__init__(reason)
        self.cut = cut  # True: recursion cut at max_ref_depth (a narrowing), not a real emptiness


def _group(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _quant(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _repeat(atom: str, lo: int, hi: int | None) -> str:
    if hi == 0:
        return ""
    if (lo, hi) == (1, 1):
        return atom
    return f"(?:{atom}){_quant(lo, hi)}"


_META = set("\\.^$*+?()[]{}|")


def _lit(text: str) -> str:
    """Regex matching exactly `text` (text is already JSON, so no control characters)."""
    return "".join("\\" + c if c in _META else c for c in text)


def dumps(value) -> str:
    """The canonical JSON text of a value: compact separators, ensure_ascii=False."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _json_key(value) -> str:
    """Equality key under JSON-Schema equality: 1 == 1.0, true != 1, key order irrelevant."""
    def norm(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v
    return json.dumps(norm(value), sort_keys=True)


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _plain_decimal(x: float) -> str:
    """repr's digits in positional notation: 1e-05 -> 0.00001, 1e+16 -> 10000000000000000.0."""
    text = format(Decimal(repr(x)), "f")
    return text if "." in text else text + ".0"


def _escape_pointer(token: str) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _child(ptr: str, *tokens) -> str:
    return ptr + "".join("/" + _escape_pointer(t) for t in tokens)


# --- patterns: ECMA-262 text -> AST of constrain.regex -> regex over JSON string content ------


@lru_cache(maxsize=None)
def _unicode_class(name: str) -> tuple[tuple[int, int], ...]:
    """Code points of Python's Unicode \\d, \\w or \\s (the sets jsonschema's re.search uses)."""
    test = {"d": lambda c: unicodedata.category(c) == "Nd",
            "w": lambda c: c.isalnum() or c == "_",
            "s": lambda c: re.fullmatch(r"\s", c) is not None}[name]
    ranges, start = [], None
    for cp in range(sys.maxunicode + 1):
        if test(chr(cp)):
            if start is None:
                start = cp
        elif start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, sys.maxunicode))
    return rx.normalize_ranges(ranges)


def _class_text(ranges) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


_ASCII_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r\\f\\v"}
# ECMA `.`: anything but the line terminators \n \r U+2028 U+2029
_ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"
_ANY_CHAR = "[\\U00000000-\\U0010ffff]"


def _ecma_to_dialect(pattern: str) -> list[tuple[str, bool, bool]]:
    """Split an ECMA pattern into top-level alternatives in the dialect, with their anchors.

    Returns [(text, anchored_start, anchored_end)]. Rewrites `.`, the class escapes and named
    groups so the meaning is a subset of both ECMA-262's and Python's (see module docstring).
    """
    alts, out = [], []
    depth, i, in_class, negated, class_start = 0, 0, False, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if e in "dws":
                text = _ASCII_CLASSES[e]
                if in_class and negated:  # [^\d]: complement of the *larger* (Unicode) set
                    text = _class_text(_unicode_class(e))
                out.append(text if in_class else f"[{text}]")
            elif e in "DWS":
                text = _class_text(rx.negate(_unicode_class(e.lower())))
                if in_class and negated:
                    raise SchemaError(f"negated class containing \\{e} is not supported")
                out.append(text if in_class else f"[{text}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]" and i > class_start:
                in_class = False
            out.append(c)
        elif c == "[":
            in_class, negated = True, pattern.startswith("^", i + 1)
            class_start = i + (2 if negated else 1)
            if pattern.startswith("]", class_start):
                raise SchemaError("a class starting with ']' means different things in ECMA-262 and Python")
            out.append(c)
        elif c == "(":
            depth += 1
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                close = pattern.find(">", i)
                out.append("(?:")
                i = close + 1 if close > 0 else i + 1
                continue
            out.append(c)
        elif c == ")":
            depth -= 1
            out.append(c)
        elif c == "." :
            out.append(_ECMA_DOT)
        elif c == "|" and depth == 0:
            alts.append("".join(out))
            out = []
        else:
            out.append(c)
        i += 1
    alts.append("".join(out))
    result = []
    for alt in alts:
        start = alt.startswith("^")
        if start:
            alt = alt[1:]
        end = alt.endswith("$") and not _escaped_at(alt, len(alt) - 1)
        if end:
            alt = alt[:-1]
        result.append((alt, start, end))
    return result


def _escaped_at(text: str, pos: int) -> bool:
    n = 0
    while pos - 1 - n >= 0 and text[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


_U_ESCAPED = [cp for cp in range(0x20) if chr(cp) not in _SHORT_ESCAPES]  # written \u00XX
_ALL_U_ESCAPES = r"\\u00(?:0[0-7bef]|1[0-9a-f])"


def _json_char_ranges(ranges) -> str:
    """Regex for the JSON-string encodings (canonical, as json.dumps writes) of one code point
    from `ranges`: unescaped where JSON allows it, else its escape."""
    inside = [cp for cp in list(range(0x20)) + [0x22, 0x5C] if any(lo <= cp <= hi for lo, hi in ranges)]
    short = "".join(_SHORT_ESCAPES[chr(cp)][1] for cp in inside if chr(cp) in _SHORT_ESCAPES)
    u_escaped = [cp for cp in inside if cp in _U_ESCAPED]
    plain = []
    for lo, hi in ranges:
        pieces = [(max(lo, 0x20), hi)]
        for cp in (0x22, 0x5C):
            pieces = [p for a, b in pieces for p in (((a, cp - 1), (cp + 1, b)) if a <= cp <= b else ((a, b),))]
        plain.extend((a, b) for a, b in pieces if a <= b)
    parts = []
    if plain:
        body = "".join(_class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}" for a, b in plain)
        parts.append(f"[{body}]")
    if short:
        letters = "".join(c if c.isalnum() else "\\" + c for c in short)  # b f n r t " \\
        parts.append("\\\\" + (f"[{letters}]" if len(short) > 1 else letters))
    if len(u_escaped) == len(_U_ESCAPED):
        parts.append(_ALL_U_ESCAPES)
    else:
        parts.extend(_lit(f"\\u{cp:04x}") for cp in u_escaped)
    if not parts:
        raise SchemaError("empty character class")
    return _group(parts)


def _class_char(cp: int) -> str:
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    return f"\\U{cp:08x}" if cp > 0xFFFF else f"\\u{cp:04x}"


def _emit_json(node) -> str:
    """AST over decoded characters -> regex over the JSON-string encoding of those characters."""
    if isinstance(node, rx.CharSet):
        return _json_char_ranges(node.ranges)
    if isinstance(node, rx.Concat):
        return "".join(_emit_json(item) for item in node.items)
    if isinstance(node, rx.Alt):
        return "(?:" + "|".join(_emit_json(item) for item in node.items) + ")"
    return _repeat(_emit_json(node.item), node.min, node.max)


def _length_range(node) -> tuple[int, int | None]:
    """(min, max) number of characters in the AST's language (max None = unbounded)."""
    if isinstance(node, rx.CharSet):
        return 1, 1
    if isinstance(node, rx.Concat):
        lo, hi = 0, 0
        for item in node.items:
            a, b = _length_range(item)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, rx.Alt):
        rs = [_length_range(item) for item in node.items]
        return min(a for a, _ in rs), (None if any(b is None for _, b in rs) else max(b for _, b in rs))
    if node.max == 0:
        return 0, 0
    a, b = _length_range(node.item)
    return a * node.min, (None if node.max is None or b is None else b * node.max)


def _with_length(node, lo: int, hi: int | None):
    """Intersect the AST's language with lengths in [lo, hi], exactly, or return None if this
    shape is not handled (only one variable-length part, a repeated single character, is)."""
    items = _flat_items(node)
    fixed = 0
    var = []
    for k, item in enumerate(items):
        a, b = _length_range(item)
        if a == b:
            fixed += a
        else:
            var.append(k)
    if not var:
        return node if lo <= fixed and (hi is None or fixed <= hi) else rx.Alt(())
    if len(var) > 1 and hi == fixed and lo <= fixed and all(_length_range(items[k])[0] == 0 for k in var):
        # every variable part must be empty (e.g. "[A-Z]{2}" searched in a string of length 2)
        return rx.Concat(tuple(item for k, item in enumerate(items) if k not in var))
    if len(var) != 1:
        return None
    rep = items[var[0]]
    if not (isinstance(rep, rx.Repeat) and isinstance(rep.item, rx.CharSet)):
        return None
    new_lo = max(rep.min, lo - fixed)
    new_hi = rep.max if hi is None else (hi - fixed if rep.max is None else min(rep.max, hi - fixed))
    if new_hi is not None and new_hi < new_lo:
        return rx.Alt(())
    items[var[0]] = rx.Repeat(rep.item, new_lo, new_hi)
    return rx.Concat(tuple(items))


_ANYWHERE = rx.Repeat(rx.parse(_ANY_CHAR), 0, None)  # the padding of an unanchored search


def _flat_items(node) -> list:
    """The sequence of a (nested) Concat, flattened."""
    if not isinstance(node, rx.Concat):
        return [node]
    return [leaf for item in node.items for leaf in _flat_items(item)]


def _length_subset(ast, lo: int, hi: int | None):
    """A subset of the AST's strings with lengths in [lo, hi], for the shapes _with_length cannot
    intersect exactly: the search padding is dropped, then the length budget is split evenly over
    the repeated parts (each a repeat of a fixed-length item). None if the shape is not handled."""
    out = []
    for alt in (ast.items if isinstance(ast, rx.Alt) else (ast,)):
        node = None
        for items in ([i for i in _flat_items(alt) if i != _ANYWHERE], _flat_items(alt)):
            node = _with_length(rx.Concat(tuple(items)), lo, hi) or _split_budget(items, lo, hi)
            if node is not None and not _is_empty(node):
                break  # else: keep the padding, which may be what reaches minLength
        if node is None:
            return None
        if not _is_empty(node):
            out.append(node)
    return out[0] if len(out) == 1 else rx.Alt(tuple(out))


def _is_empty(node) -> bool:
    return isinstance(node, rx.Alt) and not node.items


def _split_budget(items: list, lo: int, hi: int | None):
    fixed, reps = 0, []
    for k, item in enumerate(items):
        a, b = _length_range(item)
        if a == b:
            fixed += a
            continue
        if not isinstance(item, rx.Repeat):
            return None
        width, width_hi = _length_range(item.item)
        if width != width_hi or width == 0:
            return None
        fixed += item.min * width
        reps.append((k, width))
    items = list(items)
    need = lo - fixed
    for k, width in reps:  # the minimum first, taken by the repeated parts in order
        if need <= 0:
            break
        rep = items[k]
        take = -(-need // width) if rep.max is None else min(rep.max - rep.min, -(-need // width))
        items[k] = rx.Repeat(rep.item, rep.min + take, rep.max)
        fixed += take * width
        need -= take * width
    if need > 0:
        return rx.Alt(())
    if hi is not None:  # then what is left of maxLength, split evenly
        if hi < fixed:
            return rx.Alt(())
        share = (hi - fixed) // len(reps)
        for k, width in reps:
            rep = items[k]
            cap = rep.min + share // width
            items[k] = rx.Repeat(rep.item, rep.min, cap if rep.max is None else min(rep.max, cap))
    return rx.Concat(tuple(items))


def _pattern_ast(pattern: str):
    """ECMA pattern (search semantics) -> AST of the whole decoded strings it matches."""
    alts = []
    for text, start, end in _ecma_to_dialect(pattern):
        core = rx.parse(text)
        items = ([] if start else [_ANYWHERE]) + [core] + ([] if end else [_ANYWHERE])
        alts.append(rx.Concat(tuple(items)) if len(items) > 1 else core)
    return alts[0] if len(alts) == 1 else rx.Alt(tuple(alts))


# --- the compiler --------------------------------------------------------------------------


class _Compiler:
    def __init__(self, root, *, whitespace, lenient, max_ref_depth, allow_extra_keys, any_depth,
                 stack_mode: bool = False, outline_chars: int = 4_000, count_min: int = 64):
        if whitespace not in ("compact", "flexible"):
            raise SchemaError(f"whitespace must be 'compact' or 'flexible', got {whitespace!r}")
        if max_ref_depth < 1:
            raise SchemaError(f"max_ref_depth must be >= 1, got {max_ref_depth}")
        self.root = root
        self.ws = "" if whitespace == "compact" else f"[ \\t\\n\\r]{{0,{FLEXIBLE_WS_MAX}}}"
        self.lenient = lenient
        self.max_ref_depth = max_ref_depth
        self.allow_extra_keys = allow_extra_keys
        self.any_depth = any_depth
        self.unenforced: list[str] = []
        self.narrowed: list[str] = []
        self.ref_depth = 0
        self.calls = 0
        self.recursive = False  # some $ref target was entered again inside itself
        # Stack mode (compile_grammar): a plain $ref, an unconstrained value and any subschema
        # whose regex exceeds OUTLINE_CHARS become calls `(?&k)` of automaton k, compiled once.
        self.stack_mode = stack_mode
        self.outline_chars = outline_chars
        self.count_min = count_min
        self.counts: dict[int, tuple[int, int]] = {}  # counted automaton -> (min, max) items
        self.automata: list[str] = [""]     # regexes; 0 is the root, filled last
        self.ref_automaton: dict[str, int] = {}
        self.unsat_refs: dict[str, _Unsat] = {}
        self.outlined: dict[str, int] = {}  # regex text -> automaton
        self.inline = 0                     # > 0: calls are off (the regex goes to Python's re)
        self.unenforced_formats: list[str] = []
        dialect = root.get("$schema", "") if isinstance(root, dict) else ""
        self.old_draft = isinstance(dialect, str) and any(d in dialect for d in _OLD_DRAFTS)

    # -- reporting

    def refuse(self, keyword: str, ptr: str, reason: str) -> None:
        """Not enforceable exactly: an error, or (lenient) a listed unenforced constraint."""
        message = f"{keyword} at #{ptr}: {reason}"
        if not self.lenient:
            raise SchemaError(message)
        if message not in self.unenforced:
            self.unenforced.append(message)

    def narrow(self, message: str) -> None:
        if message not in self.narrowed:
            self.narrowed.append(message)

    @staticmethod
    def error(keyword: str, ptr: str, reason: str) -> SchemaError:
        return SchemaError(f"{keyword} at #{ptr}: {reason}")

    # -- structure

    def tok(self, text: str) -> str:
        """A structural token with optional whitespace around it."""
        return f"{self.ws}{_lit(text)}{self.ws}" if self.ws else _lit(text)

    def resolve(self, ref, ptr: str):
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise self.error("$ref", ptr, f"only local references '#/...' are supported, got {ref!r}")
        node = self.root
        target = ref[1:]
        for raw in target.split("/")[1:]:
            token = raw.replace("~1", "/").replace("~0", "~")
            token = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), token)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise self.error("$ref", ptr, f"{ref!r} does not resolve")
        return node, target

    def flatten(self, node, ptr: str, stack: tuple):
        """Resolve $ref and merge allOf: -> (schema without $ref/allOf at top, ptr, stack)."""
        for _ in range(10_000):
            if isinstance(node, bool) or not isinstance(node, dict):
                if not isinstance(node, bool):
                    raise self.error("schema", ptr, f"a schema must be an object or a boolean, got {type(node).__name__}")
                return node, ptr, stack
            if "$ref" in node:
                target, tptr = self.resolve(node["$ref"], ptr)
                depth = stack.count(tptr) + 1
                if depth > self.max_ref_depth:
                    raise _Unsat(f"recursion through #{tptr} deeper than max_ref_depth={self.max_ref_depth}", cut=True)
                self.ref_depth = max(self.ref_depth, depth)
                self.recursive = self.recursive or depth > 1
                stack = stack + (tptr,)
                rest = {k: v for k, v in node.items() if k != "$ref"}
                if self.old_draft or not _constraining(rest):
                    node, ptr = target, tptr
                else:
                    node = self.merge(self.flatten(target, tptr, stack)[0], rest, ptr, stack)
                continue
            if "allOf" in node:
                branches = node["allOf"]
                if not isinstance(branches, list) or not branches:
                    raise self.error("allOf", ptr, "must be a non-empty array")
                merged = {k: v for k, v in node.items() if k != "allOf"}
                for k, branch in enumerate(branches):
                    flat, _, _ = self.flatten(branch, _child(ptr, "allOf", k), stack)
                    merged = self.merge(merged, flat, _child(ptr, "allOf", k), stack)
                node = merged
                continue
            return node, ptr, stack
        raise self.error("$ref", ptr, "reference cycle without any schema in between")

    def merge(self, a, b, ptr: str, stack: tuple):
        """The schema whose instances are those of both a and b (exact), or SchemaError."""
        if a is False or b is False:
            raise _Unsat(f"false schema in allOf at #{ptr}")
        if a is True:
            return b if isinstance(b, dict) else {}
        if b is True:
            return a
        out = dict(a)
        for key, bv in b.items():
            if key not in out:
                out[key] = bv
                continue
            av = out[key]
            if _json_key(av) == _json_key(bv):
                continue
            out[key] = self.merge_keyword(key, av, bv, a, b, ptr)
        if "properties" in a or "properties" in b or "additionalProperties" in a or "additionalProperties" in b:
            self.merge_objects(out, a, b)
        return out

    def merge_objects(self, out, a, b) -> None:
        """properties under allOf: a name declared on one side only meets the other side's
        additionalProperties (absent = true), so merging never admits a key a side forbids."""
        pa, pb = a.get("properties", {}), b.get("properties", {})
        xa, xb = a.get("additionalProperties", True), b.get("additionalProperties", True)
        props = {}
        for name in list(pa) + [n for n in pb if n not in pa]:
            sa = pa.get(name, xa)
            sb = pb.get(name, xb)
            props[name] = sa if sb is True else sb if sa is True else {"allOf": [sa, sb]}
        out["properties"] = props
        if "additionalProperties" in a or "additionalProperties" in b:
            out["additionalProperties"] = xa if xb is True else xb if xa is True else {"allOf": [xa, xb]}
        if "patternProperties" in a or "patternProperties" in b:
            # a key one side's pattern admits still meets the other side's additionalProperties
            # (a narrowing where the other side has a matching pattern or declares the key)
            merged = {}
            for side, other_extra in ((a, xb), (b, xa)):
                for pat, sub in (side.get("patternProperties") or {}).items():
                    parts = [x for x in (merged.get(pat), sub, other_extra) if x is not None and x is not True]
                    merged[pat] = True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
            out["patternProperties"] = merged

    def merge_keyword(self, key, av, bv, a, b, ptr):
        if key == "type":
            ta, tb = _type_set(av), _type_set(bv)
            both = _intersect_types(ta, tb)
            if not both:
                raise _Unsat(f"allOf at #{ptr}: types {sorted(ta)} and {sorted(tb)} do not intersect")
            return sorted(both)
        if key in ("minLength", "minItems", "minProperties", "minimum", "minContains"):
            return max(av, bv)
        if key in ("maxLength", "maxItems", "maxProperties", "maximum", "maxContains"):
            return min(av, bv)
        if key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(av, bool) and not isinstance(bv, bool):
            return max(av, bv) if key == "exclusiveMinimum" else min(av, bv)
        if key == "required":
            return list(dict.fromkeys(list(av) + list(bv)))
        if key in ("properties", "additionalProperties", "patternProperties"):
            return av  # merge_objects rewrites these
        if key in ("items", "additionalItems") and isinstance(av, (dict, bool)) and isinstance(bv, (dict, bool)):
            return {"allOf": [av, bv]}
        if key == "enum":
            keys = {_json_key(v) for v in bv}
            return [v for v in av if _json_key(v) in keys]
        if key == "const":
            raise _Unsat(f"allOf at #{ptr}: different const values")
        if key in ("anyOf", "oneOf"):
            # A and (x1 | x2 ...) == (A and x1) | (A and x2) ...: a's branches each carry b's list
            return [{"allOf": [x, {key: bv}]} for x in av]
        if key in ("title", "description", "default", "examples", "$comment", "$id", "$schema",
                   "$defs", "definitions", "deprecated", "readOnly", "writeOnly"):
            return av
        if key not in _known_keywords():
            return av  # unknown keywords are annotations
        self.refuse("allOf", ptr, f"cannot merge two different {key!r} values")
        return av

    # -- compile

    def compile(self, node, ptr: str, stack: tuple = ()) -> str:
        self.calls += 1
        if self.calls > MAX_SUBSCHEMAS:
            raise SchemaTooLarge(f"the schema expands to more than {MAX_SUBSCHEMAS:,} subschemas "
                              "($ref unrolling, anyOf/allOf distribution): lower max_ref_depth or simplify it")
        out = self._compile(node, ptr, stack)
        if len(out) > self.outline_chars and self.calls_on():
            return self.outline(out)
        if len(out) > MAX_REGEX_CHARS:  # stop an unrolled blow-up as soon as one part is too big
            raise SchemaTooLarge(f"the regex for #{ptr} exceeds {MAX_REGEX_CHARS:,} characters: "
                              "lower max_ref_depth or simplify the schema")
        return out

    def calls_on(self) -> bool:
        return self.stack_mode and not self.inline

    def call_ref(self, node, ptr: str) -> str | None:
        """Stack mode: a $ref whose siblings do not constrain, as a call of its target's
        automaton (compiled once, on first use; recursion is then exact, with no depth cap)."""
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if not (self.old_draft or not _constraining(rest)):
            return None
        target, tptr = self.resolve(node["$ref"], ptr)
        if tptr in self.unsat_refs:
            raise self.unsat_refs[tptr]
        k = self.ref_automaton.get(tptr)
        if k is None:
            k = self.ref_automaton[tptr] = self.new_automaton()
            try:
                self.automata[k] = self.compile(target, tptr, ())
            except _Unsat as exc:
                # a caller compiled meanwhile may call k: k stays, with the empty language
                self.automata[k] = _NOTHING
                del self.ref_automaton[tptr]
                self.unsat_refs[tptr] = exc
                raise
        return f"(?&{k})"

    def new_automaton(self) -> int:
        if len(self.automata) >= MAX_AUTOMATA:
            raise SchemaTooLarge(f"the grammar needs more than {MAX_AUTOMATA:,} automata")
        self.automata.append(_NOTHING)
        return len(self.automata) - 1

    def counted(self, item: str, lo: int, hi: int) -> str:
        """Stack mode: item{lo,hi} with a large hi as a call of a counted automaton: its frame
        counts the items (exact; the DFA would need a state per count). `item` must be one
        non-empty unit whose DFA never re-enters its start state (one character)."""
        key = f"{lo},{hi}:{item}"
        k = self.outlined.get(key)
        if k is None:
            k = self.outlined[key] = self.new_automaton()
            self.automata[k] = item
            self.counts[k] = (lo, hi)
        return f"(?&{k})"

    def outline(self, regex: str) -> str:
        """Stack mode: a big regex as a call of its own automaton (one per distinct text)."""
        k = self.outlined.get(regex)
        if k is None:
            k = self.outlined[regex] = self.new_automaton()
            self.automata[k] = regex
        return f"(?&{k})"

    def _compile(self, node, ptr: str, stack: tuple) -> str:
        if self.calls_on() and isinstance(node, dict) and "$ref" in node:
            call = self.call_ref(node, ptr)
            if call is not None:
                return call
        node, ptr, stack = self.flatten(node, ptr, stack)
        if node is True:
            return self.any_value(ptr)
        if node is False:
            raise _Unsat(f"false schema at #{ptr}")
        if any(k in node for k in _DEPENDENCY_KEYWORDS):
            return self.compile(self.dependencies_as_any_of(node, ptr), ptr, stack)
        if "not" in node:
            rewritten = self.without_not(node, ptr, stack)
            if rewritten is not node:
                return self.compile(rewritten, ptr, stack)
        for key, reason in _UNSUPPORTED.items():
            if key in node:
                self.refuse(key, _child(ptr, key), reason)
        if "anyOf" in node or "oneOf" in node:
            return self.compile_alternatives(node, ptr, stack)
        if "const" in node or "enum" in node:
            return self.compile_enum(node, ptr, stack)
        parts, failures = [], []
        for t in self.types_of(node, ptr):
            try:
                parts.append(getattr(self, "compile_" + t)(node, ptr, stack))
            except _Unsat as exc:
                failures.append(exc)
        if not parts:
            raise failures[0]  # keeps the reason (and whether it was a recursion cut)
        for exc in failures:
            self.note_cut(exc)
        return _group(parts)

    def dependencies_as_any_of(self, node, ptr) -> dict:
        """dependencies / dependentRequired / dependentSchemas {name: X}: an object without `name`,
        or one with `name` that also meets X (a list of required names, or a schema). Exact."""
        deps = {}
        for key in _DEPENDENCY_KEYWORDS:
            value = node.get(key, {})
            if not isinstance(value, dict):
                raise self.error(key, _child(ptr, key), "must be an object")
            deps.update(value)
        if len(deps) > MAX_DEPENDENCIES:
            self.refuse(_DEPENDENCY_KEYWORDS[0] if "dependencies" in node else "dependentRequired", ptr,
                        f"{len(deps)} dependencies (more than {MAX_DEPENDENCIES}) would give 2^{len(deps)} alternatives")
            return {k: v for k, v in node.items() if k not in _DEPENDENCY_KEYWORDS}
        branches = []
        for name, dep in deps.items():
            if isinstance(dep, list):
                present = {"required": [name, *dep]}
            else:
                present = {"allOf": [{"required": [name]}, dep]}
            branches.append({"anyOf": [{"properties": {name: False}}, present]})
        rest = {k: v for k, v in node.items() if k not in _DEPENDENCY_KEYWORDS}
        return {"allOf": [rest, *branches]}

    def without_not(self, node, ptr, stack) -> dict:
        """`not` rewritten as positive keywords where that is exact; otherwise left for refusal.

        not {} / true: nothing is valid; not false: no constraint; not {type: T}: the other types;
        not {required: [a, b]}: an object without a or without b; not {anyOf: [...]} of those: all
        of the negations; not {allOf: [...]}: their required names together."""
        neg = node["not"]
        rest = {k: v for k, v in node.items() if k != "not"}
        if isinstance(neg, dict):
            try:
                neg = self.flatten(neg, _child(ptr, "not"), stack)[0]
            except _Unsat:
                return rest  # not (nothing) = anything
        if neg is True or neg == {} or (isinstance(neg, dict) and not _constraining(neg)):
            raise _Unsat(f"not at #{ptr}: nothing is valid")
        if neg is False:
            return rest
        if isinstance(neg, dict) and set(neg) - _ANNOTATIONS == {"type"}:
            banned = _type_set(neg["type"])
            if "number" in banned:
                banned |= {"integer"}
            allowed = _type_set(rest["type"]) if "type" in rest else set(_TYPES) | {"integer"}
            if "number" in allowed:
                allowed |= {"integer"}  # "number" includes the integers
            if "integer" in banned and "number" not in banned and "number" in allowed:
                return node  # "a number that is not an integer" has no exact regex here
            if not allowed - banned:
                raise _Unsat(f"not at #{ptr}: no type is left")
            rest["type"] = sorted(allowed - banned)
            return rest
        positive = _negation(neg)
        if positive is None:
            return node
        return self.merge(rest, positive, ptr, stack) if positive else rest

    def types_of(self, node, ptr) -> list[str]:
        if "type" in node:
            types = _type_set(node["type"])
            for t in types:
                if t not in _TYPES and t != "integer":
                    raise self.error("type", _child(ptr, "type"), f"unknown type {t!r}")
            if not types:
                raise self.error("type", _child(ptr, "type"), "an empty list of types allows nothing")
            if "number" in types:
                types.discard("integer")
            return [t for t in ("null", "boolean", "object", "array", "integer", "number", "string") if t in types]
        families = _keyword_families(node)
        if not families:
            return ["any"]
        self.narrow(f"no type at #{ptr}: generating {'/'.join(families)} only (the types its keywords constrain)")
        return families

    def compile_any(self, node, ptr, stack) -> str:
        return self.any_value(ptr)

    def any_value(self, ptr: str) -> str:
        if self.calls_on():  # exact: one recursive automaton, any nesting
            if "any" not in self.ref_automaton:
                k = self.ref_automaton["any"] = self.new_automaton()
                self.automata[k] = self._any(1, inner=f"(?&{k})")
            return f"(?&{self.ref_automaton['any']})"
        self.narrow(f"unconstrained value at #{ptr}: nesting limited to {self.any_depth} levels")
        return self._any(self.any_depth)

    def _any(self, depth: int, inner: str | None = None) -> str:
        scalar = f"(?:{_STRING}|{_NUMBER}|true|false|null)"
        if depth == 0:
            return scalar
        inner = self._any(depth - 1) if inner is None else inner
        comma = self.tok(",")
        array = f"{self.tok('[')}(?:{inner}(?:{comma}{inner})*)?{self.tok(']')}"
        member = f"{_STRING}{self.tok(':')}{inner}"
        obj = f"{self.tok('{')}(?:{member}(?:{comma}{member})*)?{self.tok('}')}"
        return f"(?:{scalar}|{array}|{obj})"

    def compile_alternatives(self, node, ptr, stack) -> str:
        key = "anyOf" if "anyOf" in node else "oneOf"
        branches_raw = node[key]
        if not isinstance(branches_raw, list) or not branches_raw:
            raise self.error(key, _child(ptr, key), "must be a non-empty array")
        rest = {k: v for k, v in node.items() if k != key}
        branches, flats = [], []
        for k, branch in enumerate(branches_raw):
            bptr = _child(ptr, key, k)
            try:
                flat, _, bstack = self.flatten(branch, bptr, stack)
                flats.append(flat)
                if rest:
                    branches.append((self.merge(rest, flat, bptr, bstack), bptr, bstack))
                else:  # the branch itself: in stack mode a $ref branch stays a call
                    branches.append((branch if self.calls_on() else flat, bptr, stack if self.calls_on() else bstack))
            except _Unsat as exc:
                if key == "oneOf" and exc.cut:
                    raise  # a branch not unrolled still counts for "exactly one"
                self.note_cut(exc)
        if key == "oneOf":
            clash = self.first_clash(branches)
            if clash is not None:
                if all(_negatable(f) for f in flats):
                    # exactly one: each branch without any of the others, then plain alternatives
                    exclusive = [{"allOf": [f, *({"not": g} for g in flats if g is not f)]} for f in flats]
                    return self.compile({**rest, "anyOf": exclusive}, ptr, stack)
                self.refuse("oneOf", _child(ptr, key), f"branches {clash[0]} and {clash[1]} are not provably "
                            "disjoint (oneOf then differs from anyOf)")
        parts = []
        for merged, bptr, bstack in branches:
            try:
                parts.append(self.compile(merged, bptr, bstack))
            except _Unsat as exc:
                self.note_cut(exc)
        if not parts:
            raise _Unsat(f"no branch of {key} at #{ptr} is satisfiable")
        return _group(parts)

    def note_cut(self, exc: _Unsat) -> None:
        if exc.cut:
            self.narrow(str(exc) + ": the branch is cut")

    def first_clash(self, branches):
        """oneOf compiled as anyOf is exact when no text generated for one branch validates
        another: an accepted instance then matches exactly one branch. The first pair (pointers)
        where that is not provable, or None."""
        for i, (a, a_ptr, sa) in enumerate(branches):
            for j, (b, b_ptr, sb) in enumerate(branches):
                if i != j and not self.excludes(a, b, sa, sb):
                    return a_ptr, b_ptr
        return None

    def excludes(self, a, b, sa=(), sb=(), depth=0) -> bool:
        """True only if no instance that the regex of `a` generates satisfies `b`."""
        if self.disjoint(a, b, sa, sb, depth):
            return True
        if depth > 8:
            return False
        try:
            a, _, sa = self.flatten(a, "", sa)
            b, _, sb = self.flatten(b, "", sb)
        except _Unsat as exc:
            return not exc.cut  # an empty schema is disjoint from all; a cut one is unknown
        if not (isinstance(a, dict) and isinstance(b, dict)) or "anyOf" in a or "oneOf" in a:
            return False
        # generated objects must lack, or have a value outside, a property b requires
        if not (_generated_types(a) <= {"object"} or _value_types(b) <= {"object"}):
            return False
        pa, pb = a.get("properties", {}), b.get("properties", {})
        for name in b.get("required", []):
            if name not in pa and name not in a.get("required", []) and not self.generates_extra_keys(a):
                return True
            if name in pa and name in pb and self.excludes(pa[name], pb[name], sa, sb, depth + 1):
                return True
        return False

    def generates_extra_keys(self, node) -> bool:
        extra = node.get("additionalProperties")
        if extra is None:
            return self.allow_extra_keys or not node.get("properties")
        return extra is not False

    def disjoint(self, a, b, sa=(), sb=(), depth=0) -> bool:
        """True only if no instance satisfies both a and b (a sufficient test)."""
        if depth > 8:
            return False
        try:
            a, _, sa = self.flatten(a, "", sa)
            b, _, sb = self.flatten(b, "", sb)
        except _Unsat as exc:
            return not exc.cut  # an empty schema is disjoint from all; a cut one is unknown
        if a is False or b is False:
            return True
        if a is True or b is True:
            return False
        for x, y, sx, sy in ((a, b, sa, sb), (b, a, sb, sa)):
            # x within the union of its anyOf/oneOf branches: disjoint if each branch is
            branches = x.get("anyOf") or x.get("oneOf")
            if isinstance(branches, list) and all(self.disjoint(br, y, sx, sy, depth + 1) for br in branches):
                return True
        if not _intersect_types(_value_types(a), _value_types(b)):
            return True
        ta, tb = _value_types(a), _value_types(b)
        if ta <= {"array"} and tb <= {"array"} and _intervals_disjoint(
                (a.get("minItems"), True, a.get("maxItems"), True), (b.get("minItems"), True, b.get("maxItems"), True)):
            return True
        va, vb = _values(a), _values(b)
        if va is not None and vb is not None and not ({_json_key(v) for v in va} & {_json_key(v) for v in vb}):
            return True
        if ta <= {"integer", "number"} and tb <= {"integer", "number"} and _intervals_disjoint(
                self.bounds(a, ""), self.bounds(b, "")):
            return True
        if ta <= {"object"} or tb <= {"object"}:
            # objects both must have, with a property whose values cannot agree
            pa, pb = a.get("properties", {}), b.get("properties", {})
            for name in set(a.get("required", [])) & set(b.get("required", [])):
                if name in pa and name in pb and self.disjoint(pa[name], pb[name], sa, sb, depth + 1):
                    return True
            # a name one side requires and the other (objects only) forbids
            for x, y in ((a, b), (b, a)):
                if _value_types(y) <= {"object"} and y.get("additionalProperties") is False and \
                        any(n not in y.get("properties", {}) for n in x.get("required", [])):
                    return True
        return False

    def compile_enum(self, node, ptr, stack) -> str:
        values = [node["const"]] if "const" in node else node["enum"]
        where = _child(ptr, "const" if "const" in node else "enum")
        if not isinstance(values, list):
            raise self.error("enum", where, "must be an array")
        rest = {k: v for k, v in node.items() if k not in ("enum", "const") and k in _known_keywords()
                and k not in _ANNOTATIONS}
        if "enum" in node and "const" in node:
            keys = {_json_key(node["const"])}
            values = [v for v in node["enum"] if _json_key(v) in keys]
        kept, seen = [], set()
        check = None
        if set(rest) == {"type"}:  # the common case, checked on the value itself
            types = _type_set(rest["type"])
            values = [v for v in values if _json_type(v) in types or (_json_type(v) == "integer" and "number" in types)]
        elif rest:  # the other keywords, through their (sound) regex
            self.inline += 1
            try:
                check = re.compile(self.compile(rest, ptr, stack))
            except _Unsat:
                values = []
            finally:
                self.inline -= 1
        for v in values:
            text = dumps(v)
            if _json_key(v) in seen or (check is not None and check.fullmatch(text) is None):
                continue
            seen.add(_json_key(v))
            kept.append(_lit(text) if not self.ws else self.spaced_literal(v))
        if not kept:  # dropped exactly where the schema lets it be absent, an error elsewhere
            raise _Unsat(f"{'enum' if 'enum' in node else 'const'} at #{where}: no listed value satisfies "
                         "the rest of the schema")
        return _group(kept)

    def spaced_literal(self, value) -> str:
        """A JSON value as a regex that allows the flexible whitespace between tokens."""
        if isinstance(value, list):
            inner = self.tok(",").join(self.spaced_literal(v) for v in value)
            return self.tok("[") + inner + self.tok("]")
        if isinstance(value, dict):
            inner = self.tok(",").join(_lit(dumps(k)) + self.tok(":") + self.spaced_literal(v) for k, v in value.items())
            return self.tok("{") + inner + self.tok("}")
        return _lit(dumps(value))

    # -- scalars

    def compile_null(self, node, ptr, stack) -> str:
        return "null"

    def compile_boolean(self, node, ptr, stack) -> str:
        return "(?:true|false)"

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
        self.check_multiple_of(node, ptr, integer=True)
        fmt_range = self.numeric_format(node, ptr, integer=True)
        if fmt_range is not None:
            node = {**node, "allOf": [{"minimum": fmt_range[0], "maximum": fmt_range[1]}]}
            node = self.flatten(node, ptr, stack)[0]
        lo, lo_incl, hi, hi_incl = self.bounds(node, ptr)
        if lo is None and hi is None:
            return _INTEGER
        ilo, ihi = numbers.integer_bounds(
            minimum=lo if lo_incl else None, exclusive_minimum=None if lo_incl else lo,
            maximum=hi if hi_incl else None, exclusive_maximum=None if hi_incl else hi)
        out = numbers.integer_range(ilo, ihi)
        if out is None:
            key = "minimum" if "minimum" in node else "exclusiveMinimum"
            raise self.error(key, _child(ptr, key), f"no integer in the range (lower {lo}, upper {hi})")
        return out

    def check_multiple_of(self, node, ptr, *, integer: bool) -> bool:
        """multipleOf: 1 is exact (an integer); True when it asks for integers on a number."""
        m = node.get("multipleOf")
        if m is None:
            return False
        if m == 1 or (integer and isinstance(m, (int, float)) and m > 0 and 1 % m == 0):
            return True
        self.refuse("multipleOf", _child(ptr, "multipleOf"), f"multipleOf {m} is not supported")
        return False

    def compile_number(self, node, ptr, stack) -> str:
        if self.check_multiple_of(node, ptr, integer=False):
            # an integer-valued number: integer texts, or an integer with a zero fraction
            return f"{self.compile_integer({k: v for k, v in node.items() if k != 'multipleOf'}, ptr, stack)}(?:\\.0+)?"
        self.numeric_format(node, ptr, integer=False)
        lo, lo_incl, hi, hi_incl = self.bounds(node, ptr)
        if lo is None and hi is None:
            return _NUMBER
        digits = self.fraction_digits(node, ptr, lo, lo_incl, hi, hi_incl)
        if digits == 0:
            return _NUMBER  # refused (lenient: unenforced)
        out = numbers.number_range(lo, lo_incl, hi, hi_incl, max_fraction_digits=digits)
        if out is None:
            raise self.error("minimum", _child(ptr, "minimum"), f"no number in the range (lower {lo}, upper {hi})")
        self.narrow(f"bounded number at #{ptr}: plain decimal notation only (no exponent)"
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

    def compile_string(self, node, ptr, stack) -> str:
        lo = node.get("minLength", 0)
        hi = node.get("maxLength")
        for key, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not float(v).is_integer()):
                raise self.error(key, _child(ptr, key), f"must be a non-negative integer, got {v!r}")
        lo, hi = int(lo), (None if hi is None else int(hi))
        if hi is not None and hi < lo:
            raise self.error("maxLength", _child(ptr, "maxLength"), f"maxLength {hi} < minLength {lo}")
        ast = None
        if "pattern" in node:
            ast = self.pattern_ast(node["pattern"], _child(ptr, "pattern"))
        if "format" in node:
            fast = self.format_ast(node["format"], _child(ptr, "format"))
            if fast is not None and ast is not None:
                self.refuse("format", _child(ptr, "format"), "format together with pattern is not supported")
            elif fast is not None:
                ast = fast
        if ast is None:
            if self.calls_on() and hi is not None and hi >= self.count_min:
                return f'"{self.counted(_CHAR, lo, hi)}"'
            return f'"{_repeat(_CHAR, lo, hi)}"'
        if lo > 0 or hi is not None:
            limited = _with_length(ast, lo, hi)
            if limited is None:
                a, b = _length_range(ast)
                if a >= lo and (hi is None or (b is not None and b <= hi)):
                    limited = ast
                else:
                    limited = _length_subset(ast, lo, hi)
                    key = "maxLength" if hi is not None else "minLength"
                    if limited is None:
                        self.refuse(key, _child(ptr, key), "length bounds together with this pattern/format "
                                    "cannot be intersected")
                        limited = ast
                    else:
                        self.narrow(f"{key} at #{ptr} with a pattern/format: a subset is generated (no search "
                                    "padding; the length budget split evenly over the repeated parts)")
            ast = limited
        if isinstance(ast, rx.Alt) and not ast.items:
            raise self.error("pattern" if "pattern" in node else "format", ptr,
                             "no string of the allowed lengths matches")
        return f'"{_emit_json(ast)}"'

    def pattern_ast(self, pattern, ptr):
        if not isinstance(pattern, str):
            raise self.error("pattern", ptr, "must be a string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise self.error("pattern", ptr, f"not a valid regex ({exc})") from None
        try:
            return _pattern_ast(pattern)
        except InferlabError as exc:
            self.refuse("pattern", ptr, str(exc))
            return None

    def custom_format(self, name, ptr) -> bool:
        """Stack mode: a format outside the specification's list is an annotation (listed)."""
        if not self.stack_mode or not isinstance(name, str) or name in formats.SPEC_FORMATS:
            return False
        note = f"format {name!r} at #{ptr}: not a format of the specification, an annotation (not enforced)"
        if note not in self.unenforced_formats:
            self.unenforced_formats.append(note)
        return True

    def format_ast(self, name, ptr):
        if self.custom_format(name, ptr):
            return None
        if name not in formats.FORMATS:
            self.refuse("format", ptr, f"unknown format {name!r} (known: {', '.join(formats.FORMATS)})")
            return None
        if name in formats.NARROWINGS:
            self.narrow(f"format {name} at #{ptr}: {formats.NARROWINGS[name]}")
        return _format_ast(name)

    # -- arrays

    def compile_array(self, node, ptr, stack) -> str:
        lo = node.get("minItems", 0)
        hi = node.get("maxItems")
        if hi is not None and hi < lo:
            raise self.error("maxItems", _child(ptr, "maxItems"), f"maxItems {hi} < minItems {lo}")
        if node.get("uniqueItems") is True and not (hi is not None and hi <= 1):
            self.refuse("uniqueItems", _child(ptr, "uniqueItems"), "uniqueItems is not supported (only with maxItems <= 1)")
        if isinstance(node.get("items"), list):  # drafts 4-2019: tuple form
            prefix, prefix_key = node["items"], "items"
            rest, rest_key = node.get("additionalItems", True), "additionalItems"
        else:
            prefix, prefix_key = node.get("prefixItems", []), "prefixItems"
            rest, rest_key = node.get("items", True), "items"
        prefix_rx = []
        for k, sub in enumerate(prefix):
            if hi is not None and k >= hi:
                break
            try:
                prefix_rx.append(self.compile(sub, _child(ptr, prefix_key, k), stack))
            except _Unsat as exc:
                self.note_cut(exc)
                break  # this position cannot be filled: the array stops before it
        rest_rx = None
        if len(prefix_rx) == len(prefix):
            try:
                rest_rx = self.compile(rest, _child(ptr, rest_key), stack) if rest is not True else self.any_value(_child(ptr, rest_key))
            except _Unsat as exc:
                self.note_cut(exc)
        max_len = len(prefix_rx) if rest_rx is None else None
        if max_len is not None and lo > max_len:
            raise _Unsat(f"minItems at #{ptr}: at most {max_len} items are possible")
        body = self.array_body(prefix_rx, rest_rx, lo, hi)
        return f"{self.tok('[')}{body}{self.tok(']')}"

    def array_body(self, prefix, rest, lo: int, hi: int | None) -> str:
        comma = self.tok(",")

        def tail(i: int) -> str:  # items i.. after item i-1 was written
            if hi is not None and i >= hi:
                return ""
            if i < len(prefix):
                inner = comma + prefix[i] + tail(i + 1)
                return inner if i < lo else f"(?:{inner})?"
            if rest is None:
                return ""
            return _repeat(comma + rest, max(lo - i, 0), None if hi is None else hi - i)

        if hi == 0:
            return ""
        if prefix:
            first = prefix[0] + tail(1)
        elif rest is not None:
            first = rest + tail(1)
        else:
            return ""
        return first if lo > 0 else f"(?:{first})?"

    # -- objects

    def compile_object(self, node, ptr, stack) -> str:
        props = node.get("properties", {})
        if not isinstance(props, dict):
            raise self.error("properties", _child(ptr, "properties"), "must be an object")
        required = list(dict.fromkeys(node.get("required", [])))
        extra = node.get("additionalProperties")
        extra_ptr = _child(ptr, "additionalProperties")
        pattern_props = node.get("patternProperties") or {}
        if node.get("maxProperties") == 0:
            props, extra, pattern_props = {}, False, {}  # only {} (an error below if a key is required)
        if extra is None and (self.allow_extra_keys or not (props or pattern_props)):
            extra = True  # with no properties declared, forbidding extra keys would leave only {}
        gen_extra = extra is not None and extra is not False
        schemas = dict(props)
        for name in required:
            if name not in schemas:
                if extra is False:
                    raise _Unsat(f"required at #{ptr}: {name!r} is required but additionalProperties is false")
                schemas[name] = True if extra is None else extra
        if len(pattern_props) == 1 and _universal_pattern(next(iter(pattern_props))):
            # a pattern every key matches (".*"): it applies to every key, additionalProperties to none
            (pat, sub), = pattern_props.items()
            schemas = {name: sub if v is True else {"allOf": [v, sub]} for name, v in schemas.items()}
            extra, extra_ptr, pattern_props = sub, _child(ptr, "patternProperties", pat), {}
            gen_extra = sub is not False
        map_rx = None
        if pattern_props and not schemas and not gen_extra and len(pattern_props) == 1:
            # a map: every key matches the one pattern and has its schema (keys may repeat; the
            # value json.loads keeps is then valid as well)
            (pat, sub), = pattern_props.items()
            pat_ptr = _child(ptr, "patternProperties", pat)
            key_ast = self.pattern_ast(pat, pat_ptr)
            if key_ast is not None:
                try:
                    map_rx = f'"{_emit_json(key_ast)}"' + self.tok(":") + self.compile(sub, pat_ptr, stack)
                except _Unsat as exc:
                    self.note_cut(exc)
                if extra is None:
                    self.narrow(f"additionalProperties absent at #{ptr}: only keys matching the pattern are generated")
                extra, pattern_props = False, {}
        if pattern_props:
            if gen_extra:
                self.refuse("patternProperties", _child(ptr, "patternProperties"),
                            "patternProperties with extra keys allowed is not supported")
            for pat, sub in pattern_props.items():
                try:
                    compiled = re.compile(pat)
                except re.error as exc:
                    raise self.error("patternProperties", _child(ptr, "patternProperties", pat), f"bad regex ({exc})") from None
                for name in schemas:
                    if compiled.search(name):
                        schemas[name] = sub if schemas[name] is True else {"allOf": [schemas[name], sub]}
        members = []  # (regex or None when the key must be absent, required)
        for name, sub in schemas.items():
            sub_ptr = _child(ptr, "properties", name) if name in props else extra_ptr
            key_rx = _lit(dumps(name)) + self.tok(":")
            try:
                value = self.compile(sub, sub_ptr, stack)
                if self.calls_on() and len(schemas) > MEMBER_BLOCK and len(value) > 16:
                    value = self.outline(value)  # shared by the members (blocked_object_body)
                members.append((key_rx + value, name in required))
            except _Unsat as exc:
                if name in required:
                    raise
                self.note_cut(exc)
        extra_rx = map_rx
        if gen_extra:
            try:
                value = self.any_value(extra_ptr) if extra is True else self.compile(extra, extra_ptr, stack)
                extra_rx = _key_not_in(list(schemas)) + self.tok(":") + value
            except _Unsat as exc:  # no value fits: no extra key can be written
                self.note_cut(exc)
        elif extra is None and map_rx is None:
            self.narrow(f"additionalProperties absent at #{ptr}: extra keys are not generated")
        nonempty = self.check_property_counts(node, ptr, len(members), sum(r for _, r in members), extra_rx is not None)
        if self.calls_on() and len(members) > MEMBER_BLOCK:
            body = self.blocked_object_body(members, extra_rx, nonempty=nonempty)
        else:
            body = self.object_body(members, extra_rx, nonempty=nonempty)
        if body is None:
            raise _Unsat(f"minProperties at #{ptr}: no property can be written")
        return f"{self.tok('{')}{body}{self.tok('}')}"

    def check_property_counts(self, node, ptr, n_members: int, n_required: int, open_: bool) -> bool:
        """min/maxProperties where they are exact; True when at least one member must be written."""
        lo, hi = node.get("minProperties"), node.get("maxProperties")
        nonempty = lo == 1 and n_required == 0
        if lo is not None and lo > n_required and not nonempty:
            self.refuse("minProperties", _child(ptr, "minProperties"),
                        f"minProperties {lo} > the {n_required} required properties")
        if hi is not None and (open_ or hi < n_members):
            if hi < n_required:
                raise self.error("maxProperties", _child(ptr, "maxProperties"), f"maxProperties {hi} < {n_required} required")
            self.refuse("maxProperties", _child(ptr, "maxProperties"),
                        f"maxProperties {hi} < the {n_members} possible properties")
        return nonempty

    def blocked_object_body(self, members, extra_rx, *, nonempty: bool) -> str:
        """Stack mode, many members: the body as two automata per block of MEMBER_BLOCK members,
        so the regex nests at most a block deep and the automata stay small (exact).

        after[b]: the rest of the body from block b when a member was already written (each
        member with its leading comma), then a call of after[b+1]; first[b]: the same when
        nothing was written yet: the block's members with at least one written (object_body),
        then after[b+1]; or, when the block may be skipped, first[b+1]. Past the last block:
        the extra members, or the end (first[end] is empty unless a member must be written)."""
        comma = self.tok(",")
        extras = f"(?:{comma}{extra_rx})*" if extra_rx is not None else ""
        after_next = extras
        if extra_rx is not None:
            first_next = f"{extra_rx}{extras}" if nonempty else f"(?:{extra_rx}{extras})?"
        else:
            first_next = _NOTHING if nonempty else ""
        for start in range((len(members) - 1) // MEMBER_BLOCK * MEMBER_BLOCK, -1, -MEMBER_BLOCK):
            block = members[start:start + MEMBER_BLOCK]
            after = "".join(f"{comma}{rx_j}" if req else f"(?:{comma}{rx_j})?" for rx_j, req in block)
            written = self.object_body(block, None, nonempty=True)
            skip = "" if any(req for _, req in block) else f"|{first_next}"
            first_next = self.outline(f"{written}{after_next}{skip}") if start else f"(?:{written}{after_next}{skip})"
            after_next = self.outline(after + after_next)
        return first_next

    def object_body(self, members, extra_rx, *, nonempty: bool = False) -> str | None:
        """Members in schema order, each required or optional, then extra members; a comma only
        between two written members.

        Built left to right so each member appears at most twice: written[j] matches members
        0..j when at least one of them was written (then member j needs a leading comma).
        """
        comma = self.tok(",")
        written = None
        seen_required = False
        for rx_j, req in members:
            if written is None:
                written = rx_j
            elif req:
                written = f"{written}{comma}{rx_j}" if seen_required else f"(?:{written}{comma}{rx_j}|{rx_j})"
            else:
                written = f"{written}(?:{comma}{rx_j})?" if seen_required else f"(?:{written}(?:{comma}{rx_j})?|{rx_j})"
            seen_required = seen_required or req
        if extra_rx is not None:
            extras = f"(?:{comma}{extra_rx})*"
            if written is None:
                written = extra_rx + extras
            elif seen_required:
                written = written + extras
            else:
                written = f"(?:{written}{extras}|{extra_rx}{extras})"
        if written is None:
            return None if nonempty else ""
        return written if seen_required or nonempty else f"(?:{written})?"

    # -- canonical form

    def canonical(self, instance, node, ptr: str, stack: tuple = ()) -> str:
        try:
            node, ptr, stack = self.flatten(node, ptr, stack)
        except _Unsat:
            return dumps(instance)
        if not isinstance(node, dict):
            return dumps(instance)
        if "anyOf" in node or "oneOf" in node:
            key = "anyOf" if "anyOf" in node else "oneOf"
            rest = {k: v for k, v in node.items() if k != key}
            fallback = None
            for k, branch in enumerate(node[key]):
                bptr = _child(ptr, key, k)
                try:
                    flat, _, bstack = self.flatten(branch, bptr, stack)
                    merged = self.merge(rest, flat, bptr, bstack) if rest else flat
                    text = self.canonical(instance, merged, bptr, bstack)
                    if re.fullmatch(self.compile(merged, bptr, bstack), text):
                        return text
                except (_Unsat, SchemaError):
                    continue
                fallback = fallback or text
            return fallback or dumps(instance)
        for v in _values(node) or []:
            if _json_key(v) == _json_key(instance):
                return dumps(v)
        if isinstance(instance, dict):
            props = node.get("properties", {})
            extra = node.get("additionalProperties", True)
            order = [n for n in list(props) + list(node.get("required", [])) if n in instance]
            order = list(dict.fromkeys(order)) + [n for n in instance if n not in props and n not in node.get("required", [])]
            parts = []
            patterns = node.get("patternProperties") or {}
            for name in order:
                sub = props.get(name, extra)
                if name not in props:
                    sub = next((ps for pat, ps in patterns.items() if _searches(pat, name)), sub)
                sub_ptr = _child(ptr, "properties", name) if name in props else _child(ptr, "additionalProperties")
                parts.append(dumps(name) + ":" + self.canonical(instance[name], sub, sub_ptr, stack))
            return "{" + ",".join(parts) + "}"
        if isinstance(instance, list):
            if isinstance(node.get("items"), list):
                prefix, rest = node["items"], node.get("additionalItems", True)
            else:
                prefix, rest = node.get("prefixItems", []), node.get("items", True)
            parts = [self.canonical(v, prefix[k] if k < len(prefix) else rest, ptr, stack) for k, v in enumerate(instance)]
            return "[" + ",".join(parts) + "]"
        if isinstance(instance, float) and instance.is_integer() and "type" in node and \
                "number" not in _type_set(node["type"]) and "integer" in _type_set(node["type"]):
            return dumps(int(instance))
        if isinstance(instance, float) and math.isfinite(instance) and any(k in node for k in _FAMILY_KEYWORDS["number"]):
            return _plain_decimal(instance)  # bounded numbers are generated without exponents
        return dumps(instance)


@lru_cache(maxsize=None)
def _format_ast(name: str):
    return rx.parse(formats.FORMATS[name])


def _universal_pattern(pattern: str) -> bool:
    """Does the pattern's search succeed on every string? (An unanchored alternative that can
    match the empty string, such as ".*" or "".)"""
    try:
        alts = _ecma_to_dialect(pattern)
        return any(not start and not end and _length_range(rx.parse(text))[0] == 0 for text, start, end in alts)
    except InferlabError:
        return False


def _searches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _key_not_in(names: list[str]) -> str:
    """A JSON object key (canonical text) whose decoded value is none of `names`.

    Walks the trie of the names: at each node the key may end (if the node is not a name), go on
    with a character no name continues with, or follow a trie edge.
    """
    if not names:
        return f'"{_CHAR}*"'
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True
    def walk(node) -> str:
        parts = []
        if None not in node:
            parts.append('"')
        children = [ch for ch in node if ch is not None]
        others = rx.negate(tuple((ord(c), ord(c)) for c in children))
        parts.append(_json_char_ranges(others) + any_rest + '"')
        for ch in children:
            parts.append(_json_char_ranges(((ord(ch), ord(ch)),)) + walk(node[ch]))
        return _group(parts)

    # non-canonical escapes (e.g. \u0061 for "a") could spell a declared name, so keys are canonical
    canonical_char = _json_char_ranges(rx.negate(()))
    any_rest = f"{canonical_char}*"
    return '"' + walk(trie)


_ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "id", "$comment",
                "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                "contentEncoding", "contentMediaType", "contentSchema", "$vocabulary"}


@lru_cache(maxsize=1)
def _known_keywords() -> frozenset:
    keys = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "else", "then", "additionalItems"}
    keys |= set(_UNSUPPORTED)
    for family in _FAMILY_KEYWORDS.values():
        keys |= set(family)
    return frozenset(keys)


def _constraining(node: dict) -> bool:
    return any(k in _known_keywords() for k in node)


def _intervals_disjoint(a, b) -> bool:
    """(lo, lo_inclusive, hi, hi_inclusive) intervals (None = unbounded): no common point?"""
    def before(x, y):  # x entirely below y
        hi, hi_incl, lo, lo_incl = x[2], x[3], y[0], y[1]
        return hi is not None and lo is not None and (hi < lo or (hi == lo and not (hi_incl and lo_incl)))
    return before(a, b) or before(b, a)


def _negation(neg):
    """A schema equivalent to `not neg` for negated `required` forms; else None."""
    names = _required_names(neg)
    if names is not None:  # an object missing at least one of the names
        branches = [{"properties": {n: False}} for n in names]
        return {"type": "object", **({"anyOf": branches} if len(branches) > 1 else branches[0])}
    if isinstance(neg, dict) and set(neg) - _ANNOTATIONS == {"anyOf"} and \
            all(_required_names(b) is not None for b in neg["anyOf"]):
        return {"type": "object", "allOf": [_negation(b) for b in neg["anyOf"]]}  # none of them
    return None


def _negatable(node) -> bool:
    """Can `not node` be rewritten exactly (see _Compiler.without_not)?"""
    if not isinstance(node, dict):
        return False
    keys = set(node) - _ANNOTATIONS
    if keys == {"type"}:  # not integer (but number) has no exact regex here
        types = _type_set(node["type"])
        return "integer" not in types or "number" in types
    return _negation(node) is not None


def _required_names(node):
    """The names a schema made only of `required` (also inside allOf) asks for; else None."""
    if not isinstance(node, dict):
        return None
    keys = set(node) - _ANNOTATIONS
    if keys == {"required"} and isinstance(node["required"], list) and node["required"]:
        return list(node["required"])
    if keys == {"allOf"}:
        names = [_required_names(b) for b in node["allOf"]]
        if all(n is not None for n in names):
            return list(dict.fromkeys(n for ns in names for n in ns))
    return None


def _keyword_families(node) -> list[str]:
    """The types whose keywords a schema without "type" uses (what it is generated as)."""
    return [f for f, keys in _FAMILY_KEYWORDS.items() if any(k in node for k in keys)]


def _generated_types(node) -> set:
    """The JSON types compile() generates for a flattened schema."""
    values = _values(node)
    if values is not None:
        return {_json_type(v) for v in values}
    if "type" in node:
        return _type_set(node["type"])
    return set(_keyword_families(node)) or set(_TYPES)


def _type_set(t) -> set[str]:
    return set(t) if isinstance(t, list) else {t}


def _intersect_types(a: set, b: set) -> set:
    out = a & b
    if "integer" in a and "number" in b or "integer" in b and "number" in a:
        out.add("integer")
    return out


def _values(node):
    if "const" in node:
        return [node["const"]]
    return node.get("enum")


def _value_types(node) -> set:
    values = _values(node)
    if values is not None:
        return {_json_type(v) for v in values} | ({"number"} if any(_json_type(v) == "integer" for v in values) else set())
    if "type" in node:
        t = _type_set(node["type"])
        return t | ({"integer"} if "number" in t else set())
    return set(_TYPES) | {"integer"}


def compile_schema(schema, *, whitespace: str = "compact", lenient: bool = False, max_ref_depth: int = 3,
                   allow_extra_keys: bool = False, any_depth: int = 1) -> CompiledSchema:
    """JSON Schema (a dict or a boolean) -> CompiledSchema; raises SchemaError (see module doc).

    max_ref_depth: the deepest unrolling of a recursive $ref; when that regex is too large
    (SchemaTooLarge), shallower depths are tried, and ref_depth and `narrowed` say which was used.
    allow_extra_keys: where additionalProperties is absent, generate extra keys (the JSON-Schema
    default) instead of forbidding them (the default here, as xgrammar's strict mode does).
    any_depth: nesting depth generated for unconstrained values (1: scalars, or flat arrays and
    objects of scalars; each level multiplies the automaton, measured on the Kubernetes sample).
    """
    for depth in range(max_ref_depth, 0, -1):
        c = _Compiler(schema, whitespace=whitespace, lenient=lenient, max_ref_depth=depth,
                      allow_extra_keys=allow_extra_keys, any_depth=any_depth)
        try:
            regex = c.compile(schema, "")
        except _Unsat as exc:
            raise SchemaError(f"{exc} (the schema is unsatisfiable)") from None
        except RecursionError:
            raise SchemaError("schema nested too deeply to compile") from None
        except SchemaTooLarge:
            if not c.recursive or depth == 1:
                raise
            continue
        if depth < max_ref_depth:
            c.narrow(f"recursion unrolled to depth {depth}: max_ref_depth={max_ref_depth} gave a regex too large")
        return CompiledSchema(regex=regex, unenforced=tuple(c.unenforced), ref_depth=c.ref_depth,
                              narrowed=tuple(c.narrowed), whitespace=whitespace)
    raise AssertionError("unreachable: depth 1 either returns or raises")


@dataclass(frozen=True)
class CompiledGrammar:
    """A schema as a recursive transition network: automaton k's regex may call `(?&j)`."""

    automata: tuple[str, ...]    # regexes (the dialect of constrain.regex with calls); 0 is the root
    unenforced: tuple[str, ...]
    narrowed: tuple[str, ...]
    whitespace: str
    unenforced_formats: tuple[str, ...] = ()  # custom formats left as annotations (format policy)
    counts: tuple[tuple[int, int] | None, ...] = ()  # per automaton: (min, max) items if counted


def compile_grammar(schema, *, whitespace: str = "compact", lenient: bool = False,
                    allow_extra_keys: bool = False, outline_chars: int = OUTLINE_CHARS[0],
                    count_min: int = COUNT_MIN) -> CompiledGrammar:
    """JSON Schema -> CompiledGrammar (stack mode); raises SchemaError as compile_schema does.

    Each $ref target (with no constraining siblings) is compiled once into its own automaton and
    called where it is used, so recursion is exact and has no depth cap; unconstrained values
    are one recursive automaton (any nesting); a subschema regex over OUTLINE_CHARS characters
    becomes an automaton of its own (smaller `outline_chars`: more, smaller automata); a string
    with maxLength >= count_min is a counted automaton (its frame counts characters). A schema
    without any of these is one automaton: a flat DFA.

    Format policy (JSON Schema 2020-12 makes `format` an annotation unless a validator opts in to
    assertion): the formats of constrain.formats are enforced exactly; a format the specification
    does not define (a custom name such as "path" or "utc-millisec") is an annotation, not
    enforced, and listed in `unenforced_formats`; a format the specification defines that is not
    implemented (ipv6, idn-email, regex, duration, ...) is refused, since validators assert it.
    """
    c = _Compiler(schema, whitespace=whitespace, lenient=lenient, max_ref_depth=3,
                  allow_extra_keys=allow_extra_keys, any_depth=1, stack_mode=True, outline_chars=outline_chars,
                  count_min=count_min)
    try:
        root = c.compile(schema, "")
    except _Unsat as exc:
        raise SchemaError(f"{exc} (the schema is unsatisfiable)") from None
    except RecursionError:
        raise SchemaError("schema nested too deeply to compile") from None
    c.automata[0] = root
    return CompiledGrammar(automata=tuple(c.automata), unenforced=tuple(c.unenforced),
                           narrowed=tuple(c.narrowed), whitespace=whitespace,
                           unenforced_formats=tuple(c.unenforced_formats),
                           counts=tuple(c.counts.get(k) for k in range(len(c.automata))))


def canonical_json(instance, schema, *, max_ref_depth: int = 3, allow_extra_keys: bool = False,
                   any_depth: int = 1) -> str:
    """Re-serialise an instance the way compile_schema generates it: schema property order
    (declared properties first, then extra keys in instance order), compact separators,
    ensure_ascii=False, numbers as Python's json writes them, except that an integral float where
    the schema allows only integers is written as an integer, and a float under number bounds in
    positional notation (1e-05 -> 0.00001), the only notation bounded numbers are generated in."""
    c = _Compiler(schema, whitespace="compact", lenient=True, max_ref_depth=max_ref_depth,
                  allow_extra_keys=allow_extra_keys, any_depth=any_depth)
    return c.canonical(instance, schema, "")
