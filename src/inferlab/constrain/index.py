"""The token index: for every DFA state reachable through tokens, the allowed tokens and where
each one leads. A decode step is then a lookup.

Built by walking (origin state, trie node) pairs one byte depth at a time with numpy over the
vocabulary's byte trie (vocab.py), so tokens that share a prefix share its walk: sparse rows keep
only the live pairs (cost ~ live (state, prefix) pairs), rows that allow most first bytes (inside
a string) walk whole trie levels densely. Breadth-first over the states the tokens reach. The
result is laid out without a sort: bitmask first, then each entry goes to its popcount rank.
Special tokens are never allowed, except EOS in accepting states.
Layout per row (one row per reachable state): the sorted allowed ids (int32) with their next
states (CSR), and an int32 bitmask row of ceil(V/32) words, bit t%32 of word t//32 set iff token
t is allowed: the layout of outlines-core and xgrammar.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from inferlab.constrain.dfa import DFA
from inferlab.constrain.vocab import Vocabulary


def _expand(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For pairs with `count` children starting at `start`: (pair index, child index) per child."""
    total = int(count.sum())
    rep = np.repeat(np.arange(len(count)), count)                          # (total,)
    first = np.cumsum(count) - count
    idx = np.arange(total) - np.repeat(first - start, count)               # (total,)
    return rep, idx


@dataclass(frozen=True, eq=False)
class TokenIndex:
    dfa: DFA
    vocab_size: int
    eos_id: int
    states: np.ndarray      # (R,) int32: the DFA state of each row, ascending
    row_of: np.ndarray      # (S,) int32: the row of each DFA state, -1 = unreachable through tokens
    offsets: np.ndarray     # (R+1,) int64: row r's entries are allowed[offsets[r]:offsets[r+1]]
    allowed: np.ndarray     # (N,) int32 token ids, ascending within a row; EOS in accepting rows
    next_state: np.ndarray  # (N,) int32 DFA state after the token (EOS: the state itself)
    bitmask: np.ndarray     # (R, ceil(V/32)) int32
    apply_keep: np.ndarray  # (R,) bool: row r applies by keeping its allowed ids, else by
                            # writing -inf at its disallowed ids (whichever list is shorter)
    apply_offsets: np.ndarray  # (R+1,) int64 into apply_ids
    apply_ids: np.ndarray   # (M,) intp: numpy converts any other index dtype on every call
    build_seconds: float    # the index build alone; the trie (vocabulary preprocessing) is apart

    @property
    def n_rows(self) -> int:
        return len(self.states)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.states, self.row_of, self.offsets, self.allowed,
                                      self.next_state, self.bitmask, self.apply_keep,
                                      self.apply_offsets, self.apply_ids))

    @property
    def start_row(self) -> int:
        return int(self.row_of[self.dfa.start])

    def row_allowed(self, row: int) -> np.ndarray:
        return self.allowed[self.offsets[row]:self.offsets[row + 1]]

    def apply_plan(self, row: int) -> tuple[bool, np.ndarray]:
        """(keep, ids): keep -> ids are the allowed tokens, else the disallowed ones."""
        return bool(self.apply_keep[row]), self.apply_ids[self.apply_offsets[row]:self.apply_offsets[row + 1]]

    def next_row(self, row: int, token: int) -> int:
        """The row after `token` from `row`, or -1 if the token is not allowed there."""
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        k = lo + int(np.searchsorted(self.allowed[lo:hi], token))
        if k == hi or self.allowed[k] != token:
            return -1
        return int(self.row_of[self.next_state[k]])

    @classmethod
    def build(cls, dfa: DFA, vocab: Vocabulary) -> "TokenIndex":
        trie = vocab.trie()  # cached per vocabulary; its time is reported by the trie itself
        t0 = time.perf_counter()
        q, tok, nxt, states = _walk(dfa, trie)
        if len(trie.duplicates):  # a token with the bytes of another behaves exactly like it
            dup, primary = trie.duplicates[:, 0], trie.duplicates[:, 1]
            hit = np.flatnonzero(np.isin(tok, primary))
            which = np.searchsorted(primary, tok[hit], sorter=np.argsort(primary))
            src = np.argsort(primary)[which]
            q, tok, nxt = (np.concatenate([q, q[hit]]), np.concatenate([tok, dup[src]]),
                           np.concatenate([nxt, nxt[hit]]))
        row_of = np.full(dfa.n_states, -1, dtype=np.int32)
        row_of[states] = np.arange(len(states), dtype=np.int32)
        acc = states[dfa.accepting[states]]
        if vocab.eos_id >= 0:  # EOS only where the output is complete; it keeps the state
            q = np.concatenate([q, acc])
            tok = np.concatenate([tok, np.full(len(acc), vocab.eos_id, dtype=np.int32)])
            nxt = np.concatenate([nxt, acc])
        allowed, next_state, offsets, bitmask = _layout(row_of[q].astype(np.int64), tok, nxt,
                                                        len(states), vocab.vocab_size)
        keep, apply_offsets, apply_ids = _apply_lists(allowed, offsets, bitmask, vocab.vocab_size)
        return cls(dfa, vocab.vocab_size, vocab.eos_id, states.astype(np.int32), row_of, offsets,
                   allowed, next_state, bitmask, keep, apply_offsets, apply_ids, time.perf_counter() - t0)


