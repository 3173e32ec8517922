"""unevaluatedProperties and unevaluatedItems, rewritten as the keywords they stand for.

A property (an item) is evaluated by the schema that holds the keyword, at the same instance
location, where `properties`, `patternProperties`, `additionalProperties` (`prefixItems`, `items`,
`additionalItems`) or a nested `unevaluated*` of an in-place applicator that the instance passes
looks at it: `allOf` and `$ref` always apply, `anyOf`/`oneOf` branches and `dependentSchemas`
where they validate, `if` where it validates (with `then`), `else` where it does not; `not`
contributes nothing. So a schema is an alternation of cases, each a conjunction of guards (the
branches taken) with a fixed set of evaluated names and patterns (a count of evaluated items):

    S and unevaluatedProperties U == S and anyOf(case: guards and
        {properties: {name: true ...}, patternProperties: {pattern: true ...}, additionalProperties: U})

(and with items, {prefixItems: [true] * n, items: U}). The cases of `oneOf`, `if`/`else` and
`dependentSchemas` are disjoint, and so exact; `anyOf` is every non-empty set of its branches
(each set's evaluated names their union), or past MAX_CASES one branch at a time (a subset of the
valid instances: a narrowing, recorded where the branches' sets differ). `contains` evaluates the
items that match it: past the evaluated prefix, an item is then `unevaluatedItems` or one of the
case's contains schemas. A scope-dependent `$dynamicRef` and more than MAX_CASES cases are
refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from inferlab.constrain.schema.common import _TYPES, _child

MAX_CASES = 16  # cases (branch choices) of one unevaluated* keyword: each is compiled


@dataclass(frozen=True)
class Case:
    guards: tuple = ()            # subschemas the instance passes in this case
    names: frozenset = frozenset()  # evaluated property names
    patterns: frozenset = frozenset()  # evaluated patternProperties patterns
    items: int = 0                # evaluated leading items
    everything: bool = False      # every property (item) is evaluated
    contains: tuple = ()          # contains schemas: the items each matches are evaluated

    def join(self, other: Case) -> Case:
        return Case(self.guards + other.guards, self.names | other.names, self.patterns | other.patterns,
                    max(self.items, other.items), self.everything or other.everything, self.contains + other.contains)

    def evaluates(self) -> tuple:
        """What the case evaluates, hashable (contains schemas by identity)."""
        return self.names, self.patterns, self.items, self.everything, tuple(map(id, self.contains))

    def guarded(self, guard) -> Case:
        return Case((guard,) + self.guards, self.names, self.patterns, self.items, self.everything, self.contains)


class EvaluatedMixin:
    """unevaluatedProperties / unevaluatedItems as positive keywords (mixed into _Compiler)."""

    def without_unevaluated(self, node: dict, ptr: str) -> dict:
        """node with its unevaluated* rewritten (module docstring); SchemaError where refused."""
        for key in ("unevaluatedProperties", "unevaluatedItems"):
            if key in node:
                node = self._rewrite(node, key, ptr)
        return node

    def _rewrite(self, node: dict, key: str, ptr: str) -> dict:
        u = node[key]
        rest = {k: v for k, v in node.items() if k != key}
        items = key == "unevaluatedItems"
        where = _child(ptr, key)
        if u is True:
            return rest
        self._any_of_cases = False
        cases = self._cases(rest, items, where, ptr, frozenset())
        extra = []
        for case in cases:
            part = {} if case.everything else self._evaluated_part(case, u, items)
            extra.append({**part, "allOf": list(case.guards)} if case.guards else part)
        if all(not part for part in extra):
            return rest
        if len({c.evaluates() for c in cases}) > 1 and self._any_of_cases:
            self.narrow(f"{key} at #{ptr} beside anyOf: an instance valid against several branches has one "
                        "branch's evaluated set at a time (a subset)")
        # the keyword constrains objects (arrays) alone: an instance of another type passes it
        # whatever cases its branches take (the cases kept are those an object can take)
        others = {"type": [t for t in _TYPES if t != ("array" if items else "object")]}
        tail = {"anyOf": [others, *extra]}
        return {**rest, "allOf": [*rest.get("allOf", []), tail]}

    def _evaluated_part(self, case: Case, u, items: bool) -> dict:
        if not items:
            part = {"additionalProperties": u}
            if case.names:
                part["properties"] = {n: True for n in sorted(case.names)}
            if case.patterns:
                part["patternProperties"] = {p: True for p in sorted(case.patterns)}
            return part
        # (a tuple-form items beside it is merged position by position: refs._merge_positions)
        # an item that a contains in effect matches is evaluated by it (its annotation: in a case,
        # each contains holds, minContains 0 included)
        rest = {"anyOf": [u, *case.contains]} if case.contains else u
        return {"prefixItems": [True] * case.items, "items": rest} if case.items else {"items": rest}

    def _cases(self, node, items: bool, where: str, ptr: str, seen: frozenset) -> list[Case]:
        """The cases of `node` (module docstring): guards and what each evaluates."""
        if node is False:
            return []
        if not isinstance(node, dict):
            return [Case()]
        if id(node) in seen:  # an in-place $ref cycle: what it evaluates is counted already
            return [Case()]
        seen = seen | {id(node)}
        if self.of_document(node) and not self.not_in_dialect.isdisjoint(node):
            node = self.in_dialect(node, ptr)
        if "$dynamicRef" in node or "$recursiveRef" in node:
            key = "$dynamicRef" if "$dynamicRef" in node else "$recursiveRef"
            self.refuse(key, _child(ptr, key), f"{key} beside or under unevaluated* is not supported")
        if items:
            tuple_form = isinstance(node.get("items"), list)
            own = Case(items=len(node["items"]) if tuple_form else len(node.get("prefixItems", [])),
                       everything=("items" in node and not tuple_form) or (tuple_form and "additionalItems" in node)
                       or "unevaluatedItems" in node,  # (additionalItems without a tuple is ignored)
                       contains=(node["contains"],) if "contains" in node else ())
        else:
            own = Case(names=frozenset(node.get("properties", {})), patterns=frozenset(node.get("patternProperties", {})),
                       everything="additionalProperties" in node or "unevaluatedProperties" in node)
        cases = [own]
        for k, branch in enumerate(node.get("allOf", [])):
            cases = self._product(cases, self._cases(branch, items, where, _child(ptr, "allOf", k), seen), where)
        if "$ref" in node:
            target, tptr = self.ref_target(node, ptr)
            cases = self._product(cases, self._cases(target, items, where, tptr, seen), where)
        if "oneOf" in node:  # exactly one branch passes: its cases
            cases = self._product(cases, [c.guarded(b) for k, b in enumerate(node["oneOf"])
                                          for c in self._cases(b, items, where, _child(ptr, "oneOf", k), seen)], where)
        if "anyOf" in node:
            branches = [[c.guarded(b) for c in self._cases(b, items, where, _child(ptr, "anyOf", k), seen)]
                        for k, b in enumerate(node["anyOf"])]
            cases = self._product(cases, self._any_of(branches, where), where)
        if "if" in node:
            cond = node["if"]
            yes = [c.guarded(cond) for c in self._product(
                self._cases(cond, items, where, _child(ptr, "if"), seen),
                self._cases(node.get("then", True), items, where, _child(ptr, "then"), seen), where)]
            no = [c.guarded({"not": cond}) for c in self._cases(node.get("else", True), items, where,
                                                                 _child(ptr, "else"), seen)]
            cases = self._product(cases, yes + no, where)
        for name, sub in (node.get("dependentSchemas") or {}).items():
            taken = [c.guarded({"required": [name]}) for c in self._cases(sub, items, where,
                                                                          _child(ptr, "dependentSchemas", name), seen)]
            cases = self._product(cases, [Case(guards=({"not": {"required": [name]}},))] + taken, where)
        return cases

    def _any_of(self, branches: list[list[Case]], where: str) -> list[Case]:
        """The cases of anyOf: the branches that pass are any non-empty set of them, and each set's
        evaluated names are their union. Sets that evaluate the same are one case whose guard is
        their disjunction (a set whose guards include another's adds nothing to it: left out; two
        sets that do not, such as two branches that evaluate nothing, both stay). Past MAX_CASES
        sets, one branch at a time (a subset, recorded by the caller)."""
        n = len(branches)
        if 2 ** n - 1 > MAX_CASES:
            self._any_of_cases = True
            return [c for cases in branches for c in cases]
        same: dict = {}  # what is evaluated -> the cases that evaluate it
        for mask in range(1, 2 ** n):
            chosen = [branches[i] for i in range(n) if mask >> i & 1]
            combos = [Case()]
            for cases in chosen:
                combos = self._product(combos, cases, where)
            for c in combos:
                same.setdefault(c.evaluates(), []).append(c)
        return [_either(cases) for cases in same.values()]

    def _product(self, left: list[Case], right: list[Case], where: str) -> list[Case]:
        out = [a.join(b) for a in left for b in right]
        if len(out) > MAX_CASES:
            key = where.rsplit("/", 1)[-1]
            self.refuse(key, where, f"the applicators beside it make more than {MAX_CASES} cases of what is "
                        "evaluated")
            return out[:1]
        return out


def _either(cases: list[Case]) -> Case:
    """One case for cases that evaluate the same: guarded by any of their guards. A case whose
    guards hold another's (by identity) implies it, so it is dropped; one left keeps its guards."""
    ids = [frozenset(map(id, c.guards)) for c in cases]
    # dropped: a case with another's guards and more (or the same guards as an earlier one)
    kept = [c for i, c in enumerate(cases)
            if not any(ids[j] < ids[i] or (ids[j] == ids[i] and j < i) for j in range(len(cases)))]
    if len(kept) == 1:
        return kept[0]
    return replace(kept[0], guards=({"anyOf": [{"allOf": list(c.guards)} for c in kept]},))
