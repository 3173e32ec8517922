"""Checkpoints: our own model folders, and Hugging Face GPT-2 and Llama-family folders, read without
torch or pickle (Llama, Qwen2, Mistral: model/hf_llama.py).

Our folder: config.json ({"format": "inferlab-gpt", "config": GPTConfig fields}), model.safetensors
(the flat parameter dict under our names) and tokenizer.json; a trainer may add manifest.json.

A Hugging Face GPT-2 folder: config.json (model_type "gpt2") and model.safetensors, read with the
safetensors library's numpy API. GPT-2's Conv1D weights are already stored (in, out), our layout,
so the mapping is a renaming (HF_NAMES). A tokenizer.json beside them is loaded when present.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import safetensors.numpy

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.measure.artifacts import ExperimentWriter
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT
from inferlab.model.hf_llama import (is_llama_family, llama_config, load_hf_llama, positive_field,
                                     positive_number_field)
from inferlab.model.llama import ARCHITECTURES, Llama

FORMAT = "inferlab-gpt"
FORMAT_VERSION = 1
DEFAULT_SEED = 0    # the seeded random initialisation used while no trained MiniGPT is shipped

# HF GPT-2 parameter name -> ours ({i} is the layer); the LM head is tied to wte in both.
HF_NAMES = {
    "wte.weight": "wte", "wpe.weight": "wpe", "ln_f.weight": "ln_f.g", "ln_f.bias": "ln_f.b",
    "h.{i}.ln_1.weight": "h.{i}.ln_1.g", "h.{i}.ln_1.bias": "h.{i}.ln_1.b",
    "h.{i}.attn.c_attn.weight": "h.{i}.attn.c_attn.w", "h.{i}.attn.c_attn.bias": "h.{i}.attn.c_attn.b",
    "h.{i}.attn.c_proj.weight": "h.{i}.attn.c_proj.w", "h.{i}.attn.c_proj.bias": "h.{i}.attn.c_proj.b",
    "h.{i}.ln_2.weight": "h.{i}.ln_2.g", "h.{i}.ln_2.bias": "h.{i}.ln_2.b",
    "h.{i}.mlp.c_fc.weight": "h.{i}.mlp.c_fc.w", "h.{i}.mlp.c_fc.bias": "h.{i}.mlp.c_fc.b",
    "h.{i}.mlp.c_proj.weight": "h.{i}.mlp.c_proj.w", "h.{i}.mlp.c_proj.bias": "h.{i}.mlp.c_proj.b",
}
# Buffers older GPT-2 checkpoints carry: the causal mask (rebuilt on the fly here), not parameters.
_HF_BUFFERS = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
# GPT-2's tanh-approximated GELU under its two config names; anything else is refused, not guessed.
_HF_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")


@dataclass(frozen=True)
class Checkpoint:
    model: GPT | Llama
    tokenizer: object | None    # inferlab.model.tokenizer.Tokenizer, or None when the folder has none
    trained: bool               # False: seeded random weights, not a trained model
    source: str                 # the folder read, or a description of the random initialisation


def default_model_dir() -> Path:
    return Path(str(resources.files("inferlab").joinpath("data/minigpt")))


def load_default_model() -> Checkpoint:
    """The shipped MiniGPT (src/inferlab/data/minigpt/); until it is trained and shipped, a seeded
    random initialisation of GPTConfig() with the default 512-token vocabulary, trained=False."""
    folder = default_model_dir()
    if (folder / "config.json").is_file():
        return load_model(folder)
    tokenizer = _load_tokenizer(folder)     # the shipped vocabulary is trained before the model
    if tokenizer is None:
        raise InferlabError(f"no default vocabulary: {folder / 'tokenizer.json'} is not built yet")
    return Checkpoint(GPT.init(GPTConfig(vocab_size=tokenizer.vocab_size), seed=DEFAULT_SEED), tokenizer,
                      trained=False,
                      source=f"random initialisation (seed {DEFAULT_SEED}): no trained model in {folder}")


def load_model(folder, *, context: int | None = None) -> Checkpoint:
    """Load our folder, a Hugging Face GPT-2 folder or a Llama / Qwen2 / Mistral one, told apart by
    config.json. `context` (Llama family only) is the positions to serve, default min(max, 4096)."""
    folder = Path(folder)
    config = _read_json(folder / "config.json")
    kind = _kind(config, folder)
    if kind == "own":
        model = _load_own(folder, config)
    elif kind == "gpt2":
        model = load_hf_gpt2(folder)
    else:
        model = load_hf_llama(folder, context=context)
    tokenizer = _load_tokenizer(folder)
    if tokenizer is not None:
        tokenizer.pad_to(model.config.vocab_size)   # masks cover every row of the LM head
    return Checkpoint(model, tokenizer, trained=True, source=str(folder))


def check_model_folder(folder) -> None:
    """What load_model refuses in config.json and tokenizer.json, without reading any weight: for
    a command that loads the model only after minutes of other work (mask-overhead --model)."""
    folder = Path(folder)
    config = _read_json(folder / "config.json")
    kind, where = _kind(config, folder), str(folder / "config.json")
    if kind == "own":
        _own_config(folder, config)
    elif kind == "gpt2":
        hf_gpt2_config(config, where)
    elif kind == "llama":
        llama_config(config, where)
    _load_tokenizer(folder)


def _kind(config: dict, folder: Path) -> str:
    """'own', 'gpt2' or 'llama': which loader reads this config.json."""
    if config.get("format") == FORMAT:
        return "own"
    if config.get("model_type") == "gpt2":
        return "gpt2"
    if is_llama_family(config):
        return "llama"
    raise InferlabError(f"{folder / 'config.json'}: neither an inferlab model (format {FORMAT!r}), "
                        f"a GPT-2 model (model_type 'gpt2') nor one of /architectures "
                        f"{', '.join(ARCHITECTURES)}")


def save_model(model: GPT, tokenizer, out, *, force: bool = False, manifest: dict | None = None) -> Path:
    """Write our folder atomically (all files or none); an existing folder needs force=True."""
    return model_writer(model, tokenizer, out, force=force, manifest=manifest).commit()


def model_writer(model: GPT, tokenizer, out, *, force: bool = False, manifest: dict | None = None) -> ExperimentWriter:
    """Our folder's files collected but not yet written: a caller adds its own (a training
    report, a loss curve) and commits them all at once."""
    writer = ExperimentWriter(Path(out), force=force)
    writer.add_json("config.json", {"format": FORMAT, "format_version": FORMAT_VERSION,
                                    "config": dataclasses.asdict(model.config)})
    writer.add_bytes("model.safetensors", safetensors.numpy.save(model.params, metadata={"format": FORMAT}))
    if tokenizer is not None:
        writer.add_json("tokenizer.json", tokenizer.to_hf_json())
    if manifest is not None:
        writer.add_json("manifest.json", manifest)
    return writer


def _load_own(folder: Path, doc: dict) -> GPT:
    return GPT(_own_config(folder, doc), _read_safetensors(folder / "model.safetensors"))


def _own_config(folder: Path, doc: dict) -> GPTConfig:
    if doc.get("format_version") != FORMAT_VERSION:
        raise InferlabError(f"{folder / 'config.json'}: /format_version {doc.get('format_version')!r} "
                            f"is not supported (expected {FORMAT_VERSION})")
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    raw = doc.get("config")
    if not isinstance(raw, dict) or set(raw) - fields:
        raise InferlabError(f"{folder / 'config.json'}: /config must hold only GPTConfig fields {sorted(fields)}")
    try:
        return GPTConfig(**raw)
    except (TypeError, ValueError) as exc:
        raise InferlabError(f"{folder / 'config.json'}: /config: {exc}") from None


def hf_gpt2_config(doc: dict, where: str = "config.json") -> GPTConfig:
    """GPTConfig from a Hugging Face GPT-2 config.json, refusing what this engine does not run."""
    act = doc.get("activation_function", "gelu_new")
    if act not in _HF_ACTIVATIONS:
        raise InferlabError(f"{where}: /activation_function {act!r} is not supported "
                            f"(only GPT-2's tanh GELU: {', '.join(_HF_ACTIVATIONS)})")
    for key, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                    ("add_cross_attention", False)):
        if doc.get(key, ok) != ok:
            raise InferlabError(f"{where}: /{key} = {doc[key]!r} is not supported (expected {ok!r})")
    # JSON integers only: int() would read true as 1, 64.7 as 64 and "4" as 4
    sizes = {key: positive_field(doc, key, where) for key in ("vocab_size", "n_embd", "n_head", "n_layer", "n_positions")}
    d_ff = positive_field(doc, "n_inner", where) if doc.get("n_inner") is not None else None
    try:
        return GPTConfig(vocab_size=sizes["vocab_size"], d_model=sizes["n_embd"], n_heads=sizes["n_head"],
                         n_layers=sizes["n_layer"], context=sizes["n_positions"], d_ff=d_ff,
                         ln_eps=positive_number_field(doc, "layer_norm_epsilon", where, 1e-5))
    except ValueError as exc:   # GPTConfig's own checks (n_embd divisible by n_head, ...)
        raise InferlabError(f"{where}: {exc}") from None


def load_hf_gpt2(folder) -> GPT:
    """A GPT2LMHeadModel folder (config.json + model.safetensors) as our GPT, float32."""
    folder = Path(folder)
    config = hf_gpt2_config(_read_json(folder / "config.json"), str(folder / "config.json"))
    tensors = _read_safetensors(folder / "model.safetensors")
    tensors = {name.removeprefix("transformer."): t for name, t in tensors.items()}
    head = tensors.pop("lm_head.weight", None)
    if head is not None and not np.array_equal(head, tensors.get("wte.weight")):
        raise InferlabError(f"{folder / 'model.safetensors'}: lm_head.weight differs from wte.weight; "
                            "only GPT-2's tied LM head is supported")
    params = {}
    for name, t in tensors.items():
        if _HF_BUFFERS.match(name):
            continue
        ours = _hf_to_ours(name)
        if ours is None:
            raise InferlabError(f"{folder / 'model.safetensors'}: unexpected tensor {name!r} for GPT-2")
        params[ours] = t.astype(np.float32)
    return GPT(config, params)


def _hf_to_ours(name: str) -> str | None:
    m = re.match(r"^h\.(\d+)\.(.+)$", name)
    key, layer = (f"h.{{i}}.{m.group(2)}", m.group(1)) if m else (name, None)
    ours = HF_NAMES.get(key)
    return None if ours is None else ours.replace("{i}", layer or "")


def _load_tokenizer(folder: Path):
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    from inferlab.model.tokenizer_loaders import load_vocab

    return load_vocab(str(path))


def _read_json(path: Path) -> dict:
    return read_json_object(path, missing="not found (a model folder holds config.json and model.safetensors)")


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        return safetensors.numpy.load_file(str(path))
    except FileNotFoundError:
        raise InferlabError(f"{path} not found") from None
    except Exception as exc:   # safetensors raises its own SafetensorError, and TypeError for bf16
        raise InferlabError(f"{path}: cannot read as safetensors ({type(exc).__name__}: {exc})") from None
