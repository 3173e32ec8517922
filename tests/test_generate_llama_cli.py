"""`inferlab generate --model DIR` on a Llama-family folder (weights + tokenizer.json written by
transformers and tokenizers): the greedy continuation equals transformers' own generate() from
the ids `tokenizers` gives the prompt, BOS included."""

import json

import pytest
from hf_helpers import BUILDERS

from inferlab.cli import main

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPT = "Hola, ¿qué tal? El niño"


@pytest.mark.parametrize("family, arch", [("llama2", "Llama"), ("qwen2", "Qwen2")])
def test_generate_cli_greedy_equals_transformers(tmp_path, capsys, family, arch):
    tok = BUILDERS[family]()
    tok.save(str(tmp_path / "tokenizer.json"))
    eos = tok.token_to_id("</s>" if family == "llama2" else "<|endoftext|>")
    torch.manual_seed(0)
    config = getattr(transformers, f"{arch}Config")(
        vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, eos_token_id=eos)
    getattr(transformers, f"{arch}ForCausalLM")(config).save_pretrained(tmp_path)

    assert main(["generate", PROMPT, "--model", str(tmp_path), "--max-new-tokens", "20",
                 "--temperature", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)

    ids = tok.encode(PROMPT).ids                              # with the post_processor's BOS, if any
    assert (ids[0] == tok.token_to_id("<s>")) == (family == "llama2")
    hf = getattr(transformers, f"{arch}ForCausalLM").from_pretrained(tmp_path, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=20, eos_token_id=eos,
                          pad_token_id=eos)[0, len(ids):].tolist()
    if out["stop_reason"] == "eos":
        assert ref[len(out["tokens"])] == eos
    assert out["tokens"] == ref[:len(out["tokens"])] and len(out["tokens"]) > 0
    if family == "qwen2":                                     # byte-level: text is the tokens' bytes
        assert out["text"] == tok.decode(out["tokens"], skip_special_tokens=False)


def test_jump_forward_on_a_sentencepiece_folder_is_refused_in_one_line(tmp_path, capsys):
    """Jump-forward retokenizes from a pre-token boundary: a SentencePiece-style tokenizer has no
    pre-tokenizer pattern, so the flag is refused by name, not by an internal pattern error."""
    tok = BUILDERS["llama2"]()
    tok.save(str(tmp_path / "tokenizer.json"))
    config = transformers.LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=64, eos_token_id=tok.token_to_id("</s>"))
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    schema = tmp_path / "s.json"
    schema.write_text('{"const": "sí"}')
    capsys.readouterr()                                       # (transformers' own progress on save)
    rc = main(["generate", "x", "--model", str(tmp_path), "--schema", str(schema), "--jump-forward"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "jump-forward needs a byte-level BPE" in err
