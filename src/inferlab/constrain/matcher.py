"""The matcher API in the field's vocabulary (xgrammar, llguidance): grammars, matchers, bitmasks.

A *grammar* is a schema compiled against one vocabulary: immutable, shared by any number of
matchers. Its states are immutable values, so a matcher's history is a list of states and
rollback is a pop. GrammarMatcher uses the Grammar protocol only; compile_json_schema() gives
the stack grammar of v2 (constrain.stack.StackGrammar), which implements it.

Bitmasks are int32 (batch, ceil(V/32)): bit t%32 of word t//32 is set iff token t is allowed, the
layout of xgrammar and llguidance. MatcherMask serves the engine's TokenMask hook from any
matcher, so generate() runs on every grammar (docs/architecture.md, "the matcher API").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Protocol

import numpy as np

from inferlab.constrain.dfa import DEFAULT_MAX_STATES
from inferlab.constrain.masks import apply_plan, plan_of_bitmask, unpack_bitmask
from inferlab.constrain.stack import WARM_MS, StackGrammar, compile_machine
from inferlab.constrain.tokenizer_vocab import vocabulary_of
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError

NEG_INF = np.float32(-np.inf)


class Grammar(Protocol):
    vocab_size: int
    eos_id: int  # -1 when the vocabulary has none

    def initial_state(self) -> Hashable: ...
    def fill_bitmask(self, state, out: np.ndarray) -> None: ...
    def advance(self, state, token: int) -> Hashable | None: ...
    def can_end(self, state) -> bool: ...
    def forced_bytes(self, state) -> bytes: ...


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """int32 (batch, ceil(V/32)) with every bit set: a row nobody fills masks nothing."""
    return np.full((batch, bitmask_words(vocab_size)), -1, dtype=np.int32)


def apply_token_bitmask_inplace(logits, bitmask) -> None:
    """Set the logits of disallowed tokens to -inf, in place.

    logits: numpy float (V,) or (B, V), or a torch tensor of those shapes (torch is imported only
    when a tensor is passed); bitmask: int32 (W,), (1, W) or (B, W), numpy or torch, one row for
    every logits row or one for all. Logits wider than the bitmask's 32*W tokens are a caller's
    bug (ValueError); narrower ones (a model padded below the tokenizer) are fine: only the first
    V bits are read. A bitmask or logits of another type, dtype or shape is a ValueError or
    TypeError naming it.
    """
    words = _bitmask_words(bitmask, writable=False)
    if logits.ndim not in (1, 2):
        raise ValueError(f"logits: shape {tuple(logits.shape)}, expected (V,) or (B, V)")
    if words.ndim == 2 and words.shape[0] != 1 and (logits.ndim == 1 or words.shape[0] != logits.shape[0]):
        raise ValueError(f"bitmask has {words.shape[0]} rows for logits of shape {tuple(logits.shape)}: "
                         "give one row per logits row, or one for all")
    if words.ndim == 2 and words.shape[0] == 1:
        words = words[0]                                                    # one row for all
    if logits.shape[-1] > 32 * words.shape[-1]:  # past the bitmask: neither allowed nor refused
        raise ValueError(f"logits have {logits.shape[-1]} columns but the bitmask covers {32 * words.shape[-1]} "
                         "tokens: allocate it for the logits' width (allocate_token_bitmask)")
    if isinstance(logits, np.ndarray):
        if not np.issubdtype(logits.dtype, np.floating):
            raise TypeError(f"logits: dtype {logits.dtype}, expected a float dtype (-inf is written)")
        keep = unpack_bitmask(words, logits.shape[-1])                      # (..., V)
        np.copyto(logits, NEG_INF, where=~keep)
        return
    import torch  # lazily: the core never imports torch

    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        raise TypeError(f"logits: {type(logits).__name__} of dtype {logits.dtype}, expected a float numpy "
                        "array or torch tensor (-inf is written)")
    # Unpack the complement: the disallowed set comes out of one pass, with no negation after.
    drop = unpack_bitmask(~words, logits.shape[-1])                                   # (..., V) bool
    if logits.device.type == "cpu" and logits.is_contiguous() and logits.dtype == torch.float32 \
            and not logits.requires_grad:
        np.copyto(logits.numpy(), NEG_INF, where=drop)  # shares memory; ~1.5x faster than masked_fill_
    else:
        logits.masked_fill_(torch.from_numpy(drop).to(logits.device), float("-inf"))


def _bitmask_words(bitmask, *, writable: bool) -> np.ndarray:
    """`bitmask` as a numpy int32 (W,) or (B, W) array sharing its memory (a torch tensor on the
    CPU through .numpy()), else a TypeError/ValueError naming what it is: an int64 array's bytes
    read as int32 words would allow other tokens than the grammar's. writable: it is filled, so
    a torch tensor must be on the CPU."""
    if isinstance(bitmask, np.ndarray):
        words = bitmask
    elif type(bitmask).__module__.split(".")[0] == "torch" and hasattr(bitmask, "numpy"):
        if writable and bitmask.device.type != "cpu":
            raise ValueError(f"bitmask: a torch tensor on {bitmask.device}; fill one on the CPU (or a numpy "
                             "array) and copy it over")
        words = bitmask.detach().cpu().numpy()
    else:
        raise TypeError(f"bitmask: {type(bitmask).__name__}, expected a numpy int32 array or a torch int32 "
                        "tensor (allocate_token_bitmask)")
    if words.dtype != np.int32:
        raise TypeError(f"bitmask: dtype {words.dtype}, expected int32: its words would be read as other "
                        "tokens' bits (allocate_token_bitmask)")
    if words.ndim not in (1, 2):
        raise ValueError(f"bitmask: shape {words.shape}, expected (W,) or (B, W)")
    return words


def fill_eos_only(out: np.ndarray, eos_id: int) -> None:
    """out (W,) int32: only EOS allowed (nothing when there is none): a finished batch row."""
    out[:] = 0
    if eos_id >= 0:
        out.view(np.uint32)[eos_id >> 5] = 1 << (eos_id & 31)


class GrammarMatcher:
    """One sequence's position in a grammar: a history of states, so rollback is a pop."""

    def __init__(self, grammar: Grammar, *, max_rollback_tokens: int = -1):
        self.grammar = grammar
        self.max_rollback_tokens = max_rollback_tokens
        self.reset()

    def reset(self) -> None:
        self._states = [self.grammar.initial_state()]
        self._terminated_at: int | None = None  # len(history) once EOS was accepted

    @property
    def state(self) -> Hashable:
        return self._states[-1]

    @property
    def n_accepted(self) -> int:
        return len(self._states) - 1

    def is_terminated(self) -> bool:
        return self._terminated_at is not None

    def can_end(self) -> bool:
        return self.grammar.can_end(self.state)

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) when the grammar does not allow it."""
        if self.is_terminated():
            return False
        nxt = self.grammar.advance(self.state, int(token_id))
        if nxt is None:
            return False
        self._states.append(nxt)
        if token_id == self.grammar.eos_id:
            self._terminated_at = len(self._states)
        if self.max_rollback_tokens >= 0 and len(self._states) > self.max_rollback_tokens + 1:
            del self._states[0]  # keep the window; the oldest states can no longer be reached
            if self._terminated_at is not None:
                self._terminated_at -= 1
        return True

    def fill_next_token_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed set into bitmask[row] (or a 1-D bitmask, row 0): numpy int32, or a
        torch int32 tensor on the CPU (xgrammar's allocate_token_bitmask). A row wider than the
        grammar's vocabulary (a bitmask allocated for a model's padded logits) gets its words
        and zeros past them: padded ids are never allowed. After EOS only EOS is allowed, so a
        finished row of a batch never has all its logits at -inf."""
        words = _bitmask_words(bitmask, writable=True)
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) \
                or not 0 <= row < (words.shape[0] if words.ndim == 2 else 1):
            raise ValueError(f"row {row!r} is not a row of a bitmask of shape {words.shape}")
        out = words[row] if words.ndim == 2 else words
        need = bitmask_words(self.grammar.vocab_size)
        if len(out) < need:
            raise ValueError(f"bitmask rows have {len(out)} words but the grammar's {self.grammar.vocab_size} "
                             f"tokens need {need} (allocate_token_bitmask)")
        if len(out) > need:
            out[need:] = 0
            out = out[:need]
        if self.is_terminated():
            fill_eos_only(out, self.grammar.eos_id)
            return
        self.grammar.fill_bitmask(self.state, out)

    def rollback(self, n: int) -> None:
        """Undo the last n accepted tokens."""
        if not 0 <= n <= len(self._states) - 1:
            raise InferlabError(f"cannot roll back {n} tokens: {len(self._states) - 1} can be undone")
        if n:
            del self._states[-n:]
        if self._terminated_at is not None and self._terminated_at > len(self._states):
            self._terminated_at = None

    def forced_text(self) -> bytes:
        """The longest byte string every valid continuation starts with (b"" once terminated)."""
        return b"" if self.is_terminated() else self.grammar.forced_bytes(self.state)


