"""The matcher API: bitmasks against a brute-force walk of every token's bytes through the DFA,
forced text against hand-derived strings, rollback/reset/termination semantics, the bitmask
helpers against hand-set bits, the TokenMask adapter against the indexed mask, and jump-forward
outputs (valid, accepted by a fresh matcher, forced runs canonically tokenized)."""

import json
from importlib import resources

import jsonschema
import numpy as np
import pytest

from inferlab.constrain import build_mask, vocabulary_of
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.matcher import (GrammarMatcher, MatcherMask, allocate_token_bitmask,
                                        apply_token_bitmask_inplace, compile_json_schema, unpack_bitmask)
from inferlab.constrain.schema import canonical_json, compile_schema
from inferlab.errors import InferlabError
from inferlab.model.checkpoints import load_default_model
from inferlab.model.generate import JumpForward, generate

CONJUGATION = json.loads((resources.files("inferlab") / "data" / "conjugation.schema.json").read_text())
INSTANCES = [
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "hablo"},
    {"verbo": "vivir", "tiempo": "pretérito", "persona": "vosotros", "forma": "vivisteis"},
    {"verbo": "ñoñear", "tiempo": "futuro", "persona": "él", "forma": "ñoñeará"},
]


@pytest.fixture(scope="module")
def ckpt():
    return load_default_model()


@pytest.fixture(scope="module")
def grammar(ckpt):
    return compile_json_schema(CONJUGATION, ckpt.tokenizer)


def brute_allowed(dfa, vocab, text: bytes) -> set[int]:
    """Tokens whose bytes keep `text` a live prefix, walked byte by byte; EOS iff accepting."""
    state = dfa.walk(text)
    out = {t for t, b in enumerate(vocab.token_bytes)
           if b and t not in vocab.special_ids and dfa.walk(b, state) >= 0}
    if dfa.accepting[state]:
        out.add(vocab.eos_id)
    return out


def test_bitmask_equals_brute_force_walk(ckpt, grammar):
    tok = ckpt.tokenizer
    dfa = compile_regex(compile_schema(CONJUGATION).regex)  # an independent compile
    vocab = vocabulary_of(tok)
    m = GrammarMatcher(grammar)
    bitmask = allocate_token_bitmask(2, tok.vocab_size)
    for inst in INSTANCES:
        m.reset()
        ids = tok.encode(canonical_json(inst, CONJUGATION))
        for k in range(len(ids) + 1):
            m.fill_next_token_bitmask(bitmask, 1)
            got = set(np.flatnonzero(unpack_bitmask(bitmask[1], tok.vocab_size)).tolist())
            assert got == brute_allowed(dfa, vocab, tok.decode_bytes(ids[:k])), (inst, k)
            if k < len(ids):
                assert m.accept_token(ids[k])
        assert m.accept_token(tok.eos_id) and m.is_terminated()


def test_forced_text_hand_derived(ckpt, grammar):
    tok = ckpt.tokenizer
    m = GrammarMatcher(grammar)
    assert m.forced_text() == b'{"verbo":"'

    def after(text: str) -> bytes:
        m.reset()
        for t in tok.encode(text):
            assert m.accept_token(t)
        return m.forced_text()

    assert after('{"verbo":"hablar"') == b',"tiempo":"'
    assert after('{"verbo":"hablar","tiempo":"pre') == b""          # presente | pretérito
    assert after('{"verbo":"hablar","tiempo":"pres') == b'ente","persona":"'
    assert after('{"verbo":"x","tiempo":"futuro","persona":"nosotros","forma":"y"}') == b""  # may end
    assert after('{"verbo":"x","tiempo":"futuro","persona":"t') == "ú".encode() + b'","forma":"'


def test_chars_after_forced_hand_derived(ckpt, grammar):
    tok = ckpt.tokenizer
    m = MatcherMask(grammar)

    def after(text: str):
        m.reset()
        for t in tok.encode(text):
            m.advance(t)
        return m.chars_after_forced()

    assert set(after('{"verbo":"x"')) == {"p", "f"}                       # presente | pretérito | futuro
    assert set(after('{"verbo":"x","tiempo":"futuro"')) == {"y", "t", "é", "n", "v", "e"}
    assert after("") is None                                             # a free string: too many to list
    assert after('{"verbo":"x","tiempo":"futuro","persona":"yo","forma":"y"}') == []


