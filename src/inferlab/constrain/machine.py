"""The stack machine: byte automata that call each other, run over sets of stacks.

A schema compiled by `schema.compile_grammar` is a list of regexes; automaton k's regex may hold
calls `(?&j)`. Each becomes a minimal byte DFA in which a call is an edge path over the bytes
F8-FF (nfa.call_bytes), bytes UTF-8 text never holds. The machine (a recursive transition network)
runs text over a *stack* of frames (automaton, state): at a state with a call edge it may push
the callee (the frame below then sits at the call's return state); at an accepting state of a
called automaton it may pop. Nondeterminism at those boundaries is kept as a set of stacks.

A *configuration* is such a set (closed under nothing: pushes and pops happen lazily, before the
next byte), interned to an int. The grammar's states are those ints: immutable and hashable, so
a matcher's history is a list of them. The byte transitions between configurations are computed
on first need, a (configuration, 256) row at a time, and kept in a growing table.

Recursion is exact: a configuration holds the whole stack, so the nesting depth is unbounded;
only the configurations visited are ever built.

A *counted* automaton (schema.compile_grammar: a string's maxLength) matches item{min,max}: its
frame carries the number of items done, so long bounded strings cost one small DFA, not one state
per count. Masks are keyed by the configuration with each count clamped to what one token can
still change (mask_key): counts that far from both bounds give the same mask. Nearer its max,
the tokens that stay inside the frame are those that begin few enough items: one walk per
(automaton, state) counts the items each token begins (token_split.counted_tokens), and every
count shares it.

A *map* automaton (CompiledGrammar.maps: the extra members of an object, one member per pass)
counts its members the same way: its frame begins a member by calling a key automaton (without
the comma for the object's first member) while fewer than max have begun, and returns once min
have. No object repeats a key, which no automaton can say: the grammar's state is the pair
(configuration, keys.KeyContext), the keys written in the text's open objects; a byte closing a
repeated key is refused (feed). A token mask is the configuration's cached row, then the few
tokens whose answer the written keys can change (keys.KeyIndex) resolved against the actual
state, as xgrammar splits context-independent from context-dependent tokens: so cached rows
never depend on the keys (the tokens they refuse are kept per state, so a state seen again
costs a row copy). An array of unique strings (CompiledGrammar.uniques: uniqueItems) is an
automaton of its own; a `[` read on top of it makes the key context track its items as keys, so
a repeated item is refused at its closing quote, the same way. Where a map's keys can run out
(a finite key language), stacks writing a key with no unused completion are pruned, and more tokens are resolved (every allowed
one within a key, else those that can begin a member).

The token masks over a vocabulary are grammar.py's (StackGrammar); the compile driver is compiler.py.
"""

from __future__ import annotations

import json
import math
import weakref
from typing import NamedTuple

import numpy as np

from inferlab.constrain import keys
from inferlab.constrain.dfa import DFA
from inferlab.constrain.nfa import CALL_BASE, CALL_DIGITS, CALL_MARK
from inferlab.errors import InferlabError

Frame = tuple[int, ...]           # (automaton, DFA state), or (automaton, state, items) when counted or a map
Stack = tuple[Frame, ...]         # bottom first
ROW_LOOP_BYTES = 48               # a one-stack row reading more bytes groups its targets with numpy
STEPS_KEPT = 1 << 18              # step's targets of unbuilt rows kept (then forgotten at once)


class State(NamedTuple):
    """The grammar's state: an opaque configuration handle (an int the machine interns; the
    native engine reads the same ids) and the keys written so far."""

    config: int
    keys: keys.KeyContext


def call_edges(dfa: DFA) -> dict[int, tuple[tuple[int, int], ...]]:
    """{state: ((callee, return state), ...)} read off the DFA's marker paths (all states' paths
    followed at once, a digit position at a time)."""
    trans = dfa.trans
    origin = np.flatnonzero(trans[:, CALL_MARK] >= 0)                       # (P,) states with calls
    at, value = trans[origin, CALL_MARK], np.zeros(len(origin), dtype=np.int64)
    for pos in range(CALL_DIGITS):
        digits = trans[at, CALL_MARK + 1:CALL_MARK + 1 + CALL_BASE]         # (P, CALL_BASE)
        i, d = np.nonzero(digits >= 0)
        origin, at, value = origin[i], digits[i, d], value[i] + d * CALL_BASE ** pos
    out: dict[int, list[tuple[int, int]]] = {}
    for s, callee, ret in sorted(zip(origin.tolist(), value.tolist(), at.tolist())):
        out.setdefault(s, []).append((callee, ret))
    return {s: tuple(edges) for s, edges in out.items()}


