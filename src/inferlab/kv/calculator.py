"""The calculator behind `inferlab kv`: each function takes a ModelSpec and plain numbers and
returns a JSON-ready dict (the CLI prints it or dumps it; a notebook gets the same dict)."""

from __future__ import annotations

import math
from fractions import Fraction

from inferlab.errors import InferlabError
from inferlab.kv.formulas import (KVFormat, cache_bytes, formula_text, kv_cache_bytes, max_context, per_token_bytes,
                                  tp_split)
from inferlab.kv.registry import GPU, ModelSpec
from inferlab.units import dtype_bytes, fmt_binary

# A claimed ratio within this relative distance of the true one is "approximately" right.
APPROX_TOLERANCE = Fraction(1, 10)


def window_note(spec: ModelSpec) -> str | None:
    """What a sliding window does to the cache, in one sentence; None without a window."""
    if not spec.sliding_window or not spec.sliding_layers:
        return None
    n, w = len(spec.sliding_layers), spec.sliding_window
    if n == spec.layers:
        return (f"every layer attends within a {w}-token sliding window, so the cache stops growing at "
                f"{w} positions per sequence (a rolling buffer); totals past {w} are capped")
    return (f"{n} of {spec.layers} layers attend within a {w}-token sliding window and keep at most {w} "
            f"positions; the other {spec.layers - n} keep the whole context")


def size(spec: ModelSpec, *, ctxs: list[int], batch: int, fmt: KVFormat, tp: int = 1) -> dict:
    """Per-token bytes with the arithmetic written out, and the total at each context."""
    split = tp_split(spec, tp)
    notes = [n for n in (window_note(spec),) if n]
    if spec.is_mla:
        mha = kv_cache_bytes(layers=spec.layers, kv_heads=spec.heads, head_dim=spec.head_dim, seq=1, batch=1,
                             dtype_bytes=dtype_bytes(fmt.dtype))
        notes.append(f"MLA: one latent of {spec.kv_lora_rank} + a RoPE key of {spec.rope_dim} per layer per "
                     f"token, shared by K, V and all {spec.heads} heads, so no factor 2; an MHA cache of "
                     f"{spec.heads} heads of {spec.head_dim} would take {mha} bytes per token "
                     f"({float(Fraction(mha, per_token_bytes(spec, fmt))):.3g}x more)")
    if tp > 1:
        notes.append(_tp_note(spec, split))
    notes += [f"ctx {c} is beyond the model's max_position_embeddings {spec.max_position}"
              for c in ctxs if c > spec.max_position]
    return {
        "model": spec.name,
        "attention": spec.attention,
        "per_token_bytes": per_token_bytes(spec, fmt, tp),
        "dtype_bytes": _json_number(dtype_bytes(fmt.dtype)),
        "kv_format": fmt.describe(),
        "formula": formula_text(spec, batch=1, fmt=fmt, tp=tp),
        "tp": {"ranks": tp, "kv_heads_per_rank": split.kv_heads_per_rank, "replication": split.replication},
        "totals": [{"ctx": c, "batch": batch, "bytes": cache_bytes(spec, seq=c, batch=batch, fmt=fmt, tp=tp)}
                   for c in ctxs],
        "notes": notes,
    }


def _tp_note(spec: ModelSpec, split) -> str:
    if spec.is_mla:
        return f"TP {split.tp}: the MLA latent is not split by head, so each of the {split.tp} ranks holds all of it"
    if split.replication > 1:
        return (f"TP {split.tp} > {spec.kv_heads} KV heads: each rank holds 1 KV head and each head is "
                f"replicated on {split.replication} ranks; figures are per rank")
    return f"TP {split.tp}: {split.kv_heads_per_rank} of the {spec.kv_heads} KV heads per rank; figures are per rank"


def _json_number(x: Fraction):
    return x.numerator if x.denominator == 1 else float(x)


def max_ctx(spec: ModelSpec, *, memory_bytes: int, weights_bytes: int, batch: int, fmt: KVFormat,
            tp: int = 1) -> dict:
    """S_max (floor) for `batch` sequences in what the weights leave of the memory."""
    free = memory_bytes - weights_bytes
    if free <= 0:
        raise InferlabError(f"--weights {fmt_binary(weights_bytes)} leave no room in --memory "
                            f"{fmt_binary(memory_bytes)}: the weights alone do not fit")
    s_max = max_context(spec, free_bytes=free, batch=batch, fmt=fmt, tp=tp)
    warnings = []
    if s_max is None:
        warnings.append(f"unbounded: {window_note(spec)}, and the full window fits")
    elif s_max == 0:
        warnings.append("not even one position fits")
    elif s_max > spec.max_position:
        warnings.append(f"S_max {s_max} exceeds the model's max_position_embeddings {spec.max_position}: "
                        f"the memory is not what limits the context")
    return {
        "model": spec.name,
        "s_max": s_max,
        "free_bytes": free,
        "per_token_bytes": per_token_bytes(spec, fmt, tp),
        "batch": batch,
        "max_position": spec.max_position,
        "warnings": warnings,
    }


