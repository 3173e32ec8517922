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
are few (sparse), over the whole level once they are 1/DENSE_SHARE of it or more (dense). Walks
are shared where the automaton allows: a string content loop's walk once per shape for the whole
process (`region`), a state that differs from a loop state on a few bytes from that state's
split (`delta_frame`), and a whole split by its automaton's digest wherever that automaton recurs,
in this schema or another over the vocabulary (`frame_cache`, StackGrammar._frame). A
configuration whose tokens are few (literal text, structure, numbers) is walked in Python before
any of this (`narrow_tokens`): a few trie nodes cost less than numpy's calls per level.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from inferlab.constrain.caches import CACHES
from inferlab.constrain.index import _expand
from inferlab.constrain.lru import LRU

DENSE_SHARE = 4  # walk a trie level densely from 1/4 of its nodes live
FRAME_NARROW_NODES = 400  # a frame is walked in Python while it looks at fewer trie children


@dataclass(frozen=True, eq=False)
class FrameTokens:
    accepted: np.ndarray      # (ceil(V/32),) uint32 bits: decided inside the automaton, allowed
    keep: np.ndarray | None   # sorted global trie node ids on context-dependent paths (at least:
    #                           delta_frame's may hold more); None: too many (the configuration's
    #                           mask is then one walk of the whole trie)

    @property
    def nbytes(self) -> int:
        return self.accepted.nbytes + (0 if self.keep is None else self.keep.nbytes)


_OFFSETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def level_offsets(trie) -> np.ndarray:
    """(levels + 1,) int64: the first global node id of each trie level, then the node count
    (computed once per trie)."""
    out = _OFFSETS.get(trie)
    if out is None:
        out = _OFFSETS[trie] = np.cumsum([0] + [len(lv.byte) for lv in trie.levels])
    return out


def walk_trie(levels, first: np.ndarray, rows):
    """Yield (depth, nodes, x) per trie level: x the value (a state; -1 dead) of each node of
    `nodes`, or of every node of the level where nodes is None (dense).

    first: (N_0,) the value of each depth-0 node. rows(ids) -> the transition table (ids, 256)
    indexes, after making sure the rows of the live values `ids` exist."""
    x, node = first, None
    for d, lv in enumerate(levels):
        yield d, node, x
        live = int(np.count_nonzero(x >= 0)) if node is None else len(node)
        if d + 1 == len(levels) or not live:
            return
        nxt = levels[d + 1]
        if live * DENSE_SHARE >= len(lv.byte):
            if node is not None:
                x, node = _scatter(x, node, len(lv.byte)), None
            table = rows(x[x >= 0])
            xp = x[nxt.parent]                                           # (N_{d+1},) parent values
            x = np.where(xp >= 0, table[xp, nxt.byte], -1)
        else:
            if node is None:
                node = np.flatnonzero(x >= 0)
                x = x[node]
            node, x = _children(lv, nxt, node, x, rows)


def _children(lv, nxt, node: np.ndarray, x: np.ndarray, rows) -> tuple[np.ndarray, np.ndarray]:
    """One sparse trie step: the live children (node ids at the next level, their values) of
    the live `node` with values `x`."""
    rep, child = _expand(lv.child_start[node], lv.child_count[node])
    parent = x[rep]
    x = rows(parent)[parent, nxt.byte[child]]                            # (children,)
    keep = x >= 0
    return child[keep], x[keep]


def walk_nodes(trie, first: np.ndarray, rows, keep: np.ndarray):
    """walk_trie over the global trie node ids `keep` alone (sorted; a node's parent is kept
    with it, as _paths keeps them): yield (depth, nodes, x), sparse. A level steps from the kept
    nodes of the next level to their live parents, not from the live nodes to all their
    children: a context-dependent path's ancestors are a string's content, thousands of
    children each, of which the kept are a few."""
    levels, offsets = trie.levels, level_offsets(trie)
    at = np.searchsorted(keep, offsets)                                   # (levels + 1,) keep's slice per level
    node = keep[at[0]:at[1]]
    x = first[node]
    node, x = node[x >= 0], x[x >= 0]
    for d in range(len(levels)):
        if not len(node):
            return
        yield d, node, x
        if d + 1 == len(levels):
            return
        nxt = levels[d + 1]
        child = keep[at[d + 1]:at[d + 2]] - offsets[d + 1]
        parent = nxt.parent[child]
        pos = np.minimum(np.searchsorted(node, parent), len(node) - 1)   # node is sorted
        live = node[pos] == parent
        child, xp = child[live], x[pos[live]]
        x = rows(xp)[xp, nxt.byte[child]]                                 # (children,)
        node, x = child[x >= 0], x[x >= 0]


