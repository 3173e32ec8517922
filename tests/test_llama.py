"""Llama / Qwen2 / Mistral folders saved by transformers load into our numpy engine and agree with
transformers' own float32 forward (the oracle): logits, cached decode, greedy tokens, KV bytes."""

import json

import numpy as np
import pytest

from inferlab.cli import main
from inferlab.errors import InferlabError
from inferlab.model.checkpoints import load_model
from inferlab.model.generate import SamplingConfig, decode_loop
from inferlab.model.hf_llama import llama_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 320
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
WINDOW = 8
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def _randomize(model):
    """transformers initialises norms to 1 and biases to 0; random values test that they are read."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))


# name -> (config class, model class, config kwargs, saved dtype, save_pretrained kwargs)
CASES = {
    # Llama 3.x: untied head, llama3 rope scaling, attention_bias (q, k, v and o), saved in bf16
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(rope_scaling=LLAMA3, rope_theta=500000.0, attention_bias=True), torch.bfloat16, {}),
    # Qwen2.5: QKV bias, tied embeddings, rope_theta 1e6, saved sharded
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True, rope_theta=1e6),
              torch.float32, dict(max_shard_size="40KB")),
    # Mistral: every layer slides over an 8-token window; fp16 weights
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=WINDOW), torch.float16, {}),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(name, folder, the folder loaded by transformers in float32: the oracle)."""
    name = request.param
    config_cls, model_cls, extra, dtype, save = CASES[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**SHAPE, **extra)
    config._attn_implementation = "eager"        # the eager path applies the sliding window exactly
    hf = getattr(transformers, model_cls)(config).eval()
    _randomize(hf)
    hf = hf.to(dtype)
    folder = tmp_path_factory.mktemp(name)
    hf.save_pretrained(folder, **save)
    # reloaded rather than hf.float(): .to(bf16) also rounds the RoPE inv_freq buffer, which a
    # float32 load of the folder recomputes, as we do
    oracle = getattr(transformers, model_cls).from_pretrained(folder, dtype=torch.float32,
                                                               attn_implementation="eager").eval()
    return name, folder, oracle


def _hf_logits(hf, ids):
    with torch.no_grad():
        return hf(torch.tensor(ids)[None]).logits[0].numpy()                 # (T, V)


def _sequences():
    rng = np.random.default_rng(1)
    return [rng.integers(0, VOCAB, n) for n in (1, 7, 33, 90)]


def test_folder_is_what_the_case_says(case):
    name, folder, _ = case
    names = sorted(p.name for p in folder.iterdir())
    if name == "qwen2":
        assert "model.safetensors.index.json" in names and sum(n.endswith(".safetensors") for n in names) > 1
    else:
        from safetensors.torch import load_file

        dtypes = {t.dtype for t in load_file(folder / "model.safetensors").values()}
        assert dtypes == ({torch.bfloat16} if name == "llama" else {torch.float16})


def test_logits_match_transformers(case):
    name, folder, hf = case
    model = load_model(folder).model
    for ids in _sequences():
        ref = _hf_logits(hf, ids)
        got = model.forward(ids)
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), (name, len(ids))


def test_cached_decode_matches_transformers(case):
    """Prefill, then one token at a time, in both caches: the Mistral sequence runs 11x past its window."""
    name, folder, hf = case
    model = load_model(folder).model
    ids = _sequences()[-1]
    ref = _hf_logits(hf, ids)
    for kind in ("contiguous", "paged"):
        cache = model.new_cache(kind)
        got = np.concatenate([model.decode(ids[:5], cache)] + [model.decode([t], cache) for t in ids[5:]])
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), (name, kind)


def test_sliding_window_changes_logits_past_the_window(case):
    """The window is not vacuous: the same model without it disagrees once the sequence passes it."""
    name, folder, hf = case
    if name != "mistral":
        pytest.skip("only Mistral slides")
    model = load_model(folder).model
    assert model.config.sliding_layers == (0, 1, 2) and model.config.sliding_window == WINDOW
    ids = _sequences()[-1]
    full = model.forward(ids)
    object.__setattr__(model.config, "sliding_window", None)    # the same weights, global attention
    try:
        unwindowed = model.forward(ids)
    finally:
        object.__setattr__(model.config, "sliding_window", WINDOW)
    np.testing.assert_array_equal(full[:WINDOW], unwindowed[:WINDOW])   # inside the window: identical
    assert np.abs(full[WINDOW:] - unwindowed[WINDOW:]).max() > 1e-2


