"""The stack grammar: byte automata that call each other, and its token masks.

A schema compiled by `schema.compile_grammar` is a list of regexes; automaton k's regex may hold
calls `(?&j)`. Each becomes a minimal byte DFA in which a call is an edge path over the bytes
F8-FF (nfa.call_bytes), bytes UTF-8 text never holds. The machine (a recursive transition network)
runs text over a *stack* of frames (automaton, state): at a state with a call edge it may push
the callee (the frame below then sits at the call's return state); at an accepting state of a
called automaton it may pop. Nondeterminism at those boundaries is kept as a set of stacks.

A *configuration* is such a set (closed under nothing: pushes and pops happen lazily, before the
next byte), interned to an int. The grammar's states are those ints: immutable and hashable, so
a matcher's history is a list of them. The byte transitions between configurations are computed
on first need, a (configuration, 256) row at a time, and kept in a growing table. A token mask
is first walked in Python through the configuration table, node by node of the vocabulary's
trie, where that walk stays narrow (token_split.narrow_tokens: literal text, structure,
numbers). Else it is xgrammar's split (token_split): per (automaton, state) on top of a stack,
whatever lies below, the tokens decided inside that automaton are one cached row, and only the
few whose path pushes or pops are walked through the configuration table (numpy over one trie
level at a time, so tokens that share a prefix share the work, and only configurations a token
actually reaches are ever built; a state inside a loop, such as a string's content, walks the
loop's tokens once per *shape* of the loop, shared by every grammar over the vocabulary:
token_split.region, token_split.shape_cache; a small automaton's splits are shared the same way by
its digest, token_split.frame_cache). Masks are computed on first visit of a configuration and
cached (LRU), so the time to the first mask depends on what one token can reach from the start,
not on the schema's size. A grammar may also warm up (StackGrammar.warm): build the masks
nearest the start for a fixed time before its first mask, where a caller's compile overlaps
the prompt's prefill.

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
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np

from inferlab.constrain import keys, token_split
from inferlab.constrain.dfa import DEFAULT_MAX_STATES, DFA, StateLimit, compile_regex
from inferlab.constrain.lru import LRU
from inferlab.constrain.masks import unpack_bitmask
from inferlab.constrain.nfa import CALL_BASE, CALL_DIGITS, CALL_MARK
from inferlab.errors import InferlabError
from inferlab.measure.timing import gc_disabled

Frame = tuple[int, ...]           # (automaton, DFA state), or (automaton, state, items) when counted or a map
Stack = tuple[Frame, ...]         # bottom first
State = tuple[int, tuple]         # the grammar's state: (configuration, keys.KeyContext)
MASK_CACHE_ROWS = 4096            # cached bitmask rows (ceil(V/32) int32 each: 19 KB at 151k tokens)
CLEARED_CACHE_STATES = 65536     # states whose resolved tokens are kept (a mask key and a few ids each)
MAX_FORCED_BYTES = 4096
ROW_LISTS = 8192                  # sparse rows kept for the Python walk, per kind
QUOTED_ROWS = 65536               # narrow rows whose tokens with a quote are kept (a few ids each)
DFA_BLOCK = 64                    # an automaton's walk handles are made for this many states in one pass
ROW_LOOP_BYTES = 48               # a one-stack row reading more bytes groups its targets with numpy
TWIN_STATES = 256                 # automata up to this size are matched with their twins (_twin)
SPARSE_TOKENS = 32                # a narrow mask of fewer tokens is cached as their ids (_write)
FEW_CANDIDATES = 64               # the keys' candidates are filtered by the row in Python up to this many
KEPT_PY_NODES = 256               # a keep walk over at most this many trie nodes is walked in Python
KEPT_ROWS = 1024                  # kept walks cached per clamped configuration (_kept_walk; a row each)
STEPPED_READS = 8                 # a walk's byte-by-byte reads of an unbuilt row before it builds the row
NARROW_NODES = 400                # a mask is walked node by node in Python while it looks at fewer trie children
WARM_MS = 30.0                    # compile_json_schema's grammar builds the masks nearest its start this long (warm)


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
        text = []
        for d in dfas:  # text never walks a marker path
            t = d.trans.copy()
            t[:, CALL_MARK:] = -1
            text.append(t)
        self.text_trans = text
        self.accepting = [d.accepting for d in dfas]
        self.reads = [(t >= 0).any(axis=1) for t in text]  # (S,) bool per automaton: a state with a text edge
        self.starts = [d.start for d in dfas]
        self.calls = [call_edges(d) for d in dfas]
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
            trans, accepting, calls, seen_a, work_a = self.text_trans[a], self.accepting[a], self.calls[a], seen[a], work[a]
            while work_a:
                s = work_a.pop()
                if accepting[s]:
                    return True
                targets = [t for t in set(trans[s].tolist()) if t >= 0]
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
        written = sum(len(names) for names in ctx[0] if names is not None)
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
        return cid, ctx

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
        state = self.feed((self.start, keys.START), data)
        return state is not None and self.can_end(state[0])

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


_BIT = np.uint32(1) << np.arange(32, dtype=np.uint32)  # (32,) a token's bit within its word


def _canonical(name: bytes) -> bytes:
    """A key's decoded UTF-8 bytes -> its canonical JSON spelling (what map keys are written in)."""
    return json.dumps(name.decode("utf-8"), ensure_ascii=False)[1:-1].encode("utf-8")


