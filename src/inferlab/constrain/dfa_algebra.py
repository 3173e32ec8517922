"""Boolean operations on byte DFAs, and a DFA back to a regex of code points.

The schema compiler's seam is a regex string (constrain.regex), so a language built by automaton
operations (`not`, `allOf`, `if`/`then`/`else` over operands that compile exactly) goes back
into that dialect: `product` combines two byte DFAs (intersection, union, difference: the
complement within a universe), and `to_regex` turns the result into a regex by state
elimination (Brzozowski-McCluskey) over code points, read off the UTF-8 byte paths.
Both have size limits, and so does `operand`, which builds an operand's DFA; beyond them they
raise AutomatonTooLarge at once, which the compiler turns into a refusal naming the keyword,
the pointer and the limit. The limits bound the work as well as the size: nothing is minimised
or read back that is over them, so an operand that would blow up is refused in a fraction of a
second.
"""

from __future__ import annotations

import heapq

import numpy as np

from inferlab.constrain.dfa import DFA, StateLimit, compile_regex, from_rows
from inferlab.errors import InferlabError

MAX_REGEX_CHARS = 200_000
MAX_REGEX_STATES = 2_000  # state elimination copies labels per path: beyond this it is slow and huge
# Every operand and product is read back as a regex, from at most MAX_REGEX_STATES states once
# minimised; a DFA twice that size (before minimising) is refused without building further:
# determinising, multiplying and minimising such automata is what costs seconds (Python loops).
MAX_PRODUCT_STATES = 2 * MAX_REGEX_STATES

# UTF-8 lead bytes: (first, last, continuation bytes, payload mask, lowest and highest code point)
_LEADS = ((0xC2, 0xDF, 1, 0x1F, 0x80, 0x7FF), (0xE0, 0xEF, 2, 0x0F, 0x800, 0xFFFF),
          (0xF0, 0xF4, 3, 0x07, 0x10000, 0x10FFFF))
_SURROGATES = (0xD800, 0xDFFF)


class AutomatonTooLarge(InferlabError):
    """A product or a regex read back from a DFA is over its size limit."""


def product(a: DFA, b: DFA, op: str, *, max_states: int = MAX_PRODUCT_STATES) -> DFA:
    """The minimal DFA of L(a) op L(b), op "and" | "or" | "minus" (L(a) without L(b))."""
    reps, class_of = _byte_classes(a.trans, b.trans)
    dead = np.full(len(reps), -1, dtype=np.int64)

    def accepts(pair) -> bool:
        acc_a = pair[0] >= 0 and bool(a.accepting[pair[0]])
        acc_b = pair[1] >= 0 and bool(b.accepting[pair[1]])
        return acc_a and acc_b if op == "and" else acc_a or acc_b if op == "or" else acc_a and not acc_b

    def moves(pair) -> list:
        ta = a.trans[pair[0], reps] if pair[0] >= 0 else dead                # (C,)
        tb = b.trans[pair[1], reps] if pair[1] >= 0 else dead
        return [None if (x < 0 and y < 0) or (op == "and" and (x < 0 or y < 0)) or (op == "minus" and x < 0)
                else (x, y) for x, y in zip(ta.tolist(), tb.tolist())]
    return _reachable((a.start, b.start), moves, accepts, class_of, len(reps), max_states, "product automaton")


QUOTE = 0x22


def length_bounded(d: DFA, char: DFA, lo: int, hi: int | None, *, max_states: int) -> DFA:
    """The minimal DFA of the texts of `d` (JSON strings, quotes included) whose content holds
    lo to hi characters (hi None: no upper bound), a character being a text of `char`: the
    product of d with a counter of the characters read, built over reachable (state of d,
    state of char, count) triples alone, so a simple pattern under maxLength 255 is a few
    hundred states where the regex of 255 characters is thousands before any product.

    char's accepting states must read nothing more (a character's end is known at its last
    byte), and a quote must not begin a character (it ends the content). AutomatonTooLarge
    past max_states triples."""
    if (char.trans[char.accepting] >= 0).any() or char.trans[char.start, QUOTE] >= 0:
        raise InferlabError("length_bounded: a character's end must be known at its last byte, "
                            "and a quote must not begin one")
    cap = lo if hi is None else hi  # counts past lo are alike when nothing bounds them above
    reps, class_of = _byte_classes(d.trans, char.trans, (np.arange(256) == QUOTE)[None])
    closed = -2                     # the content's state once the closing quote is read (-1: before the opening one)

    def step(c: int, k: int, b: int):
        """(char state, count) after byte b inside d's accepted text, None where the bounds refuse it."""
        if c == closed:
            return None
        if c == -1:
            return (char.start, 0) if b == QUOTE else None
        if c == char.start and b == QUOTE:
            return (closed, 0) if k >= lo else None
        c2 = int(char.trans[c, b])
        if c2 < 0:
            return None
        if not char.accepting[c2]:
            return c2, k
        return (char.start, min(k + 1, cap)) if hi is None or k < hi else None

    def moves(triple) -> list:
        p, c, k = triple
        out = []
        for b, x in zip(reps.tolist(), d.trans[p, reps].tolist()):
            ck = step(c, k, b) if x >= 0 else None
            out.append(None if ck is None else (x, *ck))
        return out
    return _reachable((d.start, -1, 0), moves, lambda t: t[1] == closed and bool(d.accepting[t[0]]), class_of,
                      len(reps), max_states, "length-bounded automaton")


