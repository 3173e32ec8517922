"""tokenizer.json files of the Llama-family formats, built here with the `tokenizers` library (the
oracle): Llama 3 and Qwen2 byte-level BPE, Llama 2 (Prepend/Replace normalizer) and Mistral
(Metaspace) SentencePiece-style BPE with byte fallback, each with special and non-special added
tokens. Our ids must equal `tokenizers`' encode(text, add_special_tokens=False)."""

from __future__ import annotations

import inspect
import json

import pytest
from hf_helpers import BUILDERS, PLAIN_ADDED, family_sentencepiece
from hypothesis import given, settings
from oracles import CORPUS, TEXT

from inferlab.errors import InferlabError
from inferlab.model.sp_bpe import SentencePieceBPE
from inferlab.model.tokenizer_loaders import load_hf_tokenizer

tokenizers = pytest.importorskip("tokenizers")

VARIED = CORPUS + [
    inspect.getsource(inspect)[:20000],
    "Grüße aus Köln — naïve café déjà vu; Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย",
    "  two leading spaces", " one", "trailing ", "a  b   c", "\u2581already a metaspace", "", " ",
    "ids 0 00 000 0000 12345678901234567890", "ZWJ 👨‍👩‍👧‍👦 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 astral", "\t\n\r\n\x0b\x0c",
]






CHAT = {
    "llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHola, ¿qué tal?<|eot_id|>",
    "qwen2": "<|im_start|>user\nHola <tool_call>{\"a\": 1}</tool_call><|im_end|>\n<|im_start|>assistant\n",
    "llama2": "<s>[INST] Hola, ¿qué tal? [/INST] Bien</s>",
    "mistral": "<s>[INST] Hola <tool_call> [/INST]</s> fin",
}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def pair(request, tmp_path_factory):
    """(family, ours, the `tokenizers` oracle), ours loaded from the saved tokenizer.json."""
    ref = BUILDERS[request.param]()
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    ref.save(str(path))
    if request.param == "llama3":      # no <|endoftext|> or </s>: the EOS comes from the config, as on the Hub
        path.with_name("tokenizer_config.json").write_text(json.dumps({"eos_token": "<|eot_id|>"}))
    return request.param, load_hf_tokenizer(path), tokenizers.Tokenizer.from_file(str(path))


def _ref_ids(ref, text):
    return ref.encode(text, add_special_tokens=False).ids


def test_varied_corpus_ids_equal_tokenizers(pair):
    family, ours, ref = pair
    assert isinstance(ours, SentencePieceBPE) == (family in ("llama2", "mistral"))
    for text in VARIED:
        specials = [s for s in ours.special_tokens if s in text]
        assert ours.encode(text, allowed_special=set(specials)) == _ref_ids(ref, text), text[:80]


def test_byte_fallback_is_exercised(pair):
    family, ours, ref = pair
    if family not in ("llama2", "mistral"):
        pytest.skip("byte-level BPE has no fallback")
    ids = ours.encode("ไทย 😀")
    assert ids == _ref_ids(ref, "ไทย 😀")
    assert any(ref.id_to_token(i).startswith("<0x") for i in ids)
    assert ours.decode_bytes(ids) == " ไทย 😀".encode()      # the first "▁" is a space
    assert ours.decode(ids) == ref.decode(ids) == "ไทย 😀"   # which decode strips, as tokenizers does


def test_decode_equals_tokenizers(pair):
    _, ours, ref = pair
    for text in VARIED:
        ids = ours.encode(text, disallowed_special=())
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False), text[:80]


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_generated_text_equals_tokenizers(pair, text):
    _, ours, ref = pair
    if any(s in text for s in ours.special_tokens):
        return
    assert ours.encode(text) == _ref_ids(ref, text)


