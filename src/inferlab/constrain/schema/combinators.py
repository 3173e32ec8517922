"""anyOf/oneOf (disjointness), not (rewritten where exact), enum/const."""

from __future__ import annotations

import re

from inferlab.constrain.schema.common import (EXCLUSIVE_SUBSCHEMAS, EXPONENT_CUT, MAX_SUBSCHEMAS, NESTING_CUT,
                                              SchemaError, SchemaTooLarge, _ANNOTATIONS, _TYPES, _Unsat, _child,
                                              _constraining, _constrains, _generated_types, _group,
                                              _json_key, _json_type, _known_keywords, _type_set, _value_types,
                                              _values, dumps, nesting_depth, value_regex, value_texts)
from inferlab.constrain.schema import typed
from inferlab.constrain.schema.values import reached


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
        otherwise the positive forms of typed.complement (required, properties, anyOf/allOf of them,
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
        positive = typed.complement(neg, self.negation_context(rest, stack))
        if positive is None:
            return None
        if positive is False:
            raise _Unsat(f"not at #{ptr}: nothing is valid")
        # flattened first: a $ref in it (not not {$ref}) must not take rest as ignored siblings
        return self.merge(rest, self.flatten(positive, ptr, stack)[0], ptr, stack)

    def compile_typed_complement(self, rest_t: dict, neg_t, t: str, ptr: str, neg_ptr: str, stack, keyword: str) -> str:
        """rest_t (a schema of type t: object or array) and not neg_t, by the positive complement
        of neg_t's part of type t (typed.complement_within); refused where it has none."""
        positive = typed.complement_within(neg_t, t, self.negation_context(rest_t, stack))
        if positive is None:
            self.refuse(keyword, neg_ptr, f"the negation of this schema over {t}s has no exact form (a keyword "
                        "of it has no positive negation: additionalProperties or patternProperties beside "
                        "open objects, propertyNames, uniqueItems, ...)")
            return self.compile(rest_t, ptr, stack)
        if positive is False:
            raise _Unsat(f"{keyword} at #{ptr}: no {t} is left")
        return self.compile(self.merge(rest_t, self.flatten(positive, ptr, stack)[0], ptr, stack), ptr, stack)

    def negation_context(self, rest, stack) -> typed.NegationContext:
        """What `rest` admits that a negation beside it may use: the names of its objects where
        additionalProperties false closes them, a disjointness test against its arrays' items."""
        if not isinstance(rest, dict):
            return typed.NegationContext()
        props, items = rest.get("properties", {}), rest.get("items")
        closed = _never(rest.get("additionalProperties", True)) and not rest.get("patternProperties") \
            and isinstance(props, dict)
        uniform = isinstance(items, (dict, bool)) and "prefixItems" not in rest
        return typed.NegationContext(frozenset(props) if closed else None,
                               (lambda x: self.disjoint(items, x, stack, stack)) if uniform else None)

    def exclusive_negations(self, live: list, flats: list, t: str) -> list[list] | None:
        """For each live oneOf branch (index, its schema of type t, ptr, stack), the positive
        forms of the other branches' negations among values of type t (their typed parts) in its
        context; None where one has none."""
        out = []
        for k, m, _, bstack in live:
            ctx = self.negation_context(m, bstack)
            negs = [typed.complement_within(flats[j][0], t, ctx) for j, *_ in live if j != k]
            if any(n is None for n in negs):
                return None
            out.append(negs)
        return out

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
            elif (negations := self.exclusive_negations(live, flats, t)) is not None or t not in ("object", "array"):
                # exactly one: each branch without any of the others, then plain alternatives (a
                # scalar branch's negation is an automaton complement where no positive form is known)
                bound = _exclusive_alternatives(negations or [])
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
        va, vb = _values(a), _values(b)
        if va is not None and vb is not None and not ({_json_key(v) for v in va} & {_json_key(v) for v in vb}):
            return True
        if (va is not None and self.none_valid(va, b)) or (vb is not None and self.none_valid(vb, a)):
            return True
        return typed.disjoint(a, b, typed.Oracle(
            sub_disjoint=lambda x, y: self.disjoint(x, y, sa, sb, depth + 1),
            bounds=lambda node: self.bounds(node, ""),
            regex_disjoint=lambda t, x, y: self.regexes_disjoint(x, y, sa, sb)))

    def regexes_disjoint(self, a: dict, b: dict, sa, sb) -> bool:
        """True only if the regexes of a and b, each a superset of its schema (operand mode, no
        narrowing: schema.algebra.superset_regex), share no text."""
        ra, rb = self.superset_regex(a, "", sa), self.superset_regex(b, "", sb)
        if ra is None or rb is None:
            return False
        try:
            self.intersection([ra, rb], "")  # (None: over the size limits, unknown)
        except _Unsat:
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
        check, narrowed, dropped = None, len(self.narrowed), []
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
            if _json_key(v) in seen:
                continue
            # the check reads one text of the value; every text equal to it is kept (value_regex)
            if check is not None and not any(check.fullmatch(t) for t in value_texts(v)):
                dropped.append(v)
                continue
            seen.add(_json_key(v))
            kept.append(value_regex(v, self.tok))
        # the check's narrowings narrowed the schema only where they may have dropped a listed value
        self.narrowed[narrowed:] = cuts = [m for m in self.narrowed[narrowed:] if any(self._may_cut(m, v) for v in dropped)]
        if not kept and cuts:  # not unsatisfiable: the check cannot tell
            raise self.error("enum" if "enum" in node else "const", where, f"no listed value passes the other "
                             f"keywords' regex, which is narrowed ({cuts[0]}); jsonschema checks them exactly")
        if not kept:  # dropped exactly where the schema lets it be absent, an error elsewhere
            raise _Unsat(f"{'enum' if 'enum' in node else 'const'} at #{where}: no listed value satisfies "
                         "the rest of the schema")
        return kept

    def _may_cut(self, narrowing: str, value) -> bool:
        """Could the narrowing `narrowing` have dropped the listed value `value` (enum_texts's regex
        check)? A nesting cut keeps any_depth levels (any_value), the plain-decimal one every number
        written without an exponent; any other, conservatively, yes."""
        if NESTING_CUT in narrowing:
            return nesting_depth(value) > self.any_depth
        if EXPONENT_CUT in narrowing:
            return re.search(r"[0-9][eE]", dumps(value)) is not None
        return True

    def validated(self, node, values, where) -> list:
        """The listed values that validate against the whole subschema (jsonschema)."""
        if not self.resources.trivial and self.refs_outside_root(node, where):
            # jsonschema is handed the subschema alone: its references would resolve against the root
            self.refuse("enum" if "enum" in node else "const", where, "the listed values beside a $ref inside "
                        "an embedded resource ($id) or another document cannot be checked")
            return values
        name = self.values.unchecked_format(node, lambda holder: self.ref_target(holder, where)[0])
        if name is not None:
            self.refuse("format", where, f"jsonschema cannot check format {name!r} here (install "
                        "jsonschema[format-nongpl]), so the listed values cannot be checked")
            return values
        try:
            return self.values.kept(node, values)
        except ValueError as exc:
            self.refuse("enum" if "enum" in node else "const", where, str(exc))
            return values

    def refs_outside_root(self, node, where) -> bool:
        """Whether `node`, or a subschema it references, holds a $ref whose base is not the root's."""
        return any("$ref" in n and not self.resources.in_root_resource(n)
                   for n in reached(node, lambda holder: self.ref_target(holder, where)[0]))


def enum_siblings(node: dict) -> dict:
    """The keywords beside enum/const that constrain instances."""
    return {k: v for k, v in node.items() if k not in ("enum", "const") and k in _known_keywords()
            and k not in _ANNOTATIONS}


def _never(node) -> bool:
    """Does the schema admit no value, as far as its top shows (false; an allOf holding such a
    schema, as merging additionalProperties false with another leaves it)?"""
    return node is False or (isinstance(node, dict) and isinstance(node.get("allOf"), list)
                             and any(_never(b) for b in node["allOf"]))


def _exclusive_alternatives(negations: list[list]) -> int:
    """An upper bound on the alternatives that `each branch and not any other` distributes to:
    for each branch, the product over the others of the alternatives of their negation (in
    that branch's context: negations[k])."""
    total = 0
    for negs in negations:
        product = 1
        for n in negs:
            product *= _alternatives(n)
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
