"""Read a Hugging Face config.json into a ModelSpec, for models the registry does not list.

Fields read (GPT-2's own names in brackets, as transformers' attribute_map aliases them):
  num_hidden_layers [n_layer]          required
  num_attention_heads [n_head]         required
  hidden_size [n_embd]                 required
  max_position_embeddings [n_positions] required
  num_key_value_heads                  absent = num_attention_heads (MHA)
  head_dim                             absent = hidden_size / num_attention_heads
  torch_dtype (or dtype)               absent = float32, transformers' default
  sliding_window, use_sliding_window, layer_types, sliding_window_pattern (Gemma 3, Cohere 2),
  max_window_layers (Qwen2), model_type gemma2 / gemma3
  a layer of another kind (linear attention, Mamba, chunked: layer_types, layers_block_type,
  hybrid_override_pattern, attention_chunk_size, ...) is refused, never sized as full attention
  kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim (MLA)
A multimodal config with the language model under "text_config" is read from there.
A missing or malformed field is named by its JSON pointer.
"""

from __future__ import annotations

import json
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json
from inferlab.kv.registry import ModelSpec, sliding_pattern
from inferlab.units import parse_dtype

_REQUIRED = {
    "num_hidden_layers": ("n_layer",),
    "num_attention_heads": ("n_head",),
    "hidden_size": ("n_embd",),
    "max_position_embeddings": ("n_positions",),
}


def load_config(path: str | Path) -> ModelSpec:
    """Parse config.json at `path`; raise InferlabError naming the file and the field on bad input."""
    path = Path(path)
    raw = read_json(path, label=f"--config {path}", missing="no such file")  # (nesting, NaN, ...: one line)
    if not isinstance(raw, dict):
        raise InferlabError(f"--config {path}: the top level must be a JSON object")
    prefix = ""
    if "num_hidden_layers" not in raw and "n_layer" not in raw and isinstance(raw.get("text_config"), dict):
        raw, prefix = raw["text_config"], "/text_config"
    return spec_from_config(raw, name=_name(raw, path), where=f"{path}{prefix}")


def _name(raw: dict, path: Path) -> str:
    named = raw.get("_name_or_path")
    if isinstance(named, str) and named:
        return named
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


# A field past these is no model's (the largest have ~10^2 layers, ~10^7 positions): a typo, and
# the per-layer tables would take forever or all the memory
MAX_FIELD = 10 ** 9
MAX_LAYERS = 10 ** 5


def _int(raw: dict, key: str, where: str, *, aliases=(), low: int = 1, high: int = MAX_FIELD) -> int | None:
    for k in (key, *aliases):
        if k in raw and raw[k] is not None:
            value = raw[k]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                kind = "a positive integer" if low == 1 else f"an integer >= {low}"
                raise InferlabError(f"{where}: /{k} must be {kind}, got {str(value)[:40]}")
            if value > high:
                raise InferlabError(f"{where}: /{k} is {str(value)[:40]}, more than any model's ({high:,})")
            return value
    return None


def spec_from_config(raw: dict, *, name: str, where: str = "config.json") -> ModelSpec:
    """The same as load_config for an already-parsed dict."""
    found = {}
    for key, aliases in _REQUIRED.items():
        value = _int(raw, key, where, aliases=aliases, high=MAX_LAYERS if key == "num_hidden_layers" else MAX_FIELD)
        if value is None:
            also = f" (or {', '.join(aliases)})" if aliases else ""
            raise InferlabError(f"{where}: missing required field /{key}{also}")
        found[key] = value
    layers, heads, hidden = found["num_hidden_layers"], found["num_attention_heads"], found["hidden_size"]
    kv_heads = _int(raw, "num_key_value_heads", where) or heads
    head_dim = _int(raw, "head_dim", where)
    kv_lora_rank = _int(raw, "kv_lora_rank", where)
    rope_dim = _int(raw, "qk_rope_head_dim", where) if kv_lora_rank else None
    if kv_lora_rank and rope_dim is None:
        raise InferlabError(f"{where}: /kv_lora_rank is set (MLA) but /qk_rope_head_dim is missing")
    if head_dim is None and kv_lora_rank:
        head_dim = _int(raw, "qk_nope_head_dim", where)
    if head_dim is None:
        if hidden % heads:
            raise InferlabError(f"{where}: no /head_dim and /hidden_size {hidden} is not divisible by "
                                f"/num_attention_heads {heads}")
        head_dim = hidden // heads
    dtype_field = "torch_dtype" if raw.get("torch_dtype") is not None else "dtype"
    dtype_name = raw.get(dtype_field) or "float32"
    dtype = parse_dtype(str(dtype_name), flag=f"{where}: /{dtype_field}")
    _check_layer_kinds(raw, layers, where)
    window, sliding = _sliding(raw, layers, where)
    return ModelSpec(
        name=name, layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, hidden=hidden,
        max_position=found["max_position_embeddings"], dtype=dtype, params=None,
        sliding_window=window, sliding_layers=sliding, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim,
        sources={"config": where},
    )