def _apply_lists(allowed, offsets, bitmask, V: int, chunk: int = 64):
    """Per row the shorter of its allowed and its disallowed ids, as one intp CSR."""
    n_allowed = np.diff(offsets)                                            # (R,)
    keep = n_allowed <= V // 2
    parts: list[np.ndarray] = []
    lengths = np.where(keep, n_allowed, V - n_allowed)
    big = np.flatnonzero(~keep)
    complements = {}
    for i in range(0, len(big), chunk):  # unpack a few rows at a time: (chunk, V) bytes
        rows = big[i:i + chunk]
        bits = np.unpackbits(bitmask[rows].view(np.uint8), axis=1, count=V, bitorder="little")
        r, col = np.nonzero(bits == 0)
        split = np.searchsorted(r, np.arange(1, len(rows)))
        complements.update(zip(rows.tolist(), np.split(col, split)))
    for row in range(len(keep)):
        parts.append(allowed[offsets[row]:offsets[row + 1]] if keep[row] else complements[row])
    apply_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.concatenate(parts).astype(np.intp) if parts else np.zeros(0, np.intp)
    return keep, apply_offsets, ids


def _layout(row: np.ndarray, tok: np.ndarray, nxt: np.ndarray, n_rows: int, V: int):
    """Place (row, token, next) triples in row-major, token-ascending order without sorting.

    The bitmask is built first; a triple's position is then its rank: the row's offset plus the
    popcount of the row's bits below the token, O(N) in all.
    """
    words = (V + 31) // 32
    word_key = row * words + (tok >> 5)                                     # (N,)
    bit = np.left_shift(np.uint32(1), (tok & 31).astype(np.uint32))         # (N,)
    # Each (row, token) occurs once, so the bits summed into a word are distinct: sum == OR.
    # float64 holds those sums (< 2**32) exactly; bincount is the fastest scatter-add in numpy.
    flat = np.bincount(word_key, weights=bit, minlength=n_rows * words).astype(np.uint32)  # (R*W,)
    pop = np.bitwise_count(flat)                                            # (R*W,) uint8
    incl = np.cumsum(pop, dtype=np.int64)
    before = incl - pop                                                     # bits before each word
    offsets = np.concatenate([[0], incl[words - 1::words]]) if n_rows else np.zeros(1, np.int64)
    rank = before[word_key] + np.bitwise_count(flat[word_key] & (bit - np.uint32(1)))  # (N,)
    allowed = np.empty(len(tok), dtype=np.int32)
    next_state = np.empty(len(tok), dtype=np.int32)
    allowed[rank] = tok
    next_state[rank] = nxt
    return allowed, next_state, offsets.astype(np.int64), flat.view(np.int32).reshape(n_rows, words)


