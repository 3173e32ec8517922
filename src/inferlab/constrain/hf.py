"""JSON-schema constrained decoding inside Hugging Face transformers' model.generate().

    from inferlab.constrain.hf import JSONSchemaLogitsProcessor
    proc = JSONSchemaLogitsProcessor([schema_a, schema_b], tokenizer)   # or one schema for all rows
    out = model.generate(**batch, logits_processor=LogitsProcessorList([proc]), max_new_tokens=64)
    proc.complete(out)   # per row: the output is a whole instance (EOS accepted or may end there)

Rows are matched by their generated tokens, not by position: beam search reorders rows every
step, so each call finds the node of a row's prefix (the last call's rows by their tokens, else a
walk of every prefix this call has seen: assisted and prompt-lookup decoding step several tokens,
or back) and advances it by the one new token. States are the grammar's immutable values, so a
node holds a reference. EOS is allowed only where the text is a complete instance; after it, the
row (HF pads it from then on) and any beam that took a -inf candidate allow only EOS. The EOS ids
are the tokenizer's eos_token_id, or `eos_token_id=` (int or list: pass
model.generation_config.eos_token_id where generate() stops on other ids). The processor's own
mask never leaves a row all -inf, but generate() options that set logits to -inf themselves
(min_new_tokens, no_repeat_ngram_size, bad_words_ids, suppress_tokens) can remove every token the
schema allows: sampling then fails in torch, and greedy takes token 0 (complete() says False).
Leave them off. (A check here cannot tell that case: prompt lookup probes the processors with
logits an earlier probe already left all -inf.)

transformers tells a processor nothing of where one generate() call ends. A call starts afresh
where its rows do not all begin with the prompts the last call began with, or extend prefixes that
call has not seen. A prompt that is an output of the last call fed back (cut by max_new_tokens, or
finished with EOS) looks like that call going on, and is taken so (a finished row then allows
only EOS; generate() going on past an EOS it does not stop on looks the same, and is warned of):
call reset() between such calls, or use a new processor.

This module imports torch and transformers (the [hf] extra); the core never imports it.
"""

from __future__ import annotations

import json
import warnings

