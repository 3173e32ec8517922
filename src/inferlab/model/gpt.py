"""A GPT-2-architecture decoder in numpy, float32: full recompute and cached decode.

Learned token and position embeddings, pre-LayerNorm blocks (causal multi-head attention, then a
GELU MLP), a final LayerNorm and an LM head tied to the token embedding (GPT-2; Radford et al.
2019). Parameters are a flat dict with GPT-2's names and weights stored (in, out), so every linear
layer is `x @ w + b` (docs/architecture.md lists the names and shapes).
"""

from __future__ import annotations

import numpy as np

from inferlab.model.attention import mha
from inferlab.model.config import GPTConfig
from inferlab.model.decoder import Decoder, check_params

_GELU_C = np.float32(np.sqrt(2.0 / np.pi))


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (GPT-2's "gelu_new"; Hendrycks & Gimpel 2016, eq. 2).

    x * x * x, not x ** 3: numpy's float32 power is a slow powf loop; compare
    `python -m timeit -s "import numpy as np; x = np.ones((64, 256), np.float32)" "x ** 3"` with "x * x * x"."""
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(_GELU_C * (x + np.float32(0.044715) * (x * x * x))))


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """(T, d) -> (T, d): normalise each row to zero mean and unit (biased) variance, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)                              # (T, 1)
    var = x.var(axis=-1, keepdims=True)                                # (T, 1)
    return (x - mean) / np.sqrt(var + np.float32(eps)) * g + b         # (T, d)


def param_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape for `config`: the contract a checkpoint must satisfy."""
    d, dh, ff = config.d_model, config.d_head, config.ff
    shapes: dict[str, tuple[int, ...]] = {"wte": (config.vocab_size, d), "wpe": (config.context, d)}
    qkv = (config.n_heads + 2 * config.kv_heads) * dh
    for i in range(config.n_layers):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.g": (d,), p + "ln_1.b": (d,),
            p + "attn.c_attn.w": (d, qkv), p + "attn.c_attn.b": (qkv,),
            p + "attn.c_proj.w": (config.n_heads * dh, d), p + "attn.c_proj.b": (d,),
            p + "ln_2.g": (d,), p + "ln_2.b": (d,),
            p + "mlp.c_fc.w": (d, ff), p + "mlp.c_fc.b": (ff,),
            p + "mlp.c_proj.w": (ff, d), p + "mlp.c_proj.b": (d,),
        })
    shapes.update({"ln_f.g": (d,), "ln_f.b": (d,)})
    return shapes


class GPT(Decoder):
    """GPT(config, params): params is the flat float32 dict of `param_shapes(config)`."""

    def __init__(self, config: GPTConfig, params: dict[str, np.ndarray]):
        expected = param_shapes(config)
        check_params(expected, params)
        self.config = config
        self.params = {name: np.ascontiguousarray(params[name], dtype=np.float32) for name in expected}

    @classmethod
    def init(cls, config: GPTConfig, seed: int = 0) -> GPT:
        """GPT-2's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm gains, and the
        residual projections scaled by 1/sqrt(2 n_layers) (Radford et al. 2019, section 2.3)."""
        rng = np.random.default_rng(seed)
        resid_std = 0.02 / np.sqrt(2 * config.n_layers)
        params = {}
        for name, shape in param_shapes(config).items():
            if name.endswith(".g"):
                params[name] = np.ones(shape, np.float32)
            elif name.endswith(".b"):
                params[name] = np.zeros(shape, np.float32)
            else:
                std = resid_std if name.endswith("c_proj.w") else 0.02
                params[name] = rng.normal(0.0, std, shape).astype(np.float32)
        return cls(config, params)

    def _run(self, ids: np.ndarray, start: int, cache) -> np.ndarray:
        c, p = self.config, self.params
        x = p["wte"][ids] + p["wpe"][start:start + ids.size]           # (T, d)
        for i in range(c.n_layers):
            h = f"h.{i}."
            a = layer_norm(x, p[h + "ln_1.g"], p[h + "ln_1.b"], c.ln_eps)            # (T, d)
            x = x + mha(a, p[h + "attn.c_attn.w"], p[h + "attn.c_attn.b"],
                        p[h + "attn.c_proj.w"], p[h + "attn.c_proj.b"],
                        n_heads=c.n_heads, n_kv_heads=c.kv_heads, cache=cache, layer=i)  # (T, d)
            m = layer_norm(x, p[h + "ln_2.g"], p[h + "ln_2.b"], c.ln_eps)            # (T, d)
            m = gelu(m @ p[h + "mlp.c_fc.w"] + p[h + "mlp.c_fc.b"])                    # (T, d_ff)
            x = x + (m @ p[h + "mlp.c_proj.w"] + p[h + "mlp.c_proj.b"])                # (T, d)
        x = layer_norm(x, p["ln_f.g"], p["ln_f.b"], c.ln_eps)                         # (T, d)
        return x @ p["wte"].T                                                          # (T, V), tied head