# A row whose first byte may be most of the 256 (inside a string, say) keeps most of the trie
# alive: it is walked densely over whole trie levels (~4 array passes per node), cheaper there
# than compacting live pairs (~20 passes per live pair). Other rows walk sparse, live pairs only.
DENSE_FIRST_BYTES = 0.5
DENSE_CHUNK = 32  # dense rows per batch: (32, largest level) int64 is ~15 MB at Qwen's trie
SPARSE_CHUNK = 256  # sparse rows per batch, so live pairs of big automata stay in the 10^6s


def _walk(dfa: DFA, trie) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Breadth-first over DFA states reached through tokens; each round walks the whole trie.

    Returns (origin state, token id, next state) per allowed token, and the reached states.
    States are carried premultiplied, x = s << 8, so a step is one take() at x + byte; the dead
    state is an extra absorbing row S, so dense walks need no compaction.
    """
    S = dfa.n_states
    dead = S << 8
    trans = np.where(dfa.trans >= 0, dfa.trans.astype(np.int64) << 8, dead)       # (S, 256)
    table = np.concatenate([trans.reshape(-1), np.full(256, dead, dtype=np.int64)])  # ((S+1)*256,)
    levels = trie.levels
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    seen = np.zeros(S, dtype=bool)
    seen[dfa.start] = True
    frontier = np.array([dfa.start], dtype=np.int64)
    done = 0  # entries of `out` whose next states are already marked
    while len(frontier) and levels:
        x0 = np.take(table, (frontier << 8)[:, None] + levels[0].byte[None, :])      # (F, N_0)
        live0 = x0 != dead
        dense = live0.mean(axis=1) > DENSE_FIRST_BYTES                              # (F,)
        for i in range(0, int(dense.sum()), DENSE_CHUNK):
            rows = np.flatnonzero(dense)[i:i + DENSE_CHUNK]
            _walk_dense(frontier[rows], x0[rows], levels, table, dead, out)
        sparse = np.flatnonzero(~dense)
        for i in range(0, len(sparse), SPARSE_CHUNK):
            rows = sparse[i:i + SPARSE_CHUNK]
            r, node = np.nonzero(live0[rows])
            _walk_sparse(frontier[rows[r]], node, x0[rows[r], node], levels, table, dead, out)
        reached = np.zeros(S, dtype=bool)
        for _, _, nxt in out[done:]:
            reached[nxt] = True
        done = len(out)
        frontier = np.flatnonzero(reached & ~seen)
        seen |= reached
    empty = np.zeros(0, np.int64)
    q, tok, nxt = (np.concatenate(parts or [empty]) for parts in zip(*out)) if out else (empty, empty, empty)
    return q, tok.astype(np.int32), nxt, np.flatnonzero(seen)


def _walk_dense(q: np.ndarray, x: np.ndarray, levels, table, dead: int, out: list) -> None:
    """Rows q (B,) over whole trie levels; x (B, N_0) premultiplied states at depth 0."""
    for d, lv in enumerate(levels):
        ends = lv.end_nodes
        xe = x[:, ends]                                                           # (B, E_d)
        r, c = np.nonzero(xe != dead)
        out.append((q[r], lv.end_token[ends[c]], xe[r, c] >> 8))
        if d + 1 == len(levels):
            return
        nxt = levels[d + 1]
        x = np.take(table, x[:, nxt.parent] + nxt.byte[None, :])                  # (B, N_d+1)
        if not (x != dead).any():
            return


def _walk_sparse(q: np.ndarray, node: np.ndarray, x: np.ndarray, levels, table, dead: int, out: list) -> None:
    """Live (origin, node at depth 0, premultiplied state) triples, expanded a level at a time."""
    for d, lv in enumerate(levels):
        if not len(q):
            return
        end = lv.end_token[node]                                                  # tokens ending here
        has = end >= 0
        out.append((q[has], end[has], x[has] >> 8))
        if d + 1 == len(levels):
            return
        rep, child = _expand(lv.child_start[node], lv.child_count[node])
        x = np.take(table, x[rep] + levels[d + 1].byte[child])
        live = x != dead
        q, node, x = q[rep][live], child[live], x[live]