def kept_tokens(trie, first: tuple[list, bytes], rows, keep: list[int]) -> list[int]:
    """walk_nodes's tokens, node by node in Python: where few nodes are kept, numpy's calls per
    level cost more than the walk. first, rows(v): a state's sparse row as narrow_tokens asks
    it; keep: sorted global node ids, each parent kept with it (so a level's parents are walked
    before it)."""
    view = trie_view(trie)
    offsets = view.offsets
    x: dict = {}
    seen: dict = {}  # rows(v), once per state
    tokens: list[int] = []
    d, lo, hi = 0, 0, offsets[1]
    byte, parent, end = view.byte[0], view.parent[0], view.end[0]
    for g in keep:
        if g >= hi:  # the next level: its arrays, read once
            while g >= offsets[d + 1]:
                d += 1
            lo, hi, up_lo = offsets[d], offsets[d + 1], offsets[d - 1]
            byte, parent, end = view.byte[d], view.parent[d], view.end[d]
        node = g - lo
        if d == 0:
            values, live = first
        else:
            up = x.get(up_lo + parent[node])
            if up is None:
                continue
            got = seen.get(up)
            if got is None:
                got = seen[up] = rows(up)
            values, live = got
        i = live.find(byte[node])
        if i < 0:
            continue
        x[g] = values[i]
        if end[node] >= 0:
            tokens.append(end[node])
    return tokens


def walk_sparse(levels, starts: list, rows):
    """Yield (depth, nodes, x) per trie level of a sparse walk that begins, at each depth d, at
    the live nodes starts[d] = (node ids, values) besides the children of the nodes before
    (no start may descend from another: the walk would visit it twice; starts may stop short)."""
    node = x = None
    last = max((d for d, (nodes, _) in enumerate(starts) if len(nodes)), default=-1)
    for d, lv in enumerate(levels):
        if node is None and d > last:
            return
        if d <= last and len(starts[d][0]):
            node = starts[d][0] if node is None else np.concatenate([node, starts[d][0]])
            x = starts[d][1] if x is None else np.concatenate([x, starts[d][1]])
        if node is None or not len(node):
            node = x = None
            continue
        yield d, node, x
        if d + 1 < len(levels):
            node, x = _children(lv, levels[d + 1], node, x, rows)


@dataclass(frozen=True, eq=False)
class TrieView:
    """A trie's levels as Python reads them fast (memoryviews, bytes; no copy but the bytes)."""
    byte: tuple[bytes, ...]              # per level: each node's last byte
    start: tuple[memoryview, ...]        # per level: each node's first child
    count: tuple[memoryview, ...]        # per level: each node's children
    end: tuple[memoryview, ...]          # per level: each node's token, -1 none
    root: tuple[int, ...]                # (256,) the depth-0 node of each byte, -1 none
    parent: tuple[memoryview, ...]       # per level: each node's parent (-1 at depth 0)
    offsets: tuple[int, ...]             # level_offsets as ints


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trie_view(trie) -> TrieView:
    out = _VIEWS.get(trie)
    if out is None:
        levels = trie.levels
        root = [-1] * 256
        for node, b in enumerate(levels[0].byte.tolist() if levels else ()):
            root[b] = node
        out = _VIEWS[trie] = TrieView(tuple(lv.byte.tobytes() for lv in levels),
                                      tuple(memoryview(lv.child_start) for lv in levels),
                                      tuple(memoryview(lv.child_count) for lv in levels),
                                      tuple(memoryview(lv.end_token) for lv in levels), tuple(root),
                                      tuple(memoryview(lv.parent) for lv in levels),
                                      tuple(level_offsets(trie).tolist()))
    return out