def test_rollback_reset_and_termination(ckpt, grammar):
    tok = ckpt.tokenizer
    ids = tok.encode(canonical_json(INSTANCES[0], CONJUGATION))
    m = GrammarMatcher(grammar)
    masks = []
    for t in ids:
        masks.append(allocate_token_bitmask(1, tok.vocab_size))
        m.fill_next_token_bitmask(masks[-1])
        assert m.accept_token(t)
    assert not m.accept_token(tok.encode("{")[0])  # a refused token leaves the state as it was
    assert m.accept_token(tok.eos_id) and m.is_terminated()
    assert not m.accept_token(ids[0])
    end = allocate_token_bitmask(1, tok.vocab_size)
    m.fill_next_token_bitmask(end)  # after EOS only EOS, so a finished batch row is never all -inf
    assert np.flatnonzero(unpack_bitmask(end[0], tok.vocab_size)).tolist() == [tok.eos_id]
    m.rollback(1)
    assert not m.is_terminated()
    for j in (1, 5, len(ids)):  # rolled back j tokens == accepted all but the last j
        rolled, probe = GrammarMatcher(grammar), GrammarMatcher(grammar)
        for t in ids:
            rolled.accept_token(t)
        rolled.rollback(j)
        for t in ids[:len(ids) - j]:
            probe.accept_token(t)
        a, b = allocate_token_bitmask(1, tok.vocab_size), allocate_token_bitmask(1, tok.vocab_size)
        rolled.fill_next_token_bitmask(a)
        probe.fill_next_token_bitmask(b)
        assert np.array_equal(a, b) and np.array_equal(a, masks[len(ids) - j])
    with pytest.raises(InferlabError):
        m.rollback(len(ids) + 1)
    m.reset()
    assert m.forced_text() == b'{"verbo":"' and not m.is_terminated()
    bounded = GrammarMatcher(grammar, max_rollback_tokens=2)
    for t in ids[:5]:
        bounded.accept_token(t)
    with pytest.raises(InferlabError):
        bounded.rollback(3)
    bounded.rollback(2)


def test_one_grammar_serves_many_matchers(ckpt, grammar):
    tok = ckpt.tokenizer
    a, b = GrammarMatcher(grammar), GrammarMatcher(grammar)
    for t in tok.encode('{"verbo":"x"'):
        assert a.accept_token(t)
    assert b.forced_text() == b'{"verbo":"' and a.forced_text() == b',"tiempo":"'


