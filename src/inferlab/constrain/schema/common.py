"""Shared pieces of the schema compiler: errors, results, regex text helpers, keyword tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from inferlab.errors import InferlabError
from inferlab.nesting import pointer_token


FLEXIBLE_WS_MAX = 12


# Bigger regexes mean an unrolled blow-up (a $ref used in many places, a deep recursion); the
# DFA stage has its own state limit, this stops the string from eating the memory first.
MAX_REGEX_CHARS = 1_000_000


MAX_SUBSCHEMAS = 50_000  # compiled subschemas (after unrolling and distribution) per schema
NESTING_CUT = "nesting limited to"  # an unconstrained value's narrowing: any_depth levels kept (any_value)
EXPONENT_CUT = "plain decimal notation only (no exponent)"  # a bounded number's narrowing (numbers.py)


# oneOf as "each branch without the others", where a narrowing is there to fall back on (extra
# keys left out): a negation distributed over many branches can take minutes to reach the limit
EXCLUSIVE_SUBSCHEMAS = 5_000


# Stack mode: a subschema regex longer than this becomes an automaton of its own, called where it
# is used, so nesting and repeated use add calls instead of multiplying the text.
OUTLINE_CHARS = (4_000, 400, 60)  # tried in turn while an automaton is over the size limits


MAX_AUTOMATA = 20_000


# Stack mode: a string maxLength from here on is counted by the frame, not unrolled. An unrolled
# string is a chain of states, one per character, and a mask at each character walks the whole
# vocabulary again (~8 ms at 151k tokens); a counted one walks it once per state of one character
# and takes a prefix of that list per count (StackGrammar._counted_bits), shared by every string
# of the schema with the same character class (StackGrammar._twin). Measured with
# benchmarks/commit_ab.py --limit 400, three rounds each: 16 instead of 64 on the schemas with a
# maxLength of at most 63 (first walk mean 0.74 of 64's, compile 0.85), then with twins 8 instead
# of 16 on those with one of at most 15 (first walk p99 0.52-0.62, mean 0.79-0.92 of 16's).
COUNT_MIN = 8


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
    "$dynamicRef": "$dynamicRef is not supported",  # (read first: Resources.dynamic_target)
    "$recursiveRef": "$recursiveRef is not supported",
}


# The format policy: "assert" enforces the formats of constrain.formats (and refuses the
# specification's others); "annotate" enforces none, each listed in unenforced_formats (JSON
# Schema 2019-09 and 2020-12's default: format is an annotation unless a validator opts in).
FORMAT_POLICIES = ("assert", "annotate")


_DEPENDENCY_KEYWORDS = ("dependencies", "dependentRequired", "dependentSchemas")


MAX_DEPENDENCIES = 4  # each one doubles the alternatives (present or absent)


MAX_CONDITIONALS = 6  # if/then/else under one allOf: each doubles the alternatives


_OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


# The validation keywords that a dialect named by $schema does not have: its validators ignore
# them, as every draft says of a keyword it does not define (a draft-04 schema's `if` or `const`
# constrains nothing there). A schema without $schema gets every keyword the compiler knows.
# Draft-03 is read as draft-04 (its own keywords aside).
_SINCE_6 = frozenset({"const", "contains", "propertyNames"})
_SINCE_7 = frozenset({"if", "then", "else"})
_SINCE_2019 = frozenset({"dependentRequired", "dependentSchemas", "minContains", "maxContains",
                         "unevaluatedItems", "unevaluatedProperties"})
_DYNAMIC = frozenset({"$dynamicRef", "$recursiveRef"})
_NOT_IN_DIALECT = {
    "draft-03": _SINCE_6 | _SINCE_7 | _SINCE_2019 | _DYNAMIC | {"prefixItems"},
    "draft-04": _SINCE_6 | _SINCE_7 | _SINCE_2019 | _DYNAMIC | {"prefixItems"},
    "draft-06": _SINCE_7 | _SINCE_2019 | _DYNAMIC | {"prefixItems"},
    "draft-07": _SINCE_2019 | _DYNAMIC | {"prefixItems"},
    "2019-09": frozenset({"dependencies", "prefixItems", "$dynamicRef"}),     # dependencies: split in two
    "2020-12": frozenset({"dependencies", "additionalItems", "$recursiveRef"}),  # additionalItems: items after prefixItems
}


def document_dicts(root) -> frozenset[int]:
    """The ids of every dict in the document `root` (walked without recursion). A node the
    compiler builds (a negation's positive form, a merge) is not among them: its keywords are
    the compiler's own, whatever dialect the document's $schema names."""
    ids, todo = set(), [root]
    while todo:
        n = todo.pop()
        if isinstance(n, dict):
            ids.add(id(n))
            todo.extend(n.values())
        elif isinstance(n, list):
            todo.extend(n)
    return frozenset(ids)


def dialect_of(root) -> str | None:
    """The draft that the root's $schema names ("draft-04" ... "2020-12"), None without one."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    if isinstance(uri, str):
        for name in _NOT_IN_DIALECT:
            if name in uri:
                return name
    return None


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


def number_spellings(value: int | float) -> list[str]:
    """The texts of a number that a compiled grammar holds: dumps's, and where it differs the
    canonical spelling, the one the complements' universe holds (algebra._UNIVERSE): an integral
    value as the integer equal to it (2.0 is also 2; 1e300 is the double's exact value, not
    10**300, which differs from it), -0 as 0, else plain decimal (1e-07 is also 0.0000001).
    Both are the same value under JSON-Schema equality, so a `not`, `oneOf` or `if` over a listed
    number must take both out: with the listed spelling alone the universe's spelling survived.
    The universe holds no other text equal to it: its fractions have at most 15 significant
    digits, and two such decimals are never the same double."""
    text = dumps(value)
    canonical = str(int(value)) if value == int(value) else _plain_decimal(value)
    return [text] if canonical == text else [text, canonical]


def value_texts(value) -> list[str]:
    """A listed value's texts: each spelling of a number (number_spellings), else dumps's."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_spellings(value)
    return [dumps(value)]


def value_regex(value, tok=_lit) -> str:
    """A JSON value as a regex over the texts equal to it: each scalar by value_texts; tok (a
    structural token's regex: optional whitespace around it, or none) between the parts."""
    if isinstance(value, list):
        return tok("[") + tok(",").join(value_regex(v, tok) for v in value) + tok("]")
    if isinstance(value, dict):
        inner = tok(",").join(_lit(dumps(k)) + tok(":") + value_regex(v, tok) for k, v in value.items())
        return tok("{") + inner + tok("}")
    return _group([_lit(t) for t in value_texts(value)])


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


def _json_equal(a, b) -> bool:
    """a == b under JSON-Schema equality (as _json_key), without serialising either: parts that
    are the same object (subschemas shared by $ref and merging) are equal at once, so comparing
    two large subschemas costs what their differences cost, not their size."""
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if x is y:
            continue
        if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
            if type(x) is not type(y) or x != y:
                return False
        elif isinstance(x, dict):
            if not isinstance(y, dict) or x.keys() != y.keys():
                return False
            todo.extend((v, y[k]) for k, v in x.items())
        elif isinstance(x, list):
            if not isinstance(y, list) or len(x) != len(y):
                return False
            todo.extend(zip(x, y))
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if x != y:
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


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


def _child(ptr: str, *tokens) -> str:
    return ptr + "".join("/" + pointer_token(t) for t in tokens)


_ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "id", "$comment",
                "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                "contentEncoding", "contentMediaType", "contentSchema", "$vocabulary"}


@lru_cache(maxsize=1)
def _known_keywords() -> frozenset:
    keys = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref",
            "additionalItems"}
    keys |= set(_UNSUPPORTED)
    for family in _FAMILY_KEYWORDS.values():
        keys |= set(family)
    return frozenset(keys)


def _constraining(node: dict) -> bool:
    return any(k in _known_keywords() for k in node)


def _constrains(node: dict, t: str) -> bool:
    """Does any keyword of node (already of type t) constrain values of type t? False: node admits
    every value of type t."""
    if t == "number" and "number" not in _type_set(node.get("type", "number")):
        return True  # integers only
    family = "number" if t == "integer" else t
    others = {k for f, keys in _FAMILY_KEYWORDS.items() if f != family for k in keys}
    return bool(set(node) & _known_keywords() - others - {"type"})


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
    return set(_TYPES)  # without "type", every type (those without keywords unconstrained)


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


def nesting_depth(value) -> int:
    """Levels of arrays/objects in a JSON value: 0 for a scalar."""
    if isinstance(value, list):
        return 1 + max(map(nesting_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting_depth, value.values()), default=0)
    return 0
