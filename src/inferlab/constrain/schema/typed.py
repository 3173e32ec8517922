"""The typed form of a schema: its keywords by the JSON type they constrain, and per type the
intersection (allOf), the disjointness test (oneOf) and the complement (not).

A flattened schema (no $ref or allOf at its top: RefsMixin.flatten) is a union over the JSON
types it admits. `part(node, t)` is its part for one type t: `type` t, the keywords of t's
family (common._FAMILY_KEYWORDS; integer shares number's), the listed values of type t, and
the type-free keywords (anyOf, oneOf, not, if/then/else), which may constrain any type. A value
of type t satisfies the schema iff it satisfies part(node, t): keywords of another family are
vacuous for it. The three operations work type by type:

- intersection (`multiple_of`, and RefsMixin.merge's keyword rules): the bounds the tighter,
  required the union, multipleOf the least common multiple (exact for integers and decimals:
  the multiples of both a and b are those of lcm(a, b)), a keyword the algebra has no exact
  rule for refused by the merge, naming it and its pointer;
- disjointness (`disjoint`): two schemas share no value iff, for every type both admit, their
  parts of that type share none; per type a sufficient test (bounds, lengths, counts, a name
  one side requires and the other forbids, item and property schemas the caller finds
  disjoint, the caller's exact regexes of string and integer parts);
- complement (`complement`): `not S` as positive keywords, the union over S's keywords of
  the values each one rejects (a keyword rejects values of its own type only), or None where
  one has no positive form. Objects and arrays have no regex complement (key orders,
  repeated keys), so this is the only `not` over them; scalars also have the automaton
  complement (schema.algebra).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from math import gcd, lcm

from inferlab.constrain.schema.common import (_FAMILY_KEYWORDS, _TYPES, _intersect_types, _json_equal, _json_type,
                                              _known_keywords, _type_set, _value_types)
from inferlab.constrain.schema.strings import _top_level

# a negation distributes to about this many alternatives at most (oneOf's "none or two"; enum's
# "differs from each value"); past it, complement() has no positive form (None)
MAX_COMPLEMENT_ALTERNATIVES = 64

_NUMERIC = {"integer", "number"}


def family(t: str) -> str:
    """The keyword family of a JSON type (integer's is number's)."""
    return "number" if t == "integer" else t


def part(node, t: str):
    """node's part for values of type t ("integer" within "number"): `type` t (integer where
    node admits only integers of it), t's family keywords and the type-free ones; enum/const
    keep their values of type t. The other families' keywords are vacuous for such values and
    left out. False where node admits no value of type t (by its type or its listed values)."""
    if isinstance(node, bool):
        return node
    types = _type_set(node["type"]) if "type" in node else set(_TYPES)
    kept = _intersect_types(types | ({"integer"} if "number" in types else set()), {t})
    if not kept:
        return False
    others = {k for f, keys in _FAMILY_KEYWORDS.items() if f != family(t) for k in keys}
    out = {k: v for k, v in node.items() if k not in others and k not in ("type", "enum", "const")}
    out["type"] = "integer" if kept == {"integer"} else t
    if "const" in node or "enum" in node:
        values = [v for v in _listed(node) if _of_type(v, t)] if isinstance(_listed(node), list) else None
        if values == []:
            return False
        if values is not None:
            out["enum"] = values
    return out


def complement_within(node, t: str, ctx: NegationContext | None = None):
    """complement(node) among values of type t: that of node's part of t, whose `type` t is
    vacuous there (one alternative fewer to distribute)."""
    p = part(node, t)
    if isinstance(p, dict) and p["type"] == t:
        p = {k: v for k, v in p.items() if k != "type"}
    return complement(p, ctx or _ANYTHING)


def _of_type(value, t: str) -> bool:
    vt = _json_type(value)
    return vt == t or (t == "number" and vt == "integer")


# -- intersection ------------------------------------------------------------------------------

def multiple_of(a, b):
    """The multipleOf equivalent to both multipleOf a and multipleOf b, exactly: their least
    common multiple, read as the decimals they are written as (0.01 is 1/100, not the float);
    None where it cannot be written exactly (a non-positive, infinite or non-decimal side)."""
    fa, fb = _decimal(a), _decimal(b)
    if fa is None or fb is None:
        return None
    # lcm of p/q and r/s (lowest terms) is lcm(p, r) / gcd(q, s)
    out = Fraction(lcm(fa.numerator, fb.numerator), gcd(fa.denominator, fb.denominator))
    if out.denominator == 1:
        return int(out)
    if out in (fa, fb):
        return a if out == fa else b  # the one written
    written = float(out)  # a new decimal (0.06 from 0.02 and 0.03), where its float reads back as it
    return written if Fraction(repr(written)) == out else None


# any one character, in ECMA-262 and Python alike (each `.` lacks some line terminators)
_ANY_CHAR = r"(?:.|\n|\r|\u2028|\u2029)"


def pattern_conjunction(a: str, b: str) -> str | None:
    """One pattern that a string matches iff it matches both (search semantics), exactly: each
    side as a lookahead at the start, "^(?=A')(?=B')", where A' is A found anywhere (an
    alternative anchored with ^ found at the start). A side already of this form gives its
    lookaheads. None where a side holds lookaheads of its own (a lookahead in a lookahead)."""
    bodies = []
    for p in (a, b):
        got = _conjuncts(p)
        if got is None:
            return None
        bodies += [x for x in got if x not in bodies]
    return "^" + "".join(f"(?={x})" for x in bodies)


def _conjuncts(pattern: str) -> list[str] | None:
    alts = _top_level(pattern)
    pieces = alts[0]
    if len(alts) == 1 and len(pieces) > 2 and pieces[0] == ("text", "^") and \
            all(x == ("text", "") or (x[0] == "look" and not x[1]) for x in pieces[1:]):
        return [x[2] for x in pieces if x[0] == "look"]  # (this function's own form)
    if any(x[0] == "look" for alt in alts for x in alt):
        return None
    texts = [alt[0][1] for alt in alts]
    return ["|".join(t[1:] if t.startswith("^") else f"{_ANY_CHAR}*{t}" for t in texts)]


def _decimal(x) -> Fraction | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or x == float("inf"):
        return None
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


# -- disjointness ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Oracle:
    """What the disjointness test asks of the compiler: whether two subschemas (property or item
    schemas, as written, resolved against their own stacks) are disjoint; the numeric bounds of a
    node (NumbersMixin.bounds, draft-04 booleans read); whether the exact regexes of two parts of
    type t (string or integer) share no text (False where either is not exact)."""
    sub_disjoint: Callable[[object, object], bool]
    bounds: Callable[[dict], tuple]
    regex_disjoint: Callable[[str, dict, dict], bool]


def disjoint(a: dict, b: dict, oracle: Oracle) -> bool:
    """True only if no value satisfies both flattened schemas: for each type both admit, their
    parts of that type are disjoint (a sufficient test per type, _parts_disjoint)."""
    common = _intersect_types(_value_types(a), _value_types(b))
    return all(_parts_disjoint(t, a, b, oracle) for t in common)


def _parts_disjoint(t: str, a: dict, b: dict, oracle: Oracle) -> bool:
    if t == "string":
        return _intervals_disjoint(_count_bounds(a, "minLength", "maxLength"),
                                   _count_bounds(b, "minLength", "maxLength")) \
            or (any(k in x for x in (a, b) for k in ("pattern", "format"))
                and oracle.regex_disjoint(t, part(a, t), part(b, t)))
    if t in _NUMERIC:  # (integers: their regexes are exact, multipleOf included)
        return _intervals_disjoint(oracle.bounds(a), oracle.bounds(b)) or (
            t == "integer" and any(k in x for x in (a, b) for k in _FAMILY_KEYWORDS["number"])
            and oracle.regex_disjoint(t, part(a, t), part(b, t)))
    if t == "object":
        return _objects_disjoint(a, b, oracle)
    if t == "array":
        return _arrays_disjoint(a, b, oracle)
    return False


def _objects_disjoint(a: dict, b: dict, oracle: Oracle) -> bool:
    if _intervals_disjoint(_count_bounds(a, "minProperties", "maxProperties"),
                           _count_bounds(b, "minProperties", "maxProperties")):
        return True
    ra, rb = _names(a.get("required")), _names(b.get("required"))
    for x, y in ((a, b), (b, a)):
        hi = _count(y.get("maxProperties"))
        if hi is not None and len(ra | rb) > hi:
            return True  # both sides' required names do not fit y's count
    pa, pb = _props(a), _props(b)
    for name in ra & rb:  # a name both require, with values that cannot agree
        if name in pa and name in pb and oracle.sub_disjoint(pa[name], pb[name]):
            return True
    for required, y, py in ((ra, b, pb), (rb, a, pa)):
        closed = y.get("additionalProperties") is False and not y.get("patternProperties")
        if any(py.get(n) is False or (closed and n not in py) for n in required):
            return True  # a name one side requires, the other forbids
    return False


def _arrays_disjoint(a: dict, b: dict, oracle: Oracle) -> bool:
    if _intervals_disjoint(_count_bounds(a, "minItems", "maxItems"), _count_bounds(b, "minItems", "maxItems")):
        return True
    present = max(_count(a.get("minItems")) or 0, _count(b.get("minItems")) or 0)
    longest = max(_prefix_length(a), _prefix_length(b))
    for i in range(min(present, longest + 1, 8)):  # an item both sides' arrays hold, schemas disjoint
        sa, sb = _item_at(a, i), _item_at(b, i)
        if sa is not True and sb is not True and oracle.sub_disjoint(sa, sb):
            return True
    return False


def _prefix_length(node: dict) -> int:
    for key in ("prefixItems", "items"):
        if isinstance(node.get(key), list):
            return len(node[key])
    return 0


def _item_at(node: dict, i: int):
    """The schema item i of node's arrays meets (prefixItems or the tuple form of items, then
    the schema past them); True where none is known to apply."""
    prefix, rest = node.get("prefixItems"), node.get("items", True)
    if isinstance(rest, list):  # the tuple form (drafts 4-2019; beside prefixItems: schema.evaluated)
        prefix, rest = rest, node.get("additionalItems", True)
    if isinstance(prefix, list):
        return prefix[i] if i < len(prefix) else rest
    return rest if isinstance(rest, (dict, bool)) else True


def _names(x) -> set:
    return {n for n in x if isinstance(n, str)} if isinstance(x, list) else set()


def _props(node: dict) -> dict:
    p = node.get("properties")
    return p if isinstance(p, dict) else {}


def _count_bounds(node: dict, lo_key: str, hi_key: str):
    return _count(node.get(lo_key)), True, _count(node.get(hi_key)), True


def _count(x):
    """A length or count bound, or None where it is absent or not a number (no claim then)."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _intervals_disjoint(a, b) -> bool:
    """(lo, lo_inclusive, hi, hi_inclusive) intervals (None = unbounded): no common point?"""
    def before(x, y):  # x entirely below y
        hi, hi_incl, lo, lo_incl = x[2], x[3], y[0], y[1]
        return hi is not None and lo is not None and (hi < lo or (hi == lo and not (hi_incl and lo_incl)))
    return before(a, b) or before(b, a)