def _text_targets(trans: np.ndarray) -> list[list[int]]:
    """Each state's live targets, a run of equal targets over adjacent bytes once (a byte
    range's edge): a search's few distinct successors without a Python pass over 256 bytes."""
    first = np.ones(trans.shape, dtype=bool)                                # (S, 256)
    first[:, 1:] = trans[:, 1:] != trans[:, :-1]
    rows, cols = np.nonzero(first & (trans >= 0))                           # (R,), (R,) row-major
    flat = trans[rows, cols].tolist()
    bounds = np.searchsorted(rows, np.arange(trans.shape[0] + 1)).tolist()  # (S + 1,)
    return [flat[bounds[i]:bounds[i + 1]] for i in range(trans.shape[0])]


class AutomatonTables(NamedTuple):
    """What the machine reads off one DFA: a function of the DFA alone (automaton_tables)."""

    text: np.ndarray                                 # (S, 256) int32: trans, marker bytes dead (read-only)
    reads: np.ndarray                                # (S,) bool: a state with a text edge
    calls: dict[int, tuple[tuple[int, int], ...]]    # call_edges
    targets: list[list[int]]                         # _text_targets(text)


# Per DFA object, while it lives: compiles share DFAs (compiler's small-DFA cache, an automaton used
# twice in one schema), and these tables were a quarter of a large schema's compile, each built
# again per machine.
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def automaton_tables(dfa: DFA) -> AutomatonTables:
    got = _TABLES.get(dfa)
    if got is None:
        text = dfa.trans.copy()  # text never walks a marker path
        text[:, CALL_MARK:] = -1
        text.flags.writeable = False  # shared by every machine over this DFA
        got = _TABLES[dfa] = AutomatonTables(text, (text >= 0).any(axis=1), call_edges(dfa), _text_targets(text))
    return got