def test_greedy_50_tokens_contiguous_paged_and_transformers_agree(case):
    name, folder, hf = case
    model = load_model(folder).model
    prompt = [5, 17, 42, 3, 99]
    runs = {kind: decode_loop(model, prompt, eos_id=None, max_new_tokens=50, sampling=SamplingConfig(0.0),
                              cache_kind=kind)[0] for kind in ("contiguous", "paged")}
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=50, min_new_tokens=50,
                          pad_token_id=0, eos_token_id=None, use_cache=True)[0, len(prompt):].tolist()
    assert runs["contiguous"] == runs["paged"] == ref and len(ref) == 50


@pytest.mark.parametrize("dtype, flag", [(np.float32, "fp32"), (np.float16, "fp16")])
def test_kv_cache_nbytes_equals_kv_size(case, capsys, dtype, flag):
    """Our allocated cache = `inferlab kv size --config DIR/config.json` at the same dtype.

    Mistral's sliding layers are sized within the window, where no rolling buffer caps kv size's
    figure (our cache keeps every position; kv size assumes a rolling buffer past the window)."""
    name, folder, _ = case
    model = load_model(folder).model
    ctx = WINDOW if name == "mistral" else 200
    assert main(["kv", "size", "--config", str(folder / "config.json"), "--ctx", str(ctx),
                 "--dtype", flag, "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["totals"][0]["bytes"]
    assert model.new_cache("contiguous", max_seq=ctx, dtype=dtype).nbytes == expected
    paged = model.new_cache("paged", max_seq=ctx, dtype=dtype, block_size=WINDOW)
    model.decode(list(range(ctx)), paged)
    assert paged.nbytes == expected


def test_fp16_cache_decodes_close_to_fp32(case):
    name, folder, _ = case
    model = load_model(folder).model
    ids = _sequences()[2]
    ref = model.forward(ids)
    got = model.decode(ids, model.new_cache(dtype=np.float16))
    assert np.abs(got - ref).max() <= 1e-2 * np.abs(ref).max()


def test_context_defaults_to_min_of_max_position_and_4096(case):
    _, folder, _ = case
    assert load_model(folder).model.config.context == 512
    assert load_model(folder, context=100).model.config.context == 100
    with pytest.raises(InferlabError, match="max_position_embeddings"):
        load_model(folder, context=513)


@pytest.mark.parametrize("patch, needle", [
    ({"architectures": ["PhiForCausalLM"]}, "/architectures"),
    ({"hidden_act": "gelu"}, "/hidden_act"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "/rope_parameters/rope_type"),
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}}, "low_freq_factor"),
    ({"intermediate_size": None}, "/intermediate_size"),
    # a CLI audit's fields of the wrong type: AttributeError / ValueError tracebacks before
    ({"rope_scaling": 5}, "/rope_scaling must be an object or null"),
    ({"rope_theta": "abc"}, "/rope_theta must be a positive number"),
    ({"rms_norm_eps": "x"}, "/rms_norm_eps must be a positive number"),
    ({"rope_scaling": {**LLAMA3, "factor": "x"}}, "/rope_scaling/factor must be a positive number"),
    ({"rope_scaling": {**LLAMA3, "original_max_position_embeddings": 0}},
     "/rope_scaling/original_max_position_embeddings must be a positive integer"),
])
def test_bad_config_is_one_line_naming_the_field(patch, needle):
    doc = {"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32, **patch}
    with pytest.raises(InferlabError, match=needle):
        llama_config(doc, "config.json")


def test_missing_weights_are_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
         "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32}))
    with pytest.raises(InferlabError, match="model.safetensors"):
        load_model(tmp_path)


def test_random_folder_is_read_alike_by_transformers_and_us(tmp_path):
    """write_random_folder (no torch) in bf16, sharded: transformers and our loader agree on it."""
    from inferlab.model.random_folder import write_random_folder

    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **SHAPE, "tie_word_embeddings": False,
              "rope_theta": 1e6}
    folder = write_random_folder(tmp_path / "m", config, dtype="bfloat16", seed=3, max_shard_bytes=30_000)
    assert (folder / "model.safetensors.index.json").is_file()
    oracle = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = _sequences()[2]
    ref = _hf_logits(oracle, ids)
    assert np.abs(load_model(folder).model.forward(ids) - ref).max() <= 1e-4 * np.abs(ref).max()
    with pytest.raises(InferlabError, match="exists"):
        write_random_folder(folder, config)


