"""$ref resolution and allOf merging; in stack mode, calls of automata compiled once."""

from __future__ import annotations

from inferlab.constrain.schema import typed
from inferlab.constrain.schema.common import (MAX_AUTOMATA, MAX_CONDITIONALS, SchemaError, SchemaTooLarge, _NOTHING, _Unsat, _child,
                                              _constraining, _intersect_types, _json_equal, _json_key,
                                              _known_keywords, _type_set, document_dicts)


# draft-03's own keywords and meanings, which its validators enforce: refused by name (never
# dropped, which would loosen the schema), as is its `time` format (HH:MM:SS, no offset)
DRAFT3_KEYWORDS = ("divisibleBy", "disallow", "extends")


_SCHEMA_KEYWORDS = ("not", "propertyNames", "additionalProperties", "additionalItems", "contains", "if", "then",
                    "else", "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
           "maxContains")


def check_shapes(node: dict, ptr: str, error, dialect: str | None) -> None:
    """A keyword whose value has the wrong shape is an error naming it (not a TypeError deep in
    the compiler): `type` a type name or a list of them, `required` a list of names, a schema
    a JSON object or a boolean (`items` also a list of them), a list or a map of schemas, a count
    a non-negative integer, `format` and `$schema` strings, `uniqueItems` a boolean, a bound or
    multipleOf not a boolean, `dependentRequired` an object of name arrays, an exclusive bound a
    number outside drafts 3-4 (there a boolean beside minimum/maximum; elsewhere jsonschema reads
    a boolean as 0 or 1)."""
    t = node.get("type")
    if t is not None and not (isinstance(t, str) or (isinstance(t, list) and all(isinstance(x, str) for x in t))):
        raise error("type", ptr, "must be a type name or an array of type names (a schema inside `type` is draft-03's)")
    r = node.get("required")
    if r is not None and not (isinstance(r, list) and all(isinstance(x, str) for x in r)):
        raise error("required", _child(ptr, "required"), "must be an array of property names "
                    "(a boolean `required` is draft-03's)")
    for k in _SCHEMA_KEYWORDS:
        if k in node and not _is_schema(node[k]):
            raise error(k, _child(ptr, k), "must be a schema (a JSON object or a boolean)")
    if "items" in node and not (_is_schema(node["items"]) or isinstance(node["items"], list)):
        raise error("items", _child(ptr, "items"), "must be a schema or an array of schemas")
    for k in _SCHEMA_LISTS:
        if k in node and not (isinstance(node[k], list) and all(_is_schema(x) for x in node[k])):
            raise error(k, _child(ptr, k), "must be an array of schemas")
    for k in _SCHEMA_MAPS:
        if k in node and not isinstance(node[k], dict):
            raise error(k, _child(ptr, k), "must be an object (of schemas)")
    for k in _COUNTS:
        v = node.get(k)
        if k in node and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == int(v)):
            raise error(k, _child(ptr, k), "must be a non-negative integer")
    if "format" in node and not isinstance(node["format"], str):
        raise error("format", _child(ptr, "format"), "must be a string")
    if "$schema" in node and not isinstance(node["$schema"], str):
        raise error("$schema", _child(ptr, "$schema"), "must be a URI string naming the draft")
    # a validator reads a truthy "yes" or 1 as uniqueItems on, and true as the number 1: never
    # guess which the author meant
    if "uniqueItems" in node and not isinstance(node["uniqueItems"], bool):
        raise error("uniqueItems", _child(ptr, "uniqueItems"), "must be true or false")
    for k in ("minimum", "maximum", "multipleOf"):
        if isinstance(node.get(k), bool):
            raise error(k, _child(ptr, k), "must be a number, not a boolean")
    dr = node.get("dependentRequired")
    if dr is not None and not (isinstance(dr, dict) and all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                                            for v in dr.values())):
        raise error("dependentRequired", _child(ptr, "dependentRequired"),
                    "must be an object of arrays of property names")
    if dialect not in ("draft-03", "draft-04"):
        for k in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(node.get(k), bool):
                raise error(k, _child(ptr, k), "a boolean is draft-04's (name that draft with $schema); "
                            f"in {dialect or 'the latest draft'} it must be a number")


