"""The canonical text of an instance: what the compiled regex/grammar is complete on."""

from __future__ import annotations

import math

from inferlab.constrain.regex import fullmatch
from inferlab.constrain.schema.common import (SchemaError, _DEPENDENCY_KEYWORDS, _FAMILY_KEYWORDS, _Unsat, _child, _json_key,
                                              _plain_decimal, _values, dumps)
from inferlab.constrain.schema.refs import conditional_as_alternatives
from inferlab.constrain.schema.strings import _searches


# The rewritings one value may go through (a branch of anyOf/oneOf merged with the rest, if as
# alternatives, not as its positive form, dependencies as anyOf) before the walk gives up: a $ref
# cycle that passes through an allOf merge (unevaluatedProperties' guards carry the branch that
# refers back) is not counted by flatten's ref stack, and re-expanded without end, each level's
# merged schema larger (CI's slow fuzz: 22.9 GB before the kernel killed the process).
MAX_REWRITES = 64


class NoCanonicalText(Exception):
    """The walk passed MAX_REWRITES on one value: canonical_json falls back to the plain text."""


class CanonicalMixin:
    """The canonical text of an instance: what the compiled regex/grammar is complete on (mixed into _Compiler)."""

    def canonical(self, instance, node, ptr: str, stack: tuple = (), rewrites: int = 0) -> str:
        """rewrites: how many times this value's schema was rewritten (MAX_REWRITES)."""
        if rewrites > MAX_REWRITES:
            raise NoCanonicalText(f"more than {MAX_REWRITES} rewritings of the schema at #{ptr}")
        try:
            node, ptr, stack = self.flatten(node, ptr, stack)
        except _Unsat:
            return dumps(instance)
        if not isinstance(node, dict):
            return dumps(instance)
        if any(k in node for k in _DEPENDENCY_KEYWORDS):  # as the compiler reads them: their required keys' order
            return self.canonical(instance, self.dependencies_as_any_of(node, ptr), ptr, stack, rewrites + 1)
        if "if" in node:  # as compile_conditional reads it: (if and then) or (not if and else)
            return self.canonical(instance, conditional_as_alternatives(node), ptr, stack, rewrites + 1)
        if "not" in node:  # as compile_negated reads it: the positive form's order, else the rest's
            rest = {k: v for k, v in node.items() if k != "not"}
            try:
                neg = self.flatten(node["not"], _child(ptr, "not"), stack)[0]
                positive = self.without_not(rest, neg, ptr, stack)
            except (_Unsat, SchemaError):
                positive = None
            return self.canonical(instance, rest if positive is None else positive, ptr, stack, rewrites + 1)
        if "anyOf" in node or "oneOf" in node:
            key = "anyOf" if "anyOf" in node else "oneOf"
            rest = {k: v for k, v in node.items() if k != key}
            cands = []  # (text, merged, bptr, bstack) of the branches with a canonical text
            for k, branch in enumerate(node[key]):
                bptr = _child(ptr, key, k)
                try:
                    flat, _, bstack = self.flatten(branch, bptr, stack)
                    merged = self.merge(rest, flat, bptr, bstack) if rest else flat
                    cands.append((self.canonical(instance, merged, bptr, bstack, rewrites + 1), merged, bptr, bstack))
                except (_Unsat, SchemaError):
                    continue
            if len({c[0] for c in cands}) == 1:  # then that text is the answer, matched or not (no
                return cands[0][0]               # branch's regex needed: it may be too large to build)
            if self.values.available:  # the first branch the instance is valid against
                for text, merged, _, _ in cands:
                    try:
                        if self.values.kept(merged, [instance]):
                            return text
                    except ValueError:
                        break  # jsonschema cannot tell: by the branches' regexes
            fallback = None
            for text, merged, bptr, bstack in cands:
                try:
                    regex = self.compile(merged, bptr, bstack)
                except (_Unsat, SchemaError):
                    continue
                if fullmatch(regex, text):
                    return text
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
            schemas = [prefix[k] if k < len(prefix) else rest for k in range(len(instance))]
            j = self.contains_position(instance, node, ptr, stack)
            if j is not None:  # compile_contains: one item has the items' and contains' schema together
                try:
                    schemas[j] = self.merge(self.flatten(rest, ptr, stack)[0],
                                            self.flatten(node["contains"], ptr, stack)[0], ptr, stack)
                except (_Unsat, SchemaError):
                    pass  # (no grammar then: the text matters not)
            parts = [self.canonical(v, sub, ptr, stack) for v, sub in zip(instance, schemas)]
            return "[" + ",".join(parts) + "]"
        if isinstance(instance, float) and instance.is_integer() and self.integral_floats:
            # from draft-06 on 1.0 is the integer 1 in every respect (type, equality): written as the
            # integer, the one spelling every number grammar holds, the complements' universe too
            # (1.0 was rejected inside not/oneOf/if). Not in drafts 3-4, where 1.0 is no integer.
            return dumps(int(instance))
        if isinstance(instance, float) and math.isfinite(instance) and \
                (not instance.is_integer() or any(k in node for k in (*_FAMILY_KEYWORDS["number"], "not"))):
            # bounded numbers and complements are generated without exponents, and a branch of a
            # oneOf is one beside the others' complements (1e-05 is written 0.00001 wherever it is
            # no integer: every number grammar holds that spelling)
            return _plain_decimal(instance)
        return dumps(instance)

    def contains_position(self, instance: list, node: dict, ptr: str, stack) -> int | None:
        """The first item that satisfies `contains` (jsonschema), where contains is compiled as
        one position of items and contains together; None where there is none or no answer."""
        if "contains" not in node or "prefixItems" in node or isinstance(node.get("items"), list) \
                or not self.values.available:
            return None
        try:
            return next((j for j, v in enumerate(instance) if self.values.kept(node["contains"], [v])), None)
        except ValueError:
            return None