def build_machine(compiled, *, max_states: int = DEFAULT_MAX_STATES) -> StackMachine:
    """CompiledGrammar -> StackMachine; each DFA within max_states."""
    dfas = _automaton_dfas(compiled, lambda k, regex: compile_regex(regex, max_states=max_states), max_states)
    return StackMachine(dfas, compiled.counts, compiled.maps, compiled.uniques)


def _automaton_dfas(compiled, regex_dfa, max_states: int) -> list[DFA]:
    """Each automaton's DFA: regex_dfa(k, regex), or a length-bounded string's (_bounded)."""
    from inferlab.constrain.schema import SchemaError

    lengths = compiled.lengths or (None,) * len(compiled.automata)
    out = []
    for k, (regex, bounds) in enumerate(zip(compiled.automata, lengths)):
        try:
            out.append(regex_dfa(k, regex) if bounds is None else _bounded(k, regex, bounds, max_states))
        except SchemaError:
            raise
        except InferlabError as exc:  # a size limit: named with the subschema the automaton is for
            where = compiled.sources[k] if k < len(compiled.sources) else None
            if where is None:
                raise
            limit = "max_states" if isinstance(exc, StateLimit) else "automaton size"
            raise type(exc)(f"{limit} at #{where}: {exc}") from None
    return out


def _bounded(k: int, regex: str, bounds: tuple, max_states: int) -> DFA:
    """A length-bounded string automaton's DFA (schema.algebra.bounded_dfa), within max_states."""
    from inferlab.constrain.schema.algebra import bounded_dfa

    out = bounded_dfa(regex, *bounds)
    if out.n_states > max_states:
        raise StateLimit(f"automaton {k} (a length-bounded string) exceeds {max_states:,} states")
    return out


@dataclass(frozen=True)
class GrammarStats:
    automata: int
    dfa_states: int
    uses_stack: bool
    configurations: int  # built so far (grows as text or masks visit them)
    narrow_masks: int    # masks made so far by a narrow walk (_narrow_mask)
    split_masks: int     # masks made so far by frame splits or a walk of the whole trie (_build_mask)