def weights_bytes(spec: ModelSpec, dtype: str) -> int:
    if spec.params is None:
        raise InferlabError(f"{spec.name}: the parameter count is unknown (a config.json does not give it); "
                            f"pass --params N")
    return math.ceil(spec.params * dtype_bytes(dtype))


def gpus(spec: ModelSpec, *, gpu: GPU, dtypes: list[str], kv_load: tuple[int, int] | None,
         fmt: KVFormat) -> dict:
    """GPUs needed to hold the weights alone, and the weights plus a KV load of (ctx, batch).

    A memory-only lower bound: ceil(bytes / per-GPU bytes), ignoring activations, the framework's
    own reserve and KV-head replication across more GPUs than KV heads.
    """
    kv = cache_bytes(spec, seq=kv_load[0], batch=kv_load[1], fmt=fmt) if kv_load else 0
    rows = []
    for dt in dtypes:
        w = weights_bytes(spec, dt)
        row = {"dtype": dt, "weights_bytes": w, "gpus_needed": -(-w // gpu.memory_bytes)}
        if kv_load:
            row["gpus_needed_with_kv"] = -(-(w + kv) // gpu.memory_bytes)
        rows.append(row)
    out = {"model": spec.name, "gpu": gpu.name, "gpu_memory_bytes": gpu.memory_bytes, "params": spec.params,
           "gpus": rows}
    if kv_load:
        out["kv_load"] = {"ctx": kv_load[0], "batch": kv_load[1], "kv_format": fmt.describe(), "bytes": kv}
    return out


def verdict(actual: Fraction, claim: Fraction) -> str:
    """'exact', 'approximate' (within APPROX_TOLERANCE) or 'wrong'."""
    if actual == claim:
        return "exact"
    return "approximate" if abs(actual - claim) <= APPROX_TOLERANCE * actual else "wrong"


def compare(a: ModelSpec, b: ModelSpec, *, ctx: int | None, batch: int, fmt_a: KVFormat, fmt_b: KVFormat,
            claim: Fraction | None = None) -> dict:
    """Cache of A over cache of B, per token and (when ctx is given) at that context, and a claim's verdict.

    The claim is a saving factor "Nx" in either direction: it is checked against max(r, 1/r).
    """
    pa, pb = per_token_bytes(a, fmt_a), per_token_bytes(b, fmt_b)
    ratio = Fraction(pa, pb)
    out = {"models": [a.name, b.name], "per_token_bytes": [pa, pb], "ratio": float(ratio),
           "ratio_exact": f"{ratio.numerator}/{ratio.denominator}",
           "formulas": [formula_text(a, batch=1, fmt=fmt_a), formula_text(b, batch=1, fmt=fmt_b)]}
    judged = ratio
    if ctx is not None:
        ca = cache_bytes(a, seq=ctx, batch=batch, fmt=fmt_a)
        cb = cache_bytes(b, seq=ctx, batch=batch, fmt=fmt_b)
        judged = Fraction(ca, cb)
        out["at_ctx"] = {"ctx": ctx, "batch": batch, "bytes": [ca, cb], "ratio": float(judged)}
    out["window_notes"] = [f"{s.name}: {n}" for s in (a, b) if (n := window_note(s))]
    if claim is not None:
        factor = max(judged, 1 / judged)
        out["claim"] = {"factor": float(claim), "actual_factor": float(factor), "verdict": verdict(factor, claim)}
    return out


def waste(spec: ModelSpec, *, max_len: int, mean_len: int, batch: int, block_size: int, fmt: KVFormat) -> dict:
    """Contiguous preallocation of max_len per sequence vs paged allocation in blocks.

    Paged: a sequence holds ceil(len / block) blocks, so at most block_size - 1 positions are
    unused per sequence (Kwon et al. 2023, PagedAttention, section 4.2). paged_wasted_bytes is
    that bound; paged_wasted_bytes_at_mean is the waste when every sequence has mean_len tokens.
    """
    if mean_len > max_len:
        raise InferlabError(f"--mean-len {mean_len} is longer than --max-len {max_len}")
    reserved = cache_bytes(spec, seq=max_len, batch=batch, fmt=fmt)
    used = cache_bytes(spec, seq=mean_len, batch=batch, fmt=fmt)
    per_tok = per_token_bytes(spec, fmt)
    at_mean = (-(-mean_len // block_size) * block_size - mean_len) * batch * per_tok
    return {
        "model": spec.name, "max_len": max_len, "mean_len": mean_len, "batch": batch, "block_size": block_size,
        "reserved_bytes": reserved, "used_bytes": used,
        "waste_fraction": float(Fraction(reserved - used, reserved)),
        "wasted_bytes": reserved - used,
        "paged_wasted_bytes": (block_size - 1) * batch * per_tok,
        "paged_wasted_bytes_at_mean": at_mean,
    }

