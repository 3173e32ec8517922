"""anyOf/oneOf (disjointness), not (rewritten where exact), enum/const."""

from __future__ import annotations

import re

from inferlab.constrain.schema.common import (EXCLUSIVE_SUBSCHEMAS, MAX_SUBSCHEMAS, SchemaError, SchemaTooLarge,
                                              _ANNOTATIONS, _TYPES, _Unsat, _child, _constraining, _constrains,
                                              _generated_types, _group, _intersect_types, _json_key, _json_type,
                                              _known_keywords, _lit, _type_set, _value_types, _values, dumps)


class CombinatorsMixin:
    """anyOf/oneOf (disjointness), not (rewritten where exact), enum/const (mixed into _Compiler)."""

    def compile_negated(self, rest: dict, neg, ptr: str, neg_ptr: str, stack, keyword: str = "not") -> str:
        """The regex of `rest and not neg`: positive keywords where exact (without_not), else by
        automaton complement (schema.algebra); refusals name `keyword` at neg_ptr."""
        if isinstance(neg, dict):
            try:
                neg = self.flatten(neg, neg_ptr, stack)[0]
            except _Unsat:
                return self.compile(rest, ptr, stack)  # not (nothing) = anything
        positive = self.without_not(rest, neg, ptr, stack)
        if positive is not None:
            return self.compile(positive, ptr, stack)
        return self.compile_complement(rest, neg, ptr, neg_ptr, stack, keyword)

    def without_not(self, rest: dict, neg, ptr, stack) -> dict | None:
        """`rest and not neg` (neg flattened) as positive keywords where that is exact; else None.

        not {} / true: nothing is valid; not false: no constraint; not {type: T}: the other types;
        otherwise the positive forms of _negation (required, properties, anyOf/allOf of them,
        double negation)."""
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
                return None  # "a number that is not an integer": by automaton
            if not allowed - banned:
                raise _Unsat(f"not at #{ptr}: no type is left")
            return {**rest, "type": sorted(allowed - banned)}
        positive = _negation(neg)
        if positive is None:
            return None
        if positive is False:
            raise _Unsat(f"not at #{ptr}: nothing is valid")
        # flattened first: a $ref in it (not not {$ref}) must not take rest as ignored siblings
        return self.merge(rest, self.flatten(positive, ptr, stack)[0], ptr, stack)

    def compile_conditional(self, node, ptr, stack) -> str:
        """if/then/else as (if and then) or (not if and else): two disjoint alternatives."""
        rest = {k: v for k, v in node.items() if k not in ("if", "then", "else")}
        cond, cond_ptr = node["if"], _child(ptr, "if")
        parts = []
        for key in ("then", "else"):
            bptr = _child(ptr, key) if key in node else cond_ptr
            try:
                merged = self.merge(rest, self.flatten(node.get(key, True), bptr, stack)[0], bptr, stack)
                if key == "then":
                    merged = self.merge(merged, self.flatten(cond, cond_ptr, stack)[0], bptr, stack)
                    parts.append(self.compile(merged, bptr, stack))
                else:
                    parts.append(self.compile_negated(merged, cond, bptr, cond_ptr, stack, keyword="if"))
            except _Unsat as exc:
                self.note_cut(exc)
        if not parts:
            raise _Unsat(f"if at #{ptr}: neither branch is satisfiable")
        return _group(parts)

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
                flats.append((flat, bptr, bstack))
                if rest:
                    branches.append((self.merge(rest, flat, bptr, bstack), bptr, bstack))
                else:  # the branch itself: in stack mode a $ref branch stays a call
                    branches.append((branch if self.calls_on() else flat, bptr, stack if self.calls_on() else bstack))
            except _Unsat as exc:
                if key == "oneOf" and exc.cut:
                    raise  # a branch not unrolled still counts for "exactly one"
                self.note_cut(exc)
        if key == "oneOf" and self.first_clash(branches) is not None:
            closed = self.closed_branches(branches)  # the fallback, if exclusive without extra keys
            if closed is not None and self.first_clash(closed, branches) is not None:
                closed = None
            if closed is None:
                return self.one_of_by_type(rest, flats, ptr, stack)
            try:
                return self.attempt(lambda: self.one_of_by_type(rest, flats, ptr, stack), EXCLUSIVE_SUBSCHEMAS)
            except SchemaError:  # a negation that cannot be exact, or too large
                self.narrow(f"oneOf at #{ptr}: its branches are exclusive only without extra keys beside their "
                            "declared properties (additionalProperties absent), which are not generated there")
                branches = closed
        parts = self.compile_each(branches)
        if not parts:
            raise _Unsat(f"no branch of {key} at #{ptr} is satisfiable")
        return _group(parts)

    def attempt(self, build, budget: int) -> str:
        """build() (a compile), with at most `budget` more subschemas; what a SchemaError leaves
        (automata, messages) is rolled back, for the caller to fall back on something else."""
        saved, limits = self.checkpoint(), (self.max_calls, self.calls_before)
        self.calls_before, self.max_calls = self.calls, min(self.max_calls, self.calls + budget)
        try:
            return build()
        except SchemaError:
            self.rollback(saved)
            raise
        finally:
            self.max_calls, self.calls_before = limits

    def closed_branches(self, branches):
        """oneOf branches with no extra keys where additionalProperties is absent beside declared
        properties (each required name not declared keeps any value, as absence gave it): a
        subset of each branch, in plain JSON Schema; None where no branch changes (extra_keys
        off, or none is such an object)."""
        if not self.extra_keys:
            return None
        out, changed = [], False
        for merged, bptr, bstack in branches:
            try:
                flat, _, fstack = self.flatten(merged, bptr, bstack)
            except _Unsat:
                flat = None
            if isinstance(flat, dict) and "additionalProperties" not in flat and flat.get("properties") \
                    and not flat.get("patternProperties") and isinstance(flat["properties"], dict) \
                    and _generated_types(flat) & {"object"}:
                required = [n for n in flat.get("required", []) if isinstance(n, str)]
                props = {**flat["properties"], **{n: True for n in required if n not in flat["properties"]}}
                out.append(({**flat, "properties": props, "additionalProperties": False}, bptr, fstack))
                changed = True
            else:
                out.append((merged, bptr, bstack))
        return out if changed else None

    def compile_each(self, alternatives) -> list[str]:
        """The regexes of the (schema, ptr, stack) alternatives; an unsatisfiable one is left out."""
        parts = []
        for node, ptr, stack in alternatives:
            try:
                parts.append(self.compile(node, ptr, stack))
            except _Unsat as exc:
                self.note_cut(exc)
        return parts

    def one_of_by_type(self, rest: dict, flats: list, ptr: str, stack) -> str:
        """oneOf whose branches are not provably disjoint, one JSON type at a time (exact: an
        instance has one type, and a branch holds for it iff the branch restricted to its type
        does). For each type: where two branches admit every value of it, none of its values
        matches exactly one branch (the type is left out); where the branches restricted to it
        are disjoint, they are plain alternatives; otherwise each branch without the others
        (`not`), or a refusal naming the first pair not provably disjoint."""
        parts = []
        for t in _TYPES:
            live, admit_all = [], 0  # live: (branch index, branch and rest restricted to t, ptr, stack)
            for k, (flat, bptr, bstack) in enumerate(flats):
                try:
                    alone = self.merge(flat, {"type": t}, bptr, bstack)
                    admit_all += not _constrains(alone, t)
                    live.append((k, self.merge(rest, alone, bptr, bstack) if rest else alone, bptr, bstack))
                except _Unsat as exc:
                    if exc.cut:
                        raise  # a branch not unrolled still counts for "exactly one"
            if admit_all >= 2 or not live:
                continue
            clash = self.first_clash([(m, bptr, bstack) for _, m, bptr, bstack in live])
            if clash is None:
                todo = [(m, bptr, bstack) for _, m, bptr, bstack in live]
            elif all(_negatable(flats[k][0]) for k, *_ in live):
                # exactly one: each branch without any of the others, then plain alternatives
                bound = _exclusive_alternatives([flats[k][0] for k, *_ in live])
                if bound > MAX_SUBSCHEMAS:  # counted before anything is built
                    raise SchemaTooLarge(f"oneOf at #{_child(ptr, 'oneOf')}: each of its {len(live)} {t} branches "
                                         f"without the others distributes to up to {bound:,} alternatives, "
                                         f"more than the {MAX_SUBSCHEMAS:,} subschemas a schema may expand to")
                todo = [({"allOf": [m, *({"not": flats[j][0]} for j, *_ in live if j != k)]}, bptr, bstack)
                        for k, m, bptr, bstack in live]
            else:
                self.refuse("oneOf", _child(ptr, "oneOf"), f"branches {clash[0]} and {clash[1]} are not "
                            "provably disjoint (oneOf then differs from anyOf)")
                todo = [(m, bptr, bstack) for _, m, bptr, bstack in live]
            parts += self.compile_each(todo)
        if not parts:
            raise _Unsat(f"no value at #{ptr} matches exactly one branch of oneOf")
        return _group(parts)

    def note_cut(self, exc: _Unsat) -> None:
        if exc.cut:
            self.narrow(str(exc) + ": the branch is cut")

    def first_clash(self, branches, schemas=None):
        """oneOf compiled as anyOf is exact when no text generated for one branch validates
        another: an accepted instance then matches exactly one branch. The first pair (pointers)
        where that is not provable, or None. `schemas`: what the branches validate against, where
        the generated `branches` are subsets of them (closed_branches). Without it, the answer is
        kept per list of branch objects (a subschema used in many places is asked again with the
        same objects)."""
        if schemas is not None:
            for i, (a, a_ptr, sa) in enumerate(branches):
                for j, (b, b_ptr, sb) in enumerate(schemas):
                    if i != j and not self.excludes(a, b, sa, sb):
                        return a_ptr, b_ptr
            return None
        key = tuple((id(node), s) for node, _, s in branches)
        known = self.clashes.get(key)
        if known is None:
            known = self.clashes[key] = ([node for node, _, _ in branches], self.clash_indices(branches))
        clash = known[1]
        return None if clash is None else (branches[clash[0]][1], branches[clash[1]][1])

    def clash_indices(self, branches) -> tuple[int, int] | None:
        for i, (a, _, sa) in enumerate(branches):
            for j in range(i + 1, len(branches)):
                b, _, sb = branches[j]
                if self.disjoint(a, b, sa, sb):  # symmetric: both directions at once
                    continue
                if not self.generated_outside(a, b, sa, sb):
                    return i, j
                if not self.generated_outside(b, a, sb, sa):
                    return j, i
        return None

    def excludes(self, a, b, sa=(), sb=(), depth=0) -> bool:
        """True only if no instance that the regex of `a` generates satisfies `b`."""
        return self.disjoint(a, b, sa, sb, depth) or self.generated_outside(a, b, sa, sb, depth)

    def generated_outside(self, a, b, sa=(), sb=(), depth=0) -> bool:
        """True only if no instance that the regex of `a` generates satisfies `b`, for reasons
        beyond disjointness (objects a never generates with a name b requires)."""
        pair = self.flat_pair(a, b, sa, sb, depth)
        if isinstance(pair, bool):
            return pair
        a, b, sa, sb = pair
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

    def flat_pair(self, a, b, sa, sb, depth: int):
        """(a, b, sa, sb) flattened; or the answer to "disjoint?" where it is known without
        looking further: past depth 8, unknown (False); a side empty, True, unless the emptiness
        is a recursion cut (then unknown: False)."""
        if depth > 8:
            return False
        try:
            a, _, sa = self.flatten(a, "", sa)
            b, _, sb = self.flatten(b, "", sb)
        except _Unsat as exc:
            return not exc.cut
        return a, b, sa, sb

    def generates_extra_keys(self, node) -> bool:
        """May the object write keys beyond its declared properties (a pattern's keys included)?"""
        extra = node.get("additionalProperties")
        if node.get("patternProperties"):
            return True
        if extra is None:
            return self.extra_keys or not node.get("properties")
        return extra is not False

    def disjoint(self, a, b, sa=(), sb=(), depth=0) -> bool:
        """True only if no instance satisfies both a and b (a sufficient test)."""
        pair = self.flat_pair(a, b, sa, sb, depth)
        if isinstance(pair, bool):
            return pair
        a, b, sa, sb = pair
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
        for family, lo_key, hi_key in (("string", "minLength", "maxLength"), ("object", "minProperties", "maxProperties")):
            if ta <= {family} and tb <= {family} and _intervals_disjoint(
                    *(tuple(x for k in (lo_key, hi_key) for x in (_count(y.get(k)), True)) for y in (a, b))):
                return True
        va, vb = _values(a), _values(b)
        if va is not None and vb is not None and not ({_json_key(v) for v in va} & {_json_key(v) for v in vb}):
            return True
        if (va is not None and self.none_valid(va, b)) or (vb is not None and self.none_valid(vb, a)):
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
                        not y.get("patternProperties") and \
                        any(n not in y.get("properties", {}) for n in x.get("required", [])):
                    return True
        return False

    def none_valid(self, values: list, node) -> bool:
        """True only if the reference validator (jsonschema, when installed) finds none of the
        values valid against node; a format it cannot check passes there, so this stays sound."""
        if not self.values.available or not isinstance(node, dict):
            return False
        try:
            return not self.values.kept(node, values)
        except ValueError:
            return False

    def compile_enum(self, node, ptr, stack) -> str:
        return _group(self.enum_texts(node, ptr, stack))

    def enum_texts(self, node, ptr, stack) -> list[str]:
        """The regexes of the listed values that the whole subschema keeps, one per distinct value."""
        values = [node["const"]] if "const" in node else node["enum"]
        where = _child(ptr, "const" if "const" in node else "enum")
        if not isinstance(values, list):
            raise self.error("enum", where, "must be an array")
        rest = enum_siblings(node)
        if "enum" in node and "const" in node:
            keys = {_json_key(node["const"])}
            values = [v for v in node["enum"] if _json_key(v) in keys]
        kept, seen = [], set()
        check = None
        if set(rest) == {"type"}:  # the common case, checked on the value itself
            types = _type_set(rest["type"])
            values = [v for v in values if _json_type(v) in types or (_json_type(v) == "integer" and "number" in types)]
        elif rest and self.values.available:  # every keyword, by the reference validator
            values = self.validated(node, values, where)
        elif rest and self.operand_depth:  # a regex check keeps a subset: too few inside a negation
            self.refuse("enum" if "enum" in node else "const", where, "values beside other keywords inside a "
                        "negated schema are checked exactly only with jsonschema installed")
        elif rest:  # the other keywords, through their (sound) regex
            self.inline += 1
            try:
                check = re.compile(self.compile(rest, ptr, stack))
            except _Unsat:
                values = []
            except SchemaError as exc:
                raise SchemaError(f"{exc} (beside enum/const at #{where}: values are checked exactly "
                                  "when jsonschema is installed)") from None
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
        return kept

    def validated(self, node, values, where) -> list:
        """The listed values that validate against the whole subschema (jsonschema)."""
        name = self.values.unchecked_format(node, lambda ref: self.resolve(ref, where)[0])
        if name is not None:
            self.refuse("format", where, f"jsonschema cannot check format {name!r} here (install "
                        "jsonschema[format-nongpl]), so the listed values cannot be checked")
            return values
        try:
            return self.values.kept(node, values)
        except ValueError as exc:
            self.refuse("enum" if "enum" in node else "const", where, str(exc))
            return values

    def spaced_literal(self, value) -> str:
        """A JSON value as a regex that allows the flexible whitespace between tokens."""
        if isinstance(value, list):
            inner = self.tok(",").join(self.spaced_literal(v) for v in value)
            return self.tok("[") + inner + self.tok("]")
        if isinstance(value, dict):
            inner = self.tok(",").join(_lit(dumps(k)) + self.tok(":") + self.spaced_literal(v) for k, v in value.items())
            return self.tok("{") + inner + self.tok("}")
        return _lit(dumps(value))


