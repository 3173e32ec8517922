"""generate(): seeds, Gumbel-max sampling, top-k/top-p by hand, stop reasons, the mask hook."""

import numpy as np
import pytest
from oracles import EOS, ByteTokenizer, DigitsMask

from inferlab.errors import InferlabError
from inferlab.model.config import GPTConfig
from inferlab.model.generate import SamplingConfig, decode_loop, filter_logits, generate, sample
from inferlab.model.gpt import GPT


@pytest.fixture(scope="module")
def model():
    return GPT.init(GPTConfig(vocab_size=257, d_model=16, n_heads=2, n_layers=1, context=32), seed=4)


def test_same_seed_same_tokens_and_different_seeds_differ(model):
    tok = ByteTokenizer()
    a = generate(model, tok, "ab", max_new_tokens=20, seed=7)
    b = generate(model, tok, "ab", max_new_tokens=20, seed=7)
    c = generate(model, tok, "ab", max_new_tokens=20, seed=8)
    assert a.tokens == b.tokens and a.text == b.text
    assert a.tokens != c.tokens           # 20 draws from ~257 near-uniform tokens
    assert a.stop_reason == "max_new_tokens" and a.n_tokens == 20 and a.complete is None


def test_greedy_equals_argmax_of_full_recompute(model):
    got = generate(model, ByteTokenizer(), "hi", max_new_tokens=12, temperature=0.0)
    ids = list(b"hi")
    for _ in range(12):                   # oracle: no cache, argmax of the last position
        nxt = int(np.argmax(model.forward(ids)[-1]))
        if nxt == EOS:
            break
        ids.append(nxt)
    assert got.tokens == ids[2:]


def test_one_rng_call_of_size_v_per_step():
    logits = np.array([0.0, 1.0, 2.0], np.float32)
    for s in (SamplingConfig(0.0), SamplingConfig(1.0), SamplingConfig(0.7, top_k=1), SamplingConfig(1.0, top_p=0.2)):
        rng, ref = np.random.default_rng(3), np.random.default_rng(3)
        sample(logits.copy(), rng, s)
        ref.gumbel(size=3)
        assert rng.bit_generator.state == ref.bit_generator.state


def test_masked_run_follows_unmasked_rng_path_until_filtered(model):
    tok = ByteTokenizer()
    everything = list(range(256))
    free = generate(model, tok, "x", max_new_tokens=10, seed=11)
    # the same run under a mask that allows every byte except the one sampled at step 4
    mask = DigitsMask(257, n=10, allowed=everything, forbid=[free.tokens[4]])
    masked = generate(model, tok, "x", mask=mask, max_new_tokens=10, seed=11)
    first = next(i for i, t in enumerate(free.tokens) if t == free.tokens[4])
    assert masked.tokens[:first] == free.tokens[:first]
    assert masked.tokens[first] != free.tokens[first]


def test_gumbel_max_draws_follow_softmax():
    logits = np.array([1.0, 0.0, 2.0, -1.0], np.float32)
    p = np.exp(logits) / np.exp(logits).sum()        # [0.2369, 0.0871, 0.6439, 0.0321]
    rng = np.random.default_rng(0)
    n = 20000
    counts = np.bincount([sample(logits.copy(), rng, SamplingConfig(1.0)) for _ in range(n)], minlength=4)
    # 4.5 standard deviations of a binomial proportion: a false alarm about once in 10^5 runs
    assert np.all(np.abs(counts / n - p) < 4.5 * np.sqrt(p * (1 - p) / n))


def test_temperature_sharpens():
    logits = np.array([1.0, 0.0], np.float32)
    rng = np.random.default_rng(1)
    n = 10000
    hits = sum(sample(logits.copy(), rng, SamplingConfig(0.5)) == 0 for _ in range(n))
    p = 1 / (1 + np.exp(-2.0))                        # softmax([2, 0])[0] = 0.8808
    assert abs(hits / n - p) < 4.5 * np.sqrt(p * (1 - p) / n)


def test_top_k_and_top_p_by_hand():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    z = filter_logits(logits.copy(), SamplingConfig(1.0, top_k=2))
    assert np.isfinite(z).tolist() == [True, True, False, False]
    # top_p 0.8: 0.5 + 0.3 reaches it, so tokens 0 and 1 stay; 0.81 needs the third one too
    assert np.isfinite(filter_logits(logits.copy(), SamplingConfig(1.0, top_p=0.8))).tolist() == [True, True, False, False]
    assert np.isfinite(filter_logits(logits.copy(), SamplingConfig(1.0, top_p=0.81))).tolist() == [True, True, True, False]
    assert np.isfinite(filter_logits(logits.copy(), SamplingConfig(1.0, top_p=0.1))).tolist() == [True, False, False, False]
    # top-k sampling only ever returns the kept tokens
    rng = np.random.default_rng(2)
    assert {sample(logits.copy(), rng, SamplingConfig(1.0, top_k=2)) for _ in range(300)} == {0, 1}