def _is_schema(x) -> bool:
    return isinstance(x, (dict, bool))


def _both(x, y):
    """The schema of the instances of both x and y (allOf, or the one side where the other is true)."""
    return x if y is True else y if x is True else {"allOf": [x, y]}


def _effective(side):
    """A schema without the keywords that have no effect beside its others (then/else without
    if, additionalItems beside a schema-form or absent items, min/maxContains without contains,
    a draft-04 exclusive bound without its bound): merged, the other side's keyword would give
    them one."""
    if not isinstance(side, dict):
        return side
    idle = [k for k in ("then", "else") if k in side and "if" not in side]
    if "additionalItems" in side and not isinstance(side.get("items"), list):
        idle.append("additionalItems")
    idle += [k for k in ("minContains", "maxContains") if k in side and "contains" not in side]
    idle += [k for k, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum"))
             if isinstance(side.get(k), bool) and bound not in side]
    return {k: v for k, v in side.items() if k not in idle} if idle else side


def _merge_positions(out: dict, a: tuple, b: tuple, list_key: str, rest_key: str) -> None:
    """Arrays under allOf: each side a (schemas by position, schema past them); at each index
    both sides' schemas hold (past a side's list, its rest), and past both lists both rests."""
    (la, ra), (lb, rb) = a, b
    out[list_key] = [_both(la[i] if i < len(la) else ra, lb[i] if i < len(lb) else rb)
                     for i in range(max(len(la), len(lb)))]
    rest = _both(ra, rb)
    if rest is True:
        out.pop(rest_key, None)
    else:
        out[rest_key] = rest


def _merge_bound(out: dict, a: dict, b: dict, key: str) -> None:
    """Draft-04 bounds under allOf: the tighter of the two sides' (bound, exclusive) pairs; at an
    equal bound, exclusive where either side is."""
    bound, lower = ("minimum", True) if key == "exclusiveMinimum" else ("maximum", False)
    sides = [(side[bound], side.get(key) is True) for side in (a, b)
             if isinstance(side.get(bound), (int, float)) and not isinstance(side.get(bound), bool)]
    if not sides or any(not isinstance(side.get(key, False), bool) for side in (a, b)):
        return  # a numeric exclusive bound beside a boolean one: merge_keyword refused the pair
    value = max(v for v, _ in sides) if lower else min(v for v, _ in sides)
    out[bound] = value
    if any(excl for v, excl in sides if v == value):
        out[key] = True
    else:
        out.pop(key, None)


def _both_dependency(x, y):
    """dependencies / dependentRequired / dependentSchemas of one name under allOf: both (a list
    of names is the schema that requires them)."""
    if x is True or y is True:  # (the name is on one side only)
        return y if x is True else x
    if isinstance(x, list) and isinstance(y, list):
        return list(dict.fromkeys(x + y))
    return _both({"required": x} if isinstance(x, list) else x, {"required": y} if isinstance(y, list) else y)


def _names_of(props: dict, patterns: dict):
    """The property names an object with additionalProperties false admits, as a propertyNames
    schema: its declared names and the keys its patterns match."""
    names = [{"enum": list(props)}] if props else []
    names += [{"pattern": pat} for pat in patterns]
    return False if not names else names[0] if len(names) == 1 else {"anyOf": names}


