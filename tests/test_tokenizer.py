"""Byte-level BPE: training by hand-derived merges, round trips, special tokens, and HF as oracle."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import CORPUS, TEXT

from inferlab.errors import InferlabError
from inferlab.model import bpe
from inferlab.model.tokenizer import ENDOFTEXT, train_bpe
from inferlab.model.tokenizer_loaders import load_hf_tokenizer, load_vocab

TRAIN_TEXT = "\n".join(CORPUS * 3) + ENDOFTEXT + "otra línea más\n" * 5


@pytest.fixture(scope="module")
def trained():
    return train_bpe(TRAIN_TEXT, 400)


def test_train_matches_hand_derived_merges():
    # "aaabdaaabac" is one GPT-2 pre-token. Pair counts: aa 4 (overlapping), ab 2, others 1, so
    # the first merge is (a, a) -> 256. The word is then [aa a b d aa a b a c]: (aa, a) and (a, b)
    # both count 2 and the tie goes to the smaller pair (97, 98) -> 257 "ab". Then [aa ab d aa ab
    # a c]: (aa, ab) counts 2 -> 258 "aaab". Specials follow: 259.
    tok = train_bpe("aaabdaaabac", 260)
    assert tok.merges == [(97, 97), (97, 98), (256, 257)]
    assert tok.token_bytes[256:259] == [b"aa", b"ab", b"aaab"]
    assert tok.encode("aaabdaaabac") == [258, ord("d"), 258, ord("a"), ord("c")]
    assert tok.vocab_size == 260 and tok.eos_id == 259
    assert tok.special_ids == frozenset({259}) and tok.token_bytes[259] == b""


def test_train_never_returns_a_smaller_vocabulary_than_asked():
    with pytest.raises(InferlabError, match="only supports"):
        train_bpe("ab ab", 300)
    with pytest.raises(InferlabError, match="below 256"):
        train_bpe("abc", 256)
    with pytest.raises(InferlabError, match="EOS"):
        train_bpe("abc", 300, special_tokens=())


def test_special_tokens_never_take_part_in_merges(trained):
    assert ENDOFTEXT.encode() not in trained.token_bytes
    assert trained.vocab_size == 400
    assert trained.eos_id == 399 and trained.special_tokens == {ENDOFTEXT: 399}


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_round_trip_text(trained, text):
    ids = trained.encode(text, disallowed_special=())
    assert trained.decode(ids) == text
    assert all(0 <= i < trained.vocab_size for i in ids)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=80))
def test_round_trip_arbitrary_bytes(trained, data):
    ids = trained.encode_piece(data)
    assert b"".join(trained.token_bytes[i] for i in ids) == data
    assert trained.decode_bytes(ids) == data


def test_special_tokens_are_explicit(trained):
    text = "hola" + ENDOFTEXT + "adiós"
    with pytest.raises(InferlabError, match="special token"):
        trained.encode(text)
    as_id = trained.encode(text, allowed_special={ENDOFTEXT})
    assert as_id == trained.encode("hola") + [trained.eos_id] + trained.encode("adiós")
    assert as_id == trained.encode(text, allowed_special="all")
    as_text = trained.encode(text, disallowed_special=())
    assert trained.eos_id not in as_text and trained.decode(as_text) == text
    assert trained.decode(as_id) == text            # a special decodes to its text
    with pytest.raises(InferlabError, match="not a special token"):
        trained.encode("x", allowed_special={"<|nope|>"})


def test_decode_partial_utf8(trained):
    nn = "ñ".encode()                               # b"\xc3\xb1"
    first, second = trained.encode_piece(nn[:1]), trained.encode_piece(nn[1:])
    assert trained.decode(first) == "\ufffd"        # half a character is replaced, not dropped
    assert trained.decode_bytes(first) == b"\xc3"   # ... but its bytes stay exact
    assert trained.decode(first + second) == "ñ"
    cut = trained.encode_piece("😀".encode()[:3])   # 3 of 4 bytes: one maximal subpart, one U+FFFD
    assert trained.decode(cut) == "\ufffd" and trained.decode_bytes(cut) == b"\xf0\x9f\x98"


def test_decode_rejects_bad_ids(trained):
    with pytest.raises(InferlabError, match="outside"):
        trained.decode([trained.vocab_size])


def test_token_bytes_are_the_concatenated_merges(trained):
    for rank, (a, b) in enumerate(trained.merges):
        assert trained.token_bytes[256 + rank] == trained.token_bytes[a] + trained.token_bytes[b]


# --- tokenizer.json: HF tokenizers is the oracle ---------------------------------------------
@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory):
    return trained.save(tmp_path_factory.mktemp("tok") / "tokenizer.json")


@pytest.fixture(scope="module")
def hf(saved):
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(saved))


def test_hf_loads_what_we_save(trained, hf):
    assert hf.get_vocab_size() == trained.vocab_size
    assert hf.token_to_id(ENDOFTEXT) == trained.eos_id
    for text in CORPUS:
        assert trained.encode(text, allowed_special="all") == hf.encode(text).ids, text


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_hf_ids_equal_on_generated_text(trained, hf, text):
    # HF always matches its added tokens in the text: that is allowed_special="all".
    ids = trained.encode(text, allowed_special="all")
    assert ids == hf.encode(text).ids
    assert hf.decode(ids, skip_special_tokens=False) == text


def test_save_load_round_trip(trained, saved):
    back = load_hf_tokenizer(saved)
    assert back.token_bytes == trained.token_bytes
    assert back.merges == trained.merges
    assert back.special_tokens == trained.special_tokens and back.eos_id == trained.eos_id
    for text in CORPUS:
        assert back.encode(text, allowed_special="all") == trained.encode(text, allowed_special="all")
    assert load_vocab(str(saved)).token_bytes == trained.token_bytes


def test_save_never_overwrites_without_force(trained, saved):
    before = saved.read_bytes()
    with pytest.raises(InferlabError, match="exists"):
        trained.save(saved)
    assert saved.read_bytes() == before
    trained.save(saved, force=True)
    assert json.loads(saved.read_text())["model"]["type"] == "BPE"


def test_gpt2_style_tokenizer_json_built_by_hf(tmp_path):
    """A GPT-2-style tokenizer.json trained and written by HF itself; we must encode like HF."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=[ENDOFTEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    hf.train_from_iterator(CORPUS * 3, trainer=trainer)
    hf.save(str(tmp_path / "tokenizer.json"))
    ours = load_hf_tokenizer(tmp_path)
    assert ours.vocab_size == hf.get_vocab_size()
    assert ours.eos_id == hf.token_to_id(ENDOFTEXT)
    for text in CORPUS + ["unseen words: murciélago, 42424242, 🦀🦀"]:
        assert ours.encode(text, allowed_special="all") == hf.encode(text).ids, text
        assert ours.decode(hf.encode(text).ids) == hf.decode(hf.encode(text).ids, skip_special_tokens=False)


