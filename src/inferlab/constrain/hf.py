"""JSON-schema constrained decoding inside Hugging Face transformers' model.generate().

    from inferlab.constrain.hf import JSONSchemaLogitsProcessor
    proc = JSONSchemaLogitsProcessor([schema_a, schema_b], tokenizer)   # or one schema for all rows
    out = model.generate(**batch, logits_processor=LogitsProcessorList([proc]), max_new_tokens=64)
    proc.complete(out)   # per row: the output is a whole instance (EOS accepted or may end there)

Rows are matched by their generated tokens, not by position: beam search reorders rows every
step, so each call looks the state of a row's prefix up (a dict of the previous call's rows) and
advances it by the one new token. States are the grammar's immutable values, so that is a copy of
a reference. EOS is allowed only where the text is a complete instance; after it, the row (HF pads
it from then on) and any beam that took a -inf candidate allow only EOS, so no row is all -inf.

This module imports torch and transformers (the [hf] extra); the core never imports it.
"""

from __future__ import annotations

import json

try:
    import torch
    from transformers import LogitsProcessor
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("inferlab.constrain.hf needs torch and transformers: pip install 'inferlab[hf]'") from exc

from inferlab.constrain.dfa import DEFAULT_MAX_STATES
from inferlab.constrain.hf_vocab import hf_vocabulary
from inferlab.constrain.matcher import allocate_token_bitmask, apply_token_bitmask_inplace, fill_eos_only
from inferlab.constrain.schema import check_nesting
from inferlab.constrain.stack import StackGrammar, compile_machine
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError
from inferlab.nesting import SCHEMA_FRAMES, recursion_room

DEAD = "dead"      # a beam that took a disallowed (-inf) candidate: it can never win
ENDED = "ended"    # EOS accepted; HF pads the row from here on


class JSONSchemaLogitsProcessor(LogitsProcessor):
    """A transformers LogitsProcessor enforcing one JSON schema per batch row (or one for all).

    schemas: a schema (dict/bool) or a list with one per batch item (beams and
    num_return_sequences of an item share its schema). tokenizer: a PreTrainedTokenizerFast
    (token bytes derived and checked against its decode(), see hf_vocab.py) or an inferlab
    Tokenizer. Each distinct schema is compiled once, to the stack grammar of
    constrain.matcher.compile_json_schema (recursive $ref exact); compile_options go to
    schema.compile_grammar. The grammars over the vocabulary are made on the first call, for the
    logits' width (models often pad the vocabulary beyond the tokenizer); their masks are built
    on first visit of a state and cached.
    """

    def __init__(self, schemas, tokenizer, *, max_states: int = DEFAULT_MAX_STATES, **compile_options):
        self.schemas = list(schemas) if isinstance(schemas, (list, tuple)) else [schemas]
        if not self.schemas:
            raise InferlabError("schemas: expected a schema or a non-empty list of schemas")
        self.tokenizer = tokenizer
        # Equal schemas compile once; the key keeps property order, which the output follows.
        for s in self.schemas:  # before json.dumps, which recurses per level
            check_nesting(s)
        with recursion_room(SCHEMA_FRAMES):
            keys = [json.dumps(s) for s in self.schemas]
        distinct = list(dict.fromkeys(keys))                     # first-seen order
        self._schema_of = [distinct.index(k) for k in keys]     # batch item -> distinct schema
        self._machines = [compile_machine(self.schemas[keys.index(k)], max_states=max_states, **compile_options)[1]
                          for k in distinct]
        self.grammars: list[StackGrammar] = []
        self.reset()

    def reset(self) -> None:
        """Forget the rows of the last generate() call (grammars are kept). Called by itself when
        a call's input is not one token longer than the last's: a new generate() began."""
        self._prompt_len: int | None = None
        self._last_len: int | None = None
        self._states: dict[tuple, object] = {}
        self._bitmask = None

    def _vocabulary(self, width: int) -> Vocabulary:
        if hasattr(self.tokenizer, "backend_tokenizer"):
            return hf_vocabulary(self.tokenizer, width)
        tb = list(self.tokenizer.token_bytes) + [b""] * (width - self.tokenizer.vocab_size)
        return Vocabulary(tuple(tb), int(self.tokenizer.eos_id), frozenset(self.tokenizer.special_ids))

    def _build(self, width: int) -> None:
        if self.grammars and self.grammars[0].vocab_size == width:
            return
        vocab = self._vocabulary(width)
        if vocab.vocab_size != width:
            raise InferlabError(f"the tokenizer has {vocab.vocab_size} tokens but the logits only {width}")
        self.grammars = [StackGrammar(machine, vocab) for machine in self._machines]

    def _grammar_index(self, row: int, rows: int) -> int:
        n = len(self.schemas)
        if n == 1:
            return 0
        if rows % n:
            raise InferlabError(f"{n} schemas for {rows} rows: the rows must be a whole number per schema")
        return self._schema_of[row // (rows // n)]

    def _step(self, g: StackGrammar, state, token: int):
        if state in (DEAD, ENDED):
            return state
        if token == g.eos_id and g.can_end(state):
            return ENDED
        nxt = g.advance(state, token)
        return DEAD if nxt is None else nxt

    def _walk(self, gi: int, seq: tuple) -> object:
        """The state after `seq` from the start (a row whose prefix the last call did not see)."""
        g = self.grammars[gi]
        state = g.initial_state()
        for t in seq:
            state = self._step(g, state, t)
        return state

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        rows, width = scores.shape
        self._build(width)
        if self._last_len is None or input_ids.shape[1] != self._last_len + 1:
            self.reset()
            self._prompt_len = input_ids.shape[1]
        self._last_len = input_ids.shape[1]
        if self._bitmask is None or self._bitmask.shape[0] != rows:
            self._bitmask = allocate_token_bitmask(rows, width)
        generated = input_ids[:, self._prompt_len:].tolist()
        previous, self._states = self._states, {}
        for r, seq in enumerate(generated):
            gi = self._grammar_index(r, rows)
            key = (gi, tuple(seq))
            state = self._states.get(key)
            if state is None:
                parent = previous.get((gi, key[1][:-1])) if seq else None
                state = (self._step(self.grammars[gi], parent, seq[-1]) if parent is not None
                         else self._walk(gi, key[1]))
                self._states[key] = state
            self._fill(self.grammars[gi], state, r)
        apply_token_bitmask_inplace(scores, self._bitmask)
        return scores

    def _fill(self, g: StackGrammar, state, row: int) -> None:
        if state in (DEAD, ENDED):
            fill_eos_only(self._bitmask[row], g.eos_id)
            return
        g.fill_bitmask(state, self._bitmask[row])

    def complete(self, sequences) -> list[bool]:
        """Per output row of generate(): True iff its generated tokens are a whole instance (EOS
        accepted, or the text may end there). Rows map to schemas as in __call__."""
        out = []
        rows = len(sequences)
        for r, seq in enumerate(sequences[:, self._prompt_len:].tolist()):
            gi = self._grammar_index(r, rows)
            state = self._walk(gi, tuple(seq))
            out.append(state == ENDED or (state != DEAD and self.grammars[gi].can_end(state)))
        return out