import numpy as np

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
from inferlab.constrain.tokenizer_vocab import check_tokenizer
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

    def __init__(self, schemas, tokenizer, *, eos_token_id: int | list[int] | None = None,
                 max_states: int = DEFAULT_MAX_STATES, **compile_options):
        self.schemas = list(schemas) if isinstance(schemas, (list, tuple)) else [schemas]
        if not self.schemas:
            raise InferlabError("schemas: expected a schema or a non-empty list of schemas")
        check_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self._stop_ids = _eos_ids(eos_token_id)  # (): the tokenizer's
        self._eos: tuple[int, ...] = ()          # the EOS ids in use, set with the grammars (_build)
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
        """Forget the last generate() call's rows and prefixes (grammars are kept). Called by itself
        when a call begins afresh (_parents)."""
        self._prompt_len: int | None = None
        self._prompt_ids = None                      # (prompts, prompt_len): the call's first rows
        self._rows: dict[tuple, int] = {}            # (grammar, generated tokens) -> node: the last call's rows
        self._child: dict[tuple[int, int], int] = {}  # (node, token) -> node: every prefix this call has seen
        self._node_state: list = []                  # node -> grammar state (or DEAD / ENDED)
        self._roots: dict[int, int] = {}             # grammar -> the node of no token
        self._bitmask = None
        self._warned = False

    def _parents(self, input_ids) -> tuple[list[int], list[tuple]] | None:
        """(each row's node before its newest token, each row's generated tokens), or None where
        `input_ids` begins a new generate() call. Within one call every row begins with one of the
        prompt rows its first step saw, and its tokens but the newest form a prefix the call has
        seen, whatever beam search, assisted or prompt-lookup decoding do."""
        if not self._from_prompts(input_ids):
            return None
        rows = input_ids.shape[0]
        seqs = [tuple(seq) for seq in input_ids[:, self._prompt_len:].tolist()]
        parents = [self._parent(self._grammar_index(r, rows), seq) for r, seq in enumerate(seqs)]
        if any(p is None for p in parents):
            return None
        return parents, seqs

    def _from_prompts(self, input_ids) -> bool:
        """Does every row begin with one of the prompt rows the call's first step saw?"""
        n = self._prompt_len
        if n is None or input_ids.shape[1] < n:
            return False
        heads = input_ids[:, :n]
        return bool((heads[:, None, :] == self._prompt_ids[None, :, :]).all(-1).any(-1).all())  # (rows, prompts)

    def _parent(self, gi: int, seq: tuple) -> int | None:
        """The node of seq[:-1] (of seq when empty) if this call has seen it, else None: the last
        call's rows first (one dict lookup), else a walk from the root (a jump of several tokens)."""
        if not seq:
            return self._root(gi)
        node = self._rows.get((gi, seq[:-1]))
        if node is not None:
            return node
        node = self._root(gi)
        for t in seq[:-1]:
            node = self._child.get((node, t))
            if node is None:
                return None
        return node

    def _root(self, gi: int) -> int:
        node = self._roots.get(gi)
        if node is None:
            node = self._roots[gi] = self._node(self.grammars[gi].initial_state())
        return node

    def _node(self, state) -> int:
        self._node_state.append(state)
        return len(self._node_state) - 1

    def _child_of(self, gi: int, node: int, token: int) -> int:
        got = self._child.get((node, token))
        if got is None:
            got = self._child[(node, token)] = self._node(self._step(self.grammars[gi], self._node_state[node], token))
        return got

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
        if self._stop_ids:
            if max(self._stop_ids) >= width:
                raise InferlabError(f"eos_token_id {max(self._stop_ids)} is past the logits' {width} columns")
            vocab = Vocabulary(vocab.token_bytes, self._stop_ids[0], vocab.special_ids | set(self._stop_ids))
        elif vocab.eos_id < 0:  # a finished row could then allow nothing: every logit -inf
            raise InferlabError("the tokenizer has no EOS token (eos_token is None): a row that completes its "
                                "instance could not end; set the tokenizer's eos_token or pass eos_token_id")
        self._eos = self._stop_ids or (vocab.eos_id,)
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
        if token in self._eos and g.can_end(state):
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
        found = self._parents(input_ids)
        if found is None:  # a new generate() call
            self.reset()
            self._prompt_len, self._prompt_ids = input_ids.shape[1], input_ids.clone()
            found = [self._root(self._grammar_index(r, rows)) for r in range(rows)], [()] * rows
        if self._bitmask is None or self._bitmask.shape[0] != rows:
            self._bitmask = allocate_token_bitmask(rows, width)
        self._rows = {}
        states = []
        for r, (parent, seq) in enumerate(zip(*found)):
            gi = self._grammar_index(r, rows)
            node = self._child_of(gi, parent, seq[-1]) if seq else parent
            self._rows[(gi, seq)] = node
            states.append((gi, self._node_state[node]))
        for gi in dict.fromkeys(gi for gi, _ in states):  # the rows' new masks in one native call per grammar
            self.grammars[gi].fill_rows([s for g, s in states if g == gi and s not in (DEAD, ENDED)])
        for r, (gi, state) in enumerate(states):
            self._fill(self.grammars[gi], state, r)
        if not self._warned and all(self._node_state[n] == ENDED for n in self._rows.values()):
            self._warned = True  # (generate() stops once every row took an id it stops on)
            warnings.warn(f"every row has taken EOS {list(self._eos)}, yet generate() goes on: it stops on other ids "
                          "(pass eos_token_id=model.generation_config.eos_token_id to the processor), or this is a "
                          "new call on a finished output (call reset() first); only EOS is allowed", stacklevel=2)
        apply_token_bitmask_inplace(scores, self._bitmask)
        return scores

    def _fill(self, g: StackGrammar, state, row: int) -> None:
        out = self._bitmask[row]
        if state in (DEAD, ENDED):
            fill_eos_only(out, g.eos_id)
        else:
            g.fill_bitmask(state, out)
            if len(self._eos) == 1 or not g.can_end(state):
                return
        for t in self._eos[1:]:  # generate()'s other stop ids, where the grammar's EOS is allowed
            out.view(np.uint32)[t >> 5] |= np.uint32(1 << (t & 31))

    def complete(self, sequences) -> list[bool]:
        """Per output row of the last generate() call this processor served: True iff its
        generated tokens are a whole instance (EOS accepted, or the text may end there). Rows map
        to schemas as in __call__. Rows that do not begin with that call's prompts (another call's
        output) are an InferlabError: where their generated tokens begin is not known here."""
        if self._prompt_len is None:
            raise InferlabError("complete(): this processor has served no generate() call yet")
        if not isinstance(sequences, torch.Tensor):
            sequences = torch.as_tensor(sequences)
        if sequences.ndim != 2:
            raise InferlabError(f"complete(): sequences of shape {tuple(sequences.shape)}, expected generate()'s "
                                "(rows, length)")
        if not self._from_prompts(sequences):
            raise InferlabError("complete(): these rows do not begin with the prompts of the last generate() call this "
                                "processor served; ask right after their call")
        out = []
        rows = len(sequences)
        for r, seq in enumerate(sequences[:, self._prompt_len:].tolist()):
            gi = self._grammar_index(r, rows)
            state = self._walk(gi, tuple(seq))
            out.append(state == ENDED or (state != DEAD and self.grammars[gi].can_end(state)))
        return out


def _eos_ids(eos_token_id) -> tuple[int, ...]:
    """generate()'s stop ids as the processor's EOS ids, in order (() where None: the tokenizer's)."""
    if eos_token_id is None:
        return ()
    ids = [eos_token_id] if isinstance(eos_token_id, int) else eos_token_id
    if not isinstance(ids, (list, tuple)) or not ids \
            or any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in ids):
        raise InferlabError(f"eos_token_id: expected a token id or a non-empty list of them, got {eos_token_id!r}")
    return tuple(dict.fromkeys(ids))