def test_mask_hook_order_eos_and_completeness(model):
    mask = DigitsMask(257, n=3)
    g = generate(model, ByteTokenizer(), "n=", mask=mask, max_new_tokens=10, seed=0)
    assert g.text.isdigit() and 1 <= g.n_tokens <= 3
    assert g.stop_reason == "eos" and g.complete is True
    # per step: build, apply, then advance once the token is kept (not for the final EOS)
    assert mask.calls == ["build", "apply", "advance"] * g.n_tokens + ["build", "apply"]
    # cut short before the mask is complete: complete is False, and nothing was loosened
    g = generate(model, ByteTokenizer(), "n=", mask=DigitsMask(257, n=3), max_new_tokens=0)
    assert g.stop_reason == "max_new_tokens" and g.complete is False and g.tokens == []


def test_no_allowed_token_stops(model):
    g = generate(model, ByteTokenizer(), "a", mask=DigitsMask(257, allowed=[]), max_new_tokens=5)
    assert g.stop_reason == "no_allowed_token" and g.tokens == [] and g.complete is False and g.n_steps == 1


def test_context_stop(model):
    tokens, reason, steps = decode_loop(model, list(range(28)), max_new_tokens=50, seed=0)
    assert reason == "context" and len(tokens) == 4 and steps == 4    # 28 + 4 = context 32


def test_paged_cache_generates_the_same_tokens(model):
    a = decode_loop(model, [1, 2, 3], max_new_tokens=25, seed=5)
    b = decode_loop(model, [1, 2, 3], max_new_tokens=25, seed=5, cache_kind="paged")
    assert a == b


def test_bad_arguments(model):
    tok = ByteTokenizer()
    for kwargs, word in [({"temperature": -1}, "temperature"), ({"top_k": 0}, "top_k"),
                         ({"top_p": 1.5}, "top_p"), ({"max_new_tokens": -1}, "max_new_tokens")]:
        with pytest.raises(InferlabError, match=word):
            generate(model, tok, "a", **kwargs)
    with pytest.raises(InferlabError, match="mask covers"):
        generate(model, tok, "a", mask=DigitsMask(100))
    with pytest.raises(InferlabError, match="context"):
        generate(model, tok, "a" * 40)


# --- the CLI and the default model ------------------------------------------------------------

TEXT = "yo hablo, tú hablas, él habla, nosotros hablamos, vosotros habláis, ellos hablan. " * 20


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from inferlab.model.checkpoints import save_model
    from inferlab.model.tokenizer import train_bpe

    tok = train_bpe(TEXT, 280)
    m = GPT.init(GPTConfig(vocab_size=280, d_model=16, n_heads=2, n_layers=1, context=64), seed=2)
    return save_model(m, tok, tmp_path_factory.mktemp("models") / "tiny")


def run_cli(capsys, *argv):
    from inferlab.cli import main

    try:
        rc = main(["generate", *map(str, argv)])
    except SystemExit as exc:          # argparse's own errors exit from inside parse_args
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_matches_the_library(model_dir, capsys):
    import json

    from inferlab.model.checkpoints import load_model

    rc, out, err = run_cli(capsys, "yo ha", "--model", model_dir, "--json", "--max-new-tokens", 9, "--seed", 4,
                           "--top-k", 50)
    assert rc == 0, err
    doc = json.loads(out)
    assert {"text", "tokens", "n_tokens", "stop_reason", "ms_per_token"} <= set(doc)
    ckpt = load_model(model_dir)
    g = generate(ckpt.model, ckpt.tokenizer, "yo ha", max_new_tokens=9, seed=4, top_k=50)
    assert doc["tokens"] == g.tokens and doc["text"] == ckpt.tokenizer.decode(g.tokens)
    assert doc["n_tokens"] == len(doc["tokens"]) and doc["stop_reason"] == g.stop_reason
    assert doc["ms_per_token"] > 0 and doc["trained"] is True


def test_cli_trace_is_written_and_never_overwritten(model_dir, tmp_path, capsys):
    import json

    trace = tmp_path / "t.json"
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--trace", trace, "--max-new-tokens", 4)
    assert rc == 0, err
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["name"] for e in events} == {"step", "forward", "sample"}     # no mask: no mask spans
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--trace", trace)
    assert rc == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert run_cli(capsys, "yo", "--model", model_dir, "--trace", trace, "--force")[0] == 0