# Fields that say some layers are not softmax attention over every past token, where no
# layer_types lists them: each is refused rather than sized as full attention (a hybrid model's
# recurrent layers keep a fixed-size state, not a per-token KV cache; chunked attention caches at
# most a chunk).
_HYBRID = ("layers_block_type", "attn_layer_period", "hybrid_override_pattern", "attention_chunk_size",
           "full_attn_idxs", "linear_attn_config")
_KINDS = ("full_attention", "sliding_attention")


def _check_layer_kinds(raw: dict, layers: int, where: str) -> None:
    """One line naming the field unless every layer is full or sliding attention with a cache of
    its own (layer_types where given, else none of the _HYBRID fields set)."""
    if raw.get("num_kv_shared_layers"):  # (Gemma 3n: its last layers read earlier layers' cache)
        raise InferlabError(f"{where}: /num_kv_shared_layers is {str(raw['num_kv_shared_layers'])[:40]}: layers that "
                            "share another layer's cache are not sized by inferlab kv")
    types = raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise InferlabError(f"{where}: /layer_types must list one type per layer ({layers})")
        for i, kind in enumerate(types):
            if kind not in _KINDS:
                raise InferlabError(f"{where}: /layer_types/{i} is {str(kind)[:40]!r}: inferlab kv sizes "
                                    "full_attention and sliding_attention layers only (a per-token KV cache)")
        return
    for key in _HYBRID:
        if raw.get(key) is not None:
            raise InferlabError(f"{where}: /{key} is set: some layers are not full or sliding attention, "
                                "which inferlab kv cannot size (give a config with /layer_types)")


def _sliding(raw: dict, layers: int, where: str) -> tuple[int | None, tuple[int, ...]]:
    """(window, sliding layer indices), following transformers' own reading of each field:
    layer_types where given (its kinds checked by _check_layer_kinds), else sliding_window_pattern
    (Gemma 3, Cohere 2: every pattern-th layer full), else the model type's rule."""
    types = raw.get("layer_types")
    window = _int(raw, "sliding_window", where)
    for key, kind in (("use_sliding_window", bool), ("model_type", str)):   # ("no" would read as on)
        if raw.get(key) is not None and not isinstance(raw[key], kind):
            raise InferlabError(f"{where}: /{key} is {json.dumps(raw[key])[:40]}, expected "
                                f"{'true or false' if kind is bool else 'a string'}")
    if window is None or raw.get("use_sliding_window") is False:
        if types is not None and "sliding_attention" in types:
            raise InferlabError(f"{where}: /layer_types has sliding_attention layers but /sliding_window is absent "
                                "or off (/use_sliding_window false)")
        return None, ()
    if types is not None:
        return window, tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    pattern = _int(raw, "sliding_window_pattern", where)
    if pattern is None and raw.get("model_type") in ("gemma3", "gemma3_text"):
        pattern = 6                                # Gemma3TextConfig's default
    if pattern is not None:                        # layer i is full where (i + 1) % pattern == 0
        return window, tuple(i for i in range(layers) if (i + 1) % pattern)
    if raw.get("model_type") == "gemma2":
        return window, sliding_pattern("even", layers)
    if raw.get("model_type") == "qwen2":          # Qwen2 slides only from max_window_layers on
        first = _int(raw, "max_window_layers", where, low=0) or 0
        return window, tuple(range(first, layers))
    return window, sliding_pattern("all", layers)
