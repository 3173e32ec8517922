"""Byte DFA: subset construction over byte classes, trimming, Hopcroft minimisation.

The DFA is dense: `trans` int32 (S, 256) with -1 = dead, `start`, `accepting` bool (S,). Every
state of the result is live (some accepting state is reachable from it), so "not -1" means
"this prefix can still be completed": the token index and the masks rely on that.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from inferlab.constrain.nfa import NFA, NfaLimit, build_nfa, charset_sequences, size_estimate
from inferlab.constrain.regex import Alt, Call, CharSet, Concat, Node, Repeat, parse
from inferlab.errors import InferlabError

DEFAULT_MAX_STATES = 100_000  # (S, 256) int32 is 100 MB at this size; beyond it indexes are huge
# The subset construction's other bound: NFA states summed over the DFA states' sets (max_states
# bounds the rows, not the sets: 100,000 sets of 50,000 NFA states is 20 GB). The same value in
# csrc/minimal_dfa.hpp, which the extension exports; past either bound both constructions raise
# StateLimit.
MAX_SUBSET_ENTRIES = 1 << 26


class StateLimit(InferlabError):
    """The subset construction reached its max_states."""


class EstimateLimit(InferlabError):
    """A regex whose NFA size estimate (nfa.size_estimate) is over the caller's limit: refused
    before any NFA is built."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"regex unrolls to ~{size:,} NFA states (limit {limit:,})")
        self.size, self.limit = size, limit


def _native_module():
    """The C++ construction (the extension _native: csrc/ beside the mask engine), or None where
    it is not built."""
    # by name, as native.py's: `from inferlab.constrain import _native` reads, to the import
    # graph (grimp), as an import of the package itself, whose __init__ imports this module
    try:
        return importlib.import_module("inferlab.constrain._native")
    except ImportError:
        return None


_NATIVE = _native_module()


