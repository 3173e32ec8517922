"""KV caches: a preallocated contiguous one, and a paged one with blocks allocated on demand.

Both store, per layer, the keys and values of every position decoded so far, for the H_kv key/value
heads (GQA-ready: H_kv <= H). Both offer the same interface, which attention.mha uses:
  append(layer, k, v)   k, v (H_kv, T_new, d_head): write the next T_new positions of `layer`
  read(layer)           -> k, v (H_kv, T, d_head): every cached position of `layer`
  length                positions cached in every layer
  nbytes                bytes actually allocated for K and V
  truncate(n)           forget positions n.. (rollback; the benchmark rewinds the cache with it)
Layers are appended one after the other within a decode step, so each layer keeps its own length.
`config` is any model config with n_layers, kv_heads, d_head and context (GPTConfig, LlamaConfig).
The cache dtype is float32 unless `dtype` says otherwise (float16 halves nbytes; reads stay exact
float16 values and attention computes with them in float32).
"""

from __future__ import annotations

import numpy as np

from inferlab.errors import InferlabError


class _LayerLengths:
    """Per-layer position counts shared by both caches."""

    def __init__(self, config, max_seq: int, dtype=np.float32):
        self.config = config
        self.max_seq = max_seq
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float16):
            raise InferlabError(f"KV cache dtype {self.dtype} is not supported (float32 or float16)")
        self._lengths = [0] * config.n_layers

    @property
    def length(self) -> int:
        return min(self._lengths)

    def _reserve(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[int, int]:
        """Check k, v and return (first new position, T_new) for `layer`."""
        c = self.config
        expected = (c.kv_heads, k.shape[1], c.d_head)
        if k.shape != expected or v.shape != expected:
            raise InferlabError(f"k, v of shapes {k.shape}, {v.shape} do not fit this cache's {expected}")
        start, t = self._lengths[layer], k.shape[1]
        if start + t > self.max_seq:
            raise InferlabError(f"KV cache full: {start + t} positions asked for, max_seq is {self.max_seq}")
        self._lengths[layer] = start + t
        return start, t

    def _truncate_lengths(self, n: int) -> None:
        if n < 0:
            raise InferlabError(f"cannot truncate a KV cache to {n} positions")
        self._lengths = [min(n, length) for length in self._lengths]


class ContiguousKVCache(_LayerLengths):
    """One array for the whole context, allocated up front (llama2.c's key_cache/value_cache)."""

    def __init__(self, config, max_seq: int | None = None, dtype=np.float32):
        super().__init__(config, config.context if max_seq is None else max_seq, dtype)
        self.data = np.zeros((config.n_layers, 2, config.kv_heads, self.max_seq, config.d_head),
                             dtype=self.dtype)               # (layers, 2, kv_heads, max_seq, d_head)

    @property
    def nbytes(self) -> int:
        return self.data.nbytes

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        start, t = self._reserve(layer, k, v)
        self.data[layer, 0, :, start:start + t] = k           # (H_kv, T_new, d_head)
        self.data[layer, 1, :, start:start + t] = v           # (H_kv, T_new, d_head)

    def read(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        n = self._lengths[layer]
        return self.data[layer, 0, :, :n], self.data[layer, 1, :, :n]   # (H_kv, T, d_head) x2, views

    def truncate(self, n: int) -> None:
        self._truncate_lengths(n)


class BlockPool:
    """Physical KV blocks of `block_size` positions, created on first need and recycled when freed.

    A block holds those positions for every layer, (layers, 2, kv_heads, block_size, d_head), as a
    vLLM block id indexes every layer's cache tensor (Kwon et al. 2023, section 4.2). Several
    caches may share one pool.
    """

    def __init__(self, config, block_size: int = 16, dtype=np.float32):
        if block_size <= 0:
            raise InferlabError(f"block_size must be a positive number of tokens, got {block_size}")
        self.block_size = block_size
        self.block_shape = (config.n_layers, 2, config.kv_heads, block_size, config.d_head)
        self.dtype = np.dtype(dtype)
        self.blocks: list[np.ndarray] = []
        self._free: list[int] = []

    @property
    def block_nbytes(self) -> int:
        return int(np.prod(self.block_shape)) * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of every block ever created, in use or free."""
        return len(self.blocks) * self.block_nbytes

    def allocate(self) -> int:
        if self._free:
            return self._free.pop()
        self.blocks.append(np.zeros(self.block_shape, dtype=self.dtype))   # (layers, 2, kv_heads, B, d_head)
        return len(self.blocks) - 1

    def free(self, block_ids) -> None:
        self._free.extend(block_ids)


class PagedKVCache(_LayerLengths):
    """PagedAttention's layout: a block table maps logical block i (positions iB..iB+B-1) to a
    physical block of the pool, allocated only when the sequence reaches it."""

    def __init__(self, config, max_seq: int | None = None, block_size: int = 16,
                 pool: BlockPool | None = None, dtype=np.float32):
        super().__init__(config, config.context if max_seq is None else max_seq, dtype)
        self.pool = BlockPool(config, block_size, dtype) if pool is None else pool
        if self.pool.dtype != self.dtype:
            raise InferlabError(f"the block pool holds {self.pool.dtype}, the cache was asked for {self.dtype}")
        self.block_size = self.pool.block_size
        self.block_table: list[int] = []

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks this sequence holds: whole blocks, so up to B - 1 positions of slack."""
        return len(self.block_table) * self.pool.block_nbytes

    def append(self, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        start, t = self._reserve(layer, k, v)
        b = self.block_size
        while len(self.block_table) * b < start + t:
            self.block_table.append(self.pool.allocate())
        pos = start
        while pos < start + t:                                 # one slice per block touched
            n = min(b - pos % b, start + t - pos)
            block = self.pool.blocks[self.block_table[pos // b]]
            block[layer, 0, :, pos % b:pos % b + n] = k[:, pos - start:pos - start + n]   # (H_kv, n, d_head)
            block[layer, 1, :, pos % b:pos % b + n] = v[:, pos - start:pos - start + n]   # (H_kv, n, d_head)
            pos += n

    def read(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """Gather the layer's blocks into contiguous K and V (a kernel would read them in place)."""
        n = self._lengths[layer]
        used = self.block_table[:-(-n // self.block_size)]
        if not used:
            empty = np.zeros((self.config.kv_heads, 0, self.config.d_head), dtype=self.dtype)
            return empty, empty
        kv = np.concatenate([self.pool.blocks[i][layer] for i in used], axis=2)   # (2, H_kv, blocks * B, d_head)
        return kv[0, :, :n], kv[1, :, :n]                                         # (H_kv, T, d_head) x2

    def truncate(self, n: int) -> None:
        self._truncate_lengths(n)
        keep = -(-max(self._lengths) // self.block_size)
        self.pool.free(self.block_table[keep:])
        del self.block_table[keep:]