class StackGrammar:
    """The matcher API's Grammar (docs/architecture.md) over a StackMachine and a vocabulary."""

    def __init__(self, machine: StackMachine, vocab, *, cache_rows: int = MASK_CACHE_ROWS,
                 narrow_nodes: int = NARROW_NODES, warm_ms: float = 0.0):
        self.machine = machine
        self.vocab = vocab
        self.vocab_size = vocab.vocab_size
        self.eos_id = vocab.eos_id
        self.words = (self.vocab_size + 31) // 32
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_rows = cache_rows
        self.narrow_nodes = narrow_nodes  # a mask walked in Python up to this many trie children (0: never)
        self._cache_states = CLEARED_CACHE_STATES
        self._cleared: OrderedDict[State, tuple[int, tuple[int, ...]]] = OrderedDict()  # state -> (mask key, cleared)
        self._advance: dict[tuple[int, int], int] = {}
        self._keys: dict[int, int] = {}
        self._frames: OrderedDict[tuple[int, int], token_split.FrameTokens] = OrderedDict()
        self._counted: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()  # _counted_walk
        self._counted_masks: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
        self._kept: OrderedDict[int, np.ndarray] = OrderedDict()  # _kept_walk
        self._twins: dict[int, int] = {}                                    # _twin per automaton
        self._twin_of: dict[bytes, int] = {}                                # its digest -> the first with it
        self._digests: dict[int, bytes] = {}                                # a twin's digest (token_split.frame_cache)
        self._crows: dict[int, tuple[list[int], bytes]] = {}            # _config_rows
        self._dfa_blocks: dict[tuple[int, bool, int], tuple] = {}            # _handles per block of DFA_BLOCK states
        self._quoted: dict[int, tuple[list[int], list[int]]] = {}  # mask key -> its narrow row's tokens with
        #                                                   a quote, and of those, with a whole quoted string (_refused)
        self._fixed: dict[tuple[int, bool], list[int]] = {}  # _row_fixed
        self._plain_masks: dict[tuple[int, int, bool], tuple] = {}  # _narrow_mask per plain top frame
        self.reach = max(len(vocab.trie().levels), 1)  # bytes of the longest token (a level per byte)
        self._narrow_made = self._split_made = 0         # stats()
        self.warmed = self.warm(warm_ms / 1e3) if warm_ms > 0 else 0  # configurations warmed (warm)

    def warm(self, seconds: float, configs: int | None = None) -> int:
        """Build the masks of the configurations nearest the start, breadth first over bytes,
        until `seconds` have passed (checked between masks, so one mask may run past it) or
        `configs` configurations are done; returns how many were (a replay passes that count
        to warm a fresh grammar the same way). Why: a server compiles the grammar while the
        prompt's prefill runs, so a few ms spent here are hidden, where the same masks built
        lazily fall on decode steps; text reaches the configurations near the start first, and
        every instance passes through the structure's first keys and values. The cost: masks
        no text asks for (schema-bench reports the time to first mask with it)."""
        m, deadline, done = self.machine, time.perf_counter() + seconds, 0
        seen, queue = {m.start}, deque([m.start])
        while queue and done != configs and time.perf_counter() < deadline:
            cid = queue.popleft()
            self._row(self._mask_key(cid))
            done += 1
            for nxt in np.unique(m.row(cid)).tolist():  # (sorted, so a replay meets the same order)
                if nxt >= 0 and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return done

    def stats(self) -> GrammarStats:
        m = self.machine
        return GrammarStats(m.n_automata, m.n_states, m.uses_stack, len(m.configs), self._narrow_made, self._split_made)

    def initial_state(self) -> State:
        return self.machine.start, keys.START

    def can_end(self, state: State) -> bool:
        return self.machine.can_end(state[0])

    def advance(self, state: State, token: int) -> State | None:
        if not 0 <= token < self.vocab_size:  # (before EOS: a vocabulary without one has eos_id -1)
            return None
        if token == self.eos_id:
            return state if self.can_end(state) else None
        if token in self.vocab.special_ids:
            return None
        key = (state, token)
        if key not in self._advance:
            data = self.vocab.token_bytes[token]
            self._advance[key] = self.machine.feed(state, data) if data else None
        return self._advance[key]

    def forced_bytes(self, state: State) -> bytes:
        """Read off the configuration alone: where the written keys rule out all but one byte,
        the forced text may stop short (never wrong)."""
        out = bytearray()
        cid = state[0]
        while len(out) < MAX_FORCED_BYTES and not self.machine.can_end(cid):
            live = np.flatnonzero(self.machine.row(cid) >= 0)
            if len(live) != 1:
                break
            out.append(int(live[0]))
            cid = self.machine.step(cid, int(live[0]))
        return bytes(out)

    def chars_after_forced(self, state: State, limit: int = 256) -> list[str] | None:
        """The characters that may follow forced_bytes(state), or None past `limit` of them (the
        protocol's optional extension: jump-forward asks whether forced text may merge with what
        follows). Multi-byte characters are walked byte by byte through the configurations. Read
        off the configuration alone, as forced_bytes: the written keys can only remove characters."""
        m = self.machine
        frontier = [(b"", m.walk(self.forced_bytes(state), state[0]))]
        out: list[str] = []
        while frontier:
            prefix, cid = frontier.pop()
            row = m.row(cid)
            for b in np.flatnonzero(row >= 0).tolist():
                data = prefix + bytes([b])
                try:
                    out.append(data.decode("utf-8"))
                except UnicodeDecodeError:  # a lead or continuation byte: the character goes on
                    frontier.append((data, int(row[b])))
                if len(out) + len(frontier) > limit:
                    return None
        return out

    def fill_bitmask(self, state: State, out: np.ndarray) -> None:
        """The configuration's row (cached), then the tokens whose answer the written keys can
        change resolved against them (keys.KeyIndex): xgrammar's context-dependent tokens. The
        resolution is a function of the state alone, so the tokens it clears are kept per state
        (LRU): a state seen before costs a row copy and clearing those few bits."""
        hit = self._cleared.get(state)
        if hit is None:
            key = self._mask_key(state[0])
            _write(out, self._row(key))
            hit = self._cleared[state] = key, self._refused(state, key, out)
            if len(self._cleared) > self._cache_states:
                self._cleared.popitem(last=False)
        else:
            self._cleared.move_to_end(state)
            _write(out, self._row(hit[0]))
        if hit[1]:
            words = memoryview(out.view(np.uint32))
            for t in hit[1]:
                words[t >> 5] &= ~(1 << (t & 31)) & 0xFFFFFFFF

    def fill_kept(self, state: State) -> bool:
        """Is `state`'s last fill kept (fill_bitmask's per-state cache): does its next fill write a
        cached row, and clear cached tokens, with nothing resolved?"""
        return state in self._cleared

    def _mask_key(self, cid: int) -> int:
        """machine.mask_key(cid, self.reach), kept per configuration."""
        key = self._keys.get(cid)
        if key is None:
            key = self._keys[cid] = self.machine.mask_key(cid, self.reach)
        return key

    def _row(self, key: int) -> np.ndarray | tuple[int, ...]:
        """Mask key `key`'s (words,) int32 row, or its few tokens where a narrow walk found
        fewer than SPARSE_TOKENS (_write), built on first need, cached (LRU)."""
        return _lru(self._masks, key, lambda: self._build_mask(key), self._cache_rows)

    def _refused(self, state: State, key: int, out: np.ndarray) -> tuple[int, ...]:
        """The tokens allowed in the row `out` of mask key `key` that the written keys refuse."""
        m = self.machine
        quoted = self._quoted.get(key)
        if quoted is not None and not (m.finite_maps and m.holds_finite_map(state[0])):
            # a narrow row: its few tokens with a quote are the candidates below, tested one by one;
            # outside a key being written, only those holding a whole quoted string can repeat one
            quoted, held = quoted
            if m.finite_maps:
                cands = quoted
            else:
                cands = held if state[1][1] is None else quoted
                cands = self.key_index.may_close_repeat(cands, state[1]) if cands else ()
            return tuple(t for t in cands if self._refuses(state, t))
        if not m.finite_maps:
            # keys.KeyIndex.candidates in the row: the fixed part's are the same for every state of
            # this mask key (kept), the varying parts' mostly none
            varying = self.key_index.varying(state[1])
            if varying is None:
                cands = self._in_row(self.key_index.any_quote, out)
            else:
                cands = self._row_fixed(key, state[1][1] is not None, out)
                for part in varying:
                    cands = cands + self._in_row(part, out) if len(part) else cands
            return tuple(t for t in dict.fromkeys(cands) if t != self.eos_id and self._refuses(state, t))
        if m.holds_finite_map(state[0]) and m.keys_plenty(state[1], self.reach):
            cands = self._prefix_candidates(state[1])
        elif m.holds_finite_map(state[0]):
            # keys can run out: within a key every allowed token is checked, else those that can
            # begin a member (a key's first byte is a quote, a comma or white space before it)
            cands = None if state[1][1] is not None else self.key_index.member_start
        else:
            cands = self.key_index.any_quote
        if cands is None:
            cands = np.flatnonzero(unpack_bitmask(out, self.vocab_size)).tolist()
        else:
            cands = self._in_row(cands, out)
        return tuple(t for t in dict.fromkeys(cands) if t != self.eos_id and self._refuses(state, t))

    def _row_fixed(self, key: int, in_key: bool, out: np.ndarray) -> list[int]:
        """The tokens of keys.KeyIndex.fixed[in_key] that mask key `key`'s row `out` allows
        (cached per key: a new state with a cached row reads them, not the row)."""
        got = self._fixed.get((key, in_key))
        if got is None:
            if len(self._fixed) >= QUOTED_ROWS:
                self._fixed.clear()
            got = self._fixed[(key, in_key)] = self._in_row(self.key_index.fixed[in_key], out)
        return got

    @staticmethod
    def _in_row(cands: np.ndarray, out: np.ndarray) -> list[int]:
        """Those of the token ids `cands` whose bit is set in the row `out` (words,) int32."""
        if not len(cands):
            return []
        if len(cands) <= FEW_CANDIDATES:  # (most states: a few dozen, where numpy's calls cost more)
            words = memoryview(out.view(np.uint32))
            return [t for t in cands.tolist() if words[t >> 5] >> (t & 31) & 1]
        words = out.view(np.uint32)
        return cands[(words[cands >> 5] & _BIT[cands & 31]) != 0].tolist()

    def _refuses(self, state: State, t: int) -> bool:
        """Is token t, allowed by the configuration's row, refused from `state`? Where no finite
        map prunes and no array of unique strings is tracked, only the written keys can refuse
        it: their steps alone say so, without stepping (and building) the configurations."""
        m = self.machine
        if not m.finite_maps and not m.uniques:
            return keys.closes_repeat(state[1], self.vocab.token_bytes[t])
        return m.feed(state, self.vocab.token_bytes[t]) is None

    def _prefix_candidates(self, ctx) -> np.ndarray:
        """Where no finite map can run out of keys within a token (keys_plenty): the tokens
        that may close a repeated key, write two quotes (close a key, then begin one), or go on
        along a written key: from the key being written, or after a quote."""
        index = self.key_index
        names = [_canonical(name) for objs in ctx[0] if objs is not None for name in objs]
        out = [index.two_quotes]
        repeat = index.candidates(ctx)
        out.append(index.any_quote if repeat is None else repeat)
        none = index.two_quotes[:0]
        out += [index.after_quote.get(b, none) for b in {raw[0] for raw in names if raw}]
        key = ctx[1]
        if key is not None:
            nxt = {raw[len(key)] for raw in names if len(raw) > len(key) and raw.startswith(key)}
            out += [index.first_byte.get(b, none) for b in nxt]
        return np.unique(np.concatenate(out))

    @property
    def key_index(self) -> keys.KeyIndex:
        return keys.key_index(self.vocab)

    def allowed_ids(self, state: State) -> np.ndarray:
        """Sorted token ids allowed after `state` (EOS included where it can end)."""
        row = np.empty(self.words, dtype=np.int32)
        self.fill_bitmask(state, row)
        return np.flatnonzero(unpack_bitmask(row, self.vocab_size)).astype(np.int32)

    def _build_mask(self, cid: int) -> np.ndarray | tuple[int, ...]:
        """xgrammar's split (token_split): the union of the closure's top frames' accepted rows
        (cached per (automaton, state)), then their context-dependent tokens walked through the
        configurations over the trie nodes on their paths alone. Where a frame has too many of
        those, one walk of the whole trie through the configurations instead."""
        m = self.machine
        narrow = self._narrow_mask(cid)
        if narrow is not None:
            return narrow
        self._split_made += 1
        tops = {st[-1] for st in m.closure(cid)}
        left: dict[tuple[int, int], int] = {}  # counted frames near their max: the items a token may still begin
        far = set()                            # counted frames (on some stack) far from it: any count
        for f in tops:
            if m.counts[f[0]] is None:
                continue
            if self._far_from_max(f):
                far.add(f[:2])
            elif m.frame_table(f[0]) is None:
                return self._walk_mask(cid)
            else:
                left[f[:2]] = max(left.get(f[:2], -1), m.counts[f[0]][1] - 1 - f[2])
        pairs = sorted({f[:2] for f in tops})
        frames = [self._frame(a, s) for a, s in pairs]
        if any(f.keep is None for f in frames):
            return self._walk_mask(cid)
        words = np.zeros(self.words, dtype=np.uint32)
        for (a, s), f in zip(pairs, frames):
            near = (a, s) in left and (a, s) not in far
            words |= self._counted_bits(a, s, left[(a, s)]) if near else f.accepted
        keeps = [f.keep for f in frames if len(f.keep)]  # (each sorted, distinct: most masks have one)
        keep = keeps[0] if len(keeps) == 1 else np.unique(np.concatenate(keeps)) if keeps else np.zeros(0, np.int64)
        if len(keep):
            words |= self._kept_walk(cid, keep).view(np.uint32)
        elif self.eos_id >= 0 and m.can_end(cid):
            words[self.eos_id >> 5] |= np.uint32(1 << (self.eos_id & 31))
        return words.view(np.int32)

    def _narrow_mask(self, cid: int) -> np.ndarray | tuple[int, ...] | None:
        """The mask of configuration `cid` by a walk of the trie through the configurations in
        Python (token_split.narrow_tokens), as a row or its few tokens (_row), or None past
        self.narrow_nodes children looked at (0: never walked), or where it reads
        token_split.REGION_MIN_BYTES first bytes or more. A walk that never left its top
        automaton's plain states (_narrow_rows) is a function of that top frame alone: kept per
        frame, for every configuration with it on top."""
        if not self.narrow_nodes:
            return None
        m = self.machine
        top = self._plain_top(cid)
        got = self._plain_masks.get(top) if top is not None else None
        if got is None:
            crossed: list[int] = []
            first, rows = self._narrow_rows(cid, top, crossed)
            if len(first[1]) >= token_split.REGION_MIN_BYTES:  # many first bytes (a string's content):
                return None                                    # a wide walk, seldom under the budget
            trie = self.vocab.trie()
            tokens = token_split.narrow_tokens(trie, first, rows, self.narrow_nodes)
            if tokens is None:
                return None
            tokens = token_split.with_duplicates(tokens, trie)
            index = self.key_index
            quoted = [t for t in tokens if index.has_quote[t]]
            quoted = quoted, [t for t in quoted if index.holds_key[t]]
            if self.eos_id >= 0 and m.can_end(cid):
                tokens.append(self.eos_id)
            got = (tuple(tokens) if len(tokens) < SPARSE_TOKENS else self._list_bits(tokens)), quoted
            self._narrow_made += 1
            if top is not None and not crossed:
                if len(self._plain_masks) >= self._cache_rows:
                    self._plain_masks.clear()
                self._plain_masks[top] = got
        if len(self._quoted) >= QUOTED_ROWS:
            self._quoted.clear()
        self._quoted[cid] = got[1]
        return got[0]

    def _list_bits(self, tokens: list[int]) -> np.ndarray:
        """(words,) int32 bits of a token list, duplicates included (with_duplicates)."""
        if len(tokens) * 8 < self.words:
            return token_split.few_bits(tokens, self.words).view(np.int32)
        return token_split.token_bits(np.asarray(tokens, dtype=np.int64), self.vocab.trie(), self.words).view(np.int32)

    def _plain_top(self, cid: int) -> tuple[int, int, bool] | None:
        """(automaton, state, a frame below) of configuration `cid` where it is one stack whose
        top frame neither counts nor maps and can neither push nor pop (StackMachine.plain)."""
        m = self.machine
        stacks = m.configs[cid]
        top = stacks[0][-1]
        a, deep = top[0], len(stacks[0]) > 1
        if len(stacks) > 1 or m.counts[a] is not None or m.maps[a] is not None:  # (a numbered frame is one of those)
            return None
        return (a, top[1], deep) if m.plain(a, deep)[top[1]] else None

    def _narrow_rows(self, cid: int, top: tuple[int, int, bool] | None, crossed: list[int]):
        """(first, rows) for narrow_tokens from configuration `cid` (its _plain_top). From a plain
        top, the walk goes through that automaton's own DFA rows (shared by every stack below, no
        configuration built) while the states it reaches can neither push nor pop: handle
        -2 - q for DFA state q; a state that can is handle -2 - n - q (n states), its
        configuration built only when the walk gets there (and noted in `crossed`)."""
        m = self.machine
        if top is None:
            return self._config_rows(cid), self._config_rows
        a, q, deep = top
        prefix, n = m.configs[cid][0][:-1], m.dfas[a].n_states

        def rows(v: int) -> tuple[list[int], bytes]:
            if v >= 0:
                return self._config_rows(v)
            if v >= -1 - n:
                return self._dfa_rows(a, -2 - v, deep)
            crossed.append(v)
            return self._config_rows(m.intern_one(prefix + ((a, -2 - n - v),)))
        return self._dfa_rows(a, q, deep), rows

    def _config_rows(self, cid: int) -> tuple[list[int], bytes]:
        """Configuration `cid`'s sparse row (token_split.sparse_row; cached, a bounded number).
        Where its top is plain (_plain_top: a keep walk past a string's closing quote lands in
        the caller's literal text), the top's DFA row with each target interned: the machine's
        table row (closure, numpy writes) is left for the text to build if it gets there. Other
        unbuilt rows are read byte by byte while few bytes are read (_Stepped)."""
        got = self._crows.get(cid)
        if got is None:
            if len(self._crows) >= ROW_LISTS:
                self._crows.clear()
            m = self.machine
            built = m.table[cid, 0] != -2
            top = None if built else self._plain_top(cid)
            if built:
                got = token_split.sparse_row(m.row(cid))
            elif top is None:  # (several stacks, or a top that may push, pop, count or map)
                live = _live_bytes(m, cid)
                got = _Stepped(cid, live, m), live
            else:
                targets, live = token_split.sparse_row(m.text_trans[top[0]][top[1]])
                values = _Interned(targets, m.configs[cid][0][:-1], top[0], m)
                got = (values if len(live) > ROW_LOOP_BYTES else values.read()), live
            self._crows[cid] = got
        return got

    def _dfa_rows(self, a: int, q: int, deep: bool) -> tuple[list[int], bytes]:
        """State q of automaton a as _narrow_rows's sparse row of handles: -2 - t for a plain
        target t, -2 - n - t for one that can push or pop (a slice of its block's, _handles)."""
        block = self._dfa_blocks.get((a, deep, q // DFA_BLOCK))
        if block is None:
            if len(self._dfa_blocks) >= ROW_LISTS // DFA_BLOCK:
                self._dfa_blocks.clear()
            block = self._dfa_blocks[(a, deep, q // DFA_BLOCK)] = self._handles(a, deep, q - q % DFA_BLOCK)
        codes, live, at = block
        lo, hi = at[q % DFA_BLOCK], at[q % DFA_BLOCK + 1]
        return codes[lo:hi], live[lo:hi]

    def _handles(self, a: int, deep: bool, first: int) -> tuple[list[int], bytes, list[int]]:
        """_dfa_rows's handles of automaton a's states first .. first + DFA_BLOCK - 1, in one numpy
        pass over their rows (a walk meets about a third of an automaton's states, so a block
        costs less than its states one by one): (every live byte's handle end to end, those
        bytes, each state's offset into both (k + 1,))."""
        plain = self.machine.plain(a, deep)
        n = len(plain)
        trans = self.machine.text_trans[a][first:first + DFA_BLOCK]              # (k, 256)
        rows, cols = np.nonzero(trans >= 0)                                    # row-major: by row, then byte
        to = trans[rows, cols]
        at = np.zeros(len(trans) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(trans)), out=at[1:])
        return np.where(plain[to], -2 - to, -2 - n - to).tolist(), cols.astype(np.uint8).tobytes(), at.tolist()

    def _far_from_max(self, frame: Frame) -> bool:
        """A counted frame whose items cannot reach their max within one token: inside it, the
        next item may always start (StackMachine.frame_table)."""
        hi = self.machine.counts[frame[0]][1]
        return self.machine.frame_table(frame[0]) is not None and (hi is None or hi - frame[2] > self.reach + 2)

    def _counted_bits(self, a: int, s: int, left: int) -> np.ndarray:
        """(words,) uint32: the tokens that stay inside counted frame (a, s) and begin at most
        `left` more items (token_split.counted_tokens, walked once per (twin, s); both cached,
        LRU)."""
        i = self._twin(a)

        def bits() -> np.ndarray:
            tokens, items = _lru(self._counted, (i, s), lambda: self._counted_walk(i, s), self._cache_rows)
            return token_split.token_bits(tokens[:np.searchsorted(items, left, side="right")], self.vocab.trie(),
                                          self.words)
        return _lru(self._counted_masks, (i, s, left), bits, self._cache_rows)

    def _twin(self, a: int) -> int:
        """The first automaton (of at most TWIN_STATES states) whose frames split as a's: the same
        transitions, accepting states, start, counting and exits (its digest). Its frame splits,
        counted walks and rows serve both: Snowplow's sp_339 has 16 counted strings of one
        character class, each a ~10 ms frame split and counted walk of its own before."""
        got = self._twins.get(a)
        if got is None:
            m = self.machine
            got = a
            if m.dfas[a].n_states <= TWIN_STATES:
                row, exit_bytes = m.exits(a)
                h = hashlib.blake2b(digest_size=16)
                for part in (m.text_trans[a], np.asarray(m.accepting[a]), np.int64([m.starts[a], m.counts[a] is None]),
                             row, exit_bytes):
                    h.update(part.tobytes())
                digest = h.digest()
                got = self._twin_of.setdefault(digest, a)
                self._digests[got] = digest
            self._twins[a] = got
        return got

    def _counted_walk(self, a: int, s: int) -> tuple[np.ndarray, np.ndarray]:
        """counted_tokens up to the most items a token may begin near any of the machine's maxes
        (left <= reach + 1, and < the largest max), so that every twin's bound shares it: a bound's
        own list is a prefix of it (sorted by items)."""
        m = self.machine
        t = m.frame_table(a)
        restart = (t >= 0) & (m.text_trans[a] < 0)  # merged in: an item's end reads the next's first byte
        top = max(c[1] for c in m.counts if c is not None and c[1] is not None)
        return token_split.counted_tokens(self.vocab.trie(), t, restart, s, max(0, min(top - 1, self.reach + 1)))

    def _frame(self, a: int, s: int) -> token_split.FrameTokens:
        """The split of frame (automaton a, state s), built on first need, cached (LRU), shared
        with its twin (_twin)."""
        m, trie, a = self.machine, self.vocab.trie(), self._twin(a)

        def build() -> token_split.FrameTokens:
            digest = self._digests.get(a)
            shared = token_split.frame_cache(trie)
            out = shared.get((digest, s)) if digest is not None else None
            if out is None:
                out = token_split.frame_tokens(trie, m.frame_table(a), m.exits(a), s, self.words,
                                               token_split.shape_cache(trie), split_of=lambda base: self._frame(a, base))
                if digest is not None:
                    shared[digest, s] = out
            return out
        return _lru(self._frames, (a, s), build, self._cache_rows)

    def _kept_walk(self, cid: int, keep: np.ndarray) -> np.ndarray:
        """_walk_mask(cid, keep), kept per configuration with its counts clamped where the tokens
        on the kept paths cannot tell them apart (StackMachine.mask_key with their most bytes as
        the reach). Why: near its max, each count of a counted string is a mask of its own, but
        its context-dependent tokens (a quote and what follows it) are short, so all counts but
        the last few share their walk (Snowplow's maxLength strings walked ~2,000 trie nodes
        through the configurations at each character)."""
        m = self.machine
        if not m.numbered:
            return self._walk_mask(cid, keep)
        # the deepest kept node's level + 1: the most bytes of a token on the kept paths
        reach = int(np.searchsorted(token_split.level_offsets(self.vocab.trie()), keep[-1], side="right"))
        key = m.mask_key(cid, reach)  # (its closure's tops are cid's, so are its kept paths)
        return _lru(self._kept, key, lambda: self._walk_mask(key, keep), KEPT_ROWS)

    def _walk_mask(self, cid: int, keep: np.ndarray | None = None) -> np.ndarray:
        """The tokens allowed from configuration `cid` (and EOS where it can end) by a walk of the
        vocabulary trie through the configuration table; only over the global trie node ids
        `keep` (sorted) when given."""
        m = self.machine
        trie = self.vocab.trie()
        levels = trie.levels

        def rows(ids):
            m.ensure_rows(ids)
            return m.table  # (read after: the table may have grown)
        if levels and keep is not None and len(keep) <= KEPT_PY_NODES:
            kept = token_split.kept_tokens(trie, self._config_rows(cid), self._config_rows, keep.tolist())
            kept = token_split.with_duplicates(kept, trie)
            if self.eos_id >= 0 and m.can_end(cid):
                kept.append(self.eos_id)
            return self._list_bits(kept)
        tokens = []
        if levels:
            first = m.row(cid)[levels[0].byte]  # (N_0,) a configuration per node, -1 dead
            walk = token_split.walk_trie(levels, first, rows) if keep is None else \
                token_split.walk_nodes(trie, first, rows, keep)
            for d, node, x in walk:
                tokens.append(token_split.live_tokens(levels, d, node, x)[1])
        allowed = np.concatenate(tokens) if tokens else np.zeros(0, np.int32)
        if self.eos_id >= 0 and m.can_end(cid):
            allowed = np.concatenate([allowed, [self.eos_id]])
        return token_split.token_bits(allowed, trie, self.words).view(np.int32)


class _Interned:
    """The values of a plain-topped configuration's sparse row (_config_rows): its top's DFA
    targets, each interned as a configuration on first read. A walk reads a few of a wide
    row's (a string's content: ~250 bytes, a few trie children looked up); a narrow row's are
    read into a list at once."""

    __slots__ = ("targets", "below", "a", "machine", "ids")

    def __init__(self, targets: list[int], below: Stack, a: int, machine: StackMachine):
        self.targets, self.below, self.a, self.machine, self.ids = targets, below, a, machine, {}

    def __getitem__(self, i: int) -> int:
        t = self.targets[i]
        got = self.ids.get(t)
        if got is None:
            got = self.ids[t] = self.machine.intern_one(self.below + ((self.a, t),))
        return got

    def __iter__(self):
        return iter(self.read())

    def read(self) -> list[int]:
        """Every value, in a list."""
        ids, make = self.ids, self.machine.intern_one
        for t in self.targets:
            if t not in ids:
                ids[t] = make(self.below + ((self.a, t),))
        return [ids[t] for t in self.targets]


def _live_bytes(m: StackMachine, cid: int) -> bytes:
    """The bytes configuration `cid` may read (its row's live columns), without building its row:
    those some stack of its closure reads."""
    stacks = m.closure(cid)
    if not stacks:
        return b""
    live = m.text_trans[stacks[0][-1][0]][stacks[0][-1][1]] >= 0             # (256,)
    for st in stacks[1:]:
        live = live | (m.text_trans[st[-1][0]][st[-1][1]] >= 0)
    return np.flatnonzero(live).astype(np.uint8).tobytes()


class _Stepped:
    """The values of an unbuilt configuration row (_config_rows, a top that is not plain), read
    byte by byte (StackMachine.step) while few are read: a keep walk past a boundary reads a few
    bytes (a comma, a brace, a quote) of the configuration after it, whose whole row (several
    stacks' columns grouped and interned: ~30-90 us) it would otherwise build. Past STEPPED_READS
    reads, or read whole, the row is built and read from."""

    __slots__ = ("cid", "live", "machine", "reads", "got")

    def __init__(self, cid: int, live: bytes, machine: StackMachine):
        self.cid, self.live, self.machine, self.reads, self.got = cid, live, machine, 0, None

    def __getitem__(self, i: int) -> int:
        if self.got is None:
            self.reads += 1
            if self.reads <= STEPPED_READS:
                return self.machine.step(self.cid, self.live[i])
            self.read()
        return self.got[i]

    def __iter__(self):
        return iter(self.read())

    def read(self) -> list[int]:
        """Every value, in a list (the row built)."""
        if self.got is None:
            self.got = self.machine.row(self.cid)[list(self.live)].tolist()
        return self.got


def _write(out: np.ndarray, mask: np.ndarray | tuple[int, ...]) -> None:
    """out (words,) int32 = a cached mask: a row copied, or a few tokens' bits set over zeros
    (a narrow mask: setting them costs less than reading a 19 KB row that has left the cache)."""
    if type(mask) is tuple:
        out.fill(0)
        words = memoryview(out.view(np.uint32))
        for t in mask:
            words[t >> 5] |= 1 << (t & 31)
    else:
        np.copyto(out, mask)


def _lru(cache: OrderedDict, key, build, limit: int):
    """cache[key], built by build() on first need; the least recently used entry out past limit.
    For a grammar's own caches, which one thread uses at a time: no lock on the fill's path
    (lru.LRU holds what grammars and compiles share across threads)."""
    out = cache.get(key)
    if out is None:
        out = cache[key] = build()
        if len(cache) > limit:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return out


def check_grammar_size(machine: StackMachine, max_states: int) -> None:
    if machine.n_states > max_states:
        raise InferlabError(f"the grammar's automata hold {machine.n_states:,} states (limit {max_states:,})")


# Small DFAs by (regex, max_states, check), across compiles: most schemas share a few automata
# (any value, strings, numbers), rebuilt otherwise for each. Kept read-only: machines share them.
SMALL_DFA_STATES = 512   # (S, 256) int32: at most 0.5 MB each
SMALL_DFA_CACHE = 512    # entries
_SMALL_DFAS = LRU(SMALL_DFA_CACHE)  # (regex, max_states, check) -> its DFA


def clear_compile_caches() -> None:
    """Forget what compiles keep across schemas (small DFAs, length-bounded strings' DFAs, the
    parser's class texts), so the next compile is a cold one (benchmarks/compile_speed.py)."""
    from inferlab.constrain import regex as rx
    from inferlab.constrain.schema.algebra import clear_bounded

    _SMALL_DFAS.clear()
    clear_bounded()
    rx.clear_memo()


def _keep_small(key: tuple, dfa: DFA) -> None:
    if dfa.n_states > SMALL_DFA_STATES:
        return
    dfa.trans.flags.writeable = False
    dfa.accepting.flags.writeable = False
    _SMALL_DFAS[key] = dfa


def compile_machine(schema, *, max_states: int = DEFAULT_MAX_STATES, check=None, **options):
    """JSON Schema -> (CompiledGrammar, StackMachine): the one compile path of the stack grammar
    (the matcher API, generate, the HF processor, `inferlab schema`, schema-bench).

    Each automaton's DFA stays within max_states; where one does not, subschemas are outlined
    into automata of their own from a smaller size on (schema.OUTLINE_CHARS in turn) before the
    schema is refused. A SchemaError is final: keywords, or an expansion (subschemas, automata,
    a regex past MAX_REGEX_CHARS, which only calls-off parts can reach), that the outline size
    does not change. An automaton whose regex a larger size gave too is not built again: its
    DFA, or its refusal, is kept by regex text; small DFAs are kept across compiles too.
    check(k, ast) may refuse automaton k's regex before its DFA is built (InferlabError).
    options: those of schema.compile_grammar but outline_chars.
    """
    from inferlab.constrain import regex as rx
    from inferlab.constrain.dfa import compile_ast
    from inferlab.constrain.schema import OUTLINE_CHARS, SchemaError, compile_grammar

    built: dict[str, DFA | InferlabError] = {}  # regex -> its DFA or its refusal

    def dfa_of(k: int, regex: str) -> DFA:
        out = built.get(regex)
        if out is None:
            key = (regex, max_states, check)
            out = _SMALL_DFAS.get(key)
            if out is None:
                try:
                    ast = rx.parse(regex)
                    if check is not None:
                        check(k, ast)
                    out = compile_ast(ast, max_states=max_states)
                except InferlabError as exc:
                    out = exc
                else:
                    _keep_small(key, out)
            built[regex] = out
        if isinstance(out, InferlabError):
            raise out
        return out

    # The cyclic GC paused: a compile allocates millions of small objects (AST and NFA nodes,
    # subset keys) that live until it ends, and the collector's passes over them took about a
    # third of the compile time of large schemas; what cycles it leaves are collected after.
    with gc_disabled():
        for n, outline in enumerate(OUTLINE_CHARS):
            try:
                compiled = compile_grammar(schema, outline_chars=outline, **options)
                dfas = _automaton_dfas(compiled, dfa_of, max_states)
                return compiled, StackMachine(dfas, compiled.counts, compiled.maps, compiled.uniques)
            except SchemaError:
                raise  # the schema's keywords or its expansion: outlining changes neither
            except InferlabError:
                if n + 1 == len(OUTLINE_CHARS):
                    raise
    raise AssertionError("unreachable")
