"""Side-by-side peers for the mask-overhead lab: llguidance, xgrammar and outlines-core (extra
`[peers]`), through schema-bench's adapters (bench.schema_peers), one adapter per peer.

Each peer compiles the same schema for the same vocabulary ids as ours and is walked along the
same token path that inferlab's masked generation produced, timing the per-step mask computation
on its fastest native path (filling an int32 bitmask row in place). The engines take turns in
each round, so their ratios to ours are paired by round (measure.verdicts). Peers are imported lazily,
by bench.schema_peers, and only when asked for: the engine and the compiler never import them. A peer
that is absent or fails is reported with a note, never silently dropped.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from inferlab.bench.schema_peers import PEER_NAMES, compile_timed, load_peers, refusal
from inferlab.constrain.vocab import Vocabulary
from inferlab.measure.timing import Stats, summarize, token_walk_us
from inferlab.measure.verdicts import paired


PEER_ROUNDS = 10  # interleaved rounds: a 95% CI of the per-round ratios' median needs >= 6
QUICK_PEER_ROUNDS = 6
SAMPLE_S = 0.05   # fill work per engine and round: the >= 50 ms aggregation rule


def _compiled(peer, info: dict, schema: dict) -> dict:
    """One loaded peer's compile: its head (availability, version, compile time), and `handle`
    where it compiled."""
    head = {"available": True, "version": info.get("version")}
    try:
        handle, compile_ms = compile_timed(peer, schema)
    except Exception as exc:  # the peer's refusal is a finding, reported
        return {**head, "compiled": False, "note": refusal(exc)}
    return {**head, "compiled": True, "compile_ms": compile_ms, "note": peer.note, "handle": handle}


def _ours(mask, tok) -> Callable:
    """Our indexed mask's new_walk: lookup plus apply to a float32 logits row, which is more
    than the peers' bitmask fill (they leave applying the bitmask to the caller)."""
    logits = np.zeros(tok.vocab_size, dtype=np.float32)   # (V,)

    def new_walk():
        mask.reset()
        return (lambda: mask.apply(logits, mask.allowed_mask())), mask.advance
    return new_walk


def interleaved_walks(walks: dict[str, Callable], path: list[int], rounds: int,
                      min_sample_s: float = SAMPLE_S) -> tuple[dict[str, Stats], dict[str, np.ndarray], dict[str, str]]:
    """Each engine walks `path` once (warm-up, discarded: a walk its matcher refuses drops the
    engine, with why), then in each round every engine in turn walks it until >= min_sample_s
    of fill work (token_walk_us): a sample is that work per step. Returns (per-step Stats over
    the rounds, paired by round; every single reading, us; {engine: why it was dropped})."""
    failed = {}
    for name, new_walk in list(walks.items()):
        try:
            token_walk_us(new_walk, path, 0.0)
        except Exception as exc:  # the engine rejects a token of our path (or fails filling): a finding
            failed[name] = f"walk failed: {refusal(exc)}"
    live = {n: w for n, w in walks.items() if n not in failed}
    samples: dict[str, list[float]] = {n: [] for n in live}
    readings: dict[str, list[np.ndarray]] = {n: [] for n in live}
    for _ in range(rounds):
        for name, new_walk in live.items():
            us = token_walk_us(new_walk, path, min_sample_s)                  # (walks * len(path),)
            samples[name].append(float(us.mean()) / 1e6)
            readings[name].append(us)
    stats = {n: summarize(v) for n, v in samples.items()}
    return stats, {n: np.concatenate(r) for n, r in readings.items()}, failed


def _timing(stats: Stats, us: np.ndarray) -> dict:
    """An engine's figures: the per-step mean of each round's >= 50 ms walk (median over the
    rounds, p10-p90), and over the single per-step readings their median and p95 (a reading is
    one step of microseconds: the shape of the distribution, not a sample of the aggregation rule)."""
    t = stats.to_json("us")
    return {"mean_us": t["median_us"], "mean_us_p10": t["p10_us"], "mean_us_p90": t["p90_us"],
            "rounds": stats.n, "noisy": stats.noisy, "spread": stats.spread,
            "median_us": float(np.median(us)), "p95_us": float(np.percentile(us, 95)), "n_readings": len(us)}


def _ratio(peer: Stats, ours: Stats) -> dict:
    """A peer's per-step time over ours, paired by round: median, p10-p90, CI (verdicts.paired)."""
    return paired(peer, ours).to_json()


def run_peers(schema: dict, tok, path: list[int], ours, *, rounds: int = PEER_ROUNDS,
              min_sample_s: float = SAMPLE_S) -> dict:
    """{name: result} for inferlab's indexed mask `ours` and each peer, walked along `path` in
    interleaved rounds (interleaved_walks); absent or failing peers are reported with a note.
    ratio_to_inferlab: a peer's per-step mean over ours, paired by round where the run allows
    (value, p10, p90, ci_low, ci_high, confidence, rounds, basis). The peers get `tok`'s ids as they are (Vocabulary.from_tokenizer:
    specials as b"")."""
    results = {"inferlab-indexed": {"available": True, "compiled": True, "note": "lookup + apply to the logits (in place)"}}
    walks = {"inferlab-indexed": _ours(ours, tok)}
    peers, info = load_peers(Vocabulary.from_tokenizer(tok), tok)
    for name in PEER_NAMES:
        if name not in peers:
            results[name] = info[name]
            continue
        results[name] = _compiled(peers[name], info[name], schema)
        handle = results[name].pop("handle", None)
        if handle is not None:
            walk = peers[name].walker(handle)
            walks[name] = lambda walk=walk: walk()[:2]
    stats, readings, failed = interleaved_walks(walks, path, rounds, min_sample_s)
    for name, why in failed.items():
        results[name]["note"] = why
    for name in stats:
        results[name].update(_timing(stats[name], readings[name]))
    if "inferlab-indexed" in stats:
        for name in stats:
            if name != "inferlab-indexed":
                results[name]["ratio_to_inferlab"] = _ratio(stats[name], stats["inferlab-indexed"])
    return results