def test_step_flops_hand_derived():
    """One layer, d 8, 2 heads of 4, 1 KV head, d_ff 16, V 10; decode 1 token against 5 keys:
    qkv 2*8*(2+2)*4 = 256, scores+av 2*2*2*5*4 = 160, out 2*8*8 = 128, MLP 2*3*8*16 = 768, head 2*8*10 = 160."""
    from inferlab.model.llama import LlamaConfig, step_flops

    c = LlamaConfig(vocab_size=10, d_model=8, n_heads=2, n_kv_heads=1, n_layers=1, d_ff=16, head_dim=4,
                    context=32, max_position=32)
    assert step_flops(c, 1, 5) == 256 + 160 + 128 + 768 + 160
    windowed = LlamaConfig(**{**c.__dict__, "sliding_window": 3, "sliding_layers": (0,)})
    assert step_flops(windowed, 1, 5) == 256 + 2 * 2 * 2 * 3 * 4 + 128 + 768 + 160


def _safetensors_file(path, header: dict, data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


def test_safetensors_reader_widens_bf16_and_f16_exactly(tmp_path):
    from inferlab.model.safetensors_io import iter_float32

    values = np.array([1.0, -2.5, 3.140625, 65280.0], np.float32)            # exact in bf16 and f16
    bf16 = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    f16 = values.astype("<f2").tobytes()
    _safetensors_file(tmp_path / "m.safetensors", {
        "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
        "b": {"dtype": "F16", "shape": [4], "data_offsets": [8, 16]}}, bf16 + f16)
    got = dict(iter_float32(tmp_path / "m.safetensors"))
    np.testing.assert_array_equal(got["a"], values.reshape(2, 2))
    np.testing.assert_array_equal(got["b"], values)
    assert got["a"].dtype == got["b"].dtype == np.float32


@pytest.mark.parametrize("header, data, needle", [
    ({"a": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}}, b"\0\0", "dtype 'I8'"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "truncated"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "8 bytes for shape"),
    # header entries of the wrong shape (a fuzz: TypeError / ValueError tracebacks before)
    ({"a": 5}, b"", "'a''s header entry is not"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": "x"}}, b"", "'a''s header entry is not"),
    ({"a": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4, "'a''s header entry is not"),
    ([1, 2], b"", "header is not a JSON object"),
])
def test_safetensors_reader_names_the_problem(tmp_path, header, data, needle):
    from inferlab.model.safetensors_io import iter_float32

    _safetensors_file(tmp_path / "m.safetensors", header, data)
    with pytest.raises(InferlabError, match=needle):
        list(iter_float32(tmp_path / "m.safetensors"))


def test_sharded_index_names_a_missing_shard(tmp_path):
    from inferlab.model.safetensors_io import weight_files

    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "part-1.safetensors"}}))
    with pytest.raises(InferlabError, match="part-1.safetensors not found"):
        weight_files(tmp_path)
    for value, needle in ((5, "/weight_map/a must be the file name of a shard"), ("../x", "/weight_map/a must be"),
                          ("[" * 6000, "nested deeper than 5,000")):
        doc = json.dumps({"weight_map": {"a": value}}) if value != "[" * 6000 else value
        (tmp_path / "model.safetensors.index.json").write_text(doc)
        with pytest.raises(InferlabError, match=needle):
            weight_files(tmp_path)


@pytest.mark.parametrize("patch, needle", [
    ({"num_hidden_layers": 4}, "missing ['model.layers.3."),
    ({"intermediate_size": 2 * SHAPE["intermediate_size"]},
     "model.layers.0.mlp.gate_proj.weight/model.layers.0.mlp.up_proj.weight has shape (192, 64), expected (384, 64)"),
])
def test_weights_that_do_not_fit_the_config_name_the_folder_and_tensor(tmp_path, patch, needle):
    """A config.json edited after the weights were saved: one line naming the folder and the
    checkpoint's own tensor name (not our fused parameter names)."""
    from inferlab.model.random_folder import write_random_folder

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **SHAPE}
    folder = write_random_folder(tmp_path / "m", config, seed=0)
    doc = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**doc, **patch}))
    with pytest.raises(InferlabError) as exc:
        load_model(folder)
    message = str(exc.value)
    assert message.startswith(f"{folder}: the weights do not fit config.json") and needle in message