@dataclass(frozen=True, eq=False)
class DFA:
    trans: np.ndarray      # (S, 256) int32, -1 = dead
    start: int
    accepting: np.ndarray  # (S,) bool

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    def walk(self, data: bytes, state: int | None = None) -> int:
        """The state after reading `data` from `state` (default start); -1 once dead."""
        s = self.start if state is None else state
        trans = self.trans
        for b in data:
            s = int(trans[s, b])
            if s < 0:
                return -1
        return s

    def fullmatch(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            data = data.encode("utf-8")
        s = self.walk(data)
        return s >= 0 and bool(self.accepting[s])


def byte_classes(nfa: NFA) -> np.ndarray:
    """(256,) class id per byte: bytes no edge tells apart share a class (cf. RE2's byte map)."""
    cuts = np.zeros(257, dtype=bool)
    cuts[0] = True  # class 0 starts at byte 0
    for edges in nfa.edges:
        for lo, hi, _ in edges:
            cuts[lo] = True
            cuts[hi + 1] = True
    return (np.cumsum(cuts[:256]) - 1).astype(np.int32)  # (256,)


def _determinize(nfa: NFA, class_of: np.ndarray, max_states: int) -> tuple[list[list[int]], list[bool]]:
    """Subset construction over byte classes; DFA states are sets of NFA states with byte edges."""
    n_classes = int(class_of[-1]) + 1
    cl = class_of.tolist()
    # Per NFA state: its byte edges as (class, target) pairs, one per class it reads.
    cedges: list[list[tuple[int, int]]] = []
    for e in nfa.edges:
        pairs = []
        for lo, hi, t in e:
            c0, c1 = cl[lo], cl[hi]
            pairs.extend([(c0, t)] if c0 == c1 else [(c, t) for c in range(c0, c1 + 1)])
        cedges.append(pairs)
    eps, final = nfa.eps, nfa.final
    memo: dict[int, frozenset[int]] = {}

    def eps_closure(state: int) -> frozenset[int]:
        """The states with byte edges (or final) reachable by epsilons; computed once per state."""
        result = memo.get(state)
        if result is None:
            seen, stack = {state}, [state]
            while stack:
                for t in eps[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            # Only states with byte edges (and the final state) tell DFA states apart.
            result = memo[state] = frozenset(s for s in seen if cedges[s] or s == final)
        return result

    def closure(seeds) -> frozenset[int]:
        if len(seeds) == 1:
            return eps_closure(seeds[0])
        return frozenset().union(*[memo[s] if s in memo else eps_closure(s) for s in seeds])

    ids: dict[frozenset[int], int] = {}
    sets: list[frozenset[int]] = []
    rows: list[list[int]] = []
    accepting: list[bool] = []

    entries = 0  # NFA states summed over sets

    def state_id(key: frozenset[int]) -> int:
        nonlocal entries
        sid = ids.get(key)
        if sid is None:
            entries += len(key)
            if len(sets) >= max_states or entries > MAX_SUBSET_ENTRIES:
                raise StateLimit(_limit_message(max_states))
            sid = ids[key] = len(sets)
            sets.append(key)
            accepting.append(final in key)
        return sid

    state_id(closure([nfa.start]))
    move_cache: dict[tuple[int, ...], int] = {}
    i = 0
    while i < len(sets):
        buckets = _group(cedges[s] for s in sets[i])  # class -> NFA targets
        row = [-1] * n_classes
        for c, targets in buckets.items():
            # Unsorted: within a DFA state equal target sets come out in equal order, and
            # a different order elsewhere only costs a closure (whose key is a frozenset).
            key = tuple(targets)
            sid = move_cache.get(key)
            if sid is None:
                sid = move_cache[key] = state_id(closure(key))
            row[c] = sid
        rows.append(row)
        i += 1
    return rows, accepting


def _limit_message(max_states: int) -> str:
    return (f"the schema's automaton exceeds {max_states} states (or {MAX_SUBSET_ENTRIES:,} NFA states summed over "
            "its subset construction's sets); simplify the schema or raise max_states")


def _group(pair_lists) -> dict[int, list[int]]:
    """{key: [value, ...]} over the (key, value) pairs of each list, in order."""
    out: dict[int, list[int]] = {}
    for pairs in pair_lists:
        for k, v in pairs:
            xs = out.get(k)
            if xs is None:
                out[k] = [v]
            else:
                xs.append(v)
    return out


def _incoming(rows: np.ndarray) -> list[list[tuple[int, int]]]:
    """The reversed edges: for each state t, the (class, source) pairs of the edges into t."""
    src, cls = np.nonzero(rows >= 0)                                        # (E,) each
    dst = rows[src, cls]
    order = np.argsort(dst, kind="stable")
    bounds = np.searchsorted(dst[order], np.arange(rows.shape[0] + 1)).tolist()
    pairs = list(zip(cls[order].tolist(), src[order].tolist()))
    return [pairs[lo:hi] for lo, hi in zip(bounds, bounds[1:])]


def _trim(rows: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """(S,) bool: states from which an accepting state is reachable (backward search over the
    distinct (source, target) pairs: a state reads many classes into one target)."""
    n = rows.shape[0]
    src, cls = np.nonzero(rows >= 0)                                        # (E,) each
    pairs = np.unique(rows[src, cls] * n + src)                             # (P,) sorted by target
    bounds = np.searchsorted(pairs, np.arange(n + 1) * n).tolist()
    preds = (pairs % n).tolist()
    live = accepting.tolist()
    stack = np.flatnonzero(accepting).tolist()
    while stack:
        t = stack.pop()
        for s in preds[bounds[t]:bounds[t + 1]]:
            if not live[s]:
                live[s] = True
                stack.append(s)
    return np.asarray(live, dtype=bool)


def _hopcroft(rows: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """(S,) block id per state: Hopcroft's partition refinement on a partial, trimmed DFA.

    The missing transitions go to an implicit dead state. Starting with every initial block in
    the worklist makes the algorithm correct without that state (Valmari & Lehtinen, 2008).
    """
    inc = _incoming(rows)
    block_of = [0 if a else 1 for a in accepting.tolist()]
    blocks = [set(np.flatnonzero(accepting).tolist()), set(np.flatnonzero(~accepting).tolist())]
    if not blocks[1]:
        blocks.pop()
    work = set(range(len(blocks)))
    while work:
        by_class = _group(inc[t] for t in blocks[work.pop()])  # class -> states moving into the splitter
        for xs in by_class.values():
            touched: dict[int, list[int]] = {}  # block -> its states among xs
            for s in xs:
                y = block_of[s]
                if y in touched:
                    touched[y].append(s)
                else:
                    touched[y] = [s]
            for y, inside in touched.items():
                if len(inside) == len(blocks[y]):
                    continue
                new = len(blocks)
                moved = set(inside)
                blocks[y] -= moved
                blocks.append(moved)
                for s in inside:
                    block_of[s] = new
                # Both halves pending if y was; else the smaller half suffices (Hopcroft).
                work.add(new if y in work or len(moved) <= len(blocks[y]) else y)
    return np.asarray(block_of, dtype=np.int64)


def _minimize(rows: np.ndarray, accepting: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray, int]:
    block = _hopcroft(rows, accepting)
    # Number blocks in order of first appearance from the start state for a canonical layout.
    block_l = block.tolist()
    rows_l = rows.tolist()
    order = [-1] * (max(block_l) + 1)
    queue, n = [start], 1
    order[block_l[start]] = 0
    rep = [start]
    while queue:
        s = queue.pop()
        for t in rows_l[s]:
            if t >= 0 and order[block_l[t]] < 0:
                order[block_l[t]] = n
                n += 1
                rep.append(t)
                queue.append(t)
    reps = np.asarray(rep)
    order_a = np.asarray(order, dtype=np.int64)
    new_rows = rows[reps]                                           # (S', C)
    new_rows = np.where(new_rows >= 0, order_a[block[new_rows.clip(min=0)]], -1).astype(np.int32)
    return new_rows, accepting[reps], 0


def compile_ast(node: Node, *, max_states: int = DEFAULT_MAX_STATES, minimize: bool = True,
                native: bool = True) -> DFA:
    """AST -> Thompson NFA -> subset construction -> trim -> (Hopcroft) -> dense byte DFA.

    The minimal DFA is built by the C++ extension _native where it is built (native=False:
    this module's Python construction, its reference; the same arrays either way)."""
    max_nfa = _max_nfa(max_states)
    if minimize and native and _NATIVE is not None:
        got = _NATIVE.regex_dfa(node, max_nfa, max_states, (CharSet, Concat, Alt, Repeat, Call), charset_sequences)
        if got != 3:  # (3: nfa.py's to build, below: a node type or depth the extension leaves to it)
            return _native_result(got, max_nfa, max_states)
    nfa = build_nfa(node, max_states=max_nfa)
    class_of = byte_classes(nfa)
    rows_l, acc_l = _determinize(nfa, class_of, max_states)
    rows = np.asarray(rows_l, dtype=np.int64).reshape(len(rows_l), -1)  # (S, C)
    return from_rows(rows, np.asarray(acc_l, dtype=bool), class_of, minimize=minimize)


def from_rows(rows: np.ndarray, accepting: np.ndarray, class_of: np.ndarray, *, minimize: bool = True) -> DFA:
    """A DFA from its transitions over byte classes (start state 0): trimmed, renumbered,
    (minimised,) and expanded to the dense (S, 256) form.

    rows: (S, C) int64, -1 = dead; accepting: (S,) bool; class_of: (256,) class of each byte."""
    live = _trim(rows, accepting)
    start = 0
    if not live[start]:  # the empty language: one state, no transitions, not accepting
        return DFA(np.full((1, 256), -1, dtype=np.int32), 0, np.zeros(1, dtype=bool))
    # Renumber live states; edges into dead states become -1.
    new_id = np.cumsum(live) - 1
    rows = np.where((rows >= 0) & live[rows.clip(min=0)], new_id[rows.clip(min=0)], -1)[live]
    accepting = accepting[live]
    start = int(new_id[start])
    if minimize:
        rows, accepting, start = _minimize(rows, accepting, start)
    trans = np.ascontiguousarray(rows[:, class_of], dtype=np.int32)  # (S, 256)
    return DFA(trans, start, accepting)


def compile_regex(pattern: str, *, max_states: int = DEFAULT_MAX_STATES, minimize: bool = True,
                  max_nfa_estimate: int | None = None) -> DFA:
    """Regex string (dialect of regex.py) -> minimal byte DFA matching whole strings.

    Where the C++ extension is built, the pattern is parsed there too (no Python AST: the
    regex.parse of a schema's automata was a quarter of its compile), into the same AST and so
    the same DFA; a pattern it does not take, and every error, are regex.parse's. With
    max_nfa_estimate, a regex whose nfa.size_estimate exceeds it raises EstimateLimit first."""
    if minimize and _NATIVE is not None:
        max_nfa = _max_nfa(max_states)
        limit = -1 if max_nfa_estimate is None else max_nfa_estimate
        got = _NATIVE.pattern_dfa(pattern, max_nfa, max_states, charset_sequences, limit)
        if got != 3:
            return _native_result(got, max_nfa, max_states, max_nfa_estimate)
    node = parse(pattern)
    if max_nfa_estimate is not None:
        size = size_estimate(node)
        if size > max_nfa_estimate:
            raise EstimateLimit(size, max_nfa_estimate)
    return compile_ast(node, max_states=max_states, minimize=minimize)


def _max_nfa(max_states: int) -> int:
    return max(20 * max_states, 1_000_000)


def _native_result(got, max_nfa: int, max_states: int, estimate_limit: int | None = None) -> DFA:
    """The DFA of a native construction's answer (_native: pattern_dfa, regex_dfa), or its
    limit raised; not for 3 (the Python side's to build)."""
    if got == 1:
        raise NfaLimit(max_nfa)
    if got == 2:
        raise StateLimit(_limit_message(max_states))
    if isinstance(got, tuple) and len(got) == 2 and got[0] == 4:
        raise EstimateLimit(got[1], estimate_limit)
    trans, accepting = got
    return DFA(np.frombuffer(trans, dtype=np.int32).reshape(-1, 256), 0,  # (S, 256)
               np.frombuffer(accepting, dtype=bool))                       # (S,)
