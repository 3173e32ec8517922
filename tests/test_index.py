"""TokenIndex and the vocabulary trie against brute-force per-token DFA walks."""

import random

import numpy as np
import pytest
from oracles import INDEX_PATTERNS, random_vocab

from inferlab.constrain.dfa import compile_regex
from inferlab.constrain import index as index_module
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.vocab import Vocabulary


def brute_force(dfa, vocab):
    """{state: {token: next state}} over the states reachable from start through tokens."""
    rows, todo = {}, [dfa.start]
    while todo:
        s = todo.pop()
        if s in rows:
            continue
        row = {}
        for t, data in enumerate(vocab.token_bytes):
            if data and t not in vocab.special_ids:
                nxt = dfa.walk(data, s)
                if nxt >= 0:
                    row[t] = nxt
        if dfa.accepting[s]:
            row[vocab.eos_id] = s
        rows[s] = row
        todo.extend(set(row.values()))
    return rows


# The walk is dense for rows allowing most first bytes, sparse otherwise, in row chunks: force
# each path, and chunks of one or two rows.
@pytest.mark.parametrize("seed, dense_first_bytes, chunk", [(0, 0.5, None), (1, 0.5, None), (0, -1.0, None),
                                                            (1, 2.0, None), (0, 0.5, 1), (1, 0.0, 2)])
@pytest.mark.parametrize("pattern", INDEX_PATTERNS)
def test_index_equals_brute_force_walk(pattern, seed, dense_first_bytes, chunk, monkeypatch):
    monkeypatch.setattr(index_module, "DENSE_FIRST_BYTES", dense_first_bytes)
    if chunk is not None:
        monkeypatch.setattr(index_module, "DENSE_CHUNK", chunk)
        monkeypatch.setattr(index_module, "SPARSE_CHUNK", chunk)
    dfa = compile_regex(pattern)
    vocab = random_vocab(seed, all_bytes=seed == 0)
    index = TokenIndex.build(dfa, vocab)
    expect = brute_force(dfa, vocab)
    assert sorted(expect) == index.states.tolist()
    V = vocab.vocab_size
    for r, s in enumerate(index.states.tolist()):
        row = expect[s]
        allowed = index.row_allowed(r)
        assert allowed.tolist() == sorted(row)
        nxt = index.next_state[index.offsets[r]:index.offsets[r + 1]]
        assert nxt.tolist() == [row[t] for t in sorted(row)]
        # Bit t%32 of word t//32, decoded with Python ints, not numpy's unpackbits.
        words = [w & 0xFFFFFFFF for w in index.bitmask[r].tolist()]
        bits = [t for t in range(V) if words[t // 32] >> (t % 32) & 1]
        assert bits == sorted(row)
        keep, ids = index.apply_plan(r)
        assert keep == (len(row) <= V // 2)
        assert ids.tolist() == (sorted(row) if keep else sorted(set(range(V)) - set(row)))
        for t in range(V):
            assert index.next_row(r, t) == (int(index.row_of[row[t]]) if t in row else -1)


def test_special_tokens_only_eos_and_only_when_accepting():
    vocab = random_vocab(3)
    index = TokenIndex.build(compile_regex("ab|a"), vocab)
    other_special = max(vocab.special_ids - {vocab.eos_id})
    assert other_special not in index.allowed
    for r, s in enumerate(index.states.tolist()):
        assert (vocab.eos_id in index.row_allowed(r)) == bool(index.dfa.accepting[s])


def test_trie_spells_every_token_once():
    vocab = random_vocab(5)
    trie = vocab.trie()
    spelled = {}

    def visit(d, node, prefix):
        lv = trie.levels[d]
        data = prefix + bytes([int(lv.byte[node])])
        if lv.end_token[node] >= 0:
            spelled[int(lv.end_token[node])] = data
        for c in range(lv.child_start[node], lv.child_start[node] + lv.child_count[node]):
            visit(d + 1, c, data)

    for root in range(len(trie.levels[0].byte)):
        visit(0, root, b"")
    for dup, primary in trie.duplicates.tolist():
        spelled[dup] = spelled[primary]
    expect = {t: b for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids}
    assert spelled == expect
    # Children come in ascending byte order, so the nodes of a level are lexicographic.
    assert all(np.all(np.diff(lv.byte[lv.child_start[i]:lv.child_start[i] + lv.child_count[i]].astype(int)) > 0)
               for lv in trie.levels for i in range(len(lv.byte)))


def test_empty_language_index_has_only_the_start_row():
    vocab = random_vocab(0)
    index = TokenIndex.build(compile_regex("[^\\x00-\\U0010ffff]"), vocab)
    assert index.dfa.n_states == 1 and index.n_rows == 1 and len(index.row_allowed(0)) == 0
    # By hand, one DFA state and one row, no allowed token: states 4 B (int32) + row_of 4 B +
    # offsets 2 x 8 B (int64) + one bitmask row of ceil(V/32) int32 words + apply_keep 1 B (bool)
    # + apply_offsets 2 x 8 B; the allowed, next-state and apply-id lists are empty.
    words = -(-vocab.vocab_size // 32)
    assert index.nbytes == 4 + 4 + 16 + 4 * words + 1 + 16


def brute_force_row(dfa, vocab, state) -> dict[int, int]:
    """{token: next state} from one state, walking every token's bytes through the DFA."""
    row = {t: nxt for t, data in enumerate(vocab.token_bytes)
           if data and t not in vocab.special_ids and (nxt := dfa.walk(data, state)) >= 0}
    if dfa.accepting[state]:
        row[vocab.eos_id] = state
    return row


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k", "qwen"])
def test_index_equals_brute_force_at_a_real_vocabulary(name):
    """The oracle at 100k+ tokens, on the start state and a seeded sample of the others: the real
    vocabularies hold what random ones do not (long tokens, shared prefixes, byte-split UTF-8)."""
    from inferlab.constrain.schema import compile_schema
    from inferlab.model.corpus import conjugation_schema
    from inferlab.model.tokenizer_loaders import load_vocab

    vocab = Vocabulary.from_tokenizer(load_vocab(name))
    dfa = compile_regex(compile_schema(conjugation_schema()).regex)
    index = TokenIndex.build(dfa, vocab)
    V = vocab.vocab_size
    states = index.states.tolist()
    sample = [dfa.start] + random.Random(0).sample([s for s in states if s != dfa.start], 3)
    for s in sample:
        row = brute_force_row(dfa, vocab, s)
        r = int(index.row_of[s])
        assert index.row_allowed(r).tolist() == sorted(row)
        nxt = index.next_state[index.offsets[r]:index.offsets[r + 1]]
        assert nxt.tolist() == [row[t] for t in sorted(row)]
        words = [w & 0xFFFFFFFF for w in index.bitmask[r].tolist()]
        assert [t for t in range(V) if words[t // 32] >> (t % 32) & 1] == sorted(row)
        assert all(int(index.row_of[n]) >= 0 for n in row.values())   # every next state has its row
