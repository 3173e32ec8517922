"""Training: the batched forward against GPT.forward, every gradient against finite differences,
the optimiser and schedule against hand-derived values, a short run, and the shipped weights."""

import json
import math

import jsonschema
import numpy as np
import pytest

from inferlab.measure.machine import blas_threads
from inferlab.model import corpus
from inferlab.model import train as tr
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT


def tiny_config(**kw):
    base = dict(vocab_size=13, d_model=8, n_heads=2, n_layers=2, context=8)
    base.update(kw)
    return GPTConfig(**base)


def test_batched_forward_equals_engine_forward():
    config = GPTConfig(context=64)
    model = GPT.init(config, seed=3)
    ids = np.random.default_rng(0).integers(0, config.vocab_size, size=(3, 40))   # (B, T)
    logits, _ = tr.forward(model.params, config, ids)                               # (B, T, V)
    for row in range(3):
        np.testing.assert_allclose(logits[row], model.forward(ids[row]), rtol=1e-4, atol=1e-5)


def test_gradients_match_finite_differences_float64():
    config = tiny_config()
    rng = np.random.default_rng(1)
    # Perturbed away from GPT.init (unit gains, zero biases) so every parameter's gradient matters.
    params = {k: v.astype(np.float64) + rng.normal(0.0, 0.1, v.shape)
              for k, v in GPT.init(config, seed=1).params.items()}
    ids = rng.integers(0, config.vocab_size, size=(3, 6))                            # (B, T)
    targets = rng.integers(0, config.vocab_size, size=(3, 6))
    weights = (rng.random((3, 6)) > 0.3).astype(np.float64)
    weights[0, 0] = 1.0
    _, grads = tr.loss_and_grads(params, config, ids, targets, weights)

    def loss_at():
        return tr.cross_entropy(tr.forward(params, config, ids)[0], targets, weights)[0]

    # Every parameter tensor, at up to 8 random entries each (all of them would take minutes).
    h = 1e-6
    for name, value in params.items():
        flat = value.reshape(-1)                    # a view: writes go into params
        for i in rng.choice(flat.size, size=min(8, flat.size), replace=False):
            old = flat[i]
            flat[i] = old + h
            up = loss_at()
            flat[i] = old - h
            down = loss_at()
            flat[i] = old
            numeric = (up - down) / (2 * h)
            analytic = grads[name].reshape(-1)[i]
            assert abs(analytic - numeric) <= 1e-6 * max(abs(numeric), 1e-3), (name, i, analytic, numeric)


def test_cross_entropy_of_uniform_logits_is_log_vocab():
    v = 7
    logits = np.zeros((2, 3, v))
    targets = np.array([[0, 1, 2], [3, 4, 5]])
    weights = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, dlogits = tr.cross_entropy(logits, targets, weights)
    assert loss == pytest.approx(math.log(v))
    # (softmax - onehot) * weight / n, with softmax = 1/7 everywhere and n = 3 weighted positions
    expected = np.full((2, 3, v), 1 / v) - np.eye(v)[targets]
    expected *= weights[..., None] / 3
    np.testing.assert_allclose(dlogits, expected, atol=1e-12)


def test_schedule_warmup_peak_half_and_floor():
    tc = tr.TrainConfig(steps=110, warmup=10, lr=1e-3, min_lr_ratio=0.1)
    assert tr.lr_at(0, tc) == pytest.approx(1e-4)            # 1/10 of the way up
    assert tr.lr_at(9, tc) == pytest.approx(1e-3)            # peak at the end of warm-up
    assert tr.lr_at(10, tc) == pytest.approx(1e-3)           # cosine starts at the peak
    assert tr.lr_at(60, tc) == pytest.approx(0.55e-3)        # half-way: (peak + floor) / 2
    assert tr.lr_at(110, tc) == pytest.approx(1e-4)          # floor


def test_adamw_first_step_moves_each_weight_by_lr_times_sign():
    tc = tr.TrainConfig(weight_decay=0.5, eps=0.0)
    params = {"w": np.array([[1.0, -2.0]]), "b": np.array([3.0])}
    grads = {"w": np.array([[0.3, -0.01]]), "b": np.array([-5.0])}
    tr.AdamW(params, tc).step(params, grads, lr=0.1)
    # Step 1 with bias correction: m_hat = g, v_hat = g^2, so the update is lr * sign(g); the
    # matrix also decays by (1 - lr * wd) first, the bias does not.
    np.testing.assert_allclose(params["w"], [[1.0 * 0.95 - 0.1, -2.0 * 0.95 + 0.1]])
    np.testing.assert_allclose(params["b"], [3.1])


