"""Checkpoints: a random HF GPT2LMHeadModel gives the same logits and greedy tokens through our loader."""

import json

import numpy as np
import pytest

from inferlab.errors import InferlabError
from inferlab.model.checkpoints import load_hf_gpt2, load_model, save_model
from inferlab.model.config import GPTConfig
from inferlab.model.generate import SamplingConfig, decode_loop
from inferlab.model.gpt import GPT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=97, n_positions=64)
    hf = transformers.GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("gpt2")
    hf.save_pretrained(folder, safe_serialization=True)
    return folder, hf


def test_hf_gpt2_logits_match_transformers(hf_folder):
    folder, hf = hf_folder
    model = load_hf_gpt2(folder)
    assert model.config == GPTConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, context=64)
    ids = np.random.default_rng(0).integers(0, 97, 40)
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids)[None]).logits[0].numpy()
    np.testing.assert_allclose(model.forward(ids), ref, atol=1e-4, rtol=0)
    # the cached decode path too
    cache = model.new_cache()
    np.testing.assert_allclose(np.concatenate([model.decode(ids[:30], cache)] + [model.decode([t], cache) for t in ids[30:]]),
                               ref, atol=1e-4, rtol=0)


def test_hf_gpt2_greedy_tokens_match_transformers(hf_folder):
    folder, hf = hf_folder
    model = load_model(folder).model
    prompt = [5, 17, 42, 3]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=30, min_new_tokens=30,
                          pad_token_id=0)[0, len(prompt):].tolist()
    tokens, reason, _ = decode_loop(model, prompt, eos_id=None, max_new_tokens=30, sampling=SamplingConfig(0.0))
    assert tokens == ref and reason == "max_new_tokens"


def test_own_round_trip(tmp_path):
    model = GPT.init(GPTConfig(vocab_size=50, d_model=16, n_heads=2, n_layers=2, context=20, n_kv_heads=1), seed=1)
    out = save_model(model, None, tmp_path / "m")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    back = load_model(out)
    assert back.model.config == model.config and back.trained and back.tokenizer is None
    for name, value in model.params.items():
        np.testing.assert_array_equal(back.model.params[name], value)
    with pytest.raises(InferlabError, match="--force"):
        save_model(model, None, out)                      # never overwrite silently
    save_model(model, None, out, force=True)


@pytest.mark.parametrize("edit, word", [
    ({"activation_function": "relu"}, "activation_function"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ({"n_embd": None}, "n_embd"),
    # JSON integers only (a fuzz: true was read as 1, 64.7 as 64, "4" as 4; a bad string named no field)
    ({"n_head": True}, "/n_head must be a positive integer, got True"),
    ({"n_embd": 64.7}, "/n_embd must be a positive integer, got 64.7"),
    ({"n_inner": "4"}, "/n_inner must be a positive integer, got 4"),
    ({"layer_norm_epsilon": "abc"}, "/layer_norm_epsilon must be a positive number, got abc"),
])
def test_hf_config_refusals(hf_folder, tmp_path, edit, word):
    folder, _ = hf_folder
    doc = json.loads((folder / "config.json").read_text())
    doc.update(edit)
    if edit.get("n_embd", 0) is None:
        del doc["n_embd"]
    (tmp_path / "config.json").write_text(json.dumps(doc))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(InferlabError, match=word):
        load_model(tmp_path)


def test_missing_and_foreign_folders(tmp_path):
    with pytest.raises(InferlabError, match="not found"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(InferlabError, match="model_type"):
        load_model(tmp_path)


def test_hub_layout_without_prefix_and_with_mask_buffers(hf_folder, tmp_path):
    """The original gpt2 hub files name tensors without "transformer." and carry attn.bias buffers."""
    import safetensors.numpy

    folder, hf = hf_folder
    tensors = safetensors.numpy.load_file(str(folder / "model.safetensors"))
    hub = {name.removeprefix("transformer."): t for name, t in tensors.items()}
    for i in range(2):
        hub[f"h.{i}.attn.bias"] = np.tril(np.ones((64, 64), np.float32))[None, None]
    safetensors.numpy.save_file(hub, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_bytes((folder / "config.json").read_bytes())
    ids = np.arange(20) % 97
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids)[None]).logits[0].numpy()
    np.testing.assert_allclose(load_hf_gpt2(tmp_path).forward(ids), ref, atol=1e-4, rtol=0)
    hub["h.0.attn.rotary"] = np.zeros(3, np.float32)               # not GPT-2: refused, named
    safetensors.numpy.save_file(hub, str(tmp_path / "model.safetensors"))
    with pytest.raises(InferlabError, match="h.0.attn.rotary"):
        load_hf_gpt2(tmp_path)
