"""Random-weight Hugging Face folders of real Llama-family shapes, written without torch.

A model's speed and memory depend on its shape, not on its weights, so the labs and benchmarks
measure real shapes (Qwen2.5-0.5B, SmolLM2, Llama 3.2) from folders written here: config.json and
model.safetensors (or shards with model.safetensors.index.json) in bf16, fp16 or f32, with
transformers' tensor names, one tensor generated and written at a time. hf_llama.load_hf_llama
and transformers read them alike.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.measure.artifacts import atomic_write_json
from inferlab.model.hf_llama import llama_config
from inferlab.model.llama import random_tensor

# Qwen/Qwen2.5-0.5B config.json: the fields that set the shape and the arithmetic.
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
    "tie_word_embeddings": True, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "use_sliding_window": False, "sliding_window": None,
}
_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def hf_tensor_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """transformers' tensor names and shapes for a Llama / Qwen2 / Mistral config.json."""
    c = llama_config(config, "config")
    d, dh = c.d_model, c.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c.vocab_size, d)}
    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (d,)
        for proj, heads in (("q", c.n_heads), ("k", c.n_kv_heads), ("v", c.n_kv_heads)):
            shapes[p + f"self_attn.{proj}_proj.weight"] = (heads * dh, d)
            if c.qkv_bias:
                shapes[p + f"self_attn.{proj}_proj.bias"] = (heads * dh,)
        shapes[p + "self_attn.o_proj.weight"] = (d, c.n_heads * dh)
        if c.o_bias:
            shapes[p + "self_attn.o_proj.bias"] = (d,)
        shapes[p + "post_attention_layernorm.weight"] = (d,)
        shapes[p + "mlp.gate_proj.weight"] = (c.d_ff, d)
        shapes[p + "mlp.up_proj.weight"] = (c.d_ff, d)
        shapes[p + "mlp.down_proj.weight"] = (d, c.d_ff)
    shapes["model.norm.weight"] = (d,)
    if not c.tie_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, d)
    return shapes


def write_random_folder(out, config: dict, *, dtype: str = "bfloat16", seed: int = 0,
                        max_shard_bytes: int | None = None, tokenizer=None) -> Path:
    """Write config.json and N(0, 0.02) weights (norms 1, biases 0) for `config` into `out`
    (a new or empty folder), and, given a Tokenizer (e.g. load_vocab("qwen"): Qwen2's vocabulary),
    its tokenizer.json and a tokenizer_config.json naming its EOS. Returns the folder."""
    if dtype not in _DTYPES:
        raise InferlabError(f"dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InferlabError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    shapes = hf_tensor_shapes(config)
    itemsize = 2 if dtype != "float32" else 4
    shards = _plan_shards(shapes, itemsize, max_shard_bytes)
    rng = np.random.default_rng(seed)
    names = ([f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors" for k in range(len(shards))]
             if len(shards) > 1 else ["model.safetensors"])
    for file_name, shard in zip(names, shards):
        _write_shard(out / file_name, {n: shapes[n] for n in shard}, dtype, rng)
    if len(shards) > 1:
        atomic_write_json(out / "model.safetensors.index.json", {
            "metadata": {"total_size": sum(int(np.prod(s)) * itemsize for s in shapes.values())},
            "weight_map": {n: f for f, shard in zip(names, shards) for n in shard}})
    if tokenizer is not None:
        if tokenizer.vocab_size > config["vocab_size"]:
            raise InferlabError(f"the tokenizer has {tokenizer.vocab_size} ids, more than /vocab_size {config['vocab_size']}")
        atomic_write_json(out / "tokenizer.json", tokenizer.to_hf_json())
        eos = next(t for t, i in tokenizer.special_tokens.items() if i == tokenizer.eos_id)
        atomic_write_json(out / "tokenizer_config.json", {"eos_token": eos})
    atomic_write_json(out / "config.json", {**config, "torch_dtype": dtype})
    return out


def _plan_shards(shapes: dict, itemsize: int, max_shard_bytes: int | None) -> list[list[str]]:
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes.items():
        nbytes = int(np.prod(shape)) * itemsize
        if max_shard_bytes is not None and shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def _kind(name: str) -> str:
    return "norm" if name.endswith("norm.weight") else "bias" if name.endswith(".bias") else "weight"


def _write_shard(path: Path, shapes: dict, dtype: str, rng: np.random.Generator) -> None:
    """safetensors layout: header length, JSON header, then each tensor's bytes in order."""
    itemsize = 2 if dtype != "float32" else 4
    header, offset = {}, 0
    for name, shape in shapes.items():
        nbytes = int(np.prod(shape)) * itemsize
        header[name] = {"dtype": _DTYPES[dtype], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode("utf-8")
    raw += b" " * (-len(raw) % 8)                     # the format pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in shapes.items():
            w = random_tensor(_kind(name), shape, rng)
            if dtype == "bfloat16":                   # round to nearest even, keep the top 16 bits
                bits = w.view(np.uint32)
                bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
                w = (bits >> np.uint32(16)).astype(np.uint16)
            elif dtype == "float16":
                w = w.astype(np.float16)
            f.write(w.tobytes())
