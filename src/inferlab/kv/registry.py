"""The model registry: published shapes (models.json, with a source for every number; MiniGPT's
row is the engine's GPTConfig defaults, checked against them by the tests), and the GPU catalogue
(gpus.json, vendor GB)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from inferlab.errors import InferlabError
from inferlab.units import DTYPE_BITS


@dataclass(frozen=True)
class ModelSpec:
    """What sizing needs from a decoder. Attention heads (heads) and KV heads (kv_heads) are kept
    apart on purpose: the cache scales with kv_heads, the attention compute with heads."""

    name: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int                  # not always hidden / heads (Gemma-2: 256 vs 224)
    hidden: int
    max_position: int
    dtype: str                     # the published weights' dtype, the default cache dtype
    params: int | None             # None when unknown (a bare config.json)
    sliding_window: int | None = None
    sliding_layers: tuple[int, ...] = ()   # indices of the layers that attend within the window
    kv_lora_rank: int | None = None        # MLA latent width (DeepSeek-V2/V3); None = K and V heads
    rope_dim: int | None = None            # MLA decoupled RoPE key width (qk_rope_head_dim)
    hypothetical: bool = False
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    note: str = ""

    def __post_init__(self):
        for name in ("layers", "heads", "kv_heads", "head_dim", "hidden", "max_position"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InferlabError(f"model {self.name!r}: {name} must be a positive integer, got {value!r}")
        if self.dtype not in DTYPE_BITS:
            raise InferlabError(f"model {self.name!r}: unknown dtype {self.dtype!r}")
        if self.heads % self.kv_heads:
            raise InferlabError(f"model {self.name!r}: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise InferlabError(f"model {self.name!r}: sliding_window must be positive, got {self.sliding_window}")
        if any(not 0 <= i < self.layers for i in self.sliding_layers):
            raise InferlabError(f"model {self.name!r}: sliding layer index outside 0..{self.layers - 1}")
        if (self.kv_lora_rank is None) != (self.rope_dim is None):
            raise InferlabError(f"model {self.name!r}: MLA needs both kv_lora_rank and qk_rope_head_dim")

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def attention(self) -> str:
        """MHA, GQA, MQA (one KV head) or MLA: what decides the cache's per-token width."""
        if self.is_mla:
            return "MLA"
        if self.kv_heads == self.heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"


def sliding_pattern(pattern: str | None, layers: int) -> tuple[int, ...]:
    """'all' -> every layer, 'even' -> 0, 2, 4, ... (Gemma-2's local-first alternation), None -> none."""
    if pattern is None:
        return ()
    if pattern == "all":
        return tuple(range(layers))
    if pattern == "even":
        return tuple(range(0, layers, 2))
    raise InferlabError(f"models.json: unknown sliding_layers {pattern!r}; use 'all' or 'even'")


def _from_entry(e: dict) -> ModelSpec:
    mla = e.get("mla") or {}
    return ModelSpec(
        name=e["name"], layers=e["layers"], heads=e["heads"], kv_heads=e["kv_heads"],
        head_dim=e["head_dim"], hidden=e["hidden"], max_position=e["max_position"], dtype=e["dtype"],
        params=e["params"], sliding_window=e.get("sliding_window"),
        sliding_layers=sliding_pattern(e.get("sliding_layers"), e["layers"]),
        kv_lora_rank=mla.get("kv_lora_rank"), rope_dim=mla.get("qk_rope_head_dim"),
        hypothetical=e.get("hypothetical", False), sources=e["sources"], note=e.get("note", ""),
    )


def _read_json(name: str) -> dict:
    return json.loads(resources.files("inferlab.kv").joinpath(name).read_text(encoding="utf-8"))


@cache
def _models() -> dict[str, ModelSpec]:
    return {entry["name"]: _from_entry(entry) for entry in _read_json("models.json")["models"]}


@cache
def _aliases() -> dict[str, str]:
    table = {name: name for name in _models()}
    for entry in _read_json("models.json")["models"]:
        for alias in entry.get("aliases", ()):
            table[alias.lower()] = entry["name"]
    return table


def model_names() -> list[str]:
    return list(_models())


def get_model(name: str) -> ModelSpec:
    """Look a model up by name or alias (case-insensitive); suggest close names when unknown."""
    key = name.strip().lower()
    aliases = _aliases()
    if key in aliases:
        return _models()[aliases[key]]
    close = difflib.get_close_matches(key, list(aliases), n=3, cutoff=0.6)
    close = list(dict.fromkeys(aliases[c] for c in close))
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InferlabError(f"unknown model {name!r}{hint} (`inferlab kv list` shows all; --config FILE reads a config.json)")


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int          # vendor GB * 1e9
    source: str


@cache
def _gpus() -> dict[str, GPU]:
    return {g["name"]: GPU(g["name"], int(g["memory_gb"]) * 10**9, g["source"])
            for g in _read_json("gpus.json")["gpus"]}


def gpu_names() -> list[str]:
    return list(_gpus())


def get_gpu(name: str) -> GPU:
    by_lower = {n.lower(): g for n, g in _gpus().items()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(by_lower[c].name for c in close)}?" if close else ""
    raise InferlabError(f"--gpu {name!r}: unknown GPU{hint} (known: {', '.join(_gpus())})")
