"""KV-cache sizing formulas.

Dense attention caches a key and a value vector per KV head, per layer, per position, per sequence:

    bytes = 2 * L * H_kv * d_h * S * B * s          (the 2 is K and V; s = bytes per element)

Beside it, the variants a user meets in practice:
  * MLA (DeepSeek-V2/V3) caches one latent of kv_lora_rank plus the decoupled RoPE key of
    qk_rope_head_dim per layer per position, shared by all heads: L * (d_c + d_rope) * S * B * s,
    no factor 2 (arXiv:2405.04434, section 2.1.2 and Table 1).
  * A sliding window of w tokens caps what a sliding layer keeps at min(S, w) positions
    (Mistral's rolling buffer; Gemma-2's every other layer).
  * Tensor parallelism splits KV heads over ranks; with more ranks than KV heads each head is
    replicated (vLLM does this for GQA models with TP > H_kv). MLA's latent is not split by head,
    so every rank holds all of it.
  * A quantized cache (fp8, int8, int4) stores scales beside the payload; see KVFormat.

Everything is computed in exact integers/fractions; a partial byte (int4 with an odd vector
width) is padded up to a whole byte per stored vector, as packed storage does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from inferlab.errors import InferlabError
from inferlab.kv.registry import ModelSpec
from inferlab.units import DTYPE_BITS, dtype_bytes, fmt_binary, fmt_number


def _positive(**values) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InferlabError(f"{name} must be a positive whole number, got {value!r}")


def _whole_bytes(value: Fraction, what: str) -> int:
    if value.denominator != 1:
        raise InferlabError(f"{what} is {value} bytes, not a whole number of bytes")
    return value.numerator


def kv_cache_bytes(*, layers: int, kv_heads: int, head_dim: int, seq: int, batch: int, dtype_bytes) -> int:
    """2 * layers * kv_heads * head_dim * seq * batch * dtype_bytes: the engine's cache .nbytes."""
    _positive(layers=layers, kv_heads=kv_heads, head_dim=head_dim, seq=seq, batch=batch)
    s = Fraction(dtype_bytes)
    if s <= 0:
        raise InferlabError(f"dtype_bytes must be positive, got {dtype_bytes!r}")
    return _whole_bytes(2 * layers * kv_heads * head_dim * seq * batch * s, "the KV cache")


def mla_cache_bytes(*, layers: int, kv_lora_rank: int, rope_dim: int, seq: int, batch: int, dtype_bytes) -> int:
    """layers * (kv_lora_rank + rope_dim) * seq * batch * dtype_bytes: one latent per layer per
    position, shared by K and V and all heads, hence no factor 2."""
    _positive(layers=layers, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim, seq=seq, batch=batch)
    s = Fraction(dtype_bytes)
    if s <= 0:
        raise InferlabError(f"dtype_bytes must be positive, got {dtype_bytes!r}")
    return _whole_bytes(layers * (kv_lora_rank + rope_dim) * seq * batch * s, "the MLA cache")


# ---------------------------------------------------------------- quantized caches

SCALE_KINDS = ("none", "tensor", "token", "block")
QUANTIZED = ("fp8", "int8", "int4")          # the dtypes that need scales to be read back