def narrow_tokens(trie, first, rows, budget: int, visited: list | None = None) -> list[int] | None:
    """The tokens whose bytes all walk from a state with row `first`, node by node in Python, a
    trie level at a time: the walk of a narrow state (literal text, structure, numbers) visits a
    few trie nodes, where walk_trie's numpy calls per level would cost more than the walk.
    first, rows(v) -> (values, live): a state's sparse row, the bytes it reads (bytes) and the
    next state of each (indexable and iterable; any int, a state handle for rows), asked once
    per state: a literal's state reads one byte, so its row is two short sequences, not 256
    entries. None once more than `budget` children were looked at: a wide walk, for numpy.
    visited: where given, gets (depth, node, value) of every node walked that has children."""
    view = trie_view(trie)
    values, live = first
    root = view.root
    nodes, states = [], []
    for b, v in zip(live, values):
        if root[b] >= 0:
            nodes.append(root[b])
            states.append(v)
    seen: dict = {}
    tokens: list[int] = []
    looked = 0
    for d, end in enumerate(view.end):
        count, start = view.count[d], view.start[d]
        byte = view.byte[d + 1] if d + 1 < len(view.byte) else b""
        next_nodes, next_states = [], []
        for node, v in zip(nodes, states):
            if end[node] >= 0:
                tokens.append(end[node])
            k = count[node]
            if not k:
                continue
            if visited is not None:
                visited.append((d, node, v))
            got = seen.get(v)
            if got is None:
                got = seen[v] = rows(v)
            values, live = got
            lo = start[node]
            if k <= len(live):  # fewer children than bytes read: look each child's byte up
                looked += k
                for child in range(lo, lo + k):
                    i = live.find(byte[child])
                    if i >= 0:
                        next_nodes.append(child)
                        next_states.append(values[i])
            else:  # children are sorted by byte, one per byte: find each byte read
                looked += len(live)
                for b, nxt in zip(live, values):
                    child = byte.find(b, lo, lo + k)
                    if child >= 0:
                        next_nodes.append(child)
                        next_states.append(nxt)
            if looked > budget:
                return None
        if not next_nodes:
            break
        nodes, states = next_nodes, next_states
    return tokens


def sparse_row(row: np.ndarray) -> tuple[list[int], bytes]:
    """A (256,) row of next states (-1 dead) as narrow_tokens's (values, live)."""
    live = np.flatnonzero(row >= 0)
    return row[live].tolist(), live.astype(np.uint8).tobytes()


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
    dup = trie.duplicates  # a token with the bytes of another behaves exactly like it
    if len(tokens) * 8 < words:  # few: set their bits one by one
        if len(dup):
            tokens = np.concatenate([tokens, dup[np.isin(dup[:, 1], tokens), 0]])
        tokens = tokens.astype(np.int64)
        out = np.zeros(words, dtype=np.uint32)
        np.bitwise_or.at(out, tokens >> 5, (np.uint32(1) << (tokens & 31).astype(np.uint32)))
        return out
    bits = np.zeros(words * 32, dtype=np.uint8)
    bits[tokens] = 1
    if len(dup):
        bits[dup[bits[dup[:, 1]] == 1, 0]] = 1
    return np.packbits(bits, bitorder="little").view(np.uint32)


_SAME_BYTES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def with_duplicates(tokens: list[int], trie) -> list[int]:
    """`tokens` and the tokens with the same bytes as one of them (token_bits's expansion, for a
    short list in Python)."""
    if not len(trie.duplicates):
        return tokens
    same = _SAME_BYTES.get(trie)
    if same is None:
        same = _SAME_BYTES[trie] = {}
        for dup, primary in trie.duplicates.tolist():
            same.setdefault(primary, []).append(dup)
    return tokens + [d for t in tokens for d in same.get(t, ())]


def few_bits(tokens: list[int], words: int) -> np.ndarray:
    """(words,) uint32 bits of a short list of distinct tokens, set word by word in Python (a few
    tokens cost less than numpy's calls)."""
    word: dict[int, int] = {}
    for t in tokens:
        word[t >> 5] = word.get(t >> 5, 0) | (1 << (t & 31))
    out = np.zeros(words, dtype=np.uint32)
    out[list(word)] = list(word.values())
    return out


def frame_tokens(trie, trans: np.ndarray, exits: tuple[np.ndarray, np.ndarray], state: int, words: int,
                 shapes: dict | None = None, split_of=None) -> FrameTokens:
    """The split for one (automaton, state): trans (S, 256) the automaton's transitions inside a
    frame; exits (StackMachine.exits): per state, the row of the bytes that may be read after a
    push or pop there (-1: none may happen). With `shapes` (a cache, {signature: Shape}), a state
    with a region (`region`) walks the region once per shape, and itself only the tokens that
    leave it. With split_of(state) -> FrameTokens (the caller's cache), a delta state
    (`delta_base`) whose shape is not cached derives its split from its base's instead."""
    levels = trie.levels
    base = delta_base(trans, state) if split_of is not None and levels else None
    if shapes is not None and levels:
        order = region(trans, state)
        if order is not None:
            sig = _signature(trans, exits, order)
            if base is None or shapes.get(sig[0]) is not None:  # (a shape another schema built)
                return _shaped_frame(trie, trans, exits, order, words, shapes, sig)
    if base is not None:
        return delta_frame(trie, trans, exits, state, base, split_of(base), words)
    if levels and np.count_nonzero(trans[state] >= 0) < REGION_MIN_BYTES:
        narrow = _narrow_frame(trie, trans, exits, state, words)
        if narrow is not None:
            return narrow
    return _walk_frame(trie, trans, exits, trans[state][levels[0].byte] if levels else None, words)



