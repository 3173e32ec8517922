"""The trie walks of token_split against a brute-force walk of every token's bytes.

The Python walk of a narrow state (narrow_tokens) and the numpy walk by trie level (walk_trie)
must both find exactly the tokens whose bytes all walk through a byte automaton from a state, on
random automata (dense and sparse rows) over generated and real vocabularies; the shared shape
cache must give the splits that a fresh one gives.
"""

import random

import numpy as np
import pytest

from inferlab.constrain import token_split
from inferlab.constrain.vocab import Vocabulary


def random_vocab(seed: int, n: int = 400) -> Vocabulary:
    """Every byte, then random multi-byte tokens over a small alphabet (shared prefixes) and a few
    over all bytes; one special token (EOS)."""
    rng = random.Random(seed)
    toks = [bytes([b]) for b in range(256)]
    for _ in range(n):
        alphabet = b'ab"{}:, 0' if rng.random() < 0.8 else bytes(range(256))
        toks.append(bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 8))))
    toks = list(dict.fromkeys(toks))
    return Vocabulary(tuple(toks) + (b"",), eos_id=len(toks), special_ids=frozenset([len(toks)]))


def random_automaton(rng: np.random.Generator, states: int, density: float) -> np.ndarray:
    """(S, 256) int32: each byte goes to a random state with probability `density`, else -1."""
    trans = rng.integers(0, states, size=(states, 256)).astype(np.int32)
    trans[rng.random((states, 256)) >= density] = -1
    return trans


def literal_automaton(rng: np.random.Generator, states: int) -> np.ndarray:
    """(S, 256) int32 of literal text: most states read one byte of the generated vocabularies'
    alphabet (a chain of one trie node a level), a few read several."""
    trans = np.full((states, 256), -1, dtype=np.int32)
    alphabet = list(b'ab"{}:, 0')
    for s in range(states):
        for b in rng.choice(alphabet, size=1 if rng.random() < 0.8 else 3, replace=False):
            trans[s, b] = rng.integers(0, states)
    return trans


def brute_force(vocab: Vocabulary, trans: np.ndarray, state: int) -> set[int]:
    out, rows = set(), trans.tolist()
    for t, data in enumerate(vocab.token_bytes):
        if not data or t in vocab.special_ids:
            continue
        s = state
        for b in data:
            s = rows[s][b]
            if s < 0:
                break
        if s >= 0:
            out.add(t)
    return out


def numpy_walk(trie, trans: np.ndarray, state: int) -> set[int]:
    levels = trie.levels
    found = [token_split.live_tokens(levels, d, node, x)[1]
             for d, node, x in token_split.walk_trie(levels, trans[state][levels[0].byte], lambda ids: trans)]
    return set(np.concatenate(found).tolist()) if found else set()


def python_walk(trie, trans: np.ndarray, state: int, budget: int) -> set[int] | None:
    def rows(s):
        live = [b for b in range(256) if trans[s][b] >= 0]  # (the bytes read, each one's next state)
        return [int(trans[s][b]) for b in live], bytes(live)
    out = token_split.narrow_tokens(trie, rows(state), rows, budget)
    assert out is None or len(out) == len(set(out))  # each token found once
    return None if out is None else set(out)


def check_walks(vocab: Vocabulary, seed: int) -> int:
    """Random automata, every state: both walks equal the brute force; a budget too small for a
    walk gives None, never a wrong answer. Returns the states a small budget left to numpy."""
    rng = np.random.default_rng(seed)
    trie = vocab.trie()
    gave_up = 0
    for states, density in [(3, 0.9), (6, 0.3), (12, 0.05), (4, 0.01), (40, None)]:
        trans = random_automaton(rng, states, density) if density else literal_automaton(rng, states)
        for s in range(states):
            truth = brute_force(vocab, trans, s)
            assert numpy_walk(trie, trans, s) == truth
            assert python_walk(trie, trans, s, 10**9) == truth
            small = python_walk(trie, trans, s, 40)
            assert small is None or small == truth
            gave_up += small is None
    return gave_up


@pytest.mark.parametrize("seed", range(3))
def test_walks_equal_brute_force_on_random_automata(seed):
    assert check_walks(random_vocab(seed), seed) > 0  # the small budget was hit, so both paths ran


def test_walks_equal_brute_force_on_the_512_vocabulary():
    from inferlab.model.tokenizer_loaders import load_vocab
    assert check_walks(Vocabulary.from_tokenizer(load_vocab("512")), 7) > 0


@pytest.mark.slow
def test_walks_equal_brute_force_at_qwen():
    from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed
    if not vocab_installed("qwen"):
        pytest.skip("qwen vocabulary not installed")
    assert check_walks(Vocabulary.from_tokenizer(load_vocab("qwen")), 11) > 0