# -- complement --------------------------------------------------------------------------------

@dataclass(frozen=True)
class NegationContext:
    """What the positive part of `rest and not neg` admits, where a negation's positive form
    needs it: the names its objects may hold (None: any), and a test of whether its arrays'
    items can satisfy a schema (`items_disjoint(x)`: True only if no item of them satisfies x;
    None: no such test)."""
    keys: frozenset | None = None
    items_disjoint: Callable[[object], bool] | None = None


_ANYTHING = NegationContext()
_COUNTS = {"minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
           "minProperties": ("object", "maxProperties", -1), "maxProperties": ("object", "minProperties", 1)}
_OBJECT_GROUP = {"properties", "required", "additionalProperties"}
_ARRAY_GROUP = {"prefixItems", "items"}
_CONDITIONAL = {"if", "then", "else"}
_CONTAINS_GROUP = {"contains", "minContains", "maxContains"}
_DEPENDENCIES = ("dependencies", "dependentRequired", "dependentSchemas")


def complement(neg, ctx: NegationContext = _ANYTHING):
    """A schema equivalent to `not neg` among the values `ctx` admits, built from positive
    keywords (False: no value; None: no positive form is known). A schema is the conjunction of
    its keywords (the object keywords properties/required/additionalProperties taken together,
    and if/then/else), so its negation is the anyOf of theirs (_negated_part): not (not X) = X;
    not anyOf = allOf of the negations and not allOf = anyOf of them; not oneOf = none or two
    of the branches; not type = the other types; a count bound, the other side of it; the
    object keywords, an object that misses a required name, or has a declared property with a
    value its schema rejects (`not` of that schema), or a name past the declared ones where the
    context's objects hold finitely many (ctx.keys); a dependency, the name present and its
    requirement failed; items, an array with an item where the context's items all fail them
    (ctx.items_disjoint); enum/const, a value that differs from each listed object or array
    (a key or item that differs, a length that does). Keywords that are not JSON Schema's are
    annotations, as everywhere else."""
    if isinstance(neg, bool):
        return not neg
    if not isinstance(neg, dict):
        return None
    node = {k: v for k, v in neg.items() if k in _known_keywords()}
    parts = [{k: node[k] for k in _OBJECT_GROUP if k in node}] if _OBJECT_GROUP & set(node) else []
    # prefixItems and items together: items holds only past the prefix, so neither alone says
    # which items fail (CI's slow fuzz: not {items: false, prefixItems: [true]} accepted [null])
    tuple_group = _ARRAY_GROUP <= set(node) and not isinstance(node["items"], list)
    if tuple_group:
        parts.append({k: node[k] for k in _ARRAY_GROUP})
    if "if" in node:
        parts.append({k: node[k] for k in _CONDITIONAL if k in node})
    if "contains" in node:  # (min/maxContains without contains constrain nothing)
        parts.append({k: node[k] for k in _CONTAINS_GROUP if k in node})
    grouped = _OBJECT_GROUP | (_ARRAY_GROUP if tuple_group else set()) | _CONDITIONAL | _CONTAINS_GROUP
    if "const" in node or "enum" in node:  # enum beside const: the values of both
        parts.append({"enum": _listed(node)})
    parts += [{k: v} for k, v in node.items() if k not in grouped and k not in ("enum", "const")]
    negs = []
    for p in parts:
        n = _negated_part(p, ctx)
        if n is None:
            return None
        if n is not False:
            negs.append(n)
    return _any_of(negs)