def test_bitmask_helpers_hand_set_bits():
    V = 70
    bm = allocate_token_bitmask(2, V)
    assert bm.shape == (2, 3) and bm.dtype == np.int32 and (bm == -1).all()
    bm[:] = 0
    for t in (0, 31, 32, 69):  # word t // 32, bit t % 32, written by hand
        bm.view(np.uint32)[0, t // 32] |= np.uint32(1) << np.uint32(t % 32)
    bm[1] = -1
    logits = np.arange(2 * V, dtype=np.float32).reshape(2, V)
    apply_token_bitmask_inplace(logits, bm)
    assert np.flatnonzero(np.isfinite(logits[0])).tolist() == [0, 31, 32, 69]
    assert np.isfinite(logits[1]).all()
    row = np.arange(V, dtype=np.float32)
    apply_token_bitmask_inplace(row, bm[0])
    assert np.flatnonzero(np.isfinite(row)).tolist() == [0, 31, 32, 69]
    torch = pytest.importorskip("torch")
    t = torch.arange(2 * V, dtype=torch.float32).reshape(2, V)
    apply_token_bitmask_inplace(t, torch.from_numpy(bm))
    assert torch.isfinite(t[0]).nonzero().flatten().tolist() == [0, 31, 32, 69]
    assert torch.isfinite(t[1]).all()
    half = torch.arange(V, dtype=torch.bfloat16)  # not float32: the masked_fill_ path
    apply_token_bitmask_inplace(half, bm[0])
    assert torch.isfinite(half).nonzero().flatten().tolist() == [0, 31, 32, 69]
    for wide in (np.zeros(97, dtype=np.float32), torch.zeros(97)):  # past the 96 tokens of 3 words
        with pytest.raises(ValueError, match="97 columns but the bitmask covers 96"):
            apply_token_bitmask_inplace(wide, bm[0])


def test_bitmask_of_another_dtype_width_or_row_is_refused_by_name(ckpt, grammar):
    """An int64 bitmask was read as int32 words (other tokens allowed); a width or row that does
    not fit crashed deep in numpy on some states only."""
    m = GrammarMatcher(grammar)
    words = (ckpt.tokenizer.vocab_size + 31) // 32
    m.accept_token(ckpt.tokenizer.encode("{")[0])
    for bad, err, needle in ((np.zeros((1, words), np.int64), TypeError, "dtype int64, expected int32"),
                             (np.zeros(words, np.float32), TypeError, "dtype float32"),
                             ([0] * words, TypeError, "list, expected a numpy int32"),
                             (np.zeros((1, words - 1), np.int32), ValueError, f"{words - 1} words but"),
                             (np.zeros((1, 1, words), np.int32), ValueError, "expected \\(W,\\) or \\(B, W\\)")):
        with pytest.raises(err, match=needle):
            m.fill_next_token_bitmask(bad)
    for bitmask, row in ((np.zeros(words, np.int32), 1), (np.zeros((2, words), np.int32), 2),
                         (np.zeros((2, words), np.int32), -1)):
        with pytest.raises(ValueError, match=f"row {row} is not a row"):
            m.fill_next_token_bitmask(bitmask, row)
    exact = allocate_token_bitmask(1, ckpt.tokenizer.vocab_size)
    m.fill_next_token_bitmask(exact)
    wide = np.full((2, words + 3), -1, np.int32)   # allocated for a model's padded logits
    m.fill_next_token_bitmask(wide, 1)
    assert (wide[1, :words] == exact[0]).all() and (wide[1, words:] == 0).all() and (wide[0] == -1).all()
    torch = pytest.importorskip("torch")             # xgrammar's allocate_token_bitmask gives a torch tensor
    t = torch.full((1, words), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(t)
    assert (t.numpy() == exact).all()


def test_apply_refuses_shapes_and_dtypes_it_cannot_read():
    V = 70
    bm = np.zeros((2, 3), np.int32)
    bm.view(np.uint32)[:, 0] = 1 << 5              # token 5 alone
    row = np.zeros(V, np.float32)
    apply_token_bitmask_inplace(row, bm[:1])        # (V,) logits with a (1, W) bitmask, as xgrammar takes
    assert np.flatnonzero(np.isfinite(row)).tolist() == [5]
    for logits, bitmask, err, needle in ((np.zeros((3, V), np.float32), bm, ValueError, "2 rows for logits of shape"),
                                         (np.zeros(V, np.float32), bm, ValueError, "2 rows for logits of shape"),
                                         (np.zeros(V, np.int64), bm[0], TypeError, "expected a float dtype"),
                                         (np.zeros(V, np.float32), bm.astype(np.int64), TypeError, "dtype int64"),
                                         (np.zeros((1, 1, V), np.float32), bm, ValueError, "expected \\(V,\\)")):
        with pytest.raises(err, match=needle):
            apply_token_bitmask_inplace(logits, bitmask)


def test_matcher_mask_generates_like_the_indexed_mask(ckpt, grammar):
    for seed in range(3):
        a = generate(ckpt.model, ckpt.tokenizer, "conjuga comer, futuro, ellos:", mask=MatcherMask(grammar), seed=seed)
        b = generate(ckpt.model, ckpt.tokenizer, "conjuga comer, futuro, ellos:",
                     mask=build_mask(CONJUGATION, ckpt.tokenizer, kind="indexed"), seed=seed)
        assert a.tokens == b.tokens and a.complete == b.complete


def test_jump_forward_plan_is_the_canonical_tokenization_in_context(ckpt, grammar):
    """Teacher-forced along canonical tokenizations of valid texts: wherever a jump is planned,
    its tokens are exactly the canonical tokens of the whole text at that place, and accepted."""
    tok = ckpt.tokenizer
    jump = JumpForward(tok)
    planned = 0
    for inst in INSTANCES:
        ids = tok.encode(canonical_json(inst, CONJUGATION))
        for k in range(len(ids)):
            mask = MatcherMask(grammar)
            for t in ids[:k]:
                mask.advance(t)
            plan = jump.plan(mask, ids[:k])
            if plan is None:
                continue
            planned += 1
            at = max(k - 1, 0)
            assert plan == ids[at:at + len(plan)], (inst, k, plan)
            assert (tok.decode_bytes(ids[:k]) + mask.forced_text()).startswith(tok.decode_bytes(ids[:at + len(plan)]))
            if k:
                mask.rollback(1)
            for t in plan:
                mask.advance(t)
    assert planned >= 3 * len(INSTANCES)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_jump_forward_outputs_valid(ckpt, grammar, temperature):
    tok = ckpt.tokenizer
    prompts = ["conjuga hablar, presente, yo:", "conjuga vivir, pretérito, nosotros:", ""]
    saved = 0
    for seed, prompt in enumerate(prompts):
        g = generate(ckpt.model, tok, prompt, mask=MatcherMask(grammar), seed=seed, temperature=temperature,
                     jump_forward=True, max_new_tokens=48)
        assert g.stop_reason in ("eos", "max_new_tokens")
        if g.stop_reason == "eos":
            jsonschema.validate(json.loads(g.text), CONJUGATION, format_checker=jsonschema.FormatChecker())
        else:
            assert g.n_tokens == 48
        fresh = GrammarMatcher(grammar)
        assert all(fresh.accept_token(t) for t in g.tokens)
        assert g.n_steps + g.forward_passes_saved == g.n_tokens + (g.stop_reason == "eos")
        assert g.tokens_forced >= g.forward_passes_saved > 0
        saved += g.forward_passes_saved
    assert saved > 0


def test_jump_forward_respects_max_new_tokens(ckpt, grammar):
    g = generate(ckpt.model, ckpt.tokenizer, "", mask=MatcherMask(grammar), jump_forward=True, max_new_tokens=2)
    assert g.n_tokens == 2 and g.stop_reason == "max_new_tokens"
    assert ckpt.tokenizer.decode(g.tokens) == '{"verbo'[:len(ckpt.tokenizer.decode(g.tokens))]


def test_jump_forward_needs_a_matcher_mask(ckpt):
    with pytest.raises(InferlabError):
        generate(ckpt.model, ckpt.tokenizer, "x", jump_forward=True)
    with pytest.raises(InferlabError):
        generate(ckpt.model, ckpt.tokenizer, "x", mask=build_mask(CONJUGATION, ckpt.tokenizer, kind="indexed"),
                 jump_forward=True)


def test_cli_jump_forward(capsys):
    from inferlab.cli import main

    schema = str(resources.files("inferlab") / "data" / "conjugation.schema.json")
    assert main(["generate", "conjuga comer, futuro, ellos:", "--schema", schema, "--jump-forward", "--json",
                 "--temperature", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] and out["forward_passes_saved"] > 0 and out["tokens_forced"] >= out["forward_passes_saved"]
    jsonschema.validate(json.loads(out["text"]), CONJUGATION)
    assert main(["generate", "x", "--jump-forward"]) == 2
    assert "--jump-forward needs --schema" in capsys.readouterr().err


def test_matcher_mask_apply_equals_the_brute_force_allowed_set(ckpt, grammar):
    """The cached plan (allowed or disallowed ids) against the brute-force walk, at every step of
    valid instances, twice (the second pass reads the plans from the cache); both plan kinds."""
    tok = ckpt.tokenizer
    dfa = compile_regex(compile_schema(CONJUGATION).regex)  # an independent compile
    vocab = vocabulary_of(tok)
    mask = MatcherMask(grammar)
    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(2):
        for inst in INSTANCES:
            mask.reset()
            ids = tok.encode(canonical_json(inst, CONJUGATION))
            for k, t in enumerate(ids):
                logits = rng.standard_normal(tok.vocab_size).astype(np.float32)
                want = logits.copy()
                allowed = brute_allowed(dfa, vocab, tok.decode_bytes(ids[:k]))
                want[[i for i in range(tok.vocab_size) if i not in allowed]] = -np.inf
                plan = mask.allowed_mask()
                kinds.add(plan[0])
                mask.apply(logits, plan)
                assert np.array_equal(logits, want), (inst, k)
                mask.advance(t)
    assert kinds == {True, False}


def test_the_package_exports_the_matcher_verbs_as_xgrammar_does():
    """`from inferlab.constrain import ...` gives the matcher module's own objects, and they work
    together: a mask that allows exactly the tokens the grammar advances on."""
    import inferlab.constrain as constrain
    from inferlab.constrain import matcher
    from inferlab.model.tokenizer_loaders import load_vocab

    names = ("compile_json_schema", "GrammarMatcher", "allocate_token_bitmask", "apply_token_bitmask_inplace")
    assert all(getattr(constrain, name) is getattr(matcher, name) for name in names)
    tok = load_vocab("512")
    grammar = constrain.compile_json_schema({"type": "boolean"}, tok)
    bitmask = constrain.allocate_token_bitmask(1, tok.vocab_size)
    constrain.GrammarMatcher(grammar).fill_next_token_bitmask(bitmask)
    logits = np.zeros((1, tok.vocab_size), dtype=np.float32)
    constrain.apply_token_bitmask_inplace(logits, bitmask)
    allowed = {int(t) for t in np.flatnonzero(np.isfinite(logits[0]))}
    start = grammar.initial_state()
    assert allowed == {t for t in range(tok.vocab_size) if grammar.advance(start, t) is not None}
    assert allowed and all(b"true".startswith(tok.token_bytes[t]) or b"false".startswith(tok.token_bytes[t])
                           for t in allowed)