def node_bytes(trie) -> list[bytes]:
    """Each global trie node id's path (the bytes from the root), from the levels' parents."""
    out, prev = [], []
    for d, lv in enumerate(trie.levels):
        cur = [(prev[p] if d else b"") + bytes([b]) for p, b in zip(lv.parent.tolist() if d else [0] * len(lv.byte),
                                                                       lv.byte.tolist())]
        out += cur
        prev = cur
    return out


def brute_force_split(vocab: Vocabulary, trans: np.ndarray, exit_row: np.ndarray, exit_bytes: np.ndarray,
                      state: int) -> tuple[set[int], set[bytes]]:
    """FrameTokens's contract from every token's bytes: the tokens that walk inside the automaton,
    and the paths of the context-dependent ones. A token is context-dependent from byte i on when
    the walk of its first i bytes is alive at a state that may push or pop there and byte i is one
    that may be read after; its path's prefixes up to i are kept, and every trie path through
    its first i + 1 bytes."""
    paths = set(node_bytes(vocab.trie()))
    kept: set[bytes] = set()
    for t, data in enumerate(vocab.token_bytes):
        if not data or t in vocab.special_ids:
            continue
        q = state
        for i in range(1, len(data)):
            q = int(trans[q, data[i - 1]])
            if q < 0:
                break
            if exit_row[q] >= 0 and exit_bytes[exit_row[q], data[i]]:
                kept.update(data[:j] for j in range(1, i + 1))
                kept.update(p for p in paths if p.startswith(data[:i + 1]))
    return brute_force(vocab, trans, state), kept


@pytest.mark.parametrize("seed", range(3))
def test_narrow_frames_equal_brute_force(seed):
    """The split of a state reading few bytes, walked in Python (token_split._narrow_frame), on
    random automata whose states may push or pop before random bytes."""
    rng = np.random.default_rng(seed)
    vocab = random_vocab(seed)
    trie, words = vocab.trie(), (vocab.vocab_size + 31) // 32
    paths = node_bytes(trie)
    walked = 0
    for states, density in [(6, 0.02), (10, 0.05), (4, 0.08)]:
        trans = random_automaton(rng, states, density)
        trans[:, [ord("a"), ord('"')]] = rng.integers(0, states, size=(states, 2))  # (paths through the trie)
        exit_row = np.where(rng.random(states) < 0.5, np.arange(states), -1).astype(np.int32)
        exit_bytes = rng.random((states, 256)) < 0.1
        for s in range(states):
            split = token_split._narrow_frame(trie, trans, (exit_row, exit_bytes), s, words)
            if split is None:
                continue
            walked += 1
            accepted, kept = brute_force_split(vocab, trans, exit_row, exit_bytes, s)
            bits = np.unpackbits(split.accepted.view(np.uint8), bitorder="little")
            assert set(np.flatnonzero(bits).tolist()) == accepted
            assert split.keep is None or {paths[n] for n in split.keep.tolist()} == kept
    assert walked > 0


def brute_force_counted(vocab: Vocabulary, trans: np.ndarray, restart: np.ndarray, state: int, cap: int) -> dict[int, int]:
    """{token: items it begins} for the tokens whose bytes all walk from `state`, each byte on a
    restart edge beginning one more item, those beginning more than cap left out."""
    out = {}
    for t, data in enumerate(vocab.token_bytes):
        if not data or t in vocab.special_ids:
            continue
        s, items = state, 0
        for b in data:
            items += bool(restart[s, b])
            s = int(trans[s, b])
            if s < 0 or items > cap:
                break
        if s >= 0 and items <= cap:
            out[t] = items
    return out


@pytest.mark.parametrize("seed", range(3))
def test_counted_tokens_equal_brute_force(seed):
    """Every state of random automata with random restart edges, at several caps: the tokens and
    the items each begins, sorted by items."""
    rng = np.random.default_rng(seed)
    vocab = random_vocab(seed)
    trie = vocab.trie()
    for states, density in [(3, 0.9), (6, 0.3)]:
        trans = random_automaton(rng, states, density)
        restart = (trans >= 0) & (rng.random(trans.shape) < 0.3)
        for s in range(states):
            for cap in (0, 1, 3, 9):
                tokens, items = token_split.counted_tokens(trie, trans, restart, s, cap)
                assert dict(zip(tokens.tolist(), items.tolist())) == brute_force_counted(vocab, trans, restart, s, cap)
                assert len(set(tokens.tolist())) == len(tokens) and (np.diff(items) >= 0).all()