def _listed(node: dict):
    if "const" not in node:
        return node["enum"]
    enum = node.get("enum")
    return [node["const"]] if not isinstance(enum, list) or any(_json_equal(node["const"], v) for v in enum) else []


def _negated_part(p: dict, ctx: NegationContext):
    """complement of one keyword of a schema (or its object keywords, or its conditional,
    together); None where no positive form is known."""
    (key, value), = list(p.items())[:1]
    if len(p) == 1 and key == "not":
        return value if isinstance(value, (dict, bool)) else None
    if len(p) == 1 and key in ("anyOf", "allOf"):
        if not isinstance(value, list) or not value:
            return None
        negs = [complement(b, ctx) for b in value]
        return None if any(n is None for n in negs) else {"allOf" if key == "anyOf" else "anyOf": negs}
    if len(p) == 1 and key == "oneOf":
        return _none_or_two(value)
    if set(p) <= _CONDITIONAL:
        return _failing_conditional(p) if "if" in p else False
    if len(p) == 1 and key == "enum":
        return _differs(value)
    if len(p) == 1 and key == "type":  # the other types; not integer (but number) has no such form
        types = _type_set(value)
        if "integer" in types and "number" not in types:
            return None
        others = [t for t in _TYPES if t not in types]
        return {"type": others} if others else False
    if len(p) == 1 and key in _COUNTS:  # the other side of the bound, among values of its type
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            return None
        fam, other, step = _COUNTS[key]
        bound = int(value) + step
        return False if bound < 0 else {"type": fam, other: bound}
    if len(p) == 1 and key in _DEPENDENCIES:
        return _failing_dependencies(value)
    if len(p) == 1 and key == "items" and not isinstance(value, list):
        if value is True or value == {}:
            return False
        if value is False or (isinstance(value, dict) and ctx.items_disjoint is not None and ctx.items_disjoint(value)):
            return {"type": "array", "minItems": 1}  # (every item of the context's arrays fails them)
        return {"type": "array", "contains": {"not": value}} if isinstance(value, dict) else None
    if "contains" in p:
        return _failing_counts(p)
    if len(p) == 1 and key in ("prefixItems", "items"):  # some item i (present) fails its schema
        # (items: the tuple form of drafts 4-2019, written as prefixItems, which compile_array reads)
        fails = _prefix_fails(value)
        return None if fails is None else _any_of(fails)
    if set(p) == _ARRAY_GROUP:
        return _failing_arrays(p)
    if set(p) <= _OBJECT_GROUP:
        return _failing_objects(p, ctx)
    return None


