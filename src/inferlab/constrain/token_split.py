"""xgrammar's split of a token mask: tokens decided inside one automaton, and the few that are not.

A configuration's stacks differ below their top frames, but what a token does while its bytes stay
inside the top frame's automaton depends on the frame's (automaton, DFA state) alone. So for each
(automaton, state), built on first need and shared by every configuration and stack that has it
on top:

- *accepted*: the tokens whose bytes all walk inside the automaton from that state (a bit row);
- *context-dependent*: the tokens whose walk inside the automaton reaches a state where a push
  or a pop may happen (a call edge, an accepting state) before their last byte, with a next byte
  that the pushed callee or the caller returned to may read: their fate depends on the stack.
  They are kept as the trie nodes on their paths (those nodes, their ancestors and all their
  descendants).

Every other token dies inside the automaton, whatever the stack. A configuration's mask is then
the union over its closure's top frames of the accepted rows, plus the context-dependent tokens
walked through the configurations (StackGrammar._build_mask), a walk of a few trie nodes instead
of the whole trie: the frame that first pushes or pops on a surviving token's path is a top
frame of the closure whose walk reached a boundary before that byte.

Both walks are numpy over one trie level at a time (`walk_trie`): over the live nodes while they
are few (sparse), over the whole level once they are 1/DENSE_SHARE of it or more (dense).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab.constrain.index import _expand

DENSE_SHARE = 4  # walk a trie level densely from 1/4 of its nodes live


@dataclass(frozen=True, eq=False)
class FrameTokens:
    accepted: np.ndarray      # (ceil(V/32),) uint32 bits: decided inside the automaton, allowed
    keep: np.ndarray | None   # sorted global trie node ids on context-dependent paths; None: too
    #                           many (the configuration's mask is then one walk of the whole trie)


def walk_trie(levels, first: np.ndarray, rows, member=None):
    """Yield (depth, nodes, x) per trie level: x the value (a state; -1 dead) of each node of
    `nodes`, or of every node of the level where nodes is None (dense).

    first: (N_0,) the value of each depth-0 node. rows(ids) -> the transition table (ids, 256)
    indexes, after making sure the rows of the live values `ids` exist. member(d, nodes) -> bool:
    restricts the walk to those nodes (always sparse)."""
    x, node = first, None
    if member is not None:
        node = np.flatnonzero((x >= 0) & member(0, np.arange(len(x))))
        x = x[node]
    for d, lv in enumerate(levels):
        yield d, node, x
        live = int(np.count_nonzero(x >= 0)) if node is None else len(node)
        if d + 1 == len(levels) or not live:
            return
        nxt = levels[d + 1]
        if member is None and live * DENSE_SHARE >= len(lv.byte):
            if node is not None:
                x, node = _scatter(x, node, len(lv.byte)), None
            table = rows(x[x >= 0])
            xp = x[nxt.parent]                                           # (N_{d+1},) parent values
            x = np.where(xp >= 0, table[xp, nxt.byte], -1)
        else:
            if node is None:
                node = np.flatnonzero(x >= 0)
                x = x[node]
            rep, child = _expand(lv.child_start[node], lv.child_count[node])
            if member is not None:
                inside = member(d + 1, child)
                rep, child = rep[inside], child[inside]
            parent = x[rep]
            x = rows(parent)[parent, nxt.byte[child]]                    # (children,)
            keep = x >= 0
            node, x = child[keep], x[keep]


def _scatter(x: np.ndarray, node: np.ndarray, n: int) -> np.ndarray:
    """Sparse (node ids, values) -> dense (n,) values, -1 elsewhere."""
    out = np.full(n, -1, dtype=np.int32)
    out[node] = x
    return out


def live_tokens(levels, d: int, node, x) -> tuple[np.ndarray, np.ndarray]:
    """(live node ids, their end tokens >= 0) of one level of walk_trie."""
    alive = np.flatnonzero(x >= 0) if node is None else node
    end = levels[d].end_token[alive]
    return alive, end[end >= 0]


def token_bits(tokens: np.ndarray, trie, words: int) -> np.ndarray:
    """(words,) uint32 bits of `tokens` and of the tokens with the same bytes as one of them."""
    bits = np.zeros(words * 32, dtype=np.uint8)
    bits[tokens] = 1
    if len(trie.duplicates):  # a token with the bytes of another behaves exactly like it
        dup = trie.duplicates
        bits[dup[bits[dup[:, 1]] == 1, 0]] = 1
    return np.packbits(bits, bitorder="little").view(np.uint32)


def frame_tokens(trie, trans: np.ndarray, exits: tuple[np.ndarray, np.ndarray], state: int, words: int) -> FrameTokens:
    """The split for one (automaton, state): trans (S, 256) the automaton's transitions inside a
    frame; exits (StackMachine.exits): per state, the row of the bytes that may be read after a
    push or pop there (-1: none may happen)."""
    levels = trie.levels
    exit_row, exit_bytes = exits
    accepted, seeds = [], []
    for d, node, x in walk_trie(levels, trans[state][levels[0].byte] if levels else None, lambda ids: trans):
        alive, end = live_tokens(levels, d, node, x)
        accepted.append(end)
        rows = exit_row[x[alive] if node is None else x]
        at = (rows >= 0) & (levels[d].child_count[alive] > 0)
        seeds.append((alive[at], rows[at]))
    tokens = np.concatenate(accepted) if accepted else np.zeros(0, np.int32)
    return FrameTokens(token_bits(tokens, trie, words), _paths(levels, seeds, exit_bytes, trie.n_nodes // DENSE_SHARE))


def _paths(levels, seeds: list, exit_bytes: np.ndarray, limit: int) -> np.ndarray | None:
    """Global ids (level offset + node) of the context-dependent paths: the seeds' children by an
    exit byte and all their descendants, and the ancestors of those children; None past `limit`."""
    offsets = np.cumsum([0] + [len(lv.byte) for lv in levels])
    parts, total = [], 0
    below = np.zeros(0, np.int64)                # context-dependent nodes at depth d
    heads = [np.zeros(0, np.int64) for _ in levels]  # per depth: the seeds with a child kept
    for d, lv in enumerate(levels):
        seed = seeds[d][0] if d < len(seeds) else below[:0]
        if not len(below) and not len(seed):
            if d + 1 >= len(seeds):
                break
            continue
        parts.append(offsets[d] + below)
        total += len(below)
        if total > limit:
            return None
        if d + 1 == len(levels):
            break
        _, kids = _expand(lv.child_start[below], lv.child_count[below])
        if len(seed):
            row = seeds[d][1]
            rep, child = _expand(lv.child_start[seed], lv.child_count[seed])
            out = exit_bytes[row[rep], levels[d + 1].byte[child]]
            heads[d] = np.unique(seed[rep[out]])
            kids = np.concatenate([kids, child[out]])
        below = np.unique(kids)
    up = np.zeros(0, np.int64)                   # ancestors-or-self of the kept seeds, at depth d
    for d in range(len(heads) - 1, -1, -1):
        if not len(up) and not len(heads[d]):
            continue
        cur = np.unique(np.concatenate([up, heads[d]]))
        parts.append(offsets[d] + cur)
        up = levels[d].parent[cur] if d else up
    out = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    return None if len(out) > limit else out
