"""The naive and the indexed masks: same allowed sets at every step, every tokenization of a valid
text accepted, EOS only when complete, every apply form equal to an independent where()."""

import json
import random
import re

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import INDEX_PATTERNS, random_vocab

from inferlab.constrain import build_mask, vocabulary_of
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.masks import IndexedJSONSchemaMask, NaiveJSONSchemaMask, apply_additive, apply_bitmask
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError
from inferlab.model.config import GPTConfig
from inferlab.model.generate import generate
from inferlab.model.gpt import GPT


def both_masks(pattern, vocab):
    dfa = compile_regex(pattern)
    return NaiveJSONSchemaMask(dfa, vocab), IndexedJSONSchemaMask(TokenIndex.build(dfa, vocab))


def check_apply_forms(naive, indexed, rng):
    """Every way to apply the current mask equals where(allowed, logits, -inf)."""
    V = naive.vocab_size
    logits = rng.standard_normal(V).astype(np.float32)
    allowed = np.zeros(V, dtype=bool)
    allowed[naive.allowed_ids()] = True
    expect = np.where(allowed, logits, np.float32(-np.inf))
    outs = [logits.copy() for _ in range(4)]
    naive.apply(outs[0], naive.allowed_mask())
    indexed.apply(outs[1], indexed.allowed_mask())
    apply_bitmask(outs[2], indexed.bitmask())
    apply_additive(outs[3], indexed.additive_mask())
    for out in outs:
        np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("pattern", INDEX_PATTERNS)
def test_masks_agree_at_every_step_of_random_walks(pattern):
    vocab = random_vocab(11)
    naive, indexed = both_masks(pattern, vocab)
    rng = np.random.default_rng(0)
    pick = random.Random(0)
    for _ in range(3):  # three walks, one reset() between each
        naive.reset()
        indexed.reset()
        for _ in range(12):
            ids = naive.allowed_ids()
            np.testing.assert_array_equal(ids, indexed.allowed_ids())
            assert naive.is_complete() == indexed.is_complete() == (vocab.eos_id in ids.tolist())
            check_apply_forms(naive, indexed, rng)
            if not len(ids):
                break
            token = pick.choice(ids.tolist())
            if token == vocab.eos_id:
                break
            naive.advance(token)
            indexed.advance(token)


def tokenize_randomly(data: bytes, vocab: Vocabulary, rng: random.Random) -> list[int]:
    """A random segmentation of `data` into vocabulary tokens (not the canonical one)."""
    by_bytes = {}
    for t, b in enumerate(vocab.token_bytes):
        by_bytes.setdefault(b, t)
    out, pos = [], 0
    while pos < len(data):
        options = [by_bytes[data[pos:pos + k]] for k in range(1, 7) if data[pos:pos + k] in by_bytes]
        tok = rng.choice(options)
        out.append(tok)
        pos += len(vocab.token_bytes[tok])
    return out


VOCAB = random_vocab(21)
MASKS = {p: both_masks(p, VOCAB) for p in INDEX_PATTERNS}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pattern=st.sampled_from(INDEX_PATTERNS), seed=st.integers(0, 2**16))
def test_any_tokenization_of_a_valid_text_is_accepted(data, pattern, seed):
    # codec="utf-8": no surrogates are drawn (they have no UTF-8 bytes), so nothing is discarded
    text = data.draw(st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True,
                                   alphabet=st.characters(codec="utf-8")))
    tokens = tokenize_randomly(text.encode(), VOCAB, random.Random(seed))
    for mask in MASKS[pattern]:
        mask.reset()
        for t in tokens:
            assert t in mask.allowed_ids()
            mask.advance(t)
        assert mask.is_complete() and VOCAB.eos_id in mask.allowed_ids()
        mask.advance(VOCAB.eos_id)  # EOS is accepted when complete, and keeps the state


def test_disallowed_tokens_raise_one_line_errors():
    vocab = random_vocab(4)
    for mask in both_masks(r'\{"a":1\}', vocab):
        with pytest.raises(InferlabError, match="token .* is not allowed") as err:
            mask.advance(vocab.token_bytes.index(b"}"))
        assert "\n" not in str(err.value)
        with pytest.raises(InferlabError):  # EOS before the output is complete
            mask.advance(vocab.eos_id)
        with pytest.raises(InferlabError):  # a special token that is not EOS
            mask.advance(max(vocab.special_ids - {vocab.eos_id}))


def test_naive_instrumentation_counts_by_hand():
    # "ab" from the start: "a" 1 step (live), "b" 1 (dead), "ab" 2 (live), "ba" 1 (dead).
    vocab = Vocabulary((b"a", b"b", b"ab", b"ba", b""), eos_id=4, special_ids=frozenset({4}))
    naive = NaiveJSONSchemaMask(compile_regex("ab"), vocab)
    m = naive.allowed_mask()
    assert naive.stats.steps == 1 and naive.stats.token_checks == 4 and naive.stats.byte_steps == 5
    assert naive.stats.ns > 0
    assert m.tolist() == [0.0, -np.inf, 0.0, -np.inf, -np.inf]


class VocabTokenizer:
    """A stand-in tokenizer over a random multi-byte Vocabulary (greedy longest-match encode);
    test_generate.ByteTokenizer has single bytes only, so no token splits a character there."""

    def __init__(self, vocab: Vocabulary):
        self.token_bytes = list(vocab.token_bytes)
        self.eos_id, self.special_ids, self.vocab_size = vocab.eos_id, vocab.special_ids, vocab.vocab_size
        self._id = {b: i for i, b in enumerate(self.token_bytes) if b}

    def encode(self, text: str) -> list[int]:
        data, out, pos = text.encode(), [], 0
        while pos < len(data):
            k = max(k for k in range(1, 7) if data[pos:pos + k] in self._id)
            out.append(self._id[data[pos:pos + k]])
            pos += k
        return out

    def decode(self, ids) -> str:
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")


SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "boolean"}},
          "required": ["a", "b"], "additionalProperties": False}


def test_build_mask_and_generate_complete_outputs_validate():
    tok = VocabTokenizer(random_vocab(8))
    assert vocabulary_of(tok) is vocabulary_of(tok)  # preprocessing cached per tokenizer
    with pytest.raises(InferlabError, match="mask kind"):
        build_mask(SCHEMA, tok, kind="fast")
    naive, indexed = build_mask(SCHEMA, tok, kind="naive"), build_mask(SCHEMA, tok, kind="indexed")
    stack = build_mask(SCHEMA, tok)  # the default: the matcher on the stack grammar
    model = GPT.init(GPTConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_layers=1, context=64))
    completes = 0
    for seed in range(6):
        outs = [generate(model, tok, "x", mask=m, max_new_tokens=40, seed=seed) for m in (naive, indexed, stack)]
        assert outs[0].tokens == outs[1].tokens == outs[2].tokens  # same allowed sets, same RNG: same path
        g = outs[1]
        if g.complete:
            completes += 1
            jsonschema.validate(json.loads(g.text), SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        assert g.stop_reason != "eos" or g.complete
    assert completes > 0