def _failing_counts(p: dict):
    """The arrays that fail contains with minContains a (default 1) and maxContains b: fewer than
    a items satisfy it (none: items of its negation; 1 to a - 1: maxContains a - 1), or more
    than b."""
    c, lo, hi = p["contains"], p.get("minContains", 1), p.get("maxContains")
    if not isinstance(c, (dict, bool)) or any(x is not None and (isinstance(x, bool) or not isinstance(x, int))
                                              for x in (lo, hi)):
        return None
    fails = []
    if lo >= 1:
        fails.append({"type": "array", "items": {"not": c}})
    if lo >= 2:
        fails.append({"type": "array", "contains": c, "maxContains": lo - 1})
    if hi is not None:
        fails.append({"type": "array", "contains": c, "minContains": hi + 1})
    return _any_of(fails)


def _none_or_two(branches):
    """not oneOf: no branch holds, or two do (exact: exactly one fails both)."""
    if not isinstance(branches, list) or not branches:
        return None
    pairs = list(combinations(branches, 2))
    if len(pairs) + 1 > MAX_COMPLEMENT_ALTERNATIVES:
        return None
    return _any_of([{"allOf": [{"not": b} for b in branches]}] + [{"allOf": list(pair)} for pair in pairs])


def _failing_conditional(p: dict):
    """not (if/then/else): the if holds and then fails, or it fails and else fails."""
    cond = p["if"]
    fails = [{"allOf": [cond, {"not": p[k]}]} if k == "then" else {"allOf": [{"not": cond}, {"not": p[k]}]}
             for k in ("then", "else") if k in p and p[k] is not True and p[k] != {}]
    return _any_of(fails)