def enum_siblings(node: dict) -> dict:
    """The keywords beside enum/const that constrain instances."""
    return {k: v for k, v in node.items() if k not in ("enum", "const") and k in _known_keywords()
            and k not in _ANNOTATIONS}


def _count(x):
    """A length or count bound, or None where it is absent or not a number (no claim then)."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _intervals_disjoint(a, b) -> bool:
    """(lo, lo_inclusive, hi, hi_inclusive) intervals (None = unbounded): no common point?"""
    def before(x, y):  # x entirely below y
        hi, hi_incl, lo, lo_incl = x[2], x[3], y[0], y[1]
        return hi is not None and lo is not None and (hi < lo or (hi == lo and not (hi_incl and lo_incl)))
    return before(a, b) or before(b, a)


def _negation(neg):
    """A schema equivalent to `not neg`, built from positive keywords, or None where none is
    known. Exact forms: not (not X) = X; not anyOf = allOf of the negations and not allOf =
    anyOf of them; an object schema of properties/required (type object or none): an object
    that misses a required name, or has a declared property with a value its schema rejects
    (`not` of that schema), and with type object also any value that is not an object."""
    if isinstance(neg, bool):
        return not neg
    if not isinstance(neg, dict):
        return None
    keys = set(neg) - _ANNOTATIONS
    if keys == {"not"} and isinstance(neg["not"], (dict, bool)):
        return neg["not"]
    if keys in ({"anyOf"}, {"allOf"}) and isinstance(neg[next(iter(keys))], list):
        parts = [_negation(b) for b in neg[next(iter(keys))]]
        if not parts or any(p is None for p in parts):
            return None
        return {"allOf" if keys == {"anyOf"} else "anyOf": parts}
    if keys == {"type"}:  # the other types; not integer (but number) has no such form
        types = _type_set(neg["type"])
        if "integer" in types and "number" not in types:
            return None
        others = [t for t in _TYPES if t not in types]
        return {"type": others} if others else False
    if not keys or not keys <= {"properties", "required", "type"} or neg.get("type", "object") != "object":
        return None
    props, required = neg.get("properties", {}), neg.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        return None
    failing = [{"properties": {n: False}} for n in required]
    failing += [{"required": [n], **({"properties": {n: {"not": sub}}} if sub is not False else {})}
                for n, sub in props.items() if sub is not True and sub != {}]
    objects = ({"type": "object", "anyOf": failing} if len(failing) > 1 else {"type": "object", **failing[0]}
               if failing else False)
    if "type" not in neg:
        return objects
    others = [t for t in _TYPES if t != "object"]
    return {"anyOf": [{"type": others}, objects]} if objects is not False else {"type": others}


def _exclusive_alternatives(flats: list) -> int:
    """An upper bound on the alternatives that `each branch and not any other` distributes to:
    for each branch, the product over the others of the alternatives of their negation."""
    counts = [_alternatives(_negation(f)) for f in flats]
    total = 0
    for k in range(len(counts)):
        product = 1
        for j, c in enumerate(counts):
            if j != k:
                product *= c
        total += product
    return total


def _alternatives(node) -> int:
    """How many alternatives a schema distributes to at its top: anyOf adds, allOf multiplies."""
    if not isinstance(node, dict):
        return 1
    n = sum(_alternatives(b) for b in node["anyOf"]) if isinstance(node.get("anyOf"), list) else 1
    for b in node.get("allOf", []) if isinstance(node.get("allOf"), list) else []:
        n *= _alternatives(b)
    return n


def _negatable(node) -> bool:
    """Can `not node` be rewritten exactly (see _Compiler.without_not)?"""
    return isinstance(node, dict) and _negation(node) is not None
