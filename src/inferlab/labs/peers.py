"""Side-by-side peers for the mask-overhead lab: llguidance, xgrammar and outlines-core (extra
`[peers]`), through schema-bench's adapters (constrain.bench_peers), one adapter per peer.

Each peer compiles the same schema for the same vocabulary ids as ours and is walked along the
same token path that inferlab's masked generation produced, timing the per-step mask computation
on its fastest native path (filling an int32 bitmask row in place). Peers are imported lazily,
by bench_peers, and only when asked for: the engine and the compiler never import them. A peer
that is absent or fails is reported with a note, never silently dropped.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from inferlab.constrain.bench_peers import PEER_NAMES, compile_timed, load_peers, refusal
from inferlab.constrain.vocab import Vocabulary
from inferlab.measure.timing import token_walk_us


def _step_times(new_walk: Callable, path: list[int], min_total_s: float) -> dict:
    """Walk `path` repeatedly (measure.timing.token_walk_us); `new_walk()` returns (fill, consume)
    at the start. The median and p95 are over all per-step readings and the mean is the
    aggregate (total / steps), which obeys the >= 50 ms aggregation rule."""
    arr = token_walk_us(new_walk, path, min_total_s)
    return {
        "median_us": float(np.median(arr)),
        "p95_us": float(np.percentile(arr, 95)),
        "mean_us": float(arr.mean()),
        "n_readings": len(arr),
    }


def _on_path(peer, info: dict, schema: dict, path: list[int], min_total_s: float) -> dict:
    """One loaded peer: its compile time, then its bitmask fill per step along `path`, each walk
    from the peer's own walker (bench_peers._Peer.walker, as schema-bench times it)."""
    head = {"available": True, "version": info.get("version")}
    try:
        handle, compile_ms = compile_timed(peer, schema)
    except Exception as exc:  # the peer's refusal is a finding, reported
        return {**head, "compiled": False, "note": refusal(exc)}
    head.update(compiled=True, compile_ms=compile_ms)
    walk = peer.walker(handle)
    try:
        return {**head, **_step_times(lambda: walk()[:2], path, min_total_s), "note": peer.note}
    except Exception as exc:  # the peer rejects a token of our path (or fails filling): a finding
        return {**head, "note": f"walk failed: {refusal(exc)}"}


def _inferlab(mask, tok, path: list[int], min_total_s: float) -> dict:
    """Our indexed mask on the same harness: lookup plus apply to a float32 logits row, which is
    more than the peers' bitmask fill (they leave applying the bitmask to the caller)."""
    logits = np.zeros(tok.vocab_size, dtype=np.float32)   # (V,)

    def new_walk():
        mask.reset()
        return (lambda: mask.apply(logits, mask.allowed_mask())), mask.advance

    return {"available": True, "compiled": True, **_step_times(new_walk, path, min_total_s),
            "note": "lookup + apply to the logits (in place)"}


def run_peers(schema: dict, tok, path: list[int], ours, *, min_total_s: float = 0.2) -> dict:
    """{name: result} for inferlab's indexed mask `ours` and each peer, walked along `path`;
    absent or failing peers are reported with a note. Ratios are peer / inferlab (mean). The
    peers get `tok`'s ids as they are (Vocabulary.from_tokenizer: specials as b"")."""
    results = {"inferlab-indexed": _inferlab(ours, tok, path, min_total_s)}
    peers, info = load_peers(Vocabulary.from_tokenizer(tok), tok)
    for name in PEER_NAMES:
        results[name] = _on_path(peers[name], info[name], schema, path, min_total_s) if name in peers else info[name]
    ref = results["inferlab-indexed"]["mean_us"]
    for r in results.values():
        if r.get("mean_us"):
            r["ratio_to_inferlab"] = r["mean_us"] / ref
    return results
