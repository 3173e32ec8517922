"""Arrays: prefixItems/items, minItems/maxItems."""

from __future__ import annotations


from inferlab.constrain.schema.common import _Unsat, _child, _repeat


class ArraysMixin:
    """Arrays: prefixItems/items, minItems/maxItems (mixed into _Compiler)."""

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

