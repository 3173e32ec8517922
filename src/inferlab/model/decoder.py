"""What every decoder of the engine shares: the cache factory, token-id checks, forward and decode.

A model class (gpt.GPT, llama.Llama) sets `config` (with vocab_size, context, n_layers, kv_heads,
d_head) and implements `_run(ids, start, cache) -> logits`; generate() and the labs only call the
methods below, so they run any of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from inferlab.errors import InferlabError
from inferlab.model.kv_cache import ContiguousKVCache, PagedKVCache


class Decoder:
    config: object
    params: dict[str, np.ndarray]

    @property
    def nbytes(self) -> int:
        """Bytes of the float32 weights held."""
        return sum(p.nbytes for p in self.params.values())

    def new_cache(self, kind: str = "contiguous", max_seq: int | None = None, **options):
        """An empty KV cache for this model: "contiguous" (preallocated) or "paged" (blocks on demand).
        options: dtype (np.float32 default, np.float16) and, for "paged", block_size and pool."""
        max_seq = self.config.context if max_seq is None else max_seq
        if not 0 < max_seq <= self.config.context:
            raise InferlabError(f"max_seq {max_seq} must be in 1..{self.config.context} (the model's context)")
        if kind == "contiguous":
            return ContiguousKVCache(self.config, max_seq=max_seq, **options)
        if kind == "paged":
            return PagedKVCache(self.config, max_seq=max_seq, **options)
        raise InferlabError(f"unknown KV cache kind {kind!r}; expected 'contiguous' or 'paged'")

    def forward(self, ids: Sequence[int]) -> np.ndarray:
        """Full recompute: ids (T,) -> logits (T, V) for every position."""
        return self._run(self._check_ids(ids, 0), 0, None)

    def decode(self, ids_new: Sequence[int], cache) -> np.ndarray:
        """Append ids_new (T_new,) after the cache's positions -> logits (T_new, V) for them."""
        start = cache.length
        return self._run(self._check_ids(ids_new, start), start, cache)

    def _run(self, ids: np.ndarray, start: int, cache) -> np.ndarray:
        raise NotImplementedError

    def _check_ids(self, ids, start: int) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)                          # (T,)
        if ids.ndim != 1 or ids.size == 0:
            raise InferlabError(f"token ids must be a non-empty 1-D sequence, got shape {ids.shape}")
        if start + ids.size > self.config.context:
            raise InferlabError(
                f"{start + ids.size} positions exceed the model's context of {self.config.context} tokens")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise InferlabError(f"token id out of range 0..{self.config.vocab_size - 1}")
        return ids


def check_params(expected: dict[str, tuple[int, ...]], params: dict[str, np.ndarray]) -> None:
    """The parameter names and shapes a model's config asks for, or InferlabError naming the first misfit."""
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise InferlabError(f"parameters do not match the config: missing {missing[:3]}, unexpected {extra[:3]}")
    for name, shape in expected.items():
        if tuple(params[name].shape) != shape:
            raise InferlabError(f"parameter {name} has shape {tuple(params[name].shape)}, expected {shape}")
