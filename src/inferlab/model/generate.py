"""generate(): cached decoding with Gumbel-max sampling, the TokenMask hook and optional tracing.

Sampling draws exactly one Gumbel vector of size V per step from np.random.Generator(seed), even at
temperature 0 (greedy) and whatever the mask, top-k or top-p remove. So two runs with the same
seed consume the RNG identically, and a masked and an unmasked run agree token for token until the
mask filters out the unmasked choice (seed 000, "distintas rutas de muestreo"). Gumbel-max:
argmax(z + G), G ~ Gumbel(0, 1) i.i.d., is a draw from softmax(z) (Gumbel 1954; Maddison et al.
2014), and -inf logits can never win, so masks and filters compose by setting logits to -inf.

Each step: forward (the KV-cached decode), mask build (`mask.allowed_mask()`), mask apply
(`mask.apply(logits, m)`), sample; then `mask.advance(token)`. EOS is a token like any other:
the mask allows it only where `is_complete()` (the TokenMask contract), and sampling it stops.

Jump-forward (SGLang, xgrammar): where the grammar allows one continuation only (a mask with
forced_text(), constrain.matcher.MatcherMask), its tokens are appended without sampling and fed in
the next forward pass together. See JumpForward for how the result stays a valid tokenization.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from inferlab.errors import InferlabError
from inferlab.model.pretokenize import pretokenize

STOP_REASONS = ("eos", "max_new_tokens", "context", "no_allowed_token")


class TokenMask(Protocol):
    """The constrained-decoding hook (docs/architecture.md); inferlab.constrain implements it."""

    vocab_size: int

    def allowed_mask(self) -> object: ...
    def apply(self, logits: np.ndarray, m) -> None: ...
    def advance(self, token: int) -> None: ...
    def is_complete(self) -> bool: ...
    def reset(self) -> None: ...
    def allowed_ids(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Generation:
    tokens: list[int]        # the new tokens; a final EOS is not included
    text: str                # tokenizer.decode(tokens)
    n_tokens: int            # len(tokens)
    stop_reason: str         # one of STOP_REASONS
    complete: bool | None    # mask.is_complete() at the end; None without a mask
    n_steps: int             # decode steps run (the step that sampled EOS counts)
    prompt_tokens: int       # positions of the prompt, prefilled in step 0
    elapsed_s: float         # wall time of the decode loop (prefill included)
    tokens_forced: int = 0   # jump-forward: tokens appended without sampling (boundary re-tokenized included)
    forward_passes_saved: int = 0  # jump-forward: passes a token-by-token decode of this output needs, less n_steps


@dataclass(frozen=True)
class SamplingConfig:
    """temperature 0 is greedy; top_k keeps the k largest logits; top_p the smallest set of tokens
    whose probability reaches p (Holtzman et al. 2020). Both filters follow the temperature."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if not self.temperature >= 0:
            raise InferlabError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and (not isinstance(self.top_k, (int, np.integer)) or self.top_k < 1):
            raise InferlabError(f"top_k must be a whole number >= 1, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise InferlabError(f"top_p must be in (0, 1], got {self.top_p}")


def filter_logits(logits: np.ndarray, s: SamplingConfig) -> np.ndarray:
    """(V,) -> (V,) logits / temperature with top-k and top-p applied as -inf (temperature > 0)."""
    z = logits / np.float32(s.temperature)                                # (V,)
    if s.top_k is not None and s.top_k < z.size:
        kth = np.partition(z, -s.top_k)[-s.top_k]
        z[z < kth] = -np.inf
    if s.top_p is not None and s.top_p < 1:
        order = np.argsort(-z, kind="stable")                             # (V,) most likely first
        p = np.exp(z[order] - z[order[0]])
        p /= p.sum()
        before = np.cumsum(p) - p                                         # mass of the better tokens
        z[order[before >= s.top_p]] = -np.inf                             # the best token always stays
    return z


def sample(logits: np.ndarray, rng: np.random.Generator, s: SamplingConfig) -> int:
    """One token from (V,) logits with exactly one RNG call of size V (Gumbel-max)."""
    g = rng.gumbel(size=logits.size)                                      # (V,) the step's only draw
    if s.temperature == 0:
        return int(np.argmax(logits))
    return int(np.argmax(filter_logits(logits, s) + g))


# Characters that may follow a forced text's last pre-token, where the grammar cannot say which:
# if none of them changes how that pre-token splits, the next text starts a new pre-token.
_PROBES = [chr(c) for c in range(128)] + ["é", "ñ", "×", "中", "\u00a0", "\u2028", "😀"]


@dataclass
class JumpForward:
    """Where the mask's forced_text() is not empty, the tokens to append without sampling.

    After a sampled token t (not yet fed to the model), the forced bytes f are tokenized together
    with t's own bytes, canonically (tokenizer.encode_ordinary): t is rolled back and replaced by
    encode(bytes(t) + f), so a token that t and f merge into is found, as xgrammar's
    retokenization of the boundary does. BPE works per pre-token, so that is the canonical
    tokenization in context only from a pre-token boundary: where t starts inside a pre-token of
    the text so far (the tokens before t are in the KV cache already), the jump waits a step. The
    last pre-token is held back unless no character the grammar allows next
    (mask.chars_after_forced(), else any character) can extend it: the model writes it, so it may
    merge with what follows. Forced bytes that would cut a UTF-8 character wait for the model too.
    The tokens appended are then the canonical tokenization of their pre-tokens.
    """

    tokenizer: object
    tokens_forced: int = 0

    def plan(self, mask, tokens: list[int]) -> list[int] | None:
        """The tokens that replace tokens[-1] (tokens empty: append after the prompt)."""
        forced = mask.forced_text()
        if not forced:
            return None
        tok = self.tokenizer
        before = tok.decode_bytes(tokens[:-1])                 # the generated text before t
        head = tok.token_bytes[tokens[-1]] if tokens else b""
        text = _longest_utf8_prefix(before + head + forced, min_len=len(before) + len(head) + 1)
        if text is None:
            return None
        pieces = pretokenize(text, tok.pattern)
        starts = np.cumsum([0] + [len(p.encode("utf-8")) for p in pieces])  # (P+1,) byte offsets
        first = int(np.searchsorted(starts, len(before)))
        if first == len(pieces) or starts[first] != len(before):  # t starts inside a pre-token
            return None
        probes = mask.chars_after_forced() if hasattr(mask, "chars_after_forced") else None
        last = pieces[-1]
        if any(pretokenize(last + c, tok.pattern)[0] != last for c in (_PROBES if probes is None else probes)):
            pieces = pieces[:-1]
        kept = "".join(pieces[first:]).encode("utf-8")
        if len(kept) <= len(head):
            return None
        ids = tok.encode_ordinary(kept.decode("utf-8"))
        if tok.decode_bytes(ids) != kept:  # a normalizing tokenizer: leave it to sampling
            return None
        return ids


def _longest_utf8_prefix(data: bytes, min_len: int) -> str | None:
    """The longest prefix of `data` of at least min_len bytes that is whole UTF-8, as text."""
    for cut in range(len(data), max(min_len, len(data) - 3) - 1, -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _jump(jump: JumpForward, mask, tokens: list[int], room: int) -> list[int] | None:
    """Apply a jump in place: tokens and the mask end after the forced tokens. Returns the tokens
    to feed next, or None if there is no jump. room: how many tokens may still be added."""
    last = tokens[-1] if tokens else None
    ids = jump.plan(mask, tokens)
    if ids is None:
        return None
    if last is not None:
        mask.rollback(1)
        tokens.pop()
        room += 1
    ids = ids[:room]
    for t in ids:
        mask.advance(t)
    tokens += ids
    jump.tokens_forced += len(ids) - (last is not None and ids[:1] == [last])
    return ids


def decode_loop(model, prompt_ids: Sequence[int], *, eos_id: int | None = None, mask: TokenMask | None = None,
                max_new_tokens: int = 64, seed: int = 0, sampling: SamplingConfig = SamplingConfig(),
                tracer=None, on_step: Callable[[int, int], None] | None = None,
                cache_kind: str = "contiguous", jump: JumpForward | None = None) -> tuple[list[int], str, int]:
    """The token-level loop of generate(): -> (new tokens, stop_reason, steps run).

    Step 0 prefills the prompt into a fresh KV cache; every later step decodes one token. The
    sequence (prompt + new tokens) never exceeds the model's context.
    """
    context = model.config.context
    prompt_ids = list(prompt_ids)
    if not prompt_ids:
        raise InferlabError("the prompt has no tokens")
    if len(prompt_ids) > context:
        raise InferlabError(f"the prompt has {len(prompt_ids)} tokens, more than the model's context of {context}")
    if max_new_tokens < 0:
        raise InferlabError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if mask is not None:
        if mask.vocab_size != model.config.vocab_size:
            raise InferlabError(
                f"the mask covers {mask.vocab_size} tokens but the model has {model.config.vocab_size}")
        mask.reset()
    if jump is not None and not hasattr(mask, "forced_text"):
        raise InferlabError("jump-forward needs a mask with forced_text() (constrain.matcher.MatcherMask)")
    rng = np.random.default_rng(seed)
    cache = model.new_cache(cache_kind)
    tokens: list[int] = []
    pending = prompt_ids
    if jump is not None:
        jump.tokens_forced = 0
        pending = pending + (_jump(jump, mask, tokens, _room(tokens, len(prompt_ids), context, max_new_tokens)) or [])
    step = 0
    while len(tokens) < max_new_tokens:
        if len(prompt_ids) + len(tokens) >= context:
            return tokens, "context", step
        t_step = tracer.now() if tracer is not None else 0
        token = _step(model, pending, cache, mask, rng, sampling, tracer, step)
        if tracer is not None:
            tracer.record("step", t_step, step)
        step += 1
        if token is None:
            return tokens, "no_allowed_token", step
        if token == eos_id:
            return tokens, "eos", step
        if mask is not None:
            mask.advance(token)
        tokens.append(token)
        pending = [token]
        if jump is not None:
            pending = _jump(jump, mask, tokens, _room(tokens, len(prompt_ids), context, max_new_tokens)) or pending
        if on_step is not None:
            on_step(step - 1, token)
    return tokens, "max_new_tokens", step


def _room(tokens: list[int], n_prompt: int, context: int, max_new_tokens: int) -> int:
    return min(max_new_tokens - len(tokens), context - n_prompt - len(tokens))


def _step(model, pending, cache, mask, rng, sampling, tracer, step) -> int | None:
    """forward, mask build, mask apply, sample -> the token, or None when the mask allows none."""
    t = tracer.now() if tracer is not None else 0
    logits = model.decode(pending, cache)[-1]                             # (V,) a fresh row
    if tracer is not None:
        tracer.record("forward", t, step)
    if mask is not None:
        t = tracer.now() if tracer is not None else 0
        m = mask.allowed_mask()
        if tracer is not None:
            tracer.record("mask_build", t, step)
            t = tracer.now()
        mask.apply(logits, m)
        if tracer is not None:
            tracer.record("mask_apply", t, step)
    t = tracer.now() if tracer is not None else 0
    token = sample(logits, rng, sampling)
    if tracer is not None:
        tracer.record("sample", t, step)
    # Gumbel-max never picks a -inf logit while any finite one remains, so a -inf pick means the
    # mask allowed nothing: an O(1) check instead of scanning all V logits every step.
    return None if logits[token] == -np.inf else token


def generate(model, tokenizer, prompt: str, mask: TokenMask | None = None, max_new_tokens: int = 64,
             seed: int = 0, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             tracer=None, on_step: Callable[[int, int], None] | None = None,
             cache_kind: str = "contiguous", jump_forward: bool = False) -> Generation:
    """Continue `prompt` with `model` (docs/architecture.md). The prompt follows the tokenizer's
    BOS when it has one (Llama's <s>, <|begin_of_text|>); without one, an empty prompt starts from
    EOS, GPT-2's <|endoftext|> convention for unconditional samples. The mask is reset first, so one
    mask object serves many runs. on_step(step, token) is called after each kept token.
    jump_forward: append the mask's forced text without sampling (JumpForward; the mask needs
    forced_text() and rollback(), as constrain.matcher.MatcherMask has)."""
    sampling = SamplingConfig(temperature, top_k, top_p)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise InferlabError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {model.config.vocab_size}")
    bos = getattr(tokenizer, "bos_id", None)     # Llama-family tokenizers start every sequence with BOS
    prompt_ids = ([bos] if bos is not None else []) + tokenizer.encode(prompt) or [tokenizer.eos_id]
    if jump_forward and mask is None:
        raise InferlabError("jump-forward needs a mask: pass a schema")
    if jump_forward and getattr(tokenizer, "pattern", None) is None:
        # JumpForward retokenizes from a pre-token boundary; a SentencePiece-style tokenizer
        # (Llama 2, Mistral) has no pre-tokenizer pattern, so no boundary it could start from
        raise InferlabError("jump-forward needs a byte-level BPE tokenizer with a pre-tokenization pattern "
                            "(GPT-2, Llama 3, Qwen2); this one (SentencePiece-style) has none")
    jump = JumpForward(tokenizer) if jump_forward else None
    t0 = time.perf_counter()
    tokens, reason, steps = decode_loop(model, prompt_ids, eos_id=tokenizer.eos_id, mask=mask,
                                        max_new_tokens=max_new_tokens, seed=seed, sampling=sampling,
                                        tracer=tracer, on_step=on_step, cache_kind=cache_kind, jump=jump)
    elapsed = time.perf_counter() - t0
    # A token-by-token decode runs one pass per token, plus the one that samples EOS.
    passes_needed = len(tokens) + (reason in ("eos", "no_allowed_token"))
    return Generation(tokens=tokens, text=tokenizer.decode(tokens), n_tokens=len(tokens), stop_reason=reason,
                      complete=mask.is_complete() if mask is not None else None, n_steps=steps,
                      prompt_tokens=len(prompt_ids), elapsed_s=elapsed,
                      tokens_forced=jump.tokens_forced if jump is not None else 0,
                      forward_passes_saved=passes_needed - steps if jump is not None else 0)