def _failing_dependencies(deps):
    """The objects that fail dependencies / dependentRequired / dependentSchemas: one name
    present, and a name it requires absent (or the schema it requires failed)."""
    if not isinstance(deps, dict):
        return None
    fails = []
    for name, dep in deps.items():
        if isinstance(dep, list):
            fails += [{"type": "object", "required": [name], "properties": {n: False}} for n in dep]
        elif dep is not True and dep != {}:
            fails.append({"type": "object", "required": [name], "not": dep})
    return _any_of(fails)


def _differs(values):
    """not enum: a value unequal to each listed value (_unequal, one anyOf per value); None where
    a listed value is not an object or an array (a scalar's has no positive form here: the
    automaton complement, schema.algebra, takes those), or past MAX_COMPLEMENT_ALTERNATIVES."""
    if not isinstance(values, list) or any(not isinstance(v, (dict, list)) for v in values):
        return None
    forms = [_unequal(v) for v in values]
    alternatives = 1
    for f in forms:
        alternatives *= len(f)
    if alternatives > MAX_COMPLEMENT_ALTERNATIVES:
        return None
    each = [_any_of(f) for f in forms]
    return True if not each else each[0] if len(each) == 1 else {"allOf": each}


def _unequal(v) -> list:
    """The values unequal to v (an object or an array), as alternatives: another type, or of its
    type a key or item that differs (absent, or with another value), or another size."""
    if isinstance(v, dict):
        out = [{"type": [t for t in _TYPES if t != "object"]}]
        out += [{"type": "object", "properties": {k: False}} for k in v]
        out += [{"type": "object", "required": [k], "properties": {k: {"not": {"const": x}}}} for k, x in v.items()]
        return out + [{"type": "object", "minProperties": len(v) + 1}]
    out = [{"type": [t for t in _TYPES if t != "array"]}]
    out += [{"type": "array", "maxItems": len(v) - 1}] if v else []
    out += [{"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [{"not": {"const": x}}]}
            for i, x in enumerate(v)]
    return out + [{"type": "array", "minItems": len(v) + 1}]


def _failing_arrays(p: dict):
    """The arrays that fail prefixItems and items (its schema form, past the prefix) together:
    some present item i < n fails prefixItems[i], or (items false) an item past the n; None
    where items is another schema ("some item past n fails it" has no positive form here)."""
    prefix, rest = p["prefixItems"], p["items"]
    fails = _prefix_fails(prefix)
    if fails is None:
        return None
    if rest is False:
        fails.append({"type": "array", "minItems": len(prefix) + 1})
    elif rest is not True and rest != {}:
        return None
    return _any_of(fails)


def _prefix_fails(prefix) -> list | None:
    """The arrays whose present item i fails prefix[i], one schema per constrained position
    (None where prefix is not a list of schemas)."""
    if not isinstance(prefix, list) or not all(isinstance(x, (dict, bool)) for x in prefix):
        return None
    return [{"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [{"not": x}]}
            for i, x in enumerate(prefix) if x is not True and x != {}]


def _any_of(fails: list):
    """Any of these failing forms: false where there is none."""
    return False if not fails else fails[0] if len(fails) == 1 else {"anyOf": fails}


def _failing_objects(p: dict, ctx: NegationContext):
    """The objects that fail properties/required/additionalProperties (`p`), or None."""
    props, required = p.get("properties", {}), p.get("required", [])
    extra = p.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list) or not isinstance(extra, (dict, bool)):
        return None
    failing = [{"properties": {n: False}} for n in required]
    failing += [{"required": [n], **({"properties": {n: {"not": sub}}} if sub is not False else {})}
                for n, sub in props.items() if sub is not True and sub != {}]
    if extra is not True and extra != {}:
        if ctx.keys is None:  # "some name past the declared ones" has no positive form
            return None
        failing += [{"required": [n], **({"properties": {n: {"not": extra}}} if extra is not False else {})}
                    for n in sorted(ctx.keys - set(props))]
    if not failing:
        return False
    return {"type": "object", "anyOf": failing} if len(failing) > 1 else {"type": "object", **failing[0]}
