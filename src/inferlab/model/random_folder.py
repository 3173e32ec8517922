"""Random-weight Hugging Face folders of real Llama-family shapes, written without torch.

A model's speed and memory depend on its shape, not on its weights, so the labs and benchmarks
measure real shapes (Qwen2.5-0.5B, SmolLM2, Llama 3.2) from folders written here: config.json and
model.safetensors (or shards with model.safetensors.index.json) in bf16, fp16 or f32, with
transformers' tensor names, one tensor generated and written at a time. hf_llama.load_hf_llama
and transformers read them alike.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.measure.artifacts import dumps_json
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
    """Write config.json and N(0, 0.02) weights (norms 1, biases 0) for `config` into the new
    folder `out`, and, given a Tokenizer (e.g. load_vocab("qwen"): Qwen2's vocabulary), its
    tokenizer.json and a tokenizer_config.json naming its EOS. The folder appears whole or not
    at all (written beside it, then renamed); files follow the umask. Returns the folder."""
    if dtype not in _DTYPES:
        raise InferlabError(f"dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
    out = Path(out)
    if out.exists():
        raise InferlabError(f"{out} exists; a random model folder is written only into a new folder")
    if tokenizer is not None and tokenizer.vocab_size > config["vocab_size"]:
        raise InferlabError(f"the tokenizer has {tokenizer.vocab_size} ids, more than /vocab_size {config['vocab_size']}")
    shapes = hf_tensor_shapes(config)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        _write_files(tmp, config, shapes, dtype, np.random.default_rng(seed), max_shard_bytes, tokenizer)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)                     # mkdtemp makes it 0700
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_files(folder: Path, config: dict, shapes: dict, dtype: str, rng, max_shard_bytes, tokenizer) -> None:
    itemsize = 2 if dtype != "float32" else 4
    shards = _plan_shards(shapes, itemsize, max_shard_bytes)
    names = ([f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors" for k in range(len(shards))]
             if len(shards) > 1 else ["model.safetensors"])
    for file_name, shard in zip(names, shards):
        _write_shard(folder / file_name, {n: shapes[n] for n in shard}, dtype, rng)
    docs = {"config.json": {**config, "torch_dtype": dtype}}
    if len(shards) > 1:
        docs["model.safetensors.index.json"] = {
            "metadata": {"total_size": sum(int(np.prod(s)) * itemsize for s in shapes.values())},
            "weight_map": {n: f for f, shard in zip(names, shards) for n in shard}}
    if tokenizer is not None:
        docs["tokenizer.json"] = tokenizer.to_hf_json(pattern="llama3" if tokenizer.pattern == "cl100k" else None)
        docs["tokenizer_config.json"] = {"eos_token": next(t for t, i in tokenizer.special_tokens.items()
                                                          if i == tokenizer.eos_id)}
    for name, doc in docs.items():
        (folder / name).write_text(dumps_json(doc), encoding="utf-8")


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


def main(argv=None) -> int:
    """python -m inferlab.model.random_folder OUT [--vocab qwen]: a Qwen2.5-0.5B-shaped folder."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m inferlab.model.random_folder",
                                description="write a random-weight Qwen2.5-0.5B-shaped Hugging Face folder")
    p.add_argument("out", type=Path, help="the new folder")
    p.add_argument("--dtype", choices=sorted(_DTYPES), default="bfloat16")
    p.add_argument("--vocab", help="also write this vocabulary's tokenizer.json: qwen, cl100k (as Llama 3 "
                                   "style), 512 or a tokenizer.json path")
    p.add_argument("--shard-mb", type=int, help="shards of at most this many MB (default one file)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        tokenizer = None
        if args.vocab is not None:
            from inferlab.model.tokenizer_loaders import load_vocab

            tokenizer = load_vocab(args.vocab)
        if args.shard_mb is not None and args.shard_mb <= 0:
            raise InferlabError(f"--shard-mb must be positive, got {args.shard_mb}")
        write_random_folder(args.out, QWEN25_05B, dtype=args.dtype, seed=args.seed, tokenizer=tokenizer,
                            max_shard_bytes=args.shard_mb and args.shard_mb * 1_000_000)
    except InferlabError as exc:
        print(f"random_folder: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