def _narrow_frame(trie, trans: np.ndarray, exits, state: int, words: int) -> FrameTokens | None:
    """The split of a state that reads few bytes (structure, literal text) by narrow_tokens:
    a few hundred trie nodes in Python cost less than numpy's calls per trie level. None past
    FRAME_NARROW_NODES children looked at."""
    exit_row, exit_bytes = exits

    def rows(q: int) -> tuple[list[int], bytes]:  # (narrow_tokens asks once per state)
        return sparse_row(trans[q])
    visited: list = []
    tokens = narrow_tokens(trie, rows(state), rows, FRAME_NARROW_NODES, visited)
    if tokens is None:
        return None
    seeds: list = []  # per depth: (nodes, exit rows) of the nodes with children at a state that may push or pop
    for d, node, q in visited:
        if exit_row[q] >= 0:
            seeds += [([], []) for _ in range(d + 1 - len(seeds))]
            seeds[d][0].append(node)
            seeds[d][1].append(exit_row[q])
    seeds = [(np.asarray(nodes, np.int64), np.asarray(rws, exit_row.dtype)) for nodes, rws in seeds]
    return FrameTokens(token_bits(np.asarray(tokens, dtype=np.int64), trie, words), _paths(trie, seeds, exit_bytes))


def _walk_frame(trie, trans: np.ndarray, exits, first: np.ndarray | None, words: int) -> FrameTokens:
    """The split from the depth-0 values `first` (a state per depth-0 node, -1: not walked)."""
    exit_row, exit_bytes = exits
    accepted, seeds = [], []
    for d, node, x in walk_trie(trie.levels, first, lambda ids: trans):
        end, seed = _split_level(trie.levels, d, node, x, exit_row)
        accepted.append(end)
        seeds.append(seed)
    tokens = np.concatenate(accepted) if accepted else np.zeros(0, np.int32)
    return FrameTokens(token_bits(tokens, trie, words), _paths(trie, seeds, exit_bytes))


