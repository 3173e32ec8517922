"""The vocabulary as the token index sees it: token bytes, EOS, and a byte trie built once.

The trie is the preprocessing that makes the index build cheap: tokens that share a prefix share
its walk through the DFA, so the build costs ~ (live trie nodes x states), not (tokens x bytes x
states). It depends only on the vocabulary, so it is built (and timed) once per tokenizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class TrieLevel:
    """The trie nodes at one depth d (prefixes of d+1 bytes), in lexicographic order."""

    byte: np.ndarray         # (N_d,) uint8: the last byte of each node's prefix
    parent: np.ndarray       # (N_d,) int64: the parent node at depth d-1 (-1 at depth 0)
    child_start: np.ndarray  # (N_d,) int64: first child at depth d+1 (children are contiguous)
    child_count: np.ndarray  # (N_d,) int64
    end_token: np.ndarray    # (N_d,) int32: the token whose bytes end at this node, or -1
    end_nodes: np.ndarray    # (E_d,) int64: the nodes with an end_token, ascending


@dataclass(frozen=True, eq=False)
class TokenTrie:
    levels: tuple[TrieLevel, ...]  # levels[d] holds the nodes at depth d
    duplicates: np.ndarray         # (D, 2) int32 (token, token with the same bytes in the trie)
    seconds: float                 # wall time of the build (the "vocabulary preprocessing")

    @property
    def n_nodes(self) -> int:
        return sum(len(level.byte) for level in self.levels)

    @property
    def nbytes(self) -> int:
        return self.duplicates.nbytes + sum(a.nbytes for lv in self.levels
                                            for a in (lv.byte, lv.parent, lv.child_start, lv.child_count,
                                                      lv.end_token, lv.end_nodes))


@dataclass(frozen=True, eq=False)
class Vocabulary:
    token_bytes: tuple[bytes, ...]  # b"" for special tokens
    eos_id: int
    special_ids: frozenset[int]
    _trie: list = field(default_factory=list, repr=False)  # the lazily built TokenTrie (cache)

    @classmethod
    def from_tokenizer(cls, tok) -> "Vocabulary":
        return cls(tuple(tok.token_bytes), int(tok.eos_id), frozenset(tok.special_ids))

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def trie(self) -> TokenTrie:
        """The byte trie over the non-special tokens; built on first use, then cached."""
        if not self._trie:
            self._trie.append(build_trie(self.token_bytes, self.special_ids))
        return self._trie[0]


def build_trie(token_bytes, special_ids=frozenset()) -> TokenTrie:
    t0 = time.perf_counter()
    ids = [i for i, b in enumerate(token_bytes) if b and i not in special_ids]
    ids.sort(key=token_bytes.__getitem__)
    order = np.asarray(ids, dtype=np.int32)                       # (N,) token ids, lexicographic
    sorted_bytes = list(map(token_bytes.__getitem__, ids))
    lengths = np.fromiter(map(len, sorted_bytes), dtype=np.int64, count=len(ids))
    width = int(lengths.max()) if len(ids) else 0
    # Padded byte matrix of the sorted tokens; the pad never matters because lengths mask it.
    flat = np.frombuffer(b"".join(sorted_bytes), dtype=np.uint8)
    mat = np.zeros((len(ids), width), dtype=np.uint8)             # (N, L)
    rows = np.repeat(np.arange(len(ids)), lengths)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    mat[rows, cols] = flat
    # lcp[i]: length of the common prefix of sorted tokens i-1 and i (0 for i = 0).
    diff = mat[1:] != mat[:-1]                                    # (N-1, L)
    first_diff = np.where(diff.any(axis=1), diff.argmax(axis=1), width)
    lcp = np.concatenate([[0], np.minimum(first_diff, np.minimum(lengths[1:], lengths[:-1]))])

    levels: list[TrieLevel] = []
    duplicates: list[tuple[int, int]] = []
    prev_node = None  # (N,) node id at depth d-1 of every token long enough, else -1
    for d in range(width):
        alive = lengths > d                                        # tokens with a byte at depth d
        tok_idx = np.flatnonzero(alive)
        # A token opens a new node at depth d unless it shares d+1 bytes with its predecessor.
        new = lcp[tok_idx] < d + 1
        new[0] = True
        node_of = np.full(len(ids), -1, dtype=np.int64)
        node_of[tok_idx] = np.cumsum(new) - 1
        firsts = tok_idx[new]                                      # (N_d,) first token of each node
        n_nodes = len(firsts)
        parent = prev_node[firsts] if prev_node is not None else np.full(n_nodes, -1, dtype=np.int64)
        if prev_node is not None:  # link the parent level's children (contiguous, in order)
            start = np.searchsorted(parent, np.arange(len(levels[-1].byte)))
            count = np.bincount(parent, minlength=len(levels[-1].byte))
            levels[-1] = TrieLevel(levels[-1].byte, levels[-1].parent, start, count, levels[-1].end_token,
                                   levels[-1].end_nodes)
        ends = np.flatnonzero(lengths == d + 1)                    # tokens ending at depth d
        end_token = np.full(n_nodes, -1, dtype=np.int32)
        end_token[node_of[ends][::-1]] = order[ends][::-1]         # the first of equal byte strings
        dup = np.flatnonzero(end_token[node_of[ends]] != order[ends])
        duplicates.extend(zip(order[ends][dup].tolist(), end_token[node_of[ends][dup]].tolist()))
        levels.append(TrieLevel(mat[firsts, d], parent, np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64),
                                end_token, np.flatnonzero(end_token >= 0)))
        prev_node = node_of
    return TokenTrie(tuple(levels), np.asarray(duplicates, dtype=np.int32).reshape(-1, 2),
                     time.perf_counter() - t0)


def longest_match(vocab: Vocabulary, data: bytes) -> list[int]:
    """A tokenization of `data` taking the longest token at each point (lowest id among equal
    bytes): a valid token sequence for tests and comparisons, not the tokenizer's own."""
    by_bytes = {b: i for i, b in reversed(list(enumerate(vocab.token_bytes))) if b and i not in vocab.special_ids}
    longest = max(map(len, by_bytes), default=0)
    out, i = [], 0
    while i < len(data):
        j = next((j for j in range(min(len(data), i + longest), i, -1) if data[i:j] in by_bytes), None)
        if j is None:
            raise ValueError(f"byte {data[i]:#04x} at {i} is no token of the vocabulary")
        out.append(by_bytes[data[i:j]])
        i = j
    return out