class StackMachine:
    """Byte-level configurations of the automata; the grammar's states are their ids."""

    def unbuilt(self) -> StackMachine:
        """A machine over the same automata with nothing built yet (a timing starts cold)."""
        return StackMachine(self.dfas, self.counts, self.maps, self.uniques)

    def __init__(self, dfas: list[DFA], counts=None, maps=None, uniques=()):
        self.dfas = dfas
        self.counts = list(counts) if counts else [None] * len(dfas)
        self.maps = list(maps) if maps else [None] * len(dfas)
        self.uniques = frozenset(uniques)  # automata that are arrays of unique strings
        self.numbered = any(c is not None for c in self.counts) or any(m is not None for m in self.maps)
        self._opens_unique: dict[int, bool] = {}
        for k, c in enumerate(self.counts):
            if (c is not None or self.maps[k] is not None) and (dfas[k].trans == dfas[k].start).any():
                raise InferlabError(f"counted automaton {k} re-enters its start state")
        tables = [automaton_tables(d) for d in dfas]
        self.text_trans = [t.text for t in tables]
        self.accepting = [d.accepting for d in dfas]
        self.reads = [t.reads for t in tables]  # (S,) bool per automaton: a state with a text edge
        self.starts = [d.start for d in dfas]
        self.calls = [t.calls for t in tables]
        self._targets = [t.targets for t in tables]
        self.productive = self._productive()
        self.configs: list[tuple[Stack, ...]] = []
        self.ids: dict[tuple[Stack, ...], int] = {}
        self._closures: list[tuple[Stack, ...] | None] = []
        self.table = np.full((64, 256), -2, dtype=np.int32)  # -2: not computed yet, -1: dead
        self._frame_tables: dict[int, np.ndarray | None] = {}
        self._exits: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._callers: dict[int, set] | None = None
        self._plain: dict[tuple[int, bool], np.ndarray] = {}
        self._ends: dict[int, bool] = {}  # can_end per configuration
        self._steps: dict[tuple[int, int], int] = {}  # step: a byte's target where the row is unbuilt
        self.start = self.intern([((0, self.starts[0]),)])
        self._init_maps()

    @property
    def n_automata(self) -> int:
        return len(self.dfas)

    @property
    def n_states(self) -> int:
        return sum(d.n_states for d in self.dfas)

    @property
    def uses_stack(self) -> bool:
        return any(self.calls)

    def _productive(self) -> list[bool]:
        """Automata with at least one complete text (calls only through productive automata).

        A least fixpoint in one pass over the states: each automaton's search from its start
        is resumed, not redone, when a callee it waits on turns out productive."""
        n = len(self.dfas)
        prod = [False] * n
        seen = [{self.starts[a]} for a in range(n)]
        work = [[self.starts[a]] for a in range(n)]
        waiting: dict[int, list[tuple[int, int]]] = {}  # callee -> (caller, return state) blocked on it

        def reaches_accept(a: int) -> bool:
            accepting, calls, seen_a, work_a = self.accepting[a], self.calls[a], seen[a], work[a]
            out = self._targets[a]
            while work_a:
                s = work_a.pop()
                if accepting[s]:
                    return True
                targets = list(out[s])
                for callee, ret in calls.get(s, ()):
                    if prod[callee]:
                        targets.append(ret)
                    else:
                        waiting.setdefault(callee, []).append((a, ret))
                for t in targets:
                    if t not in seen_a:
                        seen_a.add(t)
                        work_a.append(t)
            return False

        queue = list(range(n))
        while queue:
            a = queue.pop()
            if prod[a] or not reaches_accept(a):
                continue
            prod[a] = True
            for caller, ret in waiting.pop(a, ()):
                if not prod[caller] and ret not in seen[caller]:
                    seen[caller].add(ret)
                    work[caller].append(ret)
                    queue.append(caller)
        return prod

    def intern(self, stacks) -> int:
        key = tuple(sorted(set(stacks)))
        cid = self.ids.get(key)
        if cid is None:
            cid = self._add(key)
        return cid

    def intern_one(self, stack: Stack) -> int:
        """intern([stack]) without the sort: most configurations are one stack."""
        key = (stack,)
        cid = self.ids.get(key)
        if cid is None:
            cid = self._add(key)
        return cid

    def _add(self, key: tuple[Stack, ...]) -> int:
        cid = self.ids[key] = len(self.configs)
        self.configs.append(key)
        self._closures.append(None)
        if cid >= len(self.table):
            grown = np.empty((2 * len(self.table), 256), dtype=np.int32)
            grown[:len(self.table)] = self.table
            grown[len(self.table):] = -2
            self.table = grown
        return cid

    def closure(self, cid: int) -> tuple[Stack, ...]:
        """Every stack reachable from configuration `cid` by pushes and pops (no byte read).

        A push of an automaton already pushed in the same closure is skipped: it would read no
        byte first, and a JSON value is never empty, so such a call adds no text (it only
        happens through anyOf/allOf aliases, whose call is the whole value)."""
        out = self._closures[cid]
        if out is not None:
            return out
        if len(self.configs[cid]) == 1:  # most configurations: one stack whose top can't push or pop
            st = self.configs[cid][0]
            a, s = st[-1][0], st[-1][1]
            if self.maps[a] is None and self.counts[a] is None and self.plain(a, len(st) > 1)[s]:
                out = self._closures[cid] = self.configs[cid]
                return out
        seen: set[Stack] = set()
        work: list[tuple[Stack, frozenset]] = [(st, frozenset()) for st in self.configs[cid]]
        while work:
            st, pushed = work.pop()
            if st in seen:
                continue
            seen.add(st)
            top = st[-1]
            a, s = top[0], top[1]
            if self.maps[a] is not None:
                self._map_closure(st, pushed, work)
                continue
            if self.counts[a] is not None:
                lo, hi = self.counts[a]
                done = top[2] + (s != self.starts[a])  # items done if the current one ends here
                if s == self.starts[a] or self.accepting[a][s]:
                    if s != self.starts[a] and done < hi:  # the next item
                        work.append((st[:-1] + ((a, self.starts[a], done),), pushed))
                    if done >= lo and len(st) > 1:
                        work.append((st[:-1], pushed))
                continue
            for callee, ret in self.calls[a].get(s, ()):
                if callee not in pushed and self.productive[callee]:
                    entry = (callee, self.starts[callee]) + ((0,) if self._numbered(callee) else ())
                    work.append((st[:-1] + ((a, ret), entry), pushed | {callee}))
            if len(st) > 1 and self.accepting[a][s]:
                work.append((st[:-1], pushed))
        # A stack whose top reads no byte and cannot end (a state whose only edges are calls)
        # adds nothing its pushes do not: left out, its frame would be split and walked for naught.
        out = self._closures[cid] = tuple(sorted(st for st in seen if self._live_top(st[-1])))
        return out

    def _live_top(self, frame: Frame) -> bool:
        a, s = frame[0], frame[1]
        return len(frame) > 2 or bool(self.accepting[a][s]) or bool(self.reads[a][s])

    def _map_closure(self, st: Stack, pushed: frozenset, work: list) -> None:
        """A map frame (automaton, state, members begun): at its start, begin a member (the
        key automaton without the comma for the first member of the object, with it after) while
        fewer than max have begun, or return once min have; after a member, start over."""
        a, s, n = st[-1]
        lo, hi, first, nxt = self.maps[a]
        start = self.starts[a]
        if s == start:
            if n >= lo and len(st) > 1:
                work.append((st[:-1], pushed))
            if hi is None or n < hi:
                key = first if n == 0 and first >= 0 else nxt
                for callee, ret in self.calls[a].get(s, ()):
                    if callee == key:
                        work.append((st[:-1] + ((a, ret, n + 1), (key, self.starts[key])), pushed | {key}))
            return
        for callee, ret in self.calls[a].get(s, ()):  # within the member's value
            if callee not in pushed and self.productive[callee]:
                entry = (callee, self.starts[callee]) + ((0,) if self._numbered(callee) else ())
                work.append((st[:-1] + ((a, ret, n), entry), pushed | {callee}))
        if self.accepting[a][s]:
            work.append((st[:-1] + ((a, start, n),), pushed))

    def _numbered(self, a: int) -> bool:
        return self.counts[a] is not None or self.maps[a] is not None

    def _init_maps(self) -> None:
        """Key automata of maps, their completion counts, and the maps whose keys can run out
        (a partial key with finitely many completions): those need the key context (prune)."""
        self.key_map: dict[int, int] = {}
        self.completions: dict[int, list] = {}
        self.finite_maps: set[int] = set()
        for m, spec in enumerate(self.maps):
            if spec is None:
                continue
            for k in spec[2:]:
                if k >= 0:
                    self.key_map[k] = m
                    c = self.completions[k] = keys.completions(self.dfas[k])
                    if any(c[s] != float("inf") for s in range(len(c)) if not self.accepting[k][s]):
                        self.finite_maps.add(m)
        self._finite_in: dict[int, bool] = {}
        # The keys every finite map has beyond its minProperties, right after a key's opening
        # quote: the fewest completions there, less max(1, min) (keys_plenty).
        self.key_margin = math.inf
        for m in self.finite_maps:
            for k in self.maps[m][2:]:
                if k >= 0:
                    c = self.completions[k]
                    low = min(c[s] for s in keys.after_quote(self.dfas[k])) if min(c) > 0 else -math.inf
                    self.key_margin = min(self.key_margin, low - max(1, self.maps[m][0]))

    def keys_plenty(self, ctx, reach: int) -> bool:
        """Can no finite map run out of keys within `reach` more bytes from key context `ctx`?
        Then a stack is pruned (prune) only when the key it writes is a prefix of a written key,
        with no unused completion left: a key is at most one per byte, each state of a key
        automaton has a completion, and right after an opening quote more than the written keys."""
        written = sum(len(names) for names in ctx.objs if names is not None)
        return self.key_margin > written + reach

    def holds_finite_map(self, cid: int) -> bool:
        """Does a stack of configuration `cid` hold a map whose keys can run out?"""
        out = self._finite_in.get(cid)
        if out is None:
            out = self._finite_in[cid] = any(f[0] in self.finite_maps or self.key_map.get(f[0]) in self.finite_maps
                                             for st in self.closure(cid) for f in st)
        return out

    def prune(self, cid: int, ctx) -> int:
        """Drop the stacks writing a key of a finite map that can no longer be completed: every
        completion is a key the object already has, or too few unused keys are left for
        minProperties. -1 when none is left."""
        kept = [st for st in self.configs[cid] if self._key_alive(st, ctx)]
        if len(kept) == len(self.configs[cid]):
            return cid
        return self.intern(kept) if kept else -1

    def _key_alive(self, st: Stack, ctx) -> bool:
        k, s = st[-1][0], st[-1][1]
        m = self.key_map.get(k)
        if m not in self.finite_maps or self.accepting[k][s]:
            return True
        lo, _, _, nxt = self.maps[m]
        names, key = keys.written(ctx)
        in_keys = [raw for raw in map(_canonical, names) if self._in_map(nxt, raw)]
        if key is None:  # before the key's quote: a key of the map is left, and enough for min
            n_before = st[-2][2] - 1
            total = self.completions[nxt][self.dfas[nxt].walk(b',"')]
            return total - len(in_keys) >= max(1, lo - n_before)
        return self.completions[k][s] > sum(raw.startswith(key) for raw in in_keys)

    def _in_map(self, nxt: int, raw: bytes) -> bool:
        end = self.dfas[nxt].walk(b',"' + raw + b'"')
        return end >= 0 and bool(self.accepting[nxt][end])

    def feed(self, state: State, data: bytes) -> State | None:
        """The grammar's state after `data`: the configuration, the written keys (a repeated key
        is refused at its closing quote), and finite maps' partial keys pruned."""
        cid, ctx = state
        for b in data:
            cid = self.step(cid, b)
            if cid < 0:
                return None
            ctx = keys.step(ctx, b, b == 0x5B and bool(self.uniques) and self.opens_unique(cid))
            if ctx is None:
                return None
            if self.finite_maps:
                cid = self.prune(cid, ctx)
                if cid < 0:
                    return None
        return State(cid, ctx)

    def opens_unique(self, cid: int) -> bool:
        """Did the `[` that led to configuration `cid` open an array of unique strings on some
        stack (its automaton on top: its items are strings, so its only `[` is the opening one)?"""
        out = self._opens_unique.get(cid)
        if out is None:
            out = self._opens_unique[cid] = any(st[-1][0] in self.uniques for st in self.configs[cid])
        return out

    def can_end(self, cid: int) -> bool:
        out = self._ends.get(cid)
        if out is None:
            out = self._ends[cid] = any(len(st) == 1 and self.accepting[st[0][0]][st[0][1]] for st in self.closure(cid))
        return out

    def plain(self, a: int, deep: bool) -> np.ndarray:
        """(S,) bool: automaton a's states that can neither push nor pop (no call; not accepting
        where a frame lies below): a configuration of one stack with such a top is closed as it
        is (closure's fast path), and a byte only moves its top. Counts and maps aside."""
        key = (a, deep)
        out = self._plain.get(key)
        if out is None:
            out = np.ones(self.dfas[a].n_states, dtype=bool)
            out[list(self.calls[a])] = False
            if deep:
                out &= ~self.accepting[a]
            self._plain[key] = out
        return out

    def row(self, cid: int) -> np.ndarray:
        """(256,) int32: the configuration after each byte, -1 where the byte is not allowed."""
        row = self.table[cid]
        if row[0] != -2:
            return row
        stacks = self.closure(cid)
        if len(stacks) == 1:  # most configurations: one stack, its top's targets grouped once
            st = stacks[0]
            (a, s), extra, below = st[-1][:2], st[-1][2:], st[:-1]
            row = self.text_trans[a][s]
            live = np.flatnonzero(row >= 0)
            if len(live) > ROW_LOOP_BYTES:  # (a string's content: many bytes, few targets)
                to = row[live]
                targets = np.flatnonzero(np.bincount(to))  # (sorted, distinct: a sort-free unique)
                lut = np.empty(int(targets[-1]) + 1, dtype=np.int32)
                lut[targets] = [self.intern_one(below + ((a, t) + extra,)) for t in targets.tolist()]
                out = lut[to]
            else:
                seen: dict[int, int] = {}
                out = []
                for t in row[live].tolist():
                    i = seen.get(t)
                    if i is None:
                        i = seen[t] = self.intern_one(below + ((a, t) + extra,))
                    out.append(i)
            table = self.table  # (it may have grown in intern: read after)
            table[cid] = -1
            table[cid, live] = out
            return table[cid]
        out = np.full(256, -1, dtype=np.int32)
        if not stacks:  # every stack's top waits on a call that cannot be made: a dead end
            self.table[cid] = out
            return self.table[cid]
        targets = np.stack([self.text_trans[st[-1][0]][st[-1][1]] for st in stacks])   # (K, 256)
        live = np.flatnonzero((targets >= 0).any(axis=0))
        if len(live) > ROW_LOOP_BYTES:  # (a string's content on some stack: group columns with numpy)
            cols = np.ascontiguousarray(targets[:, live].T)                              # (L, K)
            _, first, inverse = np.unique(cols.view(np.dtype((np.void, 4 * len(stacks)))).reshape(-1),
                                          return_index=True, return_inverse=True)  # the distinct columns
            ids = [self._next(stacks, col) for col in cols[first].tolist()]
            out[live] = np.asarray(ids, dtype=np.int32)[inverse.reshape(-1)]
        elif len(live):
            seen: dict[tuple, int] = {}
            ids = []
            for col in map(tuple, targets[:, live].T.tolist()):
                i = seen.get(col)
                if i is None:
                    i = seen[col] = self._next(stacks, col)
                ids.append(i)
            out[live] = ids
        self.table[cid] = out  # (the table may have grown in intern: write after)
        return self.table[cid]

    def _next(self, stacks: tuple[Stack, ...], col) -> int:
        """The configuration after a byte whose targets, per stack, are `col` (-1: the stack dies)."""
        return self.intern(st[:-1] + ((st[-1][0], t) + st[-1][2:],) for st, t in zip(stacks, col) if t >= 0)

    def step(self, cid: int, byte: int) -> int:
        """The configuration after `byte` (-1: not allowed): from the table row where it is built,
        else this byte's target alone (kept per configuration and byte). Text reads one byte of
        a row, where a mask reads them all: a row built for each byte of text would intern every
        target of a string's content (row: ~50 us with two stacks) for the one it takes."""
        row = self.table[cid]
        if row[0] != -2:
            return int(row[byte])
        got = self._steps.get((cid, byte))
        if got is None:
            if len(self._steps) >= STEPS_KEPT:
                self._steps.clear()
            stacks = self.closure(cid)
            col = [int(self.text_trans[st[-1][0]][st[-1][1], byte]) for st in stacks]
            got = self._steps[(cid, byte)] = self._next(stacks, col) if max(col, default=-1) >= 0 else -1
        return got

    def walk(self, data: bytes, cid: int | None = None) -> int:
        cid = self.start if cid is None else cid
        for b in data:
            cid = self.step(cid, b)
            if cid < 0:
                return -1
        return cid

    def accepts(self, data: bytes | str) -> bool:
        """Is `data` a complete text of the grammar (no object repeating a key)?"""
        if isinstance(data, str):
            data = data.encode("utf-8")
        state = self.feed(State(self.start, keys.START), data)
        return state is not None and self.can_end(state.config)

    def mask_key(self, cid: int, reach: int) -> int:
        """The configuration with each count clamped where `reach` more items cannot tell it
        apart from the true one: both have the same token masks when a token is at most
        `reach` bytes (an item is at least one byte)."""
        if not self.numbered:
            return cid
        stacks, clamped = [], False
        for st in self.configs[cid]:
            frames = []
            for f in st:
                if len(f) == 3:
                    is_map = self.maps[f[0]] is not None
                    lo, hi = self.maps[f[0]][:2] if is_map else self.counts[f[0]]
                    hi = float("inf") if hi is None else hi
                    c, margin = f[2], reach + 2  # a token moves the count by at most reach + 1
                    floor = 1 if is_map and c > 0 else 0  # a map's first member is the one without a comma
                    if lo - c > margin:
                        c = max(lo - margin - 1, floor)
                    elif c >= lo and hi - c > margin:
                        c = max(lo, floor)
                    clamped |= c != f[2]
                    f = (f[0], f[1], c)
                frames.append(f)
            stacks.append(tuple(frames))
        return self.intern(stacks) if clamped else cid

    def frame_table(self, a: int) -> np.ndarray | None:
        """(S, 256) int32: automaton a's text transitions as seen inside one frame. A counted
        automaton's next item starts from an item's end (its start's bytes merged into the
        accepting states' rows) while the count is far from its max; None where the merge is not
        a DFA (an accepting state and the start read a byte in common)."""
        if a not in self._frame_tables:
            t = self.text_trans[a]
            if self.counts[a] is not None:
                acc = self.accepting[a]
                start = t[self.starts[a]]
                if ((t[acc] >= 0) & (start >= 0)).any():
                    t = None
                else:
                    t = t.copy()
                    t[acc] = np.where(t[acc] >= 0, t[acc], start)
            self._frame_tables[a] = t
        return self._frame_tables[a]

    def exits(self, a: int) -> tuple[np.ndarray, np.ndarray]:
        """Automaton a's states where a push or a pop may happen, and the bytes that may be read
        right after one: (row (S,) int32, -1 for none; bytes (B, 256) bool). After a push, the
        callee's first bytes; after a pop, the bytes the callers read at their return states.
        Conservative (every byte) where a map's members or a closure going on decide."""
        out = self._exits.get(a)
        if out is None:
            n = self.dfas[a].n_states
            rows = []
            row = np.full(n, -1, dtype=np.int32)
            acts = set(np.flatnonzero(self.accepting[a]).tolist()) | set(self.calls[a])
            if self._numbered(a):
                acts.add(self.starts[a])
            follow = self._follow(a) if self.accepting[a].any() else None
            for q in sorted(acts):
                if self.maps[a] is not None or (self.counts[a] is not None and q == self.starts[a]):
                    b = np.ones(256, dtype=bool)
                else:
                    b = np.zeros(256, dtype=bool)
                    for callee, _ in self.calls[a].get(q, ()):
                        b |= self._first(callee)
                    if self.accepting[a][q]:
                        b |= follow
                row[q] = len(rows)
                rows.append(b)
            out = self._exits[a] = (row, np.asarray(rows, dtype=bool).reshape(-1, 256))
        return out

    def _may_act(self, a: int, q: int) -> bool:
        return q in self.calls[a] or bool(self.accepting[a][q]) or (self._numbered(a) and q == self.starts[a])

    def _first(self, a: int) -> np.ndarray:
        """(256,) bool: the bytes automaton a may read first once pushed (every byte where its
        start may push or pop)."""
        if self._may_act(a, self.starts[a]):
            return np.ones(256, dtype=bool)
        return self.text_trans[a][self.starts[a]] >= 0

    def _follow(self, a: int) -> np.ndarray:
        """(256,) bool: the bytes read right after automaton a returns: its callers' bytes at
        the return states (every byte where a return state may itself push or pop)."""
        if self._callers is None:
            self._callers = {}
            for c, calls in enumerate(self.calls):
                for edges in calls.values():
                    for callee, ret in edges:
                        self._callers.setdefault(callee, set()).add((c, ret))
        out = np.zeros(256, dtype=bool)
        for c, ret in self._callers.get(a, ()):
            if self._may_act(c, ret):
                return np.ones(256, dtype=bool)
            out |= self.text_trans[c][ret] >= 0
        return out

    def ensure_rows(self, cids: np.ndarray) -> None:
        missing = cids[self.table[cids, 0] == -2]
        if len(missing):
            for cid in sorted(set(missing.tolist())):
                self.row(cid)


def _canonical(name: bytes) -> bytes:
    """A key's decoded UTF-8 bytes -> its canonical JSON spelling (what map keys are written in)."""
    return json.dumps(name.decode("utf-8"), ensure_ascii=False)[1:-1].encode("utf-8")

