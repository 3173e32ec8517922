"""Byte-pair encoding: merging one pre-token, and learning merges from word counts.

Two merge rules exist in the wild and they are not the same function:
- Hugging Face `tokenizers` (BPE model with a merges list): repeatedly apply the listed pair
  (a, b) of lowest merge rank; a token is reachable only through its listed merge.
- tiktoken (.tiktoken rank files, no merges list): repeatedly join the adjacent pair whose
  concatenated bytes have the lowest rank in the vocabulary, whatever split produced them.
Both pick the leftmost pair on a tie. `merge` runs either, given a pair lookup.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable

# (left id, right id) -> (rank, merged id), or None when the pair does not merge. One tuple
# argument, so that a dict's .get is a lookup.
PairLookup = Callable[["tuple[int, int]"], "tuple[int, int] | None"]


def merge(ids: list[int], lookup: PairLookup) -> list[int]:
    """Merge `ids` (one pre-token, initially one id per byte) until no adjacent pair merges.

    The parts form a linked list and candidate merges sit in a heap keyed (rank, position), so
    a long piece costs O(n log n) rather than a rescan per merge; a popped candidate is stale
    when its parts changed since (a part's id only ever changes by growing into a merge).
    """
    n = len(ids)
    if n < 2:
        return list(ids)
    part = list(ids)                            # part[i]: id at node i; -1 once merged away
    nxt = [*range(1, n), -1]
    prv = [*range(-1, n - 1)]
    heap = []
    for i in range(n - 1):
        hit = lookup((part[i], part[i + 1]))
        if hit is not None:
            heap.append((hit[0], i, part[i], part[i + 1], hit[1]))
    heapq.heapify(heap)
    while heap:
        _, i, a, b, merged = heapq.heappop(heap)
        j = nxt[i]
        if part[i] != a or j < 0 or part[j] != b:
            continue
        part[i], part[j] = merged, -1
        nxt[i] = k = nxt[j]
        if k >= 0:
            prv[k] = i
            hit = lookup((merged, part[k]))
            if hit is not None:
                heapq.heappush(heap, (hit[0], i, merged, part[k], hit[1]))
        h = prv[i]
        if h >= 0:
            hit = lookup((part[h], merged))
            if hit is not None:
                heapq.heappush(heap, (hit[0], h, part[h], merged, hit[1]))
    return [t for t in part if t >= 0]


def merges_from_ranks(token_bytes: list[bytes]) -> list[tuple[int, int]]:
    """A merges list for a tiktoken vocabulary (id = rank; b"" = no token), as transformers'
    TikTokenConverter derives it: every split of a token into two tokens is a merge, ordered by
    the merged token's rank, then by the parts' ranks."""
    rank = {t: i for i, t in enumerate(token_bytes) if t}
    merges = []
    for i, t in enumerate(token_bytes):
        splits = [(rank[t[:k]], rank[t[k:]]) for k in range(1, len(t)) if t[:k] in rank and t[k:] in rank]
        merges += sorted(splits)
    return merges


def train_merges(
    word_counts: dict[bytes, int],
    n_tokens: int,
    token_bytes: list[bytes],
    *,
    on_token: Callable[[], None] | None = None,
) -> list[tuple[int, int]]:
    """Learn merges over `word_counts` until `token_bytes` (initially the 256 bytes) has n_tokens.

    Pair counts are updated incrementally: a merge only revisits the words that contain the pair
    (an index pair -> words), and a heap with lazy invalidation finds the most frequent pair.
    Ties go to the smallest (left id, right id), so training is deterministic. A merge whose
    bytes already exist as a token (b"a"+b"bc" after b"ab"+b"c") maps to that token, as HF's
    trainer does; `token_bytes` is extended in place. Returns the merges in rank order.
    """
    byte_id = {b: i for i, b in enumerate(token_bytes)}
    words = [[byte_id[bytes([c])] for c in w] for w in word_counts]
    counts = list(word_counts.values())
    pair_count: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wi, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_count[pair] += counts[wi]
            where[pair].add(wi)
    heap = [(-c, pair) for pair, c in pair_count.items()]
    heapq.heapify(heap)

    merges: list[tuple[int, int]] = []
    while len(token_bytes) < n_tokens:
        pair = _pop_best(heap, pair_count)
        if pair is None:
            break
        merged = token_bytes[pair[0]] + token_bytes[pair[1]]
        new_id = byte_id.get(merged)
        if new_id is None:
            new_id = byte_id[merged] = len(token_bytes)
            token_bytes.append(merged)
            if on_token is not None:
                on_token()
        merges.append(pair)
        changed = set()
        for wi in where.pop(pair):
            old = words[wi]
            new = _merge_word(old, pair, new_id)
            if len(new) == len(old):
                continue                        # stale index entry: the word lost this pair
            for q in zip(old, old[1:]):
                pair_count[q] -= counts[wi]
                changed.add(q)
            for q in zip(new, new[1:]):
                pair_count[q] += counts[wi]
                where[q].add(wi)
                changed.add(q)
            words[wi] = new
        pair_count.pop(pair, None)
        for q in changed:
            c = pair_count.get(q, 0)
            if c > 0:
                heapq.heappush(heap, (-c, q))
            else:
                pair_count.pop(q, None)
    return merges


def _pop_best(heap: list, pair_count: dict) -> tuple[int, int] | None:
    while heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair) == -neg:
            return pair
    return None


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair`, left to right."""
    out, k, a, b = [], 0, pair[0], pair[1]
    while k < len(word):
        if k + 1 < len(word) and word[k] == a and word[k + 1] == b:
            out.append(new_id)
            k += 2
        else:
            out.append(word[k])
            k += 1
    return out


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (openai/gpt-2 encoder.py).

    Printable Latin-1 bytes map to themselves; the other 68 map to U+0100 onwards, in byte order.
    tokenizer.json vocabularies and merges are written in these characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def encode_bytes_as_unicode(data: bytes, table: dict[int, str]) -> str:
    return "".join(table[b] for b in data)


def count_words(pieces: Iterable[str]) -> dict[bytes, int]:
    """Pre-token frequency, as UTF-8 bytes, in first-seen order (so training is deterministic)."""
    counts: dict[bytes, int] = {}
    for piece in pieces:
        key = piece.encode("utf-8")
        counts[key] = counts.get(key, 0) + 1
    return counts
