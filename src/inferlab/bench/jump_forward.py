"""Jump-forward against plain masked decoding, on the same grammar and model (issue 11).

compare_jump_forward() is the measuring function behind benchmarks/jump_forward.py and the
mask-overhead lab's jump-forward row: per (prompt, seed, temperature) both decodes run with a
MatcherMask; it reports forward passes saved, validity, how often the texts are equal and, where
they are not, why; then tokens/s of both over the prompts at greedy, in one interleaved run.

Why texts can differ (the `reason` of each differing pair):
  - "rng_shift": sampling draws one Gumbel vector per forward pass (model/generate.py), so a
    decode with fewer passes gives the later tokens other draws;
  - "tokenization": before the first differing byte the two decodes fed the model different tokens
    for the same text (plain decoding may sample a non-canonical split of forced text, or a token
    that spans the forced text's end), so the model was conditioned differently;
  - "numerics": same tokens, different continuation: several tokens in one forward pass give
    logits that differ in the last bits from one token at a time, which can flip a near tie.
"""

from __future__ import annotations

import json

import numpy as np

from inferlab.constrain.matcher import Grammar, MatcherMask
from inferlab.measure.timing import measure_interleaved
from inferlab.model.generate import Generation, generate


def _valid(g: Generation) -> bool:
    if not g.complete:
        return False
    try:
        json.loads(g.text)
    except ValueError:
        return False
    return True


def _prefix_tokens(tokenizer, tokens: list[int], n_bytes: int) -> list[int]:
    """The tokens that lie wholly within the first n_bytes of their text."""
    out, used = [], 0
    for t in tokens:
        used += len(tokenizer.token_bytes[t])
        if used > n_bytes:
            break
        out.append(t)
    return out


def why_different(tokenizer, plain: Generation, jump: Generation, temperature: float) -> str:
    if temperature > 0:
        return "rng_shift"
    a, b = tokenizer.decode_bytes(plain.tokens), tokenizer.decode_bytes(jump.tokens)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    same_context = _prefix_tokens(tokenizer, plain.tokens, first) == _prefix_tokens(tokenizer, jump.tokens, first)
    return "numerics" if same_context else "tokenization"


def compare_jump_forward(model, tokenizer, grammar: Grammar, prompts: list[str], *, seeds=(0, 1, 2),
                         temperatures=(0.0, 1.0), max_new_tokens: int = 64, samples: int = 10,
                         step=None) -> dict:
    """Quality over prompts x seeds x temperatures, then interleaved timing at greedy."""
    mask = MatcherMask(grammar)
    runs = []
    for temperature in temperatures:
        for seed in seeds:
            for prompt in prompts:
                pair = [generate(model, tokenizer, prompt, mask=mask, seed=seed, temperature=temperature,
                                 max_new_tokens=max_new_tokens, jump_forward=jf) for jf in (False, True)]
                plain, jump = pair
                same_text = plain.text == jump.text
                runs.append({
                    "prompt": prompt, "seed": seed, "temperature": temperature,
                    "plain_text": plain.text, "jump_text": jump.text,
                    "plain_valid": _valid(plain), "jump_valid": _valid(jump),
                    "plain_steps": plain.n_steps, "jump_steps": jump.n_steps,
                    "jump_tokens": jump.n_tokens, "tokens_forced": jump.tokens_forced,
                    "forward_passes_saved": jump.forward_passes_saved,
                    "same_text": same_text, "same_tokens": plain.tokens == jump.tokens,
                    "reason": None if same_text else why_different(tokenizer, plain, jump, temperature),
                })
                if step is not None:
                    step(f"T={temperature} seed {seed}")

    def decode_all(jf: bool):
        def fn():
            return [generate(model, tokenizer, p, mask=mask, seed=0, temperature=0.0,
                             max_new_tokens=max_new_tokens, jump_forward=jf) for p in prompts]
        return fn

    fns = {"plain": decode_all(False), "jump_forward": decode_all(True)}
    tokens = {name: sum(g.n_tokens for g in fn()) for name, fn in fns.items()}
    stats = measure_interleaved(fns, samples=samples)
    paired = np.array(stats["plain"].samples) / np.array(stats["jump_forward"].samples)  # (samples,) speed-up
    reasons: dict[str, int] = {}
    for r in runs:
        if r["reason"]:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    greedy = [r for r in runs if r["temperature"] == 0]
    summary = {
        "runs": len(runs),
        "jump_valid": sum(r["jump_valid"] for r in runs), "plain_valid": sum(r["plain_valid"] for r in runs),
        "same_text": sum(r["same_text"] for r in runs), "same_text_greedy": sum(r["same_text"] for r in greedy),
        "greedy_runs": len(greedy), "same_tokens": sum(r["same_tokens"] for r in runs),
        "differ_reasons": reasons,
        "tokens_forced": sum(r["tokens_forced"] for r in runs),
        "forward_passes_saved": sum(r["forward_passes_saved"] for r in runs),
        "plain_forward_passes": sum(r["plain_steps"] for r in runs),
        "jump_forward_passes": sum(r["jump_steps"] for r in runs),
        "tokens_per_s": {name: tokens[name] / stats[name].median for name in fns},
        "speedup_median": float(np.median(paired)), "speedup_p10": float(np.percentile(paired, 10)),
        "speedup_p90": float(np.percentile(paired, 90)),
    }
    return {"runs": runs, "timing": {name: s.to_json("ms") for name, s in stats.items()},
            "timed_tokens": tokens, "summary": summary}
