"""GPTConfig: the one frozen description of a model's shape."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-2-style decoder. The defaults are MiniGPT (Phase 17 of the curriculum).

    MiniGPT is d_model 64, 4 heads of 16 (seed 001 profiles exactly this attention), 4 layers,
    a 512-token byte-level BPE vocabulary (seed 000's "~512") and a 256-token context.
    """

    vocab_size: int = 512
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 4
    context: int = 256
    n_kv_heads: int | None = None   # None = n_heads (MHA); fewer = GQA, as the KV cache supports
    d_ff: int | None = None         # None = 4 * d_model, GPT-2's MLP width
    ln_eps: float = 1e-5            # GPT-2's layer_norm_epsilon

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "context"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GPTConfig.{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.kv_heads}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model