def test_bad_tokenizer_json_names_the_pointer(tmp_path, trained):
    doc = trained.to_hf_json()
    doc["model"]["type"] = "WordPiece"
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InferlabError, match="/model/type"):
        load_hf_tokenizer(tmp_path / "tokenizer.json")
    doc = trained.to_hf_json()
    doc["normalizer"] = {"type": "Lowercase"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InferlabError, match="/normalizer"):
        load_hf_tokenizer(tmp_path / "tokenizer.json")


@pytest.mark.parametrize("patch, needle", [
    (lambda d: d.update(normalizer=5), "/normalizer must be an object or null"),
    (lambda d: d.update(added_tokens=[5]), "/added_tokens/0 must be an object with a string /content"),
    (lambda d: d.update(added_tokens=5), "/added_tokens must be an array"),
    (lambda d: d["model"]["vocab"].update(x="x"), "/model/vocab/x must be a token id"),
    (lambda d: d["model"]["vocab"].update(x=10 ** 9), "/model/vocab/x must be a token id (a whole number 0..10,000,000), got 1000000000"),
    # a second audit's (a fuzz of every command): TypeError / AttributeError tracebacks before
    (lambda d: d["model"].update(merges=[5]), "/model/merges/0 is 5"),
    (lambda d: d["model"].update(merges=[["a", "b", "c"]]), "/model/merges/0 is"),
    (lambda d: d.update(post_processor=[1]), "/post_processor must be an object, got list"),
    (lambda d: d.update(post_processor={"type": "Sequence", "processors": "ab"}), "/post_processor/processors must be a list"),
    (lambda d: d.update(post_processor={"type": "TemplateProcessing", "single": "ab"}), "/post_processor/single must be a list"),
    (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [1, 2]}),
     "/pre_tokenizer/pretokenizers/0 must be an object, got int"),
    (lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": "x", "behavior": "Isolated"}, {"type": "ByteLevel"}]}),
     "/pre_tokenizer/pretokenizers/0 is not a Split with a known regex"),
])
def test_tokenizer_json_fields_of_the_wrong_type_name_the_pointer(tmp_path, trained, patch, needle):
    """A CLI audit's tokenizer.json edits: AttributeError / TypeError tracebacks, or a token table
    sized by a 10^9 id, before."""
    doc = trained.to_hf_json()
    patch(doc)
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(InferlabError, match="tokenizer.json: ") as exc:
        load_hf_tokenizer(tmp_path / "tokenizer.json")
    assert needle in str(exc.value)