def test_clip_scales_to_max_norm_and_reports_the_norm_before():
    grads = {"a": np.array([3.0]), "b": np.array([[4.0]])}
    assert tr.clip_grad_norm(grads, 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(grads["a"], [0.6])
    np.testing.assert_allclose(grads["b"], [[0.8]])
    small = {"a": np.array([0.1])}
    tr.clip_grad_norm(small, 1.0)
    np.testing.assert_allclose(small["a"], [0.1])


def test_batch_weights_cover_the_completion_and_eos_only():
    data = [tr.Encoded(np.array([5, 6, 7, 8, 9]), n_prompt=2), tr.Encoded(np.array([5, 6, 7]), n_prompt=1)]
    ids, targets, weights = tr.make_batch(data, pad_id=0)
    np.testing.assert_array_equal(ids, [[5, 6, 7, 8], [5, 6, 0, 0]])
    np.testing.assert_array_equal(targets, [[6, 7, 8, 9], [6, 7, 0, 0]])
    # Row 0: prompt 5 6, so targets 7 8 9 carry loss; row 1: prompt 5, targets 6 7.
    np.testing.assert_array_equal(weights, [[0, 1, 1, 1], [1, 1, 0, 0]])


def test_training_refuses_gqa():
    with pytest.raises(Exception, match="multi-head"):
        tr.forward(tr.init_params(tiny_config(n_kv_heads=1), 0), tiny_config(n_kv_heads=1), np.zeros((1, 2), int))


class ByteTokenizer:
    """UTF-8 bytes as ids and 256 as EOS: a tokenizer with no training cost, enough for the loop."""
    vocab_size = 257
    eos_id = 256

    def encode(self, text):
        return list(text.encode("utf-8"))


@pytest.mark.slow
def test_fifty_steps_lower_the_loss_and_are_reproducible():
    tok = ByteTokenizer()
    data = tr.encode_examples(tok, corpus.examples("train")[::50])
    config = GPTConfig(vocab_size=tok.vocab_size, d_model=32, n_heads=2, n_layers=2, context=160)
    tc = tr.TrainConfig(steps=50, batch_size=8, warmup=5, lr=1e-2, seed=7)
    with blas_threads(1):      # tiny matrices: extra BLAS threads only contend
        params, logs = tr.train(config, tc, data, pad_id=tok.eos_id)
    first = logs[0].loss
    last = np.mean([log.loss for log in logs[-10:]])
    assert first == pytest.approx(math.log(tok.vocab_size), rel=0.05)   # near-uniform at init
    assert last < 0.5 * first
    # Same seed, same thread count -> bitwise the same weights (what the shipped manifest promises).
    short = tr.TrainConfig(steps=5, batch_size=8, warmup=5, lr=3e-3, seed=7)
    with blas_threads(1):
        again, _ = tr.train(config, short, data, pad_id=tok.eos_id)
        once_more, _ = tr.train(config, short, data, pad_id=tok.eos_id)
    for name in again:
        np.testing.assert_array_equal(again[name], once_more[name])


SCHEMA_CASES = [
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "hablo"},
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo"},
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "hablo", "extra": 1},
    {"verbo": "hablar", "tiempo": "pasado", "persona": "yo", "forma": "hablo"},
    {"verbo": "hablar", "tiempo": "presente", "persona": "usted", "forma": "hablo"},
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "h" * 21},
    {"verbo": 3, "tiempo": "presente", "persona": "yo", "forma": "hablo"},
    ["not", "an", "object"],
    "hablo",
]


@pytest.mark.parametrize("obj", SCHEMA_CASES)
def test_schema_check_agrees_with_jsonschema(obj):
    schema = corpus.conjugation_schema()
    assert (tr.schema_problems(obj, schema) == []) == jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).is_valid(obj)


def test_shipped_weights_load_and_generate():
    from inferlab.model.checkpoints import default_model_dir, load_default_model
    from inferlab.model.generate import generate

    ckpt = load_default_model()
    assert ckpt.trained and ckpt.model.config == GPTConfig()
    assert (default_model_dir() / "model.safetensors").stat().st_size <= 5 * 2 ** 20
    ex = corpus.Example("hablar", "pretérito", "él", "habló", "regular")        # a training verb
    gen = generate(ckpt.model, ckpt.tokenizer, ex.prompt, max_new_tokens=48, temperature=0.0)
    assert gen.stop_reason == "eos"
    assert json.loads(gen.text) == json.loads(ex.completion)
    manifest = json.loads((default_model_dir() / "manifest.json").read_text())
    assert {"command", "commit", "steps"} <= set(manifest["config"])
    assert manifest["config"]["command"].startswith("inferlab train ")


def test_cli_refuses_an_existing_out_without_force_before_training(tmp_path, capsys):
    from inferlab.cli import main

    out = tmp_path / "model"
    out.mkdir()
    assert main(["train", "--out", str(out), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--force" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("flag,value", [("--steps", "0"), ("--lr", "-1"), ("--batch-size", "x")])
def test_cli_rejects_bad_numbers_with_one_line(flag, value, capsys):
    from inferlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["train", flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and len(err.splitlines()) == 1
