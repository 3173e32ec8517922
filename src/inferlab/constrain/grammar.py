"""The stack grammar: the token masks of a StackMachine (machine.py) over a vocabulary.

A token mask is first walked in Python through the configuration table, node by node of the
vocabulary's trie, where that walk stays narrow (token_split.narrow_tokens: literal text, structure,
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

Counted frames and maps (machine.py): masks are keyed by the configuration with each count clamped
(StackMachine.mask_key); near a max, the tokens that stay inside a counted frame are those that
begin few enough items (token_split.counted_tokens). The written keys are resolved against a
cached row per state (fill_bitmask), so cached rows never depend on the keys.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np

from inferlab.constrain import keys, native, token_split
from inferlab.constrain.machine import ROW_LOOP_BYTES, Frame, Stack, StackMachine, State, _canonical
from inferlab.constrain.masks import unpack_bitmask

MASK_CACHE_ROWS = 4096            # cached bitmask rows (ceil(V/32) int32 each: 19 KB at 151k tokens)
CLEARED_CACHE_STATES = 65536     # states whose resolved tokens are kept (a mask key and a few ids each)
ADVANCE_STEPS = 65536            # (state, token) -> next state kept (LRU; advance)
MAX_FORCED_BYTES = 4096
ROW_LISTS = 8192                  # sparse rows kept for the Python walk, per kind
QUOTED_ROWS = 65536               # narrow rows whose tokens with a quote are kept (a few ids each)
DFA_BLOCK = 64                    # an automaton's walk handles are made for this many states in one pass
TWIN_STATES = 256                 # automata up to this size are matched with their twins (_twin)
SPARSE_TOKENS = 32                # a narrow mask of fewer tokens is cached as their ids (_write)
FEW_CANDIDATES = 64               # the keys' candidates are filtered by the row in Python up to this many
KEPT_PY_NODES = 256               # a keep walk over at most this many trie nodes is walked in Python
KEPT_ROWS = 1024                  # kept walks cached per clamped configuration (_kept_walk; a row each)
STEPPED_READS = 8                 # a walk's byte-by-byte reads of an unbuilt row before it builds the row
FEW_NATIVE_TOKENS = 256           # a native row of fewer tokens is read as their ids (its quoted ones kept, _refused)
NARROW_NODES = 400                # a mask is walked node by node in Python while it looks at fewer trie children
# compile_json_schema's and schema-bench's warm-up (warm) by default: none, every mask built when
# first asked. A warm-up is paid in full in the time to first mask (TTFM = compile + first mask),
# which issue 48 holds to llguidance's median; 30 ms before it put our TTFM median over 30 ms
# whatever the compile. A caller whose compile overlaps the prompt's prefill may pass warm_ms.
WARM_MS = 0.0

_UNSEEN = object()  # (advance's cache: None is a value, a dead token)
_BIT = np.uint32(1) << np.arange(32, dtype=np.uint32)  # (32,) a token's bit within its word


@dataclass(frozen=True)
class GrammarStats:
    automata: int
    dfa_states: int
    uses_stack: bool
    configurations: int  # built so far (grows as text or masks visit them)
    narrow_masks: int    # masks made so far by a narrow walk (_narrow_mask)
    split_masks: int     # masks made so far by frame splits or a walk of the whole trie (_build_mask)
    native_masks: int = 0  # masks made so far by the native engine (native.NativeMasks)


class StackGrammar:
    """The matcher API's Grammar (docs/architecture.md) over a StackMachine and a vocabulary."""

    def __init__(self, machine: StackMachine, vocab, *, cache_rows: int = MASK_CACHE_ROWS,
                 narrow_nodes: int = NARROW_NODES, warm_ms: float = 0.0, engine: str | None = None):
        self.machine = machine
        self.engine_asked = engine or native.requested()  # INFERLAB_ENGINE's, where the caller names none
        self.engine = native.in_use(self.engine_asked)    # "native", or "python" (asked, or not built)
        self._native = native.NativeMasks(machine, vocab, narrow_nodes > 0) if self.engine == "native" else None
        self._write_row = native.write_row() if self._native is not None else None
        self.vocab = vocab
        self.vocab_size = vocab.vocab_size
        self.eos_id = vocab.eos_id
        self.words = (self.vocab_size + 31) // 32
        self._cache_rows = cache_rows
        self.narrow_nodes = narrow_nodes  # a mask walked in Python up to this many trie children (0: never)
        self._cache_states = CLEARED_CACHE_STATES
        self.clear()
        self.reach = max(len(vocab.trie().levels), 1)  # bytes of the longest token (a level per byte)
        self._narrow_made = self._split_made = self._native_made = 0  # stats()
        self.warmed = self.warm(warm_ms / 1e3) if warm_ms > 0 else 0  # configurations warmed (warm)

    def clear(self) -> None:
        """Forget every mask, split and step this grammar keeps (each bounded: MASK_CACHE_ROWS
        rows, CLEARED_CACHE_STATES states, ADVANCE_STEPS steps, ROW_LISTS rows of the walk...);
        the machine's configurations stay (states name them). What grammars share across a
        process is caches.CACHES's."""
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cleared: OrderedDict[State, tuple[int, tuple[int, ...]]] = OrderedDict()  # state -> (mask key, cleared)
        self._advance: OrderedDict[tuple[State, int], State | None] = OrderedDict()  # (state, token) -> advance
        self._keys: dict[int, int] = {}  # _mask_key
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
        return GrammarStats(m.n_automata, m.n_states, m.uses_stack, len(m.configs), self._narrow_made, self._split_made,
                            self._native_made)

    def initial_state(self) -> State:
        return State(self.machine.start, keys.START)

    def can_end(self, state: State) -> bool:
        return self.machine.can_end(state.config)

    def advance(self, state: State, token: int) -> State | None:
        if not 0 <= token < self.vocab_size:  # (before EOS: a vocabulary without one has eos_id -1)
            return None
        if token == self.eos_id:
            return state if self.can_end(state) else None
        if token in self.vocab.special_ids:
            return None
        key = (state, token)
        got = self._advance.get(key, _UNSEEN)
        if got is _UNSEEN:
            data = self.vocab.token_bytes[token]
            got = self._advance[key] = self.machine.feed(state, data) if data else None
            if len(self._advance) > ADVANCE_STEPS:
                self._advance.popitem(last=False)
        else:
            self._advance.move_to_end(key)
        return got

    def forced_bytes(self, state: State) -> bytes:
        """Read off the configuration alone: where the written keys rule out all but one byte,
        the forced text may stop short (never wrong)."""
        out = bytearray()
        cid = state.config
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
        frontier = [(b"", m.walk(self.forced_bytes(state), state.config))]
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
            key = self._mask_key(state.config)
            _write(out, self._row(key))
            hit = self._cleared[state] = key, self._refused(state, key, out)
            if len(self._cleared) > self._cache_states:
                self._cleared.popitem(last=False)
        else:  # the warm path: every step of a walk seen before comes here
            self._cleared.move_to_end(state)
            row = self._row(hit[0])
            if self._write_row is not None:  # the row and the cleared bits in one native call
                self._write_row(out, row, hit[1])
                return
            _write(out, row)
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
            if len(self._keys) >= CLEARED_CACHE_STATES:
                self._keys.clear()
            key = self._keys[cid] = self.machine.mask_key(cid, self.reach)
        return key

    def _row(self, key: int) -> np.ndarray | tuple[int, ...]:
        """Mask key `key`'s (words,) int32 row, or its few tokens where a narrow walk found
        fewer than SPARSE_TOKENS (_write), built on first need, cached (LRU). (_lru written out:
        every fill reads a row here, and a closure per call was a tenth of a warm fill.)"""
        masks = self._masks
        row = masks.get(key)
        if row is None:
            row = masks[key] = self._engine_mask(key)
            if len(masks) > self._cache_rows:
                masks.popitem(last=False)
        else:
            masks.move_to_end(key)
        return row

    def _engine_mask(self, key: int) -> np.ndarray | tuple[int, ...]:
        """Mask key `key`'s row by the engine in use (the written keys aside)."""
        if self._native is None:
            native.announce_fallback(self.engine_asked)
            return self._build_mask(key)
        top = self._plain_top(key) if self.narrow_nodes else None
        got = self._plain_masks.get(top) if top is not None else None
        if got is not None:  # (another configuration's with this plain top: _narrow_mask's cache)
            self._note_quoted(key, got[1])
            return got[0]
        self._native_made += 1
        row, allowed, top_only = self._native.row(key)
        if allowed >= FEW_NATIVE_TOKENS:
            return row
        tokens = native.row_tokens(row)  # (as a narrow walk's row: _refused tests its quoted tokens alone)
        got = (tuple(tokens) if allowed < SPARSE_TOKENS else row), self._quoted_of(tokens)
        self._note_quoted(key, got[1])
        if top is not None and top_only:
            self._keep_plain(top, got)
        return got[0]

    def _sparse(self, row: np.ndarray) -> tuple[int, ...]:
        """A row of few tokens as their ids (_write sets them): a cached row costs its tokens, not 19 KB."""
        return tuple(np.flatnonzero(unpack_bitmask(row, self.vocab_size)).tolist())

    def fill_rows(self, states, threads: int | None = None) -> None:
        """Build the uncached rows of `states` (a batch's) in one native call, walked on up to
        `threads` threads at once (default: the CPUs), so that each row's fill_bitmask after it
        copies a cached row; nothing where the Python engine is in use (its rows are built by
        fill_bitmask, one at a time)."""
        if self._native is None:
            return
        todo = dict.fromkeys(self._mask_key(s.config) for s in states if s not in self._cleared)
        todo = [k for k in todo if k not in self._masks]
        if not todo:
            return
        rows = self._native.rows(todo, threads or os.cpu_count() or 1)
        self._native_made += len(todo)
        for k, row in zip(todo, rows):
            few = int(np.bitwise_count(row.view(np.uint32)).sum()) < SPARSE_TOKENS
            _lru(self._masks, k, lambda row=row, few=few: self._sparse(row) if few else row, self._cache_rows)

    def _refused(self, state: State, key: int, out: np.ndarray) -> tuple[int, ...]:
        """The tokens allowed in the row `out` of mask key `key` that the written keys refuse."""
        m = self.machine
        quoted = self._quoted.get(key)
        if quoted is not None and not (m.finite_maps and m.holds_finite_map(state.config)):
            # a narrow row: its few tokens with a quote are the candidates below, tested one by one;
            # outside a key being written, only those holding a whole quoted string can repeat one
            quoted, held = quoted
            if m.finite_maps:
                cands = quoted
            else:
                cands = held if state.keys.key is None else quoted
                cands = self.key_index.may_close_repeat(cands, state.keys) if cands else ()
            return tuple(t for t in cands if self._refuses(state, t))
        if not m.finite_maps:
            # keys.KeyIndex.candidates in the row: the fixed part's are the same for every state of
            # this mask key (kept), the varying parts' mostly none
            varying = self.key_index.varying(state.keys)
            if varying is None:
                cands = self._in_row(self.key_index.any_quote, out)
            else:
                cands = self._row_fixed(key, state.keys.key is not None, out)
                for part in varying:
                    cands = cands + self._in_row(part, out) if len(part) else cands
            return tuple(t for t in dict.fromkeys(cands) if t != self.eos_id and self._refuses(state, t))
        if m.holds_finite_map(state.config) and m.keys_plenty(state.keys, self.reach):
            cands = self._prefix_candidates(state.keys)
        elif m.holds_finite_map(state.config):
            # keys can run out: within a key every allowed token is checked, else those that can
            # begin a member (a key's first byte is a quote, a comma or white space before it)
            cands = None if state.keys.key is not None else self.key_index.member_start
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
            return keys.closes_repeat(state.keys, self.vocab.token_bytes[t])
        return m.feed(state, self.vocab.token_bytes[t]) is None

    def _prefix_candidates(self, ctx) -> np.ndarray:
        """Where no finite map can run out of keys within a token (keys_plenty): the tokens
        that may close a repeated key, write two quotes (close a key, then begin one), or go on
        along a written key: from the key being written, or after a quote."""
        index = self.key_index
        names = [_canonical(name) for objs in ctx.objs if objs is not None for name in objs]
        out = [index.two_quotes]
        repeat = index.candidates(ctx)
        out.append(index.any_quote if repeat is None else repeat)
        none = index.two_quotes[:0]
        out += [index.after_quote.get(b, none) for b in {raw[0] for raw in names if raw}]
        key = ctx.key
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
            quoted = self._quoted_of(tokens)
            if self.eos_id >= 0 and m.can_end(cid):
                tokens.append(self.eos_id)
            got = (tuple(tokens) if len(tokens) < SPARSE_TOKENS else self._list_bits(tokens)), quoted
            self._narrow_made += 1
            if top is not None and not crossed:
                self._keep_plain(top, got)
        self._note_quoted(cid, got[1])
        return got[0]

    def _keep_plain(self, top: tuple[int, int, bool], got: tuple) -> None:
        """Keep a plain top frame's (mask, quoted tokens), every configuration's with it on top."""
        if len(self._plain_masks) >= self._cache_rows:
            self._plain_masks.clear()
        self._plain_masks[top] = got

    def _quoted_of(self, tokens: list[int]) -> tuple[list[int], list[int]]:
        """(those of a row's tokens with a quote, and of those, with a whole quoted string): what
        _refused tests of a row whose tokens are known."""
        index = self.key_index
        quoted = [t for t in tokens if index.has_quote[t]]
        return quoted, [t for t in quoted if index.holds_key[t]]

    def _note_quoted(self, key: int, quoted: tuple[list[int], list[int]]) -> None:
        """Keep mask key `key`'s quoted tokens (_quoted_of's pair) for _refused."""
        if len(self._quoted) >= QUOTED_ROWS:
            self._quoted.clear()
        self._quoted[key] = quoted

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