def test_bytes_to_unicode_is_gpt2s_map():
    table = bpe.bytes_to_unicode()
    # openai/gpt-2 encoder.py: space (0x20) is the 33rd non-printable byte -> U+0100 + 32 = "Ġ",
    # newline 0x0a the 11th -> "Ċ"; "!" maps to itself; 0xad (soft hyphen) is the last -> U+0143.
    assert table[0x20] == "Ġ" and table[0x0A] == "Ċ" and table[ord("!")] == "!" and table[0xAD] == "Ń"
    assert len(set(table.values())) == 256


def test_split_pre_tokenizer_and_nfc_round_trip_through_hf(trained, tmp_path):
    """Qwen2-style tokenizer.json: Split(regex) + ByteLevel(use_regex=false) and an NFC normalizer."""
    tokenizers = pytest.importorskip("tokenizers")
    from inferlab.model.tokenizer import Tokenizer

    qwen_like = Tokenizer(trained.token_bytes, special_tokens=trained.special_tokens, pattern="qwen",
                          merges=trained.merges, eos_token=ENDOFTEXT, normalization="NFC")
    path = qwen_like.save(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    back = load_hf_tokenizer(path)
    assert back.pattern == "qwen" and back.normalization == "NFC"
    for text in CORPUS:
        ids = qwen_like.encode(text, allowed_special="all")
        assert ids == hf.encode(text).ids == back.encode(text, allowed_special="all"), text
    assert qwen_like.encode("e\u0301") == qwen_like.encode("é")     # NFC composes e + U+0301


def test_progress_bar_does_not_change_the_result(trained):
    assert train_bpe(TRAIN_TEXT, 400, progress=True).merges == trained.merges


def test_default_vocabulary():
    from importlib import resources

    if not (resources.files("inferlab") / "data" / "minigpt" / "tokenizer.json").is_file():
        with pytest.raises(InferlabError, match="not built yet"):
            load_vocab("512")
        return
    tok = load_vocab("512")
    assert tok.vocab_size == 512 and tok.token_bytes[tok.eos_id] == b"" and tok.eos_id in tok.special_ids
    text = 'conjuga hablar, presente, yo:{"verbo":"hablar","tiempo":"presente","persona":"yo","forma":"hablo"}'
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("normalizers", [[1, 2], "ab", [{"type": "Replace", "pattern": "x"}]])
def test_sentencepiece_normalizers_of_the_wrong_shape_name_the_pointer(tmp_path, normalizers):
    from inferlab.model.sp_bpe import metaspace_options

    with pytest.raises(InferlabError, match="/normalizer/normalizers must be a list of objects"):
        metaspace_options({"normalizer": {"type": "Sequence", "normalizers": normalizers}}, tmp_path / "tokenizer.json")
