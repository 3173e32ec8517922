"""The stdlib-`re` pre-tokenizers split exactly like the reference regex engines.

Oracles: the `regex` module (the same patterns with real \\p{..} support), HF `tokenizers`
(Oniguruma) for GPT-2's ByteLevel and Qwen's pattern. For cl100k Oniguruma is no oracle: it reads
`\\p{N}{1,3}+` as "1..3 digits, repeated" rather than possessive, so tiktoken's ids are its oracle
(tests/test_tokenizer_vocab.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import CORPUS, TEXT

from inferlab.errors import InferlabError
from inferlab.model.pretokenize import (
    PATTERN_NAMES,
    REFERENCE_PATTERNS,
    WHITE_SPACE,
    compiled,
    pattern_name,
    pretokenize,
)

regex = pytest.importorskip("regex")
tokenizers = pytest.importorskip("tokenizers")

# Text biased towards the pattern's corner cases: apostrophes before contraction letters, runs of
# mixed whitespace, digits, letters with combining marks, punctuation before newlines.
TRICKY = st.text(st.sampled_from("'sStTlLvVeErRdDmMſ aZ9٣ⅻ.!\n\r\t\u00a0\u3000\x1c\x85é\u0301中😀-"), max_size=40)


def hf_split(text: str, name: str) -> list[str]:
    if name == "gpt2":
        # ByteLevel maps bytes to GPT-2's alphabet; offsets give back the original substrings.
        pre = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        pre = tokenizers.pre_tokenizers.Split(tokenizers.Regex(REFERENCE_PATTERNS[name]), "isolated")
    return [text[a:b] for _, (a, b) in pre.pre_tokenize_str(text)]


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_corpus_matches_regex_module(name):
    for text in CORPUS:
        assert pretokenize(text, name) == regex.findall(REFERENCE_PATTERNS[name], text), text


@pytest.mark.parametrize("name", ["gpt2", "qwen", "llama3"])
def test_corpus_matches_hf_tokenizers(name):
    for text in CORPUS:
        assert pretokenize(text, name) == hf_split(text, name), text


@pytest.mark.parametrize("name", PATTERN_NAMES)
@settings(max_examples=200, deadline=None)
@given(text=st.one_of(TEXT, TRICKY))
def test_generated_text_matches_regex_module(name, text):
    pieces = pretokenize(text, name)
    assert pieces == regex.findall(REFERENCE_PATTERNS[name], text)
    assert "".join(pieces) == text


@pytest.mark.parametrize("name", ["gpt2", "qwen", "llama3"])
@settings(max_examples=150, deadline=None)
@given(text=st.one_of(TEXT, TRICKY))
def test_generated_text_matches_hf_tokenizers(name, text):
    assert pretokenize(text, name) == hf_split(text, name)


def test_hand_derived_splits():
    # GPT-2: contractions are case-sensitive; a whitespace run gives its last space to the word.
    assert pretokenize("I'LL  go", "gpt2") == ["I", "'", "LL", " ", " go"]
    # cl100k: contractions in any case, digits in threes, one non-letter glued before a word,
    # a newline run keeps the spaces before it, a whitespace run at the very end is one piece.
    assert pretokenize("I'LL 12345\t\tx \n\n  y", "cl100k") == [
        "I", "'LL", " ", "123", "45", "\t", "\tx", " \n\n", " ", " y"]
    assert pretokenize("x \n\n  ", "cl100k") == ["x", " \n\n  "]
    # Qwen: single digits; same contraction rule as cl100k.
    assert pretokenize("we'Re 123", "qwen") == ["we", "'Re", " ", "1", "2", "3"]
    # Llama 3: Qwen's rule with digits in threes.
    assert pretokenize("we'Re 12345", "llama3") == ["we", "'Re", " ", "123", "45"]


def test_whitespace_is_the_unicode_property_not_str_isspace():
    # U+001C..U+001F are str.isspace() but not White_Space: they are punctuation-like "other".
    assert "\x1c" not in WHITE_SPACE and "\x1c".isspace()
    assert pretokenize("a\x1c\x1db", "gpt2") == ["a", "\x1c\x1d", "b"]
    assert len(WHITE_SPACE) == 25


def test_pattern_names():
    for name, reference in REFERENCE_PATTERNS.items():
        assert pattern_name(reference) == name
    assert pattern_name(r"\w+") is None
    with pytest.raises(InferlabError, match="unknown"):
        compiled("o200k")