@pytest.mark.parametrize("argv, word", [
    (["--temperature", "-0.5"], "--temperature"), (["--temperature", "1e-320"], "1e-4..1e4"), (["--temperature", "1e308"], "1e-4..1e4"),
    (["--top-p", "0"], "--top-p"), (["--top-k", "0"], "--top-k"),
    (["--mask", "naive"], "--schema"), (["--schema", "/nonexistent.json"], "--schema"),
])
def test_cli_bad_flags_exit_2_with_one_line(model_dir, capsys, argv, word):
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, *argv)
    assert rc == 2 and word in err and len(err.strip().splitlines()) == 1 and out == ""


def test_default_model_falls_back_to_a_seeded_random_init(model_dir, tmp_path, monkeypatch):
    from inferlab.model import checkpoints

    folder = tmp_path / "minigpt"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((model_dir / "tokenizer.json").read_bytes())
    monkeypatch.setattr(checkpoints, "default_model_dir", lambda: folder)
    a, b = checkpoints.load_default_model(), checkpoints.load_default_model()
    assert a.trained is False and "random" in a.source and a.tokenizer.vocab_size == 280
    np.testing.assert_array_equal(a.model.params["wte"], b.model.params["wte"])   # seeded
    (folder / "tokenizer.json").unlink()
    with pytest.raises(InferlabError, match="tokenizer.json"):
        checkpoints.load_default_model()


def test_saved_tokenizer_round_trips(model_dir):
    from inferlab.model.checkpoints import load_model
    from inferlab.model.tokenizer import train_bpe

    tok = train_bpe(TEXT, 280)
    back = load_model(model_dir).tokenizer
    for text in ("nosotros hablamos", "¿tú hablas?", ""):
        assert back.encode(text) == tok.encode(text) and back.decode(back.encode(text)) == text
    assert back.eos_id == tok.eos_id


SCHEMA = {"type": "object", "properties": {"forma": {"enum": ["hablo", "hablas"]}, "n": {"type": "integer"}},
          "required": ["forma", "n"], "additionalProperties": False}


def test_cli_schema_output_validates_and_the_masks_agree(model_dir, tmp_path, capsys):
    import json

    jsonschema = pytest.importorskip("jsonschema")
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    docs = {}
    for kind in ("naive", "indexed", None):   # None: the default, the matcher on the stack grammar
        rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--schema", schema_path,
                               *(("--mask", kind) if kind else ()), "--json", "--seed", 3)
        assert rc == 0, err
        docs[kind] = json.loads(out)
    assert docs["naive"]["tokens"] == docs["indexed"]["tokens"] == docs[None]["tokens"]  # same seed and allowed sets
    doc = docs[None]
    assert doc["complete"] is True and doc["valid"] is True and doc["stop_reason"] == "eos"
    jsonschema.validate(json.loads(doc["text"]), SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)              # the independent oracle


def test_cli_schema_refusal_is_one_line(model_dir, tmp_path, capsys):
    import json

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "strin"}}}))
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--schema", bad)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "/properties/a" in err


def test_cli_says_when_the_default_model_is_untrained(model_dir, tmp_path, monkeypatch, capsys):
    import json

    from inferlab.model import checkpoints

    folder = tmp_path / "minigpt"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((model_dir / "tokenizer.json").read_bytes())
    monkeypatch.setattr(checkpoints, "default_model_dir", lambda: folder)
    rc, out, err = run_cli(capsys, "yo", "--json", "--max-new-tokens", 3)
    assert rc == 0 and json.loads(out)["trained"] is False and "untrained" in err


def test_cli_takes_boolean_schemas_as_schema_compile_does(model_dir, tmp_path, capsys):
    """JSON Schema's `true` (any value) and `false` (none) are schemas: `true` constrains as `{}`,
    `false` is refused in one line, never "expected a JSON object"."""
    import json

    (tmp_path / "true.json").write_text("true")
    (tmp_path / "false.json").write_text("false")
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--schema", tmp_path / "true.json", "--json", "--seed", 3)
    doc = json.loads(out)
    assert rc == (0 if doc["complete"] else 1), err
    if doc["complete"]:
        json.loads(doc["text"])                                   # any JSON value, parsed by the oracle
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--schema", tmp_path / "false.json")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "false schema" in err


def test_cli_jump_forward_beside_another_mask_names_the_mask(model_dir, tmp_path, capsys):
    (tmp_path / "s.json").write_text('{"type": "integer"}')
    rc, out, err = run_cli(capsys, "yo", "--model", model_dir, "--schema", tmp_path / "s.json", "--mask", "naive",
                           "--jump-forward")
    assert rc == 2 and "--mask naive" in err and "needs --schema" not in err and len(err.strip().splitlines()) == 1