def test_chat_template_specials_are_special_ids(pair):
    family, ours, ref = pair
    text = CHAT[family]
    ids = ours.encode(text, allowed_special="all")
    assert ids == _ref_ids(ref, text)
    used = [s for s in ours.special_tokens if s in text]
    assert used and all(ours.special_tokens[s] in ids for s in used)
    assert all(ours.token_bytes[ours.special_tokens[s]] == b"" for s in used)
    with pytest.raises(InferlabError, match="special token"):
        ours.encode(text)                                     # tiktoken's rule: explicit opt-in


def test_plain_added_token_is_matched_whole(pair):
    _, ours, ref = pair
    text = f"x{PLAIN_ADDED}y {PLAIN_ADDED}"
    ids = ours.encode(text)
    assert ids == _ref_ids(ref, text) and ours.added_tokens[PLAIN_ADDED] in ids
    assert ours.decode(ids).replace(" ", "") == text.replace(" ", "")


def test_bos_and_eos(pair):
    family, ours, ref = pair
    bos = {"llama3": "<|begin_of_text|>", "qwen2": None, "llama2": "<s>", "mistral": "<s>"}[family]
    assert ours.bos_id == (None if bos is None else ref.token_to_id(bos))
    if bos is not None:
        assert ref.encode("hi").ids == [ours.bos_id] + ours.encode("hi")
    eos = {"llama3": "<|eot_id|>", "qwen2": "<|endoftext|>", "llama2": "</s>", "mistral": "</s>"}[family]
    assert ours.eos_id == ref.token_to_id(eos)


def test_metaspace_split_true_is_refused(tmp_path):
    doc = json.loads(family_sentencepiece("mistral").to_str())
    doc["pre_tokenizer"]["split"] = True
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InferlabError, match="/pre_tokenizer/split"):
        load_hf_tokenizer(tmp_path)


# Slow: each real vocabulary is ~150k tokens written, read back and cross-encoded (~3-4 s apiece);
# test_tokenizer_vocab checks the same vocabularies against tiktoken in the default run.
@pytest.fixture(scope="module", params=[pytest.param(v, marks=pytest.mark.slow) for v in ("cl100k", "qwen")])
def real(request, tmp_path_factory):
    """A real vocabulary written as tokenizer.json by us (merges derived from the ranks,
    TikTokenConverter's way) and read back by us and by `tokenizers`: Qwen's with its own regex
    (Qwen2's tokenizer.json), cl100k_base's with Llama 3's regex (its own cannot be written)."""
    from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed

    if not vocab_installed(request.param):
        pytest.skip(f"{request.param} vocabulary not installed")
    original = load_vocab(request.param)
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    path.write_text(json.dumps(original.to_hf_json(pattern="llama3" if request.param == "cl100k" else None)))
    same_rule = request.param == "qwen"       # then tiktoken's rank rule must give the same ids too
    return (original if same_rule else None), load_hf_tokenizer(path), tokenizers.Tokenizer.from_file(str(path))


def test_real_vocabulary_tokenizer_json_equals_tokenizers(real):
    # (special tokens aside: cl100k's leave a gap at 100256 that tokenizers renumbers into)
    original, ours, ref = real
    texts = [t for t in VARIED if not any(s in t for s in ours.special_tokens)]
    assert len(texts) == len(VARIED) - 1
    for text in texts:
        ids = ours.encode(text)
        assert ids == ref.encode(text, add_special_tokens=False).ids, text[:80]
        if original is not None:
            assert ids == original.encode(text), text[:80]


@settings(max_examples=60, deadline=None)
@given(TEXT)
def test_real_vocabulary_generated_text(real, text):
    original, ours, ref = real
    if any(s in text for s in ours.special_tokens):
        return
    ids = ours.encode(text)
    assert ids == ref.encode(text, add_special_tokens=False).ids
    if original is not None:
        assert ids == original.encode(text)


def test_cl100k_regex_is_not_written_to_tokenizer_json():
    from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed

    if not vocab_installed("cl100k"):
        pytest.skip("cl100k vocabulary not installed")
    with pytest.raises(InferlabError, match="possessive"):
        load_vocab("cl100k").to_hf_json()
