"""Arrays: prefixItems/items, minItems/maxItems, uniqueItems."""

from __future__ import annotations

import math
import re

from inferlab.constrain import keys
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.schema.combinators import enum_siblings
from inferlab.constrain.schema.common import (_NOTHING, _Unsat, _child, _generated_types, _group, _known_keywords,
                                              _repeat)
from inferlab.errors import InferlabError

MAX_UNIQUE_AUTOMATA = 400  # uniqueItems over listed values: an automaton per subset written (9 values: 381)
INLINE_VALUES = 3  # ... but the subsets with at most this many values left are inline text
MAX_CONTAINS_BOUND = 16  # contains beside min/maxItems: an alternative per position of the first such item

_CALL = re.compile(r"\(\?&(\d+)\)")
COUNTED_ITEM_STATES = 4_000  # an array item counted by its frame (repeated_items): its DFA's bound
INLINE_CALLS = 32  # nested calls an item of unique strings is inlined through


def _counts(item: str) -> bool:
    """Can a counted frame run `item`: its DFA builds within COUNTED_ITEM_STATES and never
    re-enters its start state (StackMachine refuses such a counted automaton: optional
    whitespace before the comma loops on the start)?"""
    try:
        dfa = compile_regex(item, max_states=COUNTED_ITEM_STATES)
    except InferlabError:
        return False
    return not (dfa.trans == dfa.start).any()


class _NotText(Exception):
    """An item's call that inlined() cannot replace by text."""