class MatcherMask:
    """The engine's TokenMask hook (model/generate.py) served by a GrammarMatcher.

    allowed_mask() gives the step's plan (masks.plan_of_bitmask of the grammar's bitmask row:
    the allowed ids, or the disallowed ones where they are fewer), cached per grammar state as
    the token index keeps one per row; apply() touches only those logits (masks.apply_plan), so
    a warm step does not unpack V bits. EOS is accepted by the grammar (allowed only where the
    text can end) but, as the hook requires, advance() is never called with it: generate()
    stops on EOS.
    """

    def __init__(self, grammar: Grammar, *, cache_plans: int = 1024):
        self.grammar = grammar
        self.vocab_size = grammar.vocab_size
        self.matcher = GrammarMatcher(grammar)
        self._bitmask = allocate_token_bitmask(1, grammar.vocab_size)[0]    # (W,)
        self._plans: OrderedDict = OrderedDict()   # grammar state -> (keep, ids), LRU
        self._cache_plans = cache_plans

    def reset(self) -> None:
        self.matcher.reset()

    def allowed_mask(self) -> tuple[bool, np.ndarray]:
        if self.matcher.is_terminated():  # only EOS: not a state of the grammar
            self.matcher.fill_next_token_bitmask(self._bitmask)
            return plan_of_bitmask(self._bitmask, self.vocab_size)
        state = self.matcher.state
        plan = self._plans.get(state)
        if plan is None:
            self.matcher.fill_next_token_bitmask(self._bitmask)
            plan = self._plans[state] = plan_of_bitmask(self._bitmask, self.vocab_size)
            if len(self._plans) > self._cache_plans:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(state)
        return plan

    def apply(self, logits: np.ndarray, m: tuple[bool, np.ndarray]) -> None:
        apply_plan(logits, m)

    def advance(self, token: int) -> None:
        if not self.matcher.accept_token(token):
            raise InferlabError(f"token {token} is not allowed by the grammar here")

    def rollback(self, n: int) -> None:
        self.matcher.rollback(n)

    def is_complete(self) -> bool:
        return self.matcher.can_end()

    def allowed_ids(self) -> np.ndarray:
        self.matcher.fill_next_token_bitmask(self._bitmask)
        return np.flatnonzero(unpack_bitmask(self._bitmask, self.vocab_size)).astype(np.int32)

    def forced_text(self) -> bytes:
        return self.matcher.forced_text()

    def chars_after_forced(self) -> list[str] | None:
        """The characters that may follow forced_text(), or None where the grammar cannot tell."""
        after = getattr(self.grammar, "chars_after_forced", None)
        return None if after is None or self.matcher.is_terminated() else after(self.matcher.state)


def compile_json_schema(schema: dict | bool, vocab, *, max_states: int = DEFAULT_MAX_STATES,
                        warm_ms: float = WARM_MS, **options) -> StackGrammar:
    """The Grammar of `schema` over `vocab` (a constrain.vocab.Vocabulary, or a tokenizer with
    token_bytes/eos_id/special_ids), as xgrammar's GrammarCompiler.compile_json_schema.

    It is the stack grammar of v2 (constrain.stack.compile_machine): $ref recursion is exact, and
    a schema that needs no call is one flat DFA (grammar.machine.uses_stack is False), whose
    masks are built on first visit of a state and cached. options: those of
    schema.compile_grammar (whitespace, lenient, extra_keys, count_min); max_states bounds
    each automaton's DFA; warm_ms, the time spent building the masks nearest the start before
    returning (StackGrammar.warm: hidden where compiling overlaps the prompt's prefill; 0: every
    mask lazily). Raises SchemaError / InferlabError as one line.
    """
    vocab = vocab if isinstance(vocab, Vocabulary) else vocabulary_of(vocab)
    return StackGrammar(compile_machine(schema, max_states=max_states, **options)[1], vocab, warm_ms=warm_ms)
