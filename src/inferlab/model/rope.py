"""Rotary position embeddings (RoPE; Su et al. 2021) as Llama-family checkpoints define them.

Frequencies: inv_freq[i] = theta^(-2i / d_head) for i < d_head / 2, optionally rescaled by Llama
3.1's "llama3" rule (long wavelengths divided by `factor`, short ones kept, a smooth blend between).
Rotation: transformers' rotate_half convention, which Llama, Qwen2 and Mistral checkpoints are
trained with: dimension j is paired with j + d_head / 2 (not with its neighbour, as in the paper),
    x' = [x1 cos - x2 sin, x2 cos + x1 sin],   x1, x2 = the two halves of x.
Frequencies and angles are computed in float32, as transformers computes them: checkpoints were
trained with those rounded angles, and float64 angles move a deep model's logits by ~1e-4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Llama3Scaling:
    """rope_scaling {"rope_type": "llama3", ...} of Llama 3.1 / 3.2 configs."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


def inv_freq(d_head: int, theta: float, llama3: Llama3Scaling | None = None) -> np.ndarray:
    """(d_head / 2,) float32 rotation frequencies, radians per position."""
    freq = np.float32(1.0) / np.float32(theta) ** (np.arange(0, d_head, 2, dtype=np.float32) / np.float32(d_head))  # (d_head/2,)
    if llama3 is None:
        return freq
    s = llama3
    wavelen = np.float32(2 * np.pi) / freq
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor     # longer: divide by factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor   # shorter: keep
    factor = np.float32(s.factor)
    scaled = np.where(wavelen > low_wavelen, freq / factor, freq)
    smooth = (np.float32(s.original_max_position_embeddings) / wavelen - np.float32(s.low_freq_factor)) \
        / np.float32(s.high_freq_factor - s.low_freq_factor)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, blended, scaled).astype(np.float32)


class RopeTable:
    """cos and sin of every position's angles, (positions, d_head / 2) float32, built once per model."""

    def __init__(self, d_head: int, positions: int, theta: float, llama3: Llama3Scaling | None = None):
        angles = np.arange(positions, dtype=np.float32)[:, None] * inv_freq(d_head, theta, llama3)  # (P, d_head/2)
        self.cos = np.cos(angles)                              # (P, d_head/2) float32
        self.sin = np.sin(angles)                              # (P, d_head/2) float32

    def at(self, start: int, t: int) -> Rotary:
        """The rotation of positions start..start+t-1."""
        return Rotary(self.cos[start:start + t], self.sin[start:start + t])


@dataclass(frozen=True)
class Rotary:
    cos: np.ndarray     # (T, d_head/2)
    sin: np.ndarray     # (T, d_head/2)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """x (heads, T, d_head) -> rotated (heads, T, d_head), a fresh array."""
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]                  # (heads, T, d_head/2) x2, views
        out = np.empty_like(x)
        np.subtract(x1 * self.cos, x2 * self.sin, out=out[..., :half])
        np.add(x2 * self.cos, x1 * self.sin, out=out[..., half:])
        return out