def counted_tokens(trie, trans: np.ndarray, restart: np.ndarray, state: int, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """The tokens whose bytes all walk inside a counted automaton's frame from `state`, with the
    items each begins after the current one: (tokens, items), sorted by items, those beginning
    more than `cap` left out. trans (S, 256): the frame's transitions (StackMachine.frame_table);
    restart (S, 256) bool: the edges that end an item and begin the next. A frame `left` items
    from its max allows, of these, the tokens[:searchsorted(items, left, 'right')].

    One walk of the trie through the product of the states and the items begun, value
    q + S * items (-1 past cap), so every count near the max shares it."""
    n = len(trans)
    levels = trie.levels
    if not levels:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    items = np.arange(cap + 1)[:, None, None] + restart[None]              # (cap + 1, S, 256)
    table = np.where((trans[None] >= 0) & (items <= cap), trans[None] + n * items, -1)
    table = table.reshape(-1, 256).astype(np.int32)                        # ((cap + 1) * S, 256)
    tokens, begun = [], []
    for d, node, x in walk_trie(levels, table[state][levels[0].byte], lambda ids: table):
        alive = np.flatnonzero(x >= 0) if node is None else node
        value = x[alive] if node is None else x
        end = levels[d].end_token[alive]
        tokens.append(end[end >= 0])
        begun.append(value[end >= 0] // n)
    tokens, begun = np.concatenate(tokens), np.concatenate(begun)
    order = np.argsort(begun, kind="stable")
    return tokens[order].astype(np.int64), begun[order].astype(np.int64)


# A *delta* state: its row agrees with a loop state's row on all but a few bytes. The states of
# "any key but the declared names" are such: a name's next byte (or its closing quote) differs,
# every other byte falls into the string's content loop. A token whose first byte the two rows
# agree on is in the same state after that byte from either, so its fate is the loop state's,
# and so is that of any token once the two walks meet again (a name's prefix left for the loop):
# only the trie nodes where they differ are walked, and the rest is the loop state's split (its
# region shape is shared by every string of the process), instead of a shape per trie state of
# every schema's names.
DELTA_BYTES = 16


def delta_base(trans: np.ndarray, state: int) -> int | None:
    """The loop state whose split `state`'s may be derived from (delta_frame), or None: the
    most frequent target of the state's row, where the row differs from that state's row on at
    most DELTA_BYTES bytes and that state is its own most frequent target (so bases never chain)."""
    row = trans[state]
    live = row[row >= 0]
    if len(live) < REGION_MIN_BYTES:
        return None
    base = int(np.bincount(live).argmax())
    if base == state or np.count_nonzero(row != trans[base]) > DELTA_BYTES:
        return None
    loop = trans[base][trans[base] >= 0]
    return base if int(np.bincount(loop).argmax()) == base else None


def delta_frame(trie, trans: np.ndarray, exits, state: int, base: int, split: FrameTokens, words: int) -> FrameTokens:
    """frame_tokens of `state` from `split`, the split of its delta_base `base`: the walk from
    `state` goes on only where its state differs from the base's walk at the same trie node (the
    subtrees of the differing first bytes, as deep as a declared name's prefix goes on), and
    everywhere else the base's tokens and paths hold. Its paths are the base's and the walk's own:
    a superset of the state's own (the base's may hold a subtree whole that the state holds in
    part; a path kept for naught is walked for naught, never wrong)."""
    levels, offsets = trie.levels, level_offsets(trie)
    exit_row, exit_bytes = exits
    roots = levels[0].byte
    node = np.flatnonzero(trans[state][roots] != trans[base][roots])      # depth-0 nodes of the differing bytes
    x, y = trans[state][roots[node]], trans[base][roots[node]]            # the state's walk, the base's
    accepted, seeds, decided, dead = [], [], [], []
    for d, lv in enumerate(levels):
        if not len(node):
            break
        end = lv.end_token[node]
        decided.append(end[end >= 0])            # these nodes' tokens are the state's to decide
        live = x >= 0
        dead.append(offsets[d] + node[~live])    # a subtree dead here, maybe not from the base
        node, x, y = node[live], x[live], y[live]
        tokens, seed = _split_level(levels, d, node, x, exit_row)
        accepted.append(tokens)
        seeds.append(seed)
        if d + 1 == len(levels):
            break
        nxt = levels[d + 1]
        rep, child = _expand(lv.child_start[node], lv.child_count[node])
        byte, yp = nxt.byte[child], y[rep]
        xc = trans[x[rep], byte]                                            # (children,)
        yc = np.where(yp >= 0, trans[np.maximum(yp, 0), byte], -1)
        go = xc != yc                            # where both walks meet, the base's subtree holds
        node, x, y = child[go], xc[go], yc[go]
    cleared = np.concatenate(decided + [subtree_tokens(trie, np.concatenate(dead))]) if decided else np.zeros(0, np.int64)
    own = token_bits(np.concatenate(accepted), trie, words) if accepted else np.zeros(words, np.uint32)
    out = (split.accepted & ~token_bits(cleared, trie, words)) | own
    return FrameTokens(out, _union_paths(trie, split.keep, _paths(trie, seeds, exit_bytes)))


_ENDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def subtree_tokens(trie, nodes: np.ndarray) -> np.ndarray:
    """The tokens of the subtrees of the global trie node ids `nodes` (none inside another's):
    one preorder interval each (dfs_order)."""
    if not len(nodes):
        return np.zeros(0, np.int32)
    ends = _ENDS.get(trie)
    if ends is None:
        ends = _ENDS[trie] = np.concatenate([lv.end_token for lv in trie.levels])
    pre, size, order = dfs_order(trie)
    _, ranks = _expand(pre[nodes], size[nodes])
    out = ends[order[ranks]]
    return out[out >= 0]


def _split_level(levels, d: int, node, x, exit_row: np.ndarray):
    """Of one level of a walk inside an automaton: (its tokens, (the nodes with children at a
    state where a push or pop may happen, their exit rows))."""
    alive, end = live_tokens(levels, d, node, x)
    rows = exit_row[x[alive] if node is None else x]
    at = (rows >= 0) & (levels[d].child_count[alive] > 0)
    return end, (alive[at], rows[at])


# A *region* of a state: the states reached from it by bytes other than a quote, in breadth-first
# order (by byte), where they are fewer than REGION_STATES. Inside a string it is the string's
# content loop (characters, escapes, the bytes of multi-byte characters), which thousands of
# states of a schema share (every string property, array item, map value): its tokens are most
# of the vocabulary, and only those with a quote or a byte the loop refuses leave it. What a
# token does inside a region depends on the region's transitions alone, up to a renumbering:
# so the walk inside it is done once per *shape* (the renumbered transitions, with a byte that
# leaves the region marked, and the exit bytes of its states), and each state walks only the
# tokens that leave it, from where they leave, through its own automaton. A fixed-length
# pattern's chain is a region too: a shape per position, shared by the pattern's every use.
QUOTE = 0x22
REGION_STATES = 64
REGION_MIN_BYTES = 32  # a state reading fewer bytes walks few tokens: no region


@dataclass(frozen=True, eq=False)
class Shape:
    accepted: np.ndarray  # (words,) uint32: tokens whose walk stays inside the region
    # the context-dependent paths (_paths) of the walk inside the region, None: too many. A
    # frame's are these and those of its own walk after the region: _paths of a union of seeds
    # is the union of theirs, so the region's thousands of seeds are not expanded per frame
    paths: np.ndarray | None
    leave: list           # per depth: (nodes, region index of the parent's state): the walk leaves there

    @property
    def nbytes(self) -> int:
        own = 0 if self.paths is None else self.paths.nbytes
        return self.accepted.nbytes + own + sum(a.nbytes for pair in self.leave for a in pair)


SHAPE_CACHE_BYTES = 64 << 20  # shapes kept per vocabulary (LRU); one is ~19 KB to ~2 MB at 151k tokens
FRAME_CACHE_BYTES = 64 << 20  # frame splits kept per vocabulary (LRU); one is ~19 KB and its paths


_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FRAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shape_cache(trie) -> LRU:
    """The trie's region shapes by signature (_signature's key), shared by every grammar over its
    vocabulary, so a string's content loop is walked once per process, not once per schema
    (created on first use, dropped with the trie)."""
    out = _SHAPES.get(trie)
    if out is None:
        out = _SHAPES[trie] = LRU(SHAPE_CACHE_BYTES, _nbytes)
    return out


def frame_cache(trie) -> LRU:
    """The trie's frame splits by (automaton digest, state) (StackGrammar._frame: the same
    automaton recurs across schemas, an integer's, a date's, an enum's; created on first use,
    dropped with the trie)."""
    out = _FRAMES.get(trie)
    if out is None:
        out = _FRAMES[trie] = LRU(FRAME_CACHE_BYTES, _nbytes)
    return out


def _nbytes(value) -> int:
    return value.nbytes


def _clear_all(caches: weakref.WeakKeyDictionary) -> None:
    for cache in list(caches.values()):
        cache.clear()


CACHES.register("region_shapes", "masks", lambda: _clear_all(_SHAPES), lambda: sum(map(len, list(_SHAPES.values()))),
                "SHAPE_CACHE_BYTES per vocabulary")
CACHES.register("frame_splits", "masks", lambda: _clear_all(_FRAMES), lambda: sum(map(len, list(_FRAMES.values()))),
                "FRAME_CACHE_BYTES per vocabulary")


def region(trans: np.ndarray, state: int) -> np.ndarray | None:
    """The region's states (state first, breadth-first by byte), or None when the state reads few
    bytes (nothing to share: its own walk is as cheap) or reaches REGION_STATES states or more (a
    pattern's own states, whose shape would serve it alone: of 28 shapes built on the first 100
    sample schemas at Qwen, those of 38 states or more served one or two frames each). Where
    some of them can reach a loop in it (a string's content), the states that can; where none
    can (a fixed-length pattern's chain, `[A-Za-z0-9]{15}`), all of them: the chain from each
    position is then a shape that every use of the pattern shares, where each position's split
    was a walk of the whole trie of its own."""
    if np.count_nonzero(trans[state] >= 0) < REGION_MIN_BYTES:
        return None
    states = _bfs(trans, state, REGION_STATES)
    if len(states) >= REGION_STATES:
        return None
    inner = _inner(trans, states)
    adj = np.zeros((len(states), len(states)), dtype=bool)                  # region edge i -> j
    src, byte = np.nonzero(inner >= 0)
    adj[src, inner[src, byte]] = True
    live = np.ones(len(states), dtype=bool)  # drop the states with no edge to a live one: those
    while True:                              # left can reach a loop
        drop = live & ~adj[:, live].any(axis=1)
        if not drop.any():
            break
        live &= ~drop
    if not live[0]:  # (every state is reachable from the first: none can reach a loop)
        return states
    # (a dropped state never leads to a kept one: the kept states' breadth-first order is their own)
    return states if live.all() else states[live]


def _bfs(trans: np.ndarray, state: int, cap: int) -> np.ndarray:
    """The states reached from `state` by bytes other than a quote, breadth-first with each
    state's targets in byte order: the first `cap`. Python over each state's distinct targets
    (_successors): a region is tens of states of a few targets each, where numpy's calls per
    breadth-first level cost more than the search, paid by every wide state new to the process
    (docs/results.md, the experiment logs: "a region's search over successor lists")."""
    succ = _successors(trans)
    order, seen = [state], {state}
    for q in order:  # (order grows as it is read: a queue)
        for t in succ(q):
            if t not in seen:
                if len(order) == cap:
                    return np.asarray(order, dtype=np.int64)
                seen.add(t)
                order.append(t)
    return np.asarray(order, dtype=np.int64)


SUCCESSOR_BLOCK = 64  # states whose distinct targets one numpy pass lists (_successors)
_SUCCESSORS: dict[int, tuple] = {}  # id(trans) -> (a weak reference to it, {block: lists})


def _successors(trans: np.ndarray):
    """q -> state q's distinct targets by bytes other than a quote, in the order of the first
    byte to each: listed a block of SUCCESSOR_BLOCK states at a time, kept while `trans` lives
    (a frame's table lives as long as its machine)."""
    got = _SUCCESSORS.get(id(trans))
    if got is None or got[0]() is not trans:
        got = _SUCCESSORS[id(trans)] = (weakref.ref(trans), {})
        weakref.finalize(trans, _SUCCESSORS.pop, id(trans), None)
    blocks = got[1]

    def succ(q: int) -> list[int]:
        block = blocks.get(q // SUCCESSOR_BLOCK)
        if block is None:
            block = blocks[q // SUCCESSOR_BLOCK] = _successor_block(trans, q - q % SUCCESSOR_BLOCK)
        return block[q % SUCCESSOR_BLOCK]
    return succ


def _successor_block(trans: np.ndarray, first: int) -> list[list[int]]:
    """_successors of states first .. first + SUCCESSOR_BLOCK - 1, in one numpy pass."""
    rows = trans[first:first + SUCCESSOR_BLOCK].copy()                      # (k, 256)
    rows[:, QUOTE] = -1
    r, b = np.nonzero(rows >= 0)                                            # row-major: by row, then byte
    key = r.astype(np.int64) * len(trans) + rows[r, b]                     # (row, target), in byte order
    _, at = np.unique(key, return_index=True)                               # each pair's first byte
    at.sort()                                                               # back to row, then byte order
    r, to = r[at], rows[r[at], b[at]]
    ends = np.cumsum(np.bincount(r, minlength=len(rows))).tolist()
    to = to.tolist()
    return [to[lo:hi] for lo, hi in zip([0] + ends[:-1], ends)]


def _inner(trans: np.ndarray, states: np.ndarray) -> np.ndarray:
    """(k, 256) int32: the region index each region state goes to by each byte, -1 where the
    byte is refused or leaves the region (a quote always leaves)."""
    index = np.full(len(trans), -1, dtype=np.int32)
    index[states] = np.arange(len(states), dtype=np.int32)
    rows = trans[states]                                                    # (k, 256)
    inner = np.where(rows >= 0, index[np.maximum(rows, 0)], -1)
    inner[:, QUOTE] = -1
    return inner


def _signature(trans: np.ndarray, exits, states: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """(the shape's key, its walk table (2k, 256): region index, k + i for a byte leaving the
    region from index i, -1 refused; per region index its row of the shape's exit bytes or -1;
    those exit bytes (B, 256) bool)."""
    k = len(states)
    inner = _inner(trans, states)
    table = np.full((2 * k, 256), -1, dtype=np.int32)
    leaving = np.arange(k, 2 * k, dtype=np.int32)[:, None]
    table[:k] = np.where(inner >= 0, inner, np.where(trans[states] >= 0, leaving, -1))
    exit_row, exit_bytes = exits
    own = exit_row[states]
    has = own >= 0
    shape_rows = np.where(has, np.cumsum(has) - 1, -1).astype(np.int32)
    shape_bytes = exit_bytes[own[has]]
    key = table[:k].tobytes() + has.tobytes() + np.packbits(shape_bytes).tobytes()
    return key, table, shape_rows, shape_bytes


def _shape(trie, table: np.ndarray, shape_rows: np.ndarray, shape_bytes: np.ndarray, words: int) -> Shape:
    """The walk of the whole trie inside a region (its table from _signature)."""
    levels = trie.levels
    k = len(shape_rows)
    accepted, seeds, leave = [], [], []
    for d, node, x in walk_trie(levels, table[0][levels[0].byte], lambda ids: table):
        if node is None:
            node = np.flatnonzero(x >= 0)
            x = x[node]
        out = x >= k
        leave.append((node[out], x[out] - k))
        end, seed = _split_level(levels, d, node[~out], x[~out], shape_rows)
        accepted.append(end)
        seeds.append(seed)
    while leave and not len(leave[-1][0]):
        leave.pop()
    return Shape(token_bits(np.concatenate(accepted), trie, words), _paths(trie, seeds, shape_bytes), leave)


def _shaped_frame(trie, trans: np.ndarray, exits, states: np.ndarray, words: int, shapes: dict, sig) -> FrameTokens:
    """frame_tokens of states[0] from its region's shape (sig: _signature's), the walk inside the
    region shared, then the tokens leaving it walked on from the nodes where they leave."""
    levels = trie.levels
    key, table, shape_rows, shape_bytes = sig
    shape = shapes.get(key)
    if shape is None:
        shape = shapes[key] = _shape(trie, table, shape_rows, shape_bytes, words)
    exit_row, exit_bytes = exits
    starts = [(node, trans[states[src], levels[d].byte[node]]) for d, (node, src) in enumerate(shape.leave)]
    accepted = [np.zeros(0, np.int32)]
    seeds = []                                   # per depth, as _paths reads them
    for d, node, x in walk_sparse(levels, starts, lambda ids: trans):
        end, seed = _split_level(levels, d, node, x, exit_row)
        accepted.append(end)
        if len(seed[0]):
            seeds += [(seed[0][:0], seed[1][:0])] * (d - len(seeds)) + [seed]
    words_out = shape.accepted | token_bits(np.concatenate(accepted), trie, words)
    return FrameTokens(words_out, _union_paths(trie, shape.paths, _paths(trie, seeds, exit_bytes)))


def _paths(trie, seeds: list, exit_bytes: np.ndarray) -> np.ndarray | None:
    """Global ids (level offset + node) of the context-dependent paths: the seeds' children by an
    exit byte and all their descendants (one preorder interval each: dfs_order), and the
    ancestors of those children; None past 1 / DENSE_SHARE of the trie's nodes."""
    levels, offsets = trie.levels, level_offsets(trie)
    limit = _paths_limit(trie)
    kids, heads = [], {}                         # heads: depth -> the seeds with a child kept
    for d, (seed, row) in enumerate(seeds[:len(levels) - 1]):
        if not len(seed):
            continue
        rep, child = _expand(levels[d].child_start[seed], levels[d].child_count[seed])
        out = exit_bytes[row[rep], levels[d + 1].byte[child]]
        if out.any():
            heads[d] = np.unique(seed[rep[out]])
            kids.append(offsets[d + 1] + child[out])
    if not kids:
        return np.zeros(0, np.int64)
    pre, size, order = dfs_order(trie)
    kids = np.unique(np.concatenate(kids))
    first = np.sort(pre[kids])
    end = first + size[order[first]]
    top = np.ones(len(first), dtype=bool)        # the kids no other kid holds (subtrees nest or
    top[1:] = first[1:] >= np.maximum.accumulate(end)[:-1]  # are disjoint)
    if int((end - first)[top].sum()) > limit:
        return None
    parts = [order[_expand(first[top], (end - first)[top])[1]]]
    up = np.zeros(0, np.int64)                   # ancestors-or-self of the kept seeds, at depth d
    for d in range(max(heads), -1, -1):
        cur = np.unique(np.concatenate([up, heads.get(d, up[:0])]))
        parts.append(offsets[d] + cur)
        up = levels[d].parent[cur] if d else up
    out = np.unique(np.concatenate(parts))
    return None if len(out) > limit else out


def _union_paths(trie, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """The union of two splits' context-dependent paths (sorted global ids), None where either
    is None or the union is past _paths_limit: what _paths gives for the union of their seeds."""
    if a is None or b is None:
        return None
    keep = np.union1d(a, b)
    return None if len(keep) > _paths_limit(trie) else keep


def _paths_limit(trie) -> int:
    """Past this many context-dependent nodes a frame's paths are None: 1 / DENSE_SHARE of the
    trie, where one walk of the whole trie costs less."""
    return int(level_offsets(trie)[-1]) // DENSE_SHARE


_DFS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def dfs_order(trie) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pre, size, order), each (nodes,) int64 over global ids: a node's preorder rank, its
    subtree's node count, and the global id at each preorder rank; a subtree is then the ranks
    pre .. pre + size - 1 (computed once per trie)."""
    out = _DFS.get(trie)
    if out is None:
        levels = trie.levels
        sizes = [np.ones(len(lv.byte), np.int64) for lv in levels]
        for d in range(len(levels) - 2, -1, -1):           # bottom-up: 1 + the children's sizes
            sizes[d] += np.bincount(levels[d + 1].parent, weights=sizes[d + 1], minlength=len(sizes[d])).astype(np.int64)
        pres = []
        for d, lv in enumerate(levels):                    # top-down: after the parent and the
            before = np.cumsum(sizes[d]) - sizes[d]        # siblings before (children are contiguous)
            if d == 0:
                pres.append(before)
            else:
                first = levels[d - 1].child_start[lv.parent]
                pres.append(pres[-1][lv.parent] + 1 + before - before[first])
        pre, size = np.concatenate(pres), np.concatenate(sizes)
        order = np.empty_like(pre)
        order[pre] = np.arange(len(pre))
        out = _DFS[trie] = pre, size, order
    return out