@dataclass(frozen=True)
class KVFormat:
    """How the cache stores each cached vector (one K or V head row, or one MLA latent).

    scales: "none"   no scale (fp32/fp16/bf16)
            "tensor" one fp32 scale per layer for K and one for V (vLLM's fp8 KV cache,
                     k_scale/v_scale): a constant 2 * L * 4 bytes, nothing per token
            "token"  one scale per cached vector, i.e. per token per KV head (LMDeploy's online
                     int8/int4 KV quantization is per-head per-token asymmetric)
            "block"  one scale per `group` consecutive elements of a vector (group-wise
                     quantization, as KIVI and Hugging Face's QuantizedCache with q_group_size 64)
    scale_bytes: bytes per scale (fp16 = 2). zero_point: asymmetric schemes also store a zero
    point of the same size per scale.
    """

    dtype: str = "fp16"
    scales: str = "none"
    group: int = 64
    scale_bytes: int = 2
    zero_point: bool = False

    def __post_init__(self):
        if self.dtype not in DTYPE_BITS:
            raise InferlabError(f"--dtype {self.dtype!r}: unknown dtype; use one of {', '.join(DTYPE_BITS)}")
        if self.scales not in SCALE_KINDS:
            raise InferlabError(f"--scales {self.scales!r}: use one of {', '.join(SCALE_KINDS)}")
        if self.group <= 0:
            raise InferlabError(f"--group must be a positive number of elements, got {self.group}")
        if self.scale_bytes <= 0:
            raise InferlabError(f"scale_bytes must be positive, got {self.scale_bytes}")

    @property
    def element_bytes(self) -> Fraction:
        return dtype_bytes(self.dtype)

    def vector_bytes(self, width: int) -> int:
        """Bytes to store one cached vector of `width` elements, scales included."""
        payload = math.ceil(width * self.element_bytes)            # packed int4 rows pad to a byte
        return payload + self.scale_count(width) * self.scale_bytes * (2 if self.zero_point else 1)

    def scale_count(self, width: int) -> int:
        if self.scales == "token":
            return 1
        if self.scales == "block":
            return -(-width // self.group)
        return 0                                                   # none, or per-tensor (constant)

    def describe(self) -> str:
        if self.scales == "none":
            return self.dtype
        what = {"tensor": "one fp32 scale per layer for K and for V",
                "token": "one scale per token per KV head",
                "block": f"one scale per {self.group} elements"}[self.scales]
        extra = " plus a zero point" if self.zero_point else ""
        size = "" if self.scales == "tensor" else f", {self.scale_bytes}-byte scales"
        return f"{self.dtype} ({what}{extra}{size})"


def default_format(dtype: str) -> KVFormat:
    """The usual storage for each cache dtype: floats need no scale; fp8 uses per-tensor scales
    (vLLM --kv-cache-dtype fp8); int8 per-token asymmetric (LMDeploy); int4 group-wise with 64
    elements per group, asymmetric (KIVI, Hugging Face QuantizedCache)."""
    if dtype == "fp8":
        return KVFormat(dtype, scales="tensor")
    if dtype == "int8":
        return KVFormat(dtype, scales="token", zero_point=True)
    if dtype == "int4":
        return KVFormat(dtype, scales="block", group=64, zero_point=True)
    return KVFormat(dtype)


# ---------------------------------------------------------------- model-level sizing

@dataclass(frozen=True)
class TPSplit:
    tp: int
    kv_heads_per_rank: int      # MLA: the latent is whole on every rank, reported as 1 "head"
    replication: int            # copies of each KV head (or of the latent) across the ranks


def tp_split(spec: ModelSpec, tp: int = 1) -> TPSplit:
    """KV heads per tensor-parallel rank. TP <= H_kv must divide H_kv; TP > H_kv must be a multiple
    of H_kv, each rank then holds one head and each head lives on TP / H_kv ranks."""
    _positive(tp=tp)
    if spec.is_mla:
        return TPSplit(tp, 1, tp)
    h = spec.kv_heads
    if tp <= h:
        if h % tp:
            raise InferlabError(f"--tp {tp} does not divide the {h} KV heads of {spec.name}")
        return TPSplit(tp, h // tp, 1)
    if tp % h:
        raise InferlabError(f"--tp {tp} is more than the {h} KV heads of {spec.name} but not a multiple "
                            f"of {h}, so the heads cannot be replicated evenly")
    return TPSplit(tp, 1, tp // h)


def vectors_per_layer(spec: ModelSpec, tp: int = 1) -> tuple[int, int]:
    """(vectors, width) cached per layer per position on one rank: (2 * H_kv, d_h) or (1, d_c + d_rope)."""
    if spec.is_mla:
        return 1, spec.kv_lora_rank + spec.rope_dim
    return 2 * tp_split(spec, tp).kv_heads_per_rank, spec.head_dim


def layer_token_bytes(spec: ModelSpec, fmt: KVFormat, tp: int = 1) -> int:
    """Bytes one layer caches for one position of one sequence, on one rank."""
    vectors, width = vectors_per_layer(spec, tp)
    return vectors * fmt.vector_bytes(width)


def per_token_bytes(spec: ModelSpec, fmt: KVFormat, tp: int = 1) -> int:
    """Bytes per cached position of one sequence, every layer, one rank (what the lab calls per token)."""
    return spec.layers * layer_token_bytes(spec, fmt, tp)


def constant_bytes(spec: ModelSpec, fmt: KVFormat) -> int:
    """Per-tensor scales: one fp32 scale for K and one for V per layer, whatever S and B."""
    return 2 * spec.layers * 4 if fmt.scales == "tensor" else 0


def cached_positions(spec: ModelSpec, seq: int) -> list[int]:
    """Positions each layer keeps at context `seq`: min(seq, window) on sliding layers."""
    _positive(seq=seq)
    sliding = set(spec.sliding_layers) if spec.sliding_window else set()
    return [min(seq, spec.sliding_window) if i in sliding else seq for i in range(spec.layers)]


def cache_bytes(spec: ModelSpec, *, seq: int, batch: int, fmt: KVFormat, tp: int = 1) -> int:
    """The whole cache on one rank for `batch` sequences of `seq` positions, windows applied."""
    _positive(seq=seq, batch=batch)
    per_layer = layer_token_bytes(spec, fmt, tp)
    return batch * per_layer * sum(cached_positions(spec, seq)) + constant_bytes(spec, fmt)


def max_context(spec: ModelSpec, *, free_bytes: int, batch: int, fmt: KVFormat, tp: int = 1) -> int | None:
    """The largest S with cache_bytes(S) <= free_bytes (floor), or None when the cache stops growing
    before it fills the memory (every layer slides, and the full window fits)."""
    _positive(batch=batch)
    budget = free_bytes - constant_bytes(spec, fmt)
    per_layer = layer_token_bytes(spec, fmt, tp)
    n_slide = len(spec.sliding_layers) if spec.sliding_window else 0
    n_full = spec.layers - n_slide
    s = budget // (batch * per_layer * spec.layers) if budget > 0 else 0   # every layer still grows
    if not n_slide or s < spec.sliding_window:
        return s
    if n_full == 0:
        return None
    # Past the window only the full-attention layers grow: B * per_layer * (n_slide * w + n_full * S).
    return (budget // (batch * per_layer) - n_slide * spec.sliding_window) // n_full


def formula_text(spec: ModelSpec, *, batch: int, fmt: KVFormat, tp: int = 1) -> str:
    """The per-token arithmetic written out as the lab does:
    '2 * 32 * 32 * 128 * 1 * 2 = 524288 bytes = 512 KiB'."""
    s = fmt_number(fmt.element_bytes)
    vectors, width = vectors_per_layer(spec, tp)
    if spec.is_mla:
        terms = f"{spec.layers} * ({spec.kv_lora_rank} + {spec.rope_dim}) * {batch} * {s}"
    else:
        terms = f"2 * {spec.layers} * {vectors // 2} * {spec.head_dim} * {batch} * {s}"
    scales = fmt.scale_count(width)
    if scales:
        per = fmt.scale_bytes * (2 if fmt.zero_point else 1)
        lead = f"{spec.layers}" if spec.is_mla else f"2 * {spec.layers} * {vectors // 2}"
        terms += f" + {lead} * {scales} * {batch} * {per} (scales)"
    total = batch * per_token_bytes(spec, fmt, tp)
    binary = f" = {fmt_binary(total)}" if total >= 1024 else ""
    return f"{terms} = {total} bytes{binary}"
