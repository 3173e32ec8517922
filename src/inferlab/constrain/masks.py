"""The two JSON-schema token masks; both implement the TokenMask hook of docs/architecture.md.

NaiveJSONSchemaMask is seed 000's baseline: every step walks every token's bytes through the DFA
from the current state, in plain Python, and builds the additive 0/-inf float32 array (V,).
IndexedJSONSchemaMask looks the current state's row up in a TokenIndex: a step is a lookup.

EOS is allowed only in accepting states; other special tokens never.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from inferlab.constrain.dfa import DFA
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError

NEG_INF = np.float32(-np.inf)


def apply_additive(logits: np.ndarray, m: np.ndarray) -> None:
    """logits (V,) += m (V,) float32 of 0 / -inf, in place: the seed's form."""
    np.add(logits, m, out=logits)


def apply_bitmask(logits: np.ndarray, words: np.ndarray) -> None:
    """Set the logits of tokens whose bit is clear in `words` (ceil(V/32),) int32 to -inf."""
    keep = np.unpackbits(words.view(np.uint8), count=len(logits), bitorder="little")  # (V,) 0/1
    logits[keep == 0] = NEG_INF


def apply_plan(logits: np.ndarray, plan: tuple[bool, np.ndarray]) -> None:
    """logits (V,) in place from a plan (keep, ids): keep -> ids are the allowed tokens (their
    logits are saved, the row filled with -inf, and scattered back), else the disallowed ones."""
    keep, ids = plan
    if keep:
        kept = logits[ids]
        logits.fill(NEG_INF)
        logits[ids] = kept
    else:
        logits[ids] = NEG_INF


def unpack_bitmask(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """int32 (..., W) -> bool (..., V): True where the token is allowed."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), axis=-1, count=vocab_size,
                         bitorder="little")                                  # (..., V) uint8
    return bits.view(bool)


def plan_of_bitmask(words: np.ndarray, vocab_size: int) -> tuple[bool, np.ndarray]:
    """(keep, ids) of an int32 bitmask row (ceil(V/32),): the allowed ids where they are at most
    half the vocabulary, else the disallowed ones (intp: what fancy indexing takes unconverted)."""
    bits = unpack_bitmask(words, vocab_size)                                          # (V,) bool
    allowed = np.flatnonzero(bits)
    if 2 * len(allowed) <= vocab_size:
        return True, allowed
    return False, np.flatnonzero(~bits)


def _disallowed_token(token: int, where: str) -> InferlabError:
    return InferlabError(f"token {token} is not allowed {where}")


@dataclass
class NaiveStats:
    """The naive mask's instrumentation, summed over allowed_mask() calls since reset()."""

    steps: int = 0
    token_checks: int = 0   # tokens walked through the DFA
    byte_steps: int = 0     # DFA transitions taken
    ns: int = 0             # wall time inside allowed_mask(), perf_counter_ns


class NaiveJSONSchemaMask:
    """Every step: for each of the V tokens, walk its bytes from the current state, in Python."""

    def __init__(self, dfa: DFA, vocab: Vocabulary):
        self.dfa = dfa
        self.vocab = vocab
        self.vocab_size = vocab.vocab_size
        self._trans = dfa.trans.tolist()        # plain lists: the seed's pure-Python state machine
        self._accepting = dfa.accepting.tolist()
        self.stats = NaiveStats()
        self.reset()

    def reset(self) -> None:
        self.state = self.dfa.start
        self.stats = NaiveStats()

    def _walk_all(self) -> list[int]:
        trans, state, allowed = self._trans, self.state, []
        checks = steps = 0
        for t, data in enumerate(self.vocab.token_bytes):
            if not data:  # special tokens: only EOS, and only when complete
                continue
            checks += 1
            s = state
            for b in data:
                steps += 1
                s = trans[s][b]
                if s < 0:
                    break
            else:
                allowed.append(t)
        if self._accepting[state] and self.vocab.eos_id >= 0:
            allowed.append(self.vocab.eos_id)
            allowed.sort()
        self.stats.token_checks += checks
        self.stats.byte_steps += steps
        return allowed

    def allowed_mask(self) -> np.ndarray:
        """The additive 0/-inf float32 array (V,) for the current state."""
        t0 = time.perf_counter_ns()
        m = np.full(self.vocab_size, NEG_INF, dtype=np.float32)   # (V,)
        m[self._walk_all()] = 0.0
        self.stats.steps += 1
        self.stats.ns += time.perf_counter_ns() - t0
        return m

    def apply(self, logits: np.ndarray, m: np.ndarray) -> None:
        apply_additive(logits, m)

    def allowed_ids(self) -> np.ndarray:
        return np.asarray(self._walk_all(), dtype=np.int32)

    def is_complete(self) -> bool:
        return bool(self._accepting[self.state])

    def advance(self, token: int) -> None:
        if token == self.vocab.eos_id and self.is_complete():
            return
        data = self.vocab.token_bytes[token] if 0 <= token < self.vocab_size else b""
        s = self.dfa.walk(data, self.state) if data else -1
        if s < 0:
            raise _disallowed_token(token, f"in DFA state {self.state}")
        self.state = s


class IndexedJSONSchemaMask:
    """A step is a row lookup in the TokenIndex.

    apply() touches as few logits as it can: per row, the index keeps the allowed ids or, where
    they are fewer, the disallowed ones; a small allowed set is applied by saving those logits,
    filling the row with -inf and scattering them back, a small disallowed set by
    `logits[disallowed] = -inf`.
    """

    def __init__(self, index: TokenIndex):
        self.index = index
        self.vocab_size = index.vocab_size
        # Per row: (keep, ids): keep=True -> ids are the allowed tokens, else the disallowed.
        # intp ids: numpy converts other index types on every fancy-indexing call.
        self._plans = [index.apply_plan(r) for r in range(index.n_rows)]
        self.reset()

    def reset(self) -> None:
        self.row = self.index.start_row

    def allowed_mask(self) -> tuple[bool, np.ndarray]:
        return self._plans[self.row]

    def apply(self, logits: np.ndarray, m: tuple[bool, np.ndarray]) -> None:
        apply_plan(logits, m)

    def additive_mask(self) -> np.ndarray:
        """The seed's form: float32 (V,) of 0 (allowed) / -inf, for apply_additive."""
        m = np.full(self.vocab_size, NEG_INF, dtype=np.float32)
        m[self.allowed_ids()] = 0.0
        return m

    def bitmask(self) -> np.ndarray:
        """int32 (ceil(V/32),): bit t%32 of word t//32 set iff token t is allowed (apply_bitmask)."""
        return self.index.bitmask[self.row]

    def allowed_ids(self) -> np.ndarray:
        return self.index.row_allowed(self.row)

    def is_complete(self) -> bool:
        return bool(self.index.dfa.accepting[self.index.states[self.row]])

    def advance(self, token: int) -> None:
        if token == self.index.eos_id and self.is_complete():
            return
        nxt = self.index.next_row(self.row, token)
        if nxt < 0:
            raise _disallowed_token(token, f"in DFA state {int(self.index.states[self.row])}")
        self.row = nxt
