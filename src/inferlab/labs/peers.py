"""Side-by-side peers for the mask-overhead lab: llguidance and outlines-core (extra `[peers]`,
which also holds xgrammar: it is reported, not yet timed).

Each peer compiles the same schema for the same vocabulary and is walked along the same token
path that inferlab's masked generation produced, timing the per-step mask computation. Peers are
imported lazily, here only, and only when asked for: the engine and the compiler never import them.
A peer that is absent or fails is reported with a note, never silently dropped.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from typing import Callable

import numpy as np

from inferlab.measure.timing import token_walk_us
from inferlab.model.pretokenize import REFERENCE_PATTERNS


def _step_times(make_matcher: Callable, step_fns, path: list[int], min_total_s: float) -> dict:
    """Walk `path` repeatedly (measure.timing.token_walk_us); `step_fns(matcher)` returns
    (compute_mask, consume). The median and p95 are over all per-step readings and the mean is
    the aggregate (total / steps), which obeys the >= 50 ms aggregation rule."""
    arr = token_walk_us(lambda: step_fns(make_matcher()), path, min_total_s)
    return {
        "median_us": float(np.median(arr)),
        "p95_us": float(np.percentile(arr, 95)),
        "mean_us": float(arr.mean()),
        "n_readings": len(arr),
    }


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _llguidance(schema: dict, tok, path: list[int], min_total_s: float) -> dict:
    import llguidance
    import llguidance.numpy as lln

    # tiktoken's layout: bytes -> rank. Our ids are ranks (merge order), so they carry over as is.
    encoder = {b: i for i, b in enumerate(tok.token_bytes) if b and i not in tok.special_ids}
    lltok = llguidance.LLTokenizer.from_tiktoken(
        encoder=encoder, special_tokens=dict(tok.special_tokens), pattern=REFERENCE_PATTERNS[tok.pattern],
        eos_token=tok.eos_id, n_vocab=tok.vocab_size, slices=None)
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        schema, defaults={"whitespace_flexible": False})
    matcher = llguidance.LLMatcher(lltok, grammar, log_level=0)
    compile_ms = (time.perf_counter() - t0) * 1e3
    if matcher.is_error():
        return {"available": True, "compiled": False, "note": matcher.get_error()}
    bitmask = lln.allocate_token_bitmask(1, tok.vocab_size)  # (1, ceil(V/32)) int32

    def steps(m):
        return (lambda: lln.fill_next_token_bitmask(m, bitmask)), m.consume_token

    timing = _step_times(lambda: llguidance.LLMatcher(lltok, grammar, log_level=0), steps, path, min_total_s)
    return {"available": True, "compiled": True, "compile_ms": compile_ms,
            "version": _version("llguidance"), **timing,
            "note": "compile = grammar_from_json_schema + LLMatcher (the tokenizer's slices are built before, untimed)"}


def _outlines(schema: dict, tok, path: list[int], min_total_s: float) -> dict:
    import outlines_core as oc

    by_bytes: dict[bytes, list[int]] = {}
    for i, b in enumerate(tok.token_bytes):
        if i not in tok.special_ids and b:
            by_bytes.setdefault(b, []).append(i)
    vocab = oc.Vocabulary(tok.eos_id, by_bytes)
    t0 = time.perf_counter()
    regex = oc.json_schema.build_regex_from_schema(json.dumps(schema))
    index = oc.Index(regex, vocab)
    compile_ms = (time.perf_counter() - t0) * 1e3
    bitmask = np.full((1, (tok.vocab_size + 31) // 32), -1, dtype=np.int32)

    def steps(guide):
        ptr, n, size = bitmask.ctypes.data, bitmask.size, bitmask.itemsize
        return (lambda: guide.write_mask_into(ptr, n, size)), guide.advance

    timing = _step_times(lambda: oc.Guide(index), steps, path, min_total_s)
    return {"available": True, "compiled": True, "compile_ms": compile_ms,
            "version": _version("outlines-core"), **timing,
            "note": "compile = build_regex_from_schema + Index; outlines-core does not enforce every "
                    "keyword (e.g. integer minimum), so its automaton may be looser than ours"}


def _inferlab(mask, tok, path: list[int], min_total_s: float) -> dict:
    """Our indexed mask on the same harness: lookup plus apply to a float32 logits row, which is
    more than the peers' bitmask fill (they leave applying the bitmask to the caller)."""
    logits = np.zeros(tok.vocab_size, dtype=np.float32)   # (V,)

    def fresh():
        mask.reset()
        return mask

    def steps(m):
        return (lambda: m.apply(logits, m.allowed_mask())), m.advance

    return {"available": True, "compiled": True, **_step_times(fresh, steps, path, min_total_s),
            "note": "lookup + apply to the logits (in place)"}


PEERS = {"llguidance": _llguidance, "outlines-core": _outlines}
INSTALL_HINT = "pip install 'inferlab[peers]'"   # pyproject.toml's extra with all three peers


def _not_installed(exc: ImportError) -> dict:
    return {"available": False, "note": f"not installed ({exc.name}); {INSTALL_HINT}"}


def run_peers(schema: dict, tok, path: list[int], ours, *, min_total_s: float = 0.2) -> dict:
    """{name: result} for inferlab's indexed mask `ours` and each peer, walked along `path`;
    absent or failing peers are reported with a note. Ratios are peer / inferlab (mean)."""
    results = {"inferlab-indexed": _inferlab(ours, tok, path, min_total_s)}
    for name, fn in PEERS.items():
        try:
            results[name] = fn(schema, tok, path, min_total_s)
        except ImportError as exc:
            results[name] = _not_installed(exc)
        except Exception as exc:  # a peer's own failure is a finding, reported, not a crash
            results[name] = {"available": True, "compiled": False, "note": f"{type(exc).__name__}: {exc}"}
    try:
        import xgrammar  # noqa: F401
        results["xgrammar"] = {"available": True, "compiled": False,
                               "note": "xgrammar imports, but inferlab has no adapter for it yet"}
    except ImportError as exc:
        results["xgrammar"] = _not_installed(exc)
    ref = results["inferlab-indexed"]["mean_us"]
    for r in results.values():
        if r.get("mean_us"):
            r["ratio_to_inferlab"] = r["mean_us"] / ref
    return results
