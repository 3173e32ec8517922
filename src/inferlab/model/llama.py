"""Llama-family decoders in numpy, float32: Llama (SmolLM2, Llama 3.x), Qwen2 (QKV biases) and Mistral
(sliding window), as transformers' LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM run them.

A block is x + attn(rms_norm(x)), then x + mlp(rms_norm(x)): RMSNorm (Zhang & Sennrich 2019)
without mean or bias; attention with grouped-query heads (H query heads, H_kv key/value heads,
head_dim not necessarily d_model / H) and rotary positions on q and k (model/rope.py); a SwiGLU
MLP, down(silu(gate(x)) * up(x)) (Shazeer 2020). The LM head is its own matrix or, when tied,
the embedding. The attention is attention.mha, the same five ops the GPT and the attention
profiler run; the rotation and the sliding window are its `rope` and `window` arguments.

Parameters are a flat dict of float32 arrays in transformers' (out, in) layout, so a linear layer
is `x @ w.T` (a transposed view: BLAS reads it in place, nothing is copied at load). q, k, v are
stored fused, and so are gate and up, so a layer runs two projections where transformers runs five:
```
embed (V, d)                       lm_head (V, d)  (absent when tied: logits = x @ embed.T)
layers.{i}.attn_norm (d,)          layers.{i}.mlp_norm (d,)          norm (d,)
layers.{i}.qkv.w ((H + 2 H_kv) d_head, d)   layers.{i}.qkv.b ((H + 2 H_kv) d_head,)  if qkv_bias
layers.{i}.o.w (d, H d_head)                layers.{i}.o.b (d,)                      if o_bias
layers.{i}.gate_up.w (2 d_ff, d)            layers.{i}.down.w (d, d_ff)
```
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab.errors import InferlabError
from inferlab.model.attention import mha
from inferlab.model.decoder import Decoder, check_params
from inferlab.model.rope import Llama3Scaling, RopeTable

ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")


@dataclass(frozen=True)
class LlamaConfig:
    """Shape of a Llama-family decoder. `context` is how many positions this engine serves (the
    KV cache's default size), at most the checkpoint's max_position."""

    vocab_size: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    n_layers: int
    d_ff: int
    head_dim: int
    context: int
    max_position: int
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_llama3: Llama3Scaling | None = None
    qkv_bias: bool = False                   # Qwen2; Llama's attention_bias sets both
    o_bias: bool = False
    tie_embeddings: bool = False
    sliding_window: int | None = None        # Mistral; Qwen2 with use_sliding_window
    sliding_layers: tuple[int, ...] = ()     # the layers the window applies to
    architecture: str = "LlamaForCausalLM"

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_kv_heads", "n_layers", "d_ff", "head_dim",
                     "context", "max_position"):
            if getattr(self, name) <= 0:
                raise InferlabError(f"LlamaConfig.{name} must be positive, got {getattr(self, name)}")
        if self.n_heads % self.n_kv_heads:
            raise InferlabError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise InferlabError(f"head_dim {self.head_dim} must be even for rotary embeddings")
        if self.context > self.max_position:
            raise InferlabError(f"context {self.context} exceeds the checkpoint's max_position {self.max_position}")
        if self.architecture not in ARCHITECTURES:
            raise InferlabError(f"architecture {self.architecture!r} is not one of {', '.join(ARCHITECTURES)}")

    # the names the KV caches, generate() and the attention profiler read (as GPTConfig has them)
    @property
    def d_head(self) -> int:
        return self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads

    @property
    def ff(self) -> int:
        return self.d_ff

    def window(self, layer: int) -> int | None:
        return self.sliding_window if layer in self.sliding_layers else None


def param_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape for `config` (the table in the module docstring)."""
    c = config
    d, qkv = c.d_model, (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    shapes: dict[str, tuple[int, ...]] = {"embed": (c.vocab_size, d)}
    for i in range(c.n_layers):
        p = f"layers.{i}."
        shapes[p + "attn_norm"] = (d,)
        shapes[p + "qkv.w"] = (qkv, d)
        if c.qkv_bias:
            shapes[p + "qkv.b"] = (qkv,)
        shapes[p + "o.w"] = (d, c.n_heads * c.head_dim)
        if c.o_bias:
            shapes[p + "o.b"] = (d,)
        shapes[p + "mlp_norm"] = (d,)
        shapes[p + "gate_up.w"] = (2 * c.d_ff, d)
        shapes[p + "down.w"] = (d, c.d_ff)
    shapes["norm"] = (d,)
    if not c.tie_embeddings:
        shapes["lm_head"] = (c.vocab_size, d)
    return shapes


def step_flops(config: LlamaConfig, t_new: int, t_k: int) -> int:
    """FLOPs (2 per multiply-add) of a forward over t_new positions attending to t_k keys (the
    naive attention computes every score, masked or not; a sliding layer sees at most its window
    plus the new positions). What the labs put next to a measured forward or decode step."""
    c = config
    d, dh, h = c.d_model, c.head_dim, c.n_heads
    total = 0
    for layer in range(c.n_layers):
        window = c.window(layer)
        keys = t_k if window is None else min(t_k, window + t_new - 1)
        total += (2 * t_new * d * (h + 2 * c.n_kv_heads) * dh    # qkv_proj
                  + 2 * 2 * h * t_new * keys * dh                 # scores and av
                  + 2 * t_new * h * dh * d                        # out_proj
                  + 2 * 3 * t_new * d * c.d_ff)                   # gate, up, down
    return total + 2 * t_new * d * c.vocab_size                   # LM head


def random_tensor(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """transformers' initialisation of a Llama-family tensor: "norm" ones, "bias" zeros, "weight"
    N(0, 0.02) (initializer_range), float32."""
    if kind == "norm":
        return np.ones(shape, np.float32)
    if kind == "bias":
        return np.zeros(shape, np.float32)
    w = rng.standard_normal(shape, dtype=np.float32)
    w *= np.float32(0.02)
    return w


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """(T, d) -> (T, d): divide each row by its root mean square, then scale (no mean, no bias)."""
    ms = np.mean(x * x, axis=-1, keepdims=True)                        # (T, 1)
    return x * (np.float32(1.0) / np.sqrt(ms + np.float32(eps))) * w   # (T, d)


def swiglu(gate_up: np.ndarray) -> np.ndarray:
    """(T, 2 d_ff) -> (T, d_ff): silu(gate) * up. sigmoid as (1 + tanh(g/2)) / 2: no exp overflow."""
    ff = gate_up.shape[1] // 2
    g, u = gate_up[:, :ff], gate_up[:, ff:]                            # (T, d_ff) x2, views
    half = np.float32(0.5)
    return g * (half + half * np.tanh(half * g)) * u                   # (T, d_ff)


class Llama(Decoder):
    """Llama(config, params): params is the flat float32 dict of `param_shapes(config)`."""

    def __init__(self, config: LlamaConfig, params: dict[str, np.ndarray]):
        expected = param_shapes(config)
        check_params(expected, params)
        for name in expected:
            if params[name].dtype != np.float32:
                raise InferlabError(f"parameter {name} is {params[name].dtype}, expected float32")
        self.config = config
        self.params = {name: params[name] for name in expected}
        self.rope = RopeTable(config.head_dim, config.context, config.rope_theta, config.rope_llama3)

    @classmethod
    def init(cls, config: LlamaConfig, seed: int = 0) -> Llama:
        """Random weights, N(0, 0.02) (transformers' initializer_range), unit norms, zero biases:
        a model of the right shape to time, not to read."""
        rng = np.random.default_rng(seed)
        kinds = {True: "norm", False: "weight"}
        return cls(config, {name: random_tensor("bias" if name.endswith(".b") else kinds[name.endswith("norm")],
                                                shape, rng)
                            for name, shape in param_shapes(config).items()})

    def _run(self, ids: np.ndarray, start: int, cache) -> np.ndarray:
        c, p = self.config, self.params
        rope = self.rope.at(start, ids.size)
        x = p["embed"][ids]                                            # (T, d)
        for i in range(c.n_layers):
            layer = f"layers.{i}."
            a = rms_norm(x, p[layer + "attn_norm"], c.rms_eps)         # (T, d)
            x = x + mha(a, p[layer + "qkv.w"].T, p.get(layer + "qkv.b"),
                        p[layer + "o.w"].T, p.get(layer + "o.b"),
                        n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, cache=cache, layer=i,
                        rope=rope, window=c.window(i))                 # (T, d)
            m = rms_norm(x, p[layer + "mlp_norm"], c.rms_eps)          # (T, d)
            m = swiglu(m @ p[layer + "gate_up.w"].T)                    # (T, d_ff)
            x = x + m @ p[layer + "down.w"].T                          # (T, d)
        x = rms_norm(x, p["norm"], c.rms_eps)                          # (T, d)
        return x @ p["embed" if c.tie_embeddings else "lm_head"].T     # (T, V)