def _byte_classes(*tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one byte per class (C,), each byte's class (256,)): bytes that no row of the (S, 256)
    tables tells apart share a class."""
    columns = np.vstack(tables).T                                           # (256, rows)
    _, first, class_of = np.unique(columns, axis=0, return_index=True, return_inverse=True)
    return first.astype(np.int64), class_of.reshape(-1).astype(np.int64)


def _reachable(start, moves, accepts, class_of: np.ndarray, n_classes: int, max_states: int, what: str) -> DFA:
    """The minimal DFA over the keys reachable from `start` (hashable): moves(key) -> the next
    key per byte class (None: dead), accepts(key) -> bool. AutomatonTooLarge past max_states
    keys, before any is minimised."""
    ids, keys, rows, accepting = {start: 0}, [start], [], []
    while len(rows) < len(keys):
        key = keys[len(rows)]
        accepting.append(accepts(key))
        row = []
        for nxt in moves(key):
            if nxt is None:
                row.append(-1)
                continue
            sid = ids.get(nxt)
            if sid is None:
                if len(keys) >= max_states:
                    raise AutomatonTooLarge(f"the {what} exceeds {max_states:,} states")
                sid = ids[nxt] = len(keys)
                keys.append(nxt)
            row.append(sid)
        rows.append(row)
    return from_rows(np.asarray(rows, dtype=np.int64).reshape(len(rows), n_classes),
                     np.asarray(accepting, dtype=bool), class_of)


def operand(regex: str, *, max_states: int = MAX_PRODUCT_STATES) -> DFA:
    """The minimal DFA of an operand's regex; AutomatonTooLarge past max_states (the subset
    construction stops there)."""
    try:
        return compile_regex(regex, max_states=max_states)
    except StateLimit:
        raise AutomatonTooLarge(f"an operand's automaton exceeds {max_states:,} states") from None


def is_empty(d: DFA) -> bool:
    return not bool(d.accepting.any())


def to_regex(d: DFA, *, max_chars: int = MAX_REGEX_CHARS) -> str | None:
    """A regex (constrain.regex dialect, Python `re` compatible) of the DFA's language over code
    points, or None for the empty language. The DFA must read valid UTF-8 only (no call markers)."""
    if is_empty(d):
        return None
    if d.n_states > MAX_REGEX_STATES:
        raise AutomatonTooLarge(f"the automaton has {d.n_states:,} states, over the {MAX_REGEX_STATES:,} "
                                "a regex is read back from")
    memo: dict[tuple[int, int], tuple] = {}
    # the states at character boundaries (the others are inside a multi-byte character)
    edges = {d.start: _code_point_edges(d, d.start, memo)}
    todo = [d.start]
    while todo:
        for t in edges[todo.pop()]:
            if t not in edges:
                edges[t] = _code_point_edges(d, t, memo)
                todo.append(t)
    n = d.n_states
    start, final = n, n + 1
    out: list[dict[int, _Label]] = [{} for _ in range(n + 2)]
    inc: list[set[int]] = [set() for _ in range(n + 2)]
    # per state, the summed lengths of its labels in and out (self-loops apart), kept as labels
    # change, so a state's elimination weight costs O(1), not a pass over its edges
    in_len, out_len = [0] * (n + 2), [0] * (n + 2)

    def add(p: int, q: int, label: _Label) -> None:
        old = out[p].get(q)
        new = out[p][q] = label if old is None else _alt(old, label)
        inc[q].add(p)
        if len(new.text) > max_chars:
            raise AutomatonTooLarge(f"the regex of the automaton exceeds {max_chars:,} characters")
        if p != q:
            grown = len(new.text) - (0 if old is None else len(old.text))
            out_len[p] += grown
            in_len[q] += grown

    def weight_of(q: int) -> int:
        """How much text eliminating q adds: each label into q is copied once per way out and each
        label out of q once per way in (Delgado & Morais's heuristic); the smallest goes first."""
        loop = out[q].get(q)
        ins, outs = len(inc[q]) - (q in inc[q]), len(out[q]) - (loop is not None)
        w = in_len[q] * (outs - 1) + out_len[q] * (ins - 1)
        return w + (len(loop.text) * (ins * outs - 1) if loop is not None else 0)

    add(start, d.start, _EMPTY)
    for s, targets in edges.items():
        if d.accepting[s]:
            add(s, final, _EMPTY)
        for target, ranges in targets.items():
            add(s, target, _charset(ranges))
    # eliminate the lightest state first (ties: the lowest id); eliminating q changes the weights
    # of its neighbours only, so the others stay valid in the heap (stale entries are skipped)
    weight = {x: weight_of(x) for x in edges}
    heap = [(w, x) for x, w in weight.items()]
    heapq.heapify(heap)
    while heap:
        w, q = heapq.heappop(heap)
        if weight.get(q) != w:
            continue
        del weight[q]
        loop = out[q].pop(q, None)
        inc[q].discard(q)
        middle = _star(loop) if loop is not None else _EMPTY
        for p in inc[q]:
            into = out[p].pop(q)
            out_len[p] -= len(into.text)
            for r, away in out[q].items():
                add(p, r, _cat(_cat(into, middle), away))
        for r, away in out[q].items():
            inc[r].discard(q)
            in_len[r] -= len(away.text)
        for x in inc[q] | out[q].keys():
            if x in weight:
                weight[x] = weight_of(x)
                heapq.heappush(heap, (weight[x], x))
        out[q], inc[q] = {}, set()
    label = out[start].get(final)
    # one unit: the compiler concatenates and repeats subschema regexes as they are
    return None if label is None else _group(label, 2)


class _Label:
    """A regex text and how tightly it binds: 0 alternation, 1 concatenation, 2 atom."""

    __slots__ = ("text", "prec")

    def __init__(self, text: str, prec: int):
        self.text, self.prec = text, prec


_EMPTY = _Label("", 2)


def _group(x: _Label, prec: int) -> str:
    return x.text if x.prec >= prec else f"(?:{x.text})"


def _alt(x: _Label, y: _Label) -> _Label:
    if x.text == y.text:
        return x
    return _Label(f"{x.text}|{y.text}", 0)


def _cat(x: _Label, y: _Label) -> _Label:
    if not x.text:
        return y
    if not y.text:
        return x
    return _Label(_group(x, 1) + _group(y, 1), 1)


def _star(x: _Label) -> _Label:
    if not x.text:
        return _EMPTY
    return _Label(_group(x, 2) + "*", 1)


def _char(cp: int) -> str:
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    if 0x20 <= cp < 0x7F:
        return "\\" + c
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _charset(ranges: list[tuple[int, int]]) -> _Label:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _Label(_char(ranges[0][0]), 2)
    body = "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges)
    return _Label(f"[{body}]", 2)


def _code_point_edges(d: DFA, s: int, memo: dict) -> dict[int, list[tuple[int, int]]]:
    """From state s: target state -> sorted, merged code-point ranges that lead there."""
    trans = d.trans
    found: list[tuple[int, int, int]] = []
    row = trans[s].tolist()
    for b in range(0x80):
        if row[b] >= 0:
            found.append((b, b, row[b]))
    for first, last, k, mask, lowest, highest in _LEADS:
        for b in range(first, last + 1):
            if row[b] < 0:
                continue
            base = (b & mask) << (6 * k)
            for lo, hi, t in _continuations(d, row[b], k, memo):
                lo, hi = max(base + lo, lowest), min(base + hi, highest)
                for lo2, hi2 in _minus_surrogates(lo, hi):
                    found.append((lo2, hi2, t))
    if any(row[b] >= 0 for b in range(0xF5, 0x100)) or any(row[b] >= 0 for b in range(0x80, 0xC2)):
        raise InferlabError("to_regex: the DFA reads bytes that start no UTF-8 character (a call marker?)")
    edges: dict[int, list[tuple[int, int]]] = {}
    for lo, hi, t in sorted(found):
        ranges = edges.setdefault(t, [])
        if ranges and ranges[-1][1] + 1 >= lo:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], hi))
        else:
            ranges.append((lo, hi))
    return edges


def _minus_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    if lo > hi:
        return []
    if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
        return [(lo, hi)]
    return [(x, y) for x, y in ((lo, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, hi)) if x <= y]


def _continuations(d: DFA, t: int, k: int, memo: dict) -> tuple[tuple[int, int, int], ...]:
    """(lo, hi, target) over the payload values [0, 64**k) of k continuation bytes read from t."""
    if k == 0:
        return ((0, 0, t),)
    found = memo.get((t, k))
    if found is not None:
        return found
    out: list[tuple[int, int, int]] = []
    shift = 6 * (k - 1)
    row = d.trans[t].tolist()
    for c in range(0x80, 0xC0):
        if row[c] < 0:
            continue
        for lo, hi, target in _continuations(d, row[c], k - 1, memo):
            lo, hi = ((c - 0x80) << shift) + lo, ((c - 0x80) << shift) + hi
            if out and out[-1][2] == target and out[-1][1] + 1 == lo:
                out[-1] = (out[-1][0], hi, target)
            else:
                out.append((lo, hi, target))
    memo[(t, k)] = found = tuple(out)
    return found