class ArraysMixin:
    """Arrays: prefixItems/items, minItems/maxItems, uniqueItems (mixed into _Compiler)."""

    def compile_array(self, node, ptr, stack) -> str:
        lo = node.get("minItems", 0)
        hi = node.get("maxItems")
        if hi is not None and hi < lo:
            raise _Unsat(f"maxItems at #{_child(ptr, 'maxItems')}: maxItems {hi} < minItems {lo}: no array is valid")
        if "contains" in node:
            return self.compile_contains(node, ptr, stack)
        unique = node.get("uniqueItems") is True and not (hi is not None and hi <= 1)
        if unique and self.calls_on() and "prefixItems" not in node and not isinstance(node.get("items"), list):
            texts = self.finite_items(node.get("items", True), _child(ptr, "items"), stack)
            if texts is not None:
                return self.distinct_sequences(texts, lo, hi, ptr)
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
        out = f"{self.tok('[')}{body}{self.tok(']')}"
        if unique:
            items = prefix[:len(prefix_rx)] + ([rest] if rest_rx is not None else [])
            why = self.unique_strings_refusal(items, prefix_rx + ([rest_rx] if rest_rx is not None else []), stack)
            if why is not None:
                self.refuse("uniqueItems", _child(ptr, "uniqueItems"), why)
                return out
            return self.outline(out, force=True, table=self.uniques)
        return out

    def compile_contains(self, node, ptr, stack) -> str:
        """contains: at least one item valid against it. With I the items' regex and K that of
        the items and contains together, the arrays whose first K item is item j, for each j the
        bounds allow: `(I,){j}K(,I){...}` (exact); without maxItems the last j open-ended. Beside
        items and min/maxItems up to MAX_CONTAINS_BOUND; with prefixItems or uniqueItems an error
        (lenient: contains left out)."""
        where = _child(ptr, "contains")
        if "minContains" in node or "maxContains" in node:
            return self.counted_contains(node, ptr, stack)
        rest = {k: v for k, v in node.items() if k != "contains"}
        lo, hi = max(int(rest.get("minItems", 0)), 1), rest.get("maxItems")
        if rest.get("uniqueItems") is True or "prefixItems" in rest or isinstance(rest.get("items"), list) \
                or max(lo, hi or 0) > MAX_CONTAINS_BOUND:
            self.refuse("contains", where, "contains is supported beside items and min/maxItems up to "
                        f"{MAX_CONTAINS_BOUND} only (not prefixItems or uniqueItems)")
            return self.compile_array(rest, ptr, stack)
        if hi is not None and hi < lo:
            raise _Unsat(f"contains at #{where}: maxItems {hi} leaves no room for an item")
        items, items_ptr = rest.get("items", True), _child(ptr, "items")
        try:
            flat, _, fstack = self.flatten(node["contains"], where, stack)
            both = self.merge(self.flatten(items, items_ptr, stack)[0], flat, where, fstack)
            first = self.compile(both, where, fstack)
        except _Unsat as exc:
            raise _Unsat(f"contains at #{where}: no item can satisfy it ({exc})", cut=exc.cut) from None
        any_item = self.compile(items, items_ptr, stack) if items is not True else self.any_value(items_ptr)
        comma = self.tok(",")
        alts = [_repeat(any_item + comma, j, j) + first + _repeat(comma + any_item, max(lo - 1 - j, 0),
                                                                   None if hi is None else hi - 1 - j)
                for j in range(hi if hi is not None else lo - 1)]
        if hi is None:
            alts.append(_repeat(any_item + comma, lo - 1, None) + first + _repeat(comma + any_item, 0, None))
        return f"{self.tok('[')}{_group(alts)}{self.tok(']')}"

    def counted_contains(self, node, ptr, stack) -> str:
        """contains with minContains a / maxContains b: between a and b items valid against it
        (2019-09 on). With K the items that satisfy it and N those that do not (items and not
        contains: the negation's own rules, refused where it has none), the arrays are
        `(N,)* K (,N)* (,K (,N)*){a-1,b-1}`, and where a is 0 also those of N alone (empty
        included): exact. Beside min/maxItems, uniqueItems or a tuple of items: an error."""
        a, b = node.get("minContains", 1), node.get("maxContains")
        a, b = int(a), (None if b is None else int(b))
        for key in ("minItems", "maxItems", "uniqueItems", "prefixItems"):
            if key in node or isinstance(node.get("items"), list):
                key = key if key in node else "items"
                self.refuse("minContains" if "minContains" in node else "maxContains", ptr,
                            f"minContains/maxContains beside {key} is not supported")
                return self.compile_array({k: v for k, v in node.items() if k not in ("contains", "minContains",
                                                                                   "maxContains")}, ptr, stack)
        if b is not None and b < a:
            raise _Unsat(f"maxContains at #{_child(ptr, 'maxContains')}: maxContains {b} < minContains {a}")
        where, items, items_ptr = _child(ptr, "contains"), node.get("items", True), _child(ptr, "items")
        try:
            flat, _, fstack = self.flatten(node["contains"], where, stack)
            yes = self.compile(self.merge(self.flatten(items, items_ptr, stack)[0], flat, where, fstack), where, fstack)
        except _Unsat as exc:
            self.note_cut(exc)
            yes = None
        try:
            no = self.compile({"allOf": [items, {"not": node["contains"]}]}, where, stack)
        except _Unsat as exc:
            self.note_cut(exc)
            no = None
        comma = self.tok(",")
        alts = []
        if a == 0 and no is not None:  # none satisfies contains: N items alone, or none
            alts.append(f"(?:{no}{_repeat(comma + no, 0, None)})?")
        elif a == 0:
            alts.append("")
        if yes is not None and (b is None or b >= 1):
            others = "" if no is None else _repeat(comma + no, 0, None)
            lead = "" if no is None else _repeat(no + comma, 0, None)
            alts.append(f"{lead}{yes}{others}{_repeat(comma + yes + others, max(a - 1, 0), None if b is None else b - 1)}")
        if not alts:
            raise _Unsat(f"contains at #{where}: no item can satisfy it, and minContains is {a}")
        return f"{self.tok('[')}{_group(alts)}{self.tok(']')}"

    def finite_items(self, items, ptr, stack) -> list[str] | None:
        """The regexes of the values of an items schema that lists them (enum/const, booleans,
        null), one per distinct value, or None."""
        try:
            flat = self.flatten(items, ptr, stack)[0]
        except _Unsat:
            return None
        if not isinstance(flat, dict):
            return None
        if "enum" in flat or "const" in flat:
            if not (self.values.available or set(enum_siblings(flat)) <= {"type"}):
                return None
            try:
                return self.enum_texts(flat, ptr, stack)
            except _Unsat:
                return None
        if set(flat) & _known_keywords() == {"type"} and flat["type"] in ("boolean", "null"):
            return ["true", "false"] if flat["type"] == "boolean" else ["null"]
        return None

    def distinct_sequences(self, texts: list[str], lo: int, hi: int | None, ptr: str) -> str:
        """Stack mode: an array of distinct values from a finite list (uniqueItems), exact: one
        automaton per set of values written (inline where few values are left), calling the
        next set's after each value."""
        n = len(texts)
        top = n if hi is None else min(n, hi)
        automata = sum(math.comb(n, k) for k in range(1, top - INLINE_VALUES))  # the subsets with more left than inline
        if automata > MAX_UNIQUE_AUTOMATA:
            self.refuse("uniqueItems", _child(ptr, "uniqueItems"), f"uniqueItems over {n} listed values"
                        f"{'' if hi is None else f' (maxItems {hi})'}: {automata:,} sets of values written, each an "
                        f"automaton (at most {MAX_UNIQUE_AUTOMATA})")
        if lo > top:
            raise _Unsat(f"minItems at #{ptr}: at most {top} distinct values are possible")
        comma, memo = self.tok(","), {}

        def after(used: frozenset) -> str:  # the rest of the array once `used` were written
            if len(used) == top:
                return ""
            if used not in memo:
                alts = _group([f"{texts[i]}{after(used | {i})}" for i in range(n) if i not in used])
                rest = f"{comma}{alts}" if len(used) < lo else f"(?:{comma}{alts})?"
                # a few values left: inline (at most 3! paths); more: an automaton shared by every order
                memo[used] = rest if top - len(used) <= INLINE_VALUES else self.outline(rest, force=True)
            return memo[used]

        body = _group([f"{texts[i]}{after(frozenset([i]))}" for i in range(n)]) if top else ""
        body = body if lo > 0 or not body else f"(?:{body})?"
        return f"{self.tok('[')}{body}{self.tok(']')}"

    def unique_strings_refusal(self, items: list, regexes: list[str], stack) -> str | None:
        """Why uniqueItems cannot be exact here, or None. Exact: stack mode, items that are only
        strings (compared decoded, as JSON equality says), each item's language with no dead
        end, i.e. every partial item has infinitely many completions, so a written set of items
        never leaves a begun item without an unused completion; the matcher tracks the items
        written (constrain.keys, as an object's keys)."""
        base = "uniqueItems is not supported (only with maxItems <= 1, or over strings in the stack grammar"
        if not self.calls_on():
            return base + ", outside negations and enum checks)"
        for item in items:
            try:
                flat = self.flatten(item, "", stack)[0]
            except _Unsat:
                continue
            if flat is True or not isinstance(flat, dict) or not _generated_types(flat) <= {"string"}:
                return base + "; these items are not only strings)"
        for regex in regexes:
            regex = self.inlined(regex)
            if regex is None:
                return base + "; an item of its own counted or nested automaton is not tracked)"
            try:
                dfa = compile_regex(regex, max_states=20_000)
            except InferlabError:
                return base + "; the item automaton is over the size limit)"
            done = keys.completions(dfa)
            if any(done[q] != math.inf for q in range(dfa.n_states) if not dfa.accepting[q]):
                return base + "; an item with finitely many completions could run out of unused values)"
        return None

    def inlined(self, regex: str, seen: frozenset = frozenset()) -> str | None:
        """A call-free item regex: each plain call (an outlined string, a $ref target) replaced
        by its callee's regex, itself inlined; None where a call is of a counted or
        length-bounded string, a map, an array of unique strings or a recursion (not tracked as
        text), or past INLINE_CALLS nested calls."""
        def callee(match) -> str:
            k = int(match.group(1))
            opaque = k in self.counts or k in self.maps or k in self.lengths or k in self.uniques.values()
            if opaque or k in seen or len(seen) >= INLINE_CALLS or self.automata[k] == _NOTHING:
                raise _NotText  # (_NOTHING: a $ref target still being compiled)
            inner = self.inlined(self.automata[k], seen | {k})
            if inner is None:
                raise _NotText
            return f"(?:{inner})"
        try:
            return _CALL.sub(callee, regex)
        except _NotText:
            return None

    def repeated_items(self, item: str, lo: int, hi: int | None) -> str:
        """item{lo,hi} (item: a comma and an array item's regex). Stack mode, where the larger
        bound is count_min or more and the item calls no automaton: a counted automaton's call
        (its frame counts the items, as a long string's characters), so maxItems 1000 of a
        24-character id is a few dozen DFA states, not one per item unrolled; without maxItems, lo
        items counted then any number more. (A counted frame pushes no call: an item with calls
        is unrolled, as before.)"""
        if not self.calls_on() or _CALL.search(item) or max(lo, hi or 0) < self.count_min or not _counts(item):
            return _repeat(item, lo, hi)
        if hi is None:
            return self.counted(item, lo, lo) + _repeat(item, 0, None)
        return self.counted(item, lo, hi)

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
            return self.repeated_items(comma + rest, max(lo - i, 0), None if hi is None else hi - i)

        if hi == 0:
            return ""
        if prefix:
            first = prefix[0] + tail(1)
        elif rest is not None:
            first = rest + tail(1)
        else:
            return ""
        return first if lo > 0 else f"(?:{first})?"