class RefsMixin:
    """$ref resolution and allOf merging; in stack mode, calls of automata compiled once (mixed into _Compiler)."""

    def refuse_draft3(self, node: dict, ptr: str) -> dict:
        """A draft-03 document's own keywords (DRAFT3_KEYWORDS, a boolean `required`, schemas
        inside `type`, the `time` format) are refused by name: read as draft-04 they would be
        dropped, and its validators enforce them. Lenient: `node` without them, each listed."""
        drop = [(k, "a draft-03 keyword is not supported") for k in DRAFT3_KEYWORDS if k in node]
        if isinstance(node.get("required"), bool):
            drop.append(("required", "draft-03's boolean `required` is not supported"))
        t = node.get("type")
        if isinstance(t, list) and not all(isinstance(x, str) for x in t):
            drop.append(("type", "draft-03's schemas inside `type` are not supported"))
        if node.get("format") == "time":
            drop.append(("format", "draft-03's time (HH:MM:SS, no offset) is not supported"))
        for k, why in drop:
            self.refuse(k, _child(ptr, k), why)  # (raises unless lenient)
        return {k: v for k, v in node.items() if k not in dict(drop)} if drop else node

    def static_dynamic_ref(self, node: dict, ptr: str) -> dict:
        """node with its $dynamicRef / $recursiveRef as the $ref it stands for
        (Resources.dynamic_target: refused where that depends on the dynamic scope); beside a
        $ref of its own, under allOf."""
        key = "$dynamicRef" if "$dynamicRef" in node else "$recursiveRef"
        ref = self.resources.dynamic_target(node, ptr, self.error)
        rest = {k: v for k, v in node.items() if k != key}
        if "$ref" not in rest:
            return {**rest, "$ref": ref}
        return {**rest, "allOf": [*rest.get("allOf", []), {"$ref": ref}]}

    def ref_target(self, node: dict, ptr: str):
        """(target, its pointer) of node's $ref, resolved against node's base URI (schema.resources:
        $id, anchors, other documents from the registry); a document first reached here is read
        in the root's dialect, as the root's own nodes are."""
        known = len(self.resources.foreign)
        found = self.resources.resolve(node["$ref"], node, ptr, self.error)
        if self.not_in_dialect:
            for doc in self.resources.foreign[known:]:
                self.document |= document_dicts(doc)
        return found

    def flatten(self, node, ptr: str, stack: tuple):
        """Resolve $ref and merge allOf: -> (schema without $ref/allOf at top, ptr, stack)."""
        for _ in range(10_000):
            if isinstance(node, bool) or not isinstance(node, dict):
                if not isinstance(node, bool):
                    raise self.error("schema", ptr, f"a schema must be an object or a boolean, got {type(node).__name__}")
                return node, ptr, stack
            own = self.of_document(node)
            if own and self.dialect == "draft-03":
                node = self.refuse_draft3(node, ptr)
            if own and not self.not_in_dialect.isdisjoint(node):
                node = self.in_dialect(node, ptr)
            check_shapes(node, ptr, self.error, self.dialect)
            if "$dynamicRef" in node or "$recursiveRef" in node:
                node = self.static_dynamic_ref(node, ptr)
            if "unevaluatedProperties" in node or "unevaluatedItems" in node:
                node = self.without_unevaluated(node, ptr)  # (schema.evaluated)
            if "$ref" in node:
                target, tptr = self.ref_target(node, ptr)
                depth = stack.count(tptr) + 1
                if depth > self.max_ref_depth:
                    raise _Unsat(f"recursion through #{tptr} deeper than max_ref_depth={self.max_ref_depth}", cut=True)
                self.ref_depth = max(self.ref_depth, depth)
                self.recursive = self.recursive or depth > 1
                stack = stack + (tptr,)
                rest = {k: v for k, v in node.items() if k != "$ref"}
                if (self.old_draft and own) or not _constraining(rest):
                    node, ptr = target, tptr
                else:
                    node = self.merge(self.flatten(target, tptr, stack)[0], rest, ptr, stack)
                continue
            if "allOf" in node:
                branches = node["allOf"]
                if not isinstance(branches, list) or not branches:
                    raise self.error("allOf", ptr, "must be a non-empty array")
                conditionals = sum(isinstance(b, dict) and "if" in b for b in branches) + ("if" in node)
                if conditionals > MAX_CONDITIONALS:
                    node = self.exclusive_conditionals(node, ptr, stack, conditionals)
                    continue
                merged = {k: v for k, v in node.items() if k != "allOf"}
                for k, branch in enumerate(branches):
                    flat, _, _ = self.flatten(branch, _child(ptr, "allOf", k), stack)
                    merged = self.merge(merged, flat, _child(ptr, "allOf", k), stack)
                node = merged
                continue
            return node, ptr, stack
        raise self.error("$ref", ptr, "reference cycle without any schema in between")

    def exclusive_conditionals(self, node, ptr: str, stack: tuple, n: int) -> dict:
        """allOf with more than MAX_CONDITIONALS if/then/else whose `if`s, each beside the rest,
        no instance satisfies two of: one alternative per `if` (it, its then, the others' elses)
        and one where none holds (every `not if`, every else), n + 1 instead of 2^n. Exact;
        otherwise SchemaTooLarge."""
        conds = [(node["if"], node.get("then", True), node.get("else", True))] if "if" in node else []
        rest = {k: v for k, v in node.items() if k not in ("allOf", "if", "then", "else")}
        for k, branch in enumerate(node["allOf"]):
            bptr = _child(ptr, "allOf", k)
            flat, _, _ = self.flatten(branch, bptr, stack)
            if isinstance(flat, dict) and "if" in flat:
                conds.append((flat["if"], flat.get("then", True), flat.get("else", True)))
                flat = {key: v for key, v in flat.items() if key not in ("if", "then", "else")}
            rest = self.merge(rest, flat, bptr, stack)
        live = []
        for cond in conds:
            try:
                live.append(self.merge(rest, self.flatten(cond[0], ptr, stack)[0], ptr, stack))
            except _Unsat:
                continue  # never true beside the rest: the else applies (in every alternative)
        if any(not self.disjoint(a, b, stack, stack) for i, a in enumerate(live) for b in live[i + 1:]):
            raise SchemaTooLarge(f"if at #{_child(ptr, 'allOf')}: {n} conditionals under one allOf whose conditions "
                                 f"are not provably exclusive (each doubles the alternatives; at most {MAX_CONDITIONALS})")
        alts = [{"allOf": [c[0], c[1], *(d[2] for d in conds if d is not c)]} for c in conds]
        alts.append({"allOf": [*({"not": c[0]} for c in conds), *(c[2] for c in conds)]})
        if "anyOf" in rest:
            return {**{k: v for k, v in rest.items() if k != "anyOf"}, "allOf": [{"anyOf": rest["anyOf"]}, {"anyOf": alts}]}
        return {**rest, "anyOf": alts}

    def merge(self, a, b, ptr: str, stack: tuple):
        """The schema whose instances are those of both a and b (exact), or SchemaError."""
        if a is False or b is False:
            raise _Unsat(f"false schema in allOf at #{ptr}")
        if a is True:
            return b if isinstance(b, dict) else {}
        if b is True:
            return a
        a, b = _effective(a), _effective(b)
        if "if" in a and "if" in b and not all(_json_equal(a.get(k), b.get(k)) for k in ("if", "then", "else")):
            b = conditional_as_alternatives(b)  # two conditionals: the second one as an anyOf
        out = dict(a)
        for key, bv in b.items():
            if key not in out:
                out[key] = bv
                continue
            av = out[key]
            if _json_equal(av, bv):
                continue
            out[key] = self.merge_keyword(key, av, bv, a, b, ptr)
        if any(k in side for k in ("properties", "additionalProperties", "patternProperties") for side in (a, b)):
            self.merge_objects(out, a, b, ptr)
        if "prefixItems" in a or "prefixItems" in b:
            self.merge_prefixes(out, a, b, ptr)
        elif isinstance(a.get("items"), list) or isinstance(b.get("items"), list):
            self.merge_tuples(out, a, b)
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(a.get(key), bool) or isinstance(b.get(key), bool):
                _merge_bound(out, a, b, key)
        if "contains" in a and "contains" in b and ("minContains" in a or "minContains" in b) and \
                all(isinstance(side.get("minContains", 1), int) for side in (a, b)):
            # (the contains of both, equal here: a side without minContains asks for one match)
            out["minContains"] = max(a.get("minContains", 1), b.get("minContains", 1))
        return out

    def merge_tuples(self, out, a, b) -> None:
        """The tuple form of items (drafts 4-2019) under allOf, position by position: past a
        side's own list, its additionalItems holds (a schema-form items holds everywhere)."""
        sides = []
        for side in (a, b):
            items = side.get("items", True)
            sides.append((items, side.get("additionalItems", True)) if isinstance(items, list) else ([], items))
        _merge_positions(out, *sides, "items", "additionalItems")

    def merge_prefixes(self, out, a, b, ptr: str) -> None:
        """prefixItems under allOf: a side's `items` holds at every index past its own prefix, so
        also inside the other side's longer prefix (merging `items` alone would leave those
        elements to the other side's prefix only)."""
        sides = []
        for side in (a, b):
            rest = side.get("items", True)
            if isinstance(rest, list):
                # the tuple form beside prefixItems (schema.evaluated writes unevaluatedItems as
                # prefixItems in any dialect): the same positions, its additionalItems past them
                sides.append((rest, side.get("additionalItems", True)))
            else:
                sides.append((side.get("prefixItems", []), rest))
        if not all(isinstance(prefix, list) for prefix, _ in sides):
            raise self.error("prefixItems", ptr, "must be an array")
        out.pop("additionalItems", None)  # (the merged rest is `items`, in prefixItems form)
        _merge_positions(out, *sides, "prefixItems", "items")

    def merge_objects(self, out, a, b, ptr: str) -> None:
        """properties, patternProperties and additionalProperties under allOf, exactly: a key meets
        each side's rule for it. A side's rule for a key: its declared schema and the schemas of
        every pattern of its own that matches the key (searched with Python's re, as jsonschema
        and compile_object do), and its additionalProperties where it declares the key nowhere.

        - a name declared on one side meets the other side's additionalProperties only where no
          pattern of the other side matches it (the merged patterns apply to it as well);
        - a pattern of both sides gets both schemas; a pattern of one side gets, beside its own,
          the other side's additionalProperties (where that is false: propertyNames, the other
          side's declared names and patterns, exact): exact for every key no pattern of the other side
          also matches. A key that patterns of both sides match gets more than it must there; such
          keys match several merged patterns, and compile_object never writes those as extra keys
          (its recorded narrowing); a declared or required name that is such a key, or that the
          other side declares, is recorded here (a narrowing: sound, that name gets more);
        - a key that no pattern matches and neither side declares meets both additionalProperties."""
        pa, pb = a.get("properties", {}), b.get("properties", {})
        qa, qb = a.get("patternProperties") or {}, b.get("patternProperties") or {}
        for where, value in (("properties", pa), ("properties", pb), ("patternProperties", qa), ("patternProperties", qb)):
            if not isinstance(value, dict):
                raise self.error(where, _child(ptr, where), "must be an object")
        xa, xb = a.get("additionalProperties", True), b.get("additionalProperties", True)
        ca = self.check_patterns(qa, ptr) if qa else []
        cb = self.check_patterns(qb, ptr) if qb else []

        def rule(props, compiled, extra, name):  # what a side asks of a name it may not declare
            if name in props:
                return props[name]
            return True if any(c.search(name) for c in compiled) else extra

        props = {name: _both(rule(pa, ca, xa, name), rule(pb, cb, xb, name))
                 for name in list(pa) + [n for n in pb if n not in pa]}
        if props or "properties" in out:
            out["properties"] = props
        if "additionalProperties" in a or "additionalProperties" in b:
            out["additionalProperties"] = _both(xa, xb)
        if qa or qb:
            names = list(props) + [n for n in out.get("required", []) if isinstance(n, str) and n not in props]
            sides = ((qa, ca, qb, cb, pb, xb), (qb, cb, qa, ca, pa, xa))
            for name in names:
                # one side's own pattern carries the other's additionalProperties, which that side
                # does not apply to a name it declares or matches itself
                if any(x is not True and x is not False and (name in theirs or any(c.search(name) for c in cother))
                       and any(c.search(name) for pat, c in zip(mine, cmine) if pat not in other)
                       for mine, cmine, other, cother, theirs, x in sides):
                    self.narrow(f"patternProperties at #{ptr}: {name!r} matches a pattern of one allOf branch and "
                                "is declared or matched by the other, whose additionalProperties it must meet too")
                    break
            if any(x is not True and x is not False and any(p not in other for p in mine) and
                   any(p not in mine for p in other) for mine, other, x in ((qa, qb, xb), (qb, qa, xa))):
                # an extra key that a pattern of each side matches gets both merged patterns'
                # schemas (compile_object), each with the other side's additionalProperties
                self.narrow(f"patternProperties at #{ptr}: a key that patterns of both allOf branches match must "
                            "meet their additionalProperties too (stricter)")
            merged = {}
            for pat in list(qa) + [p for p in qb if p not in qa]:
                # additionalProperties false is a side's names: propertyNames below, exact
                sa = qa[pat] if pat in qa else True if xa is False else xa
                sb = qb[pat] if pat in qb else True if xb is False else xb
                merged[pat] = _both(sa, sb)
            out["patternProperties"] = merged
            for props_o, q_o, x_o, q_s in ((pa, qa, xa, qb), (pb, qb, xb, qa)):
                if x_o is False and any(pat not in q_o for pat in q_s):
                    out["propertyNames"] = _both(out.get("propertyNames", True), _names_of(props_o, q_o))

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
        if key in ("properties", "additionalProperties", "patternProperties", "prefixItems"):
            return av  # merge_objects and merge_prefixes rewrite these
        if key in ("items", "additionalItems") and isinstance(av, (dict, bool)) and isinstance(bv, (dict, bool)):
            return {"allOf": [av, bv]}
        if (key == "items" and (isinstance(av, list) or isinstance(bv, list))) or \
                (key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(av, bool) and isinstance(bv, bool)):
            return av  # merge_tuples and _merge_bound rewrite these (tuples, draft-04 booleans)
        if key == "propertyNames":
            return _both(av, bv)
        if key == "uniqueItems" and isinstance(av, bool) and isinstance(bv, bool):
            return av or bv
        if key in ("dependentRequired", "dependentSchemas", "dependencies") and isinstance(av, dict) \
                and isinstance(bv, dict):
            return {name: _both_dependency(av.get(name, True), bv.get(name, True)) for name in {**av, **bv}}
        if key == "enum":
            keys = {_json_key(v) for v in bv}
            return [v for v in av if _json_key(v) in keys]
        if key == "const":
            raise _Unsat(f"allOf at #{ptr}: different const values")
        if key == "pattern" and isinstance(av, str) and isinstance(bv, str):  # both, as lookaheads (exact)
            try:
                both = typed.pattern_conjunction(av, bv)
            except SchemaError as exc:
                both, why = None, str(exc)
            else:
                why = "a pattern with lookaheads of its own"
            if both is None:
                self.refuse("pattern", _child(ptr, "pattern"), f"allOf of two patterns: {why} cannot be intersected")
                return av
            return both
        if key == "multipleOf":  # the multiples of both: of their least common multiple (exact)
            both = typed.multiple_of(av, bv)
            if both is None:
                self.refuse("multipleOf", _child(ptr, "multipleOf"), f"allOf of multipleOf {av} and {bv}: their "
                            "common multiples are not a multipleOf that can be written exactly")
                return av
            return both
        if key == "not":
            return {"anyOf": [av, bv]}  # not a and not b == not (a or b)
        if key in ("anyOf", "oneOf"):
            # A and (x1 | x2 ...) == (A and x1) | (A and x2) ...: a's branches each carry b's list
            return [{"allOf": [x, {key: bv}]} for x in av]
        if key in ("title", "description", "default", "examples", "$comment", "$id", "$schema",
                   "$defs", "definitions", "deprecated", "readOnly", "writeOnly"):
            return av
        if key not in _known_keywords():
            return av  # unknown keywords are annotations
        self.refuse(key, _child(ptr, key), f"allOf: cannot merge two different {key!r} values")
        return av

    def calls_on(self) -> bool:
        return self.stack_mode and not self.inline

    def call_ref(self, node, ptr: str) -> str | None:
        """Stack mode: a $ref whose siblings do not constrain, as a call of its target's
        automaton (compiled once, on first use; recursion is then exact, with no depth cap)."""
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if not ((self.old_draft and self.of_document(node)) or not _constraining(rest)):
            return None
        if "$dynamicRef" in rest or "$recursiveRef" in rest:
            return None  # (flatten reads it first)
        target, tptr = self.ref_target(node, ptr)
        if tptr in self.unsat_refs:
            raise self.unsat_refs[tptr]
        k = self.ref_automaton.get(tptr)
        if k is None:
            k = self.ref_automaton[tptr] = self.new_automaton()
            self.sources[k] = tptr
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
            raise SchemaTooLarge(f"automata at #{self.where[-1]}: the grammar needs more than {MAX_AUTOMATA:,} "
                                 "automata here")
        self.automata.append(_NOTHING)
        self.sources.append(self.where[-1])
        return len(self.automata) - 1

    def counted(self, item: str, lo: int, hi: int) -> str:
        """Stack mode: item{lo,hi} with a large hi as a call of a counted automaton: its frame
        counts the items (exact; the DFA would need a state per count). `item` must be one
        non-empty unit whose DFA never re-enters its start state (one character)."""
        return self._marked(f"{lo},{hi}:{item}", item, self.counts, (lo, hi))

    def bounded(self, regex: str, lo: int, hi: int | None) -> str:
        """Stack mode: a string's regex (quotes included) whose content holds lo to hi characters,
        as a call of an automaton of its own whose DFA counts them (schema.algebra.bounded_dfa;
        the caller has checked it builds)."""
        return self._marked(f"length {lo},{hi}:{regex}", regex, self.lengths, (lo, hi))

    def _marked(self, key: str, regex: str, table: dict, mark: tuple) -> str:
        """A call of the automaton of `regex` that `table` marks with `mark` (what its frame or
        its DFA counts), one per key."""
        k = self.outlined.get(key)
        if k is None:
            k = self.outlined[key] = self.new_automaton()
            self.automata[k] = regex
            table[k] = mark
        return f"(?&{k})"

    def outline(self, regex: str, *, force: bool = False, table: dict | None = None) -> str:
        """Stack mode: a big regex as a call of its own automaton (one per distinct text, shared
        through `table`, self.outlined by default); an empty or short one stays inline unless
        `force`."""
        if not regex or (not force and len(regex) <= self.outline_chars):
            return regex
        table = self.outlined if table is None else table
        k = table.get(regex)
        if k is None:
            k = table[regex] = self.new_automaton()
            self.automata[k] = regex
        return f"(?&{k})"



def conditional_as_alternatives(node: dict) -> dict:
    """{if, then, else, ...rest} -> {...rest, anyOf: [(if and then), (not if and else)]}, for
    merging with another conditional (allOf of several if/then/else)."""
    rest = {k: v for k, v in node.items() if k not in ("if", "then", "else")}
    cond = node["if"]
    branches = [{"allOf": [cond, node.get("then", True)]}, {"allOf": [{"not": cond}, node.get("else", True)]}]
    if "anyOf" in rest:
        return {**{k: v for k, v in rest.items() if k != "anyOf"},
                "allOf": [{"anyOf": rest["anyOf"]}, {"anyOf": branches}]}
    return {**rest, "anyOf": branches}
