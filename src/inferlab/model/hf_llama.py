"""Hugging Face Llama / Qwen2 / Mistral folders as llama.Llama: config.json and safetensors weights.

The folder is the user's (nothing is downloaded): config.json, and model.safetensors or a sharded
model.safetensors.index.json. Weights in bf16, fp16 or f32 are widened to float32 one tensor at a
time (safetensors_io); q/k/v and gate/up are fused as soon as a layer's parts have all been read,
so loading holds one float32 copy of the weights plus a layer's parts and one raw tensor.

config.json fields read (transformers 4 and 5 spellings):
  architectures[0]      LlamaForCausalLM | Qwen2ForCausalLM | MistralForCausalLM
  hidden_size, num_attention_heads, num_key_value_heads, head_dim, num_hidden_layers,
  max_position_embeddings, sliding_window / use_sliding_window / layer_types / max_window_layers
                        as kv.hf_config reads them (one reading for `inferlab kv` and the engine)
  vocab_size, intermediate_size, rms_norm_eps, hidden_act (must be silu), tie_word_embeddings
  attention_bias (Llama: bias on q, k, v and o), mlp_bias (must be false)
  rope_theta + rope_scaling (transformers 4) or rope_parameters (5): rope_type default or llama3
Anything else that changes the computation is refused, naming its JSON pointer.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.kv.hf_config import spec_from_config
from inferlab.model.llama import ARCHITECTURES, Llama, LlamaConfig
from inferlab.model.rope import Llama3Scaling
from inferlab.model.safetensors_io import iter_float32, weight_files

DEFAULT_CONTEXT = 4096   # positions served when the caller does not say: a cache of 128k positions
                         # (Llama 3.2) would be several GB before the first token

# transformers name (after "model.") -> (our name, part of a fused tensor or None)
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
_LAYER_NAMES = {
    "input_layernorm.weight": ("attn_norm", None),
    "post_attention_layernorm.weight": ("mlp_norm", None),
    "self_attn.q_proj.weight": ("qkv.w", 0), "self_attn.k_proj.weight": ("qkv.w", 1),
    "self_attn.v_proj.weight": ("qkv.w", 2),
    "self_attn.q_proj.bias": ("qkv.b", 0), "self_attn.k_proj.bias": ("qkv.b", 1),
    "self_attn.v_proj.bias": ("qkv.b", 2),
    "self_attn.o_proj.weight": ("o.w", None), "self_attn.o_proj.bias": ("o.b", None),
    "mlp.gate_proj.weight": ("gate_up.w", 0), "mlp.up_proj.weight": ("gate_up.w", 1),
    "mlp.down_proj.weight": ("down.w", None),
}
_PARTS = {"qkv.w": 3, "qkv.b": 3, "gate_up.w": 2}
_TOP_NAMES = {"model.embed_tokens.weight": "embed", "model.norm.weight": "norm", "lm_head.weight": "lm_head"}
_BUFFERS = re.compile(r"\.rotary_emb\.inv_freq$")    # older checkpoints save RoPE's buffer


def is_llama_family(doc: dict) -> bool:
    archs = doc.get("architectures")
    return isinstance(archs, list) and len(archs) == 1 and archs[0] in ARCHITECTURES


def llama_config(doc: dict, where: str = "config.json", *, context: int | None = None) -> LlamaConfig:
    """LlamaConfig from a parsed config.json; `context` defaults to min(max_position, 4096)."""
    archs = doc.get("architectures")
    if not is_llama_family(doc):
        raise InferlabError(f"{where}: /architectures {archs!r} is not one of {', '.join(ARCHITECTURES)}")
    arch = archs[0]
    spec = spec_from_config(doc, name=arch, where=where)
    if doc.get("hidden_act", "silu") != "silu":
        raise InferlabError(f"{where}: /hidden_act {doc['hidden_act']!r} is not supported (only silu)")
    if doc.get("mlp_bias"):
        raise InferlabError(f"{where}: /mlp_bias true is not supported")
    bias = bool(doc.get("attention_bias", False))
    context = min(spec.max_position, DEFAULT_CONTEXT) if context is None else context
    if not 0 < context <= spec.max_position:
        raise InferlabError(f"context {context} must be in 1..{spec.max_position} "
                            f"({where}: /max_position_embeddings)")
    theta, llama3 = _rope(doc, where)
    return LlamaConfig(
        vocab_size=positive_field(doc, "vocab_size", where), d_model=spec.hidden, n_heads=spec.heads,
        n_kv_heads=spec.kv_heads, n_layers=spec.layers, d_ff=positive_field(doc, "intermediate_size", where),
        head_dim=spec.head_dim, context=context, max_position=spec.max_position,
        rms_eps=positive_number_field(doc, "rms_norm_eps", where, 1e-6), rope_theta=theta, rope_llama3=llama3,
        qkv_bias=arch == "Qwen2ForCausalLM" or bias, o_bias=bias,
        tie_embeddings=bool(doc.get("tie_word_embeddings", False)),
        sliding_window=spec.sliding_window, sliding_layers=spec.sliding_layers, architecture=arch)


def positive_field(doc: dict, key: str, where: str, pointer: str = "") -> int:
    """doc[key] as an int > 0, else one line naming its pointer (`pointer`: doc's own, in config.json)."""
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InferlabError(f"{where}: {pointer}/{key} must be a positive integer, got {str(value)[:40]}")
    return value


def positive_number_field(doc: dict, key: str, where: str, default: float, pointer: str = "") -> float:
    """doc[key] as a float > 0 (default where absent), else one line naming its pointer."""
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InferlabError(f"{where}: {pointer}/{key} must be a positive number, got {str(value)[:40]}")
    return float(value)


def _rope(doc: dict, where: str) -> tuple[float, Llama3Scaling | None]:
    """(theta, llama3 scaling or None) from rope_parameters (transformers 5) or rope_theta/rope_scaling."""
    if isinstance(doc.get("rope_parameters"), dict):
        params, pointer = doc["rope_parameters"], "/rope_parameters"
        theta = positive_number_field(params, "rope_theta", where, doc.get("rope_theta", 10000.0), pointer)
    else:
        params, pointer = doc.get("rope_scaling") or {}, "/rope_scaling"
        theta = positive_number_field(doc, "rope_theta", where, 10000.0)
    if not isinstance(params, dict):
        raise InferlabError(f"{where}: {pointer} must be an object or null, got {type(params).__name__}")
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind != "llama3":
        raise InferlabError(f"{where}: {pointer}/rope_type {kind!r} is not supported (default or llama3)")
    for key in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
        if key not in params:
            raise InferlabError(f"{where}: {pointer}/{key} is missing for rope_type llama3")
    return theta, Llama3Scaling(
        factor=positive_number_field(params, "factor", where, None, pointer),
        low_freq_factor=positive_number_field(params, "low_freq_factor", where, None, pointer),
        high_freq_factor=positive_number_field(params, "high_freq_factor", where, None, pointer),
        original_max_position_embeddings=positive_field(params, "original_max_position_embeddings", where, pointer))


def load_hf_llama(folder, *, context: int | None = None) -> Llama:
    """A Llama / Qwen2 / Mistral folder as a float32 Llama (the module docstring says what is read)."""
    folder = Path(folder)
    where = str(folder / "config.json")
    config = llama_config(read_json_object(folder / "config.json"), where, context=context)
    params = params_from_hf(config, _tensors(folder), where=str(folder))
    try:
        return Llama(config, params)
    except InferlabError as exc:  # our parameter names: say the folder's, and which file set them
        raise InferlabError(f"{folder}: the weights do not fit config.json: {_hf_spelling(str(exc))}") from None


def _hf_spelling(message: str) -> str:
    """`message` with our parameter names (layers.1.down.w) spelled as the checkpoint's tensors."""
    top = {ours: theirs for theirs, ours in _TOP_NAMES.items()}

    def hf(m: re.Match) -> str:
        name = m.group(0)
        if name in top:
            return top[name]
        layer = _LAYER.match(name)
        if layer:
            theirs = [k for k, (ours, _) in _LAYER_NAMES.items() if ours == layer.group(2)]
            if theirs:
                return "/".join(f"model.layers.{layer.group(1)}.{t}" for t in theirs)
        return name
    return re.sub(r"\b(?:embed|norm|lm_head|layers\.\d+\.[a-z_]+\.?[wb]?)\b", hf, message)


def _tensors(folder: Path):
    for path in weight_files(folder):
        yield from iter_float32(path)


def params_from_hf(config: LlamaConfig, tensors, *, where: str = "weights") -> dict[str, np.ndarray]:
    """Our parameter dict from (transformers name, float32 array) pairs, fusing q/k/v and gate/up.

    Used by the loader (arrays streamed from safetensors) and by the benchmark (a transformers
    model's own tensors, shared without a copy where no fusion is needed)."""
    params: dict[str, np.ndarray] = {}
    pending: dict[str, list] = {}
    head = None
    for hf_name, array in tensors:
        if _BUFFERS.search(hf_name):
            continue
        if hf_name == "lm_head.weight" and config.tie_embeddings:
            head = array                        # some tied checkpoints save the head anyway
            continue
        ours, part = _our_name(hf_name, where)
        if part is None:
            params[ours] = array
            continue
        parts = pending.setdefault(ours, [None] * _PARTS[ours.split(".", 2)[2]])
        parts[part] = array
        if all(x is not None for x in parts):
            params[ours] = np.concatenate(parts, axis=0)        # q;k;v rows, or gate;up rows
            del pending[ours]
    if pending:
        raise InferlabError(f"{where}: {sorted(pending)[0]} is missing some of its parts (q/k/v or gate/up)")
    if head is not None and not np.array_equal(head, params.get("embed")):
        raise InferlabError(f"{where}: tie_word_embeddings is true but lm_head.weight differs from the embedding")
    return params


def _our_name(hf_name: str, where: str) -> tuple[str, int | None]:
    if hf_name in _TOP_NAMES:
        return _TOP_NAMES[hf_name], None
    m = _LAYER.match(hf_name.removeprefix("model."))
    if m and hf_name.startswith("model.") and m.group(2) in _LAYER_NAMES:
        ours, part = _LAYER_NAMES[m.group(2)]
        return f"layers.{m.group(1)}.{ours}", part
    raise InferlabError(f"{where}: unexpected tensor {hf_name!r} for a Llama-family model")

