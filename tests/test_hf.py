"""Hugging Face integration: token bytes of fast tokenizers, JSONSchemaLogitsProcessor inside
transformers' generate() (GPT-2 and Llama architectures, random weights, batches with one schema
per row, greedy / sampling / beam search) checked with jsonschema, and inferlab's bitmask against
xgrammar's at every step of valid instances, with the schemas where the two differ pinned down."""

import copy
import json
import warnings

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hf_helpers import byte_level_tokenizer, sentencepiece_tokenizer  # noqa: E402

from inferlab.constrain.hf import JSONSchemaLogitsProcessor  # noqa: E402
from inferlab.constrain.hf_vocab import check_against_decode, hf_token_bytes, hf_vocabulary  # noqa: E402
from inferlab.constrain.matcher import (GrammarMatcher, allocate_token_bitmask, compile_json_schema,  # noqa: E402
                                        unpack_bitmask)
from inferlab.constrain.schema import canonical_json  # noqa: E402
from inferlab.constrain.vocab import longest_match  # noqa: E402
from inferlab.errors import InferlabError  # noqa: E402
from inferlab.model.checkpoints import load_default_model  # noqa: E402

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                           "born": {"type": "string", "format": "date"},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "born", "age"], "additionalProperties": False}
FLAGS = {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
TENSE = {"type": "object", "properties": {"tiempo": {"enum": ["presente", "pretérito", "futuro"]},
                                          "n": {"type": "integer", "minimum": -5, "maximum": 99}},
         "required": ["tiempo", "n"], "additionalProperties": False}


@pytest.fixture(scope="module", params=["byte_level", "sentencepiece"])
def tokenizer(request):
    return byte_level_tokenizer() if request.param == "byte_level" else sentencepiece_tokenizer()


# --- token bytes ---------------------------------------------------------------------------
def test_byte_level_bytes_equal_inferlab_loader(tmp_path):
    """MiniGPT's tokenizer.json read by HF vs inferlab's own loader: the same bytes per id."""
    ours = load_default_model().tokenizer
    path = tmp_path / "tokenizer.json"
    ours.save(path)
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>")
    vocab = hf_vocabulary(hf)
    assert list(vocab.token_bytes) == ours.token_bytes and vocab.eos_id == ours.eos_id


@pytest.mark.parametrize("text", ["hola mundo", "ñandú € 😀", '{"x":[1,2]}', "tab\tnl\n\u0001"])
def test_token_bytes_spell_the_encoded_text(tokenizer, text):
    vocab = hf_vocabulary(tokenizer)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    spelled = b"".join(vocab.token_bytes[i] for i in ids)
    prefix = b" " if "▁" in tokenizer.backend_tokenizer.to_str() else b""  # SentencePiece prepends "▁"
    assert spelled == prefix + text.encode()


def test_sentencepiece_byte_fallback_and_specials():
    tok = sentencepiece_tokenizer()
    tb, special = hf_token_bytes(tok)
    assert tb[tok.convert_tokens_to_ids("<0xC3>")] == b"\xc3"
    assert tb[tok.convert_tokens_to_ids("▁")] == b" "
    assert {tok.convert_tokens_to_ids(t) for t in ("<unk>", "<s>", "</s>")} == special
    assert all(tb[i] == b"" for i in special)


def test_added_token_and_padding():
    tok = byte_level_tokenizer()
    tb, special = hf_token_bytes(tok, vocab_size=len(tok) + 5)
    assert tb[tok.convert_tokens_to_ids("hello world")] == b"hello world"
    assert len(tb) == len(tok) + 5 and tb[-5:] == [b""] * 5


def test_check_against_decode_catches_a_wrong_byte(tokenizer):
    tb, special = hf_token_bytes(tokenizer)
    i = next(i for i, b in enumerate(tb) if len(b) > 1)
    tb[i] = tb[i][::-1] + b"x"
    with pytest.raises(InferlabError, match=f"token {i} "):
        check_against_decode(tokenizer, tb, special)


# --- the processor in model.generate() -----------------------------------------------------
def tiny_model(arch: str, vocab_size: int, eos: int):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=128,
                                      bos_token_id=eos, eos_token_id=eos)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   bos_token_id=1, eos_token_id=eos)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module", params=[("gpt2", "byte_level"), ("llama", "sentencepiece")], ids=["gpt2", "llama"])
def setup(request, tmp_path_factory):
    arch, kind = request.param
    tok = byte_level_tokenizer() if kind == "byte_level" else sentencepiece_tokenizer()
    tok.padding_side = "left"
    folder = tmp_path_factory.mktemp(arch)
    # 3 padded logits rows beyond the tokenizer, as real checkpoints have: never allowed
    tiny_model(arch, len(tok) + 3, tok.eos_token_id).save_pretrained(folder)
    tok.save_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder, padding_side="left")


MODES = {"greedy": {"do_sample": False}, "sampling": {"do_sample": True, "top_k": 0, "temperature": 1.5},
         "beam": {"do_sample": False, "num_beams": 3, "num_return_sequences": 2}}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("per_row", [True, False], ids=["schema_per_row", "one_schema"])
def test_batched_generate_outputs_validate(setup, mode, per_row):
    model, tok = setup
    schemas = [PERSON, FLAGS, TENSE, FLAGS] if per_row else [TENSE]
    prompts = ["hola", "x", '{"a":', "mundo ñandú"]
    proc = JSONSchemaLogitsProcessor(schemas if per_row else TENSE, tok)
    batch = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(1)
    max_new = 64
    out = model.generate(**batch, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=max_new,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **MODES[mode])
    grammar = proc.grammars[0]
    token_bytes = hf_vocabulary(tok, model.config.vocab_size).token_bytes
    complete = proc.complete(out)
    per_item = len(out) // len(prompts)
    n_complete = 0
    for r, row in enumerate(out[:, batch["input_ids"].shape[1]:].tolist()):
        schema = schemas[r // per_item] if per_row else TENSE
        gen = row[:row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
        assert max(gen, default=0) < len(tok)  # the padded logits rows are never chosen
        if complete[r]:
            text = b"".join(token_bytes[t] for t in gen).decode()
            jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
            n_complete += 1
        else:
            assert len(row) == max_new and tok.eos_token_id not in row, (r, row)
    assert grammar.vocab_size == model.config.vocab_size
    assert n_complete > 0


def test_schema_count_must_divide_rows(setup):
    model, tok = setup
    proc = JSONSchemaLogitsProcessor([FLAGS, TENSE, PERSON], tok)
    batch = tok(["a", "b"], return_tensors="pt", padding=True)
    with pytest.raises(InferlabError, match="3 schemas for 2 rows"):
        model.generate(**batch, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=2,
                       pad_token_id=tok.pad_token_id)


# --- against xgrammar ----------------------------------------------------------------------
EQUAL_CASES = [
    (FLAGS, [[True, False], [], [False, False, True]]),
    (TENSE, [{"tiempo": "pretérito", "n": 12}, {"tiempo": "futuro", "n": 7}]),
    ({"type": "array", "items": {"type": "number"}}, [[12.5e-3, 3, 0.25], [1e10]]),
    ({"type": "object", "properties": {"verbo": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                                       "b": {"type": "null"}},
      "required": ["verbo", "tags"], "additionalProperties": False},
     [{"verbo": "hablar", "tags": ["a", "ñ b"], "b": None}, {"verbo": "", "tags": []}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False},
     [{"a": 1}, {"a": 70}, {"a": 0}]),  # negatives: see the "-0" difference below
]


def xgrammar_pair(tok, schema):
    xgr = pytest.importorskip("xgrammar")
    V = len(tok)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=[tok.eos_token_id])
    compiled = xgr.GrammarCompiler(info).compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                             separators=(",", ":"), strict_mode=True)
    return xgr, xgr.GrammarMatcher(compiled), GrammarMatcher(compile_json_schema(schema, hf_vocabulary(tok, V)))


def bitmasks(xgr, xm, m, V):
    xb, ob = xgr.allocate_token_bitmask(1, V), allocate_token_bitmask(1, V)
    xm.fill_next_token_bitmask(xb)
    m.fill_next_token_bitmask(ob)
    return unpack_bitmask(xb.numpy()[0], V), unpack_bitmask(ob[0], V)


def xgrammar_text_specials(tok) -> np.ndarray:
    """xgrammar's TokenizerInfo reads <unk> and <s> of a SentencePiece vocabulary as plain text
    tokens ("<unk>" inside a JSON string); inferlab never allows special tokens but EOS."""
    return np.array([tok.convert_tokens_to_ids(t) for t in ("<unk>", "<s>") if t in tok.get_vocab()
                     and tok.convert_tokens_to_ids(t) != tok.eos_token_id], dtype=np.int64)


@pytest.mark.parametrize("case", range(len(EQUAL_CASES)))
def test_bitmask_equals_xgrammar_at_every_step(tokenizer, case):
    schema, instances = EQUAL_CASES[case]
    xgr, xm, m = xgrammar_pair(tokenizer, schema)
    V = len(tokenizer)
    ignore = xgrammar_text_specials(tokenizer) if "▁" in tokenizer.backend_tokenizer.to_str() else []
    vocab = hf_vocabulary(tokenizer)
    for inst in instances:
        xm.reset()
        m.reset()
        ids = longest_match(vocab, canonical_json(inst, schema).encode()) + [tokenizer.eos_token_id]
        for k, t in enumerate(ids):
            theirs, ours = bitmasks(xgr, xm, m, V)
            theirs[ignore] = False
            assert np.array_equal(theirs, ours), (inst, k, np.flatnonzero(theirs != ours)[:10])
            assert xm.accept_token(t) and m.accept_token(t)
        assert xm.is_terminated() and m.is_terminated()


def allowed_after(tok, schema, text: str):
    xgr, xm, m = xgrammar_pair(tok, schema)
    for t in longest_match(hf_vocabulary(tok), text.encode()):
        assert xm.accept_token(t) and m.accept_token(t)
    theirs, ours = bitmasks(xgr, xm, m, len(tok))
    return set(np.flatnonzero(theirs & ~ours).tolist()), set(np.flatnonzero(ours & ~theirs).tolist())


def test_where_xgrammar_differs_byte_level():
    """The schemas where the bitmasks differ, each with the independent reason ours is the
    schema's reading: JSON forbids raw control characters in strings, "-0" is a JSON integer,
    and 2024-02-30 is no RFC 3339 date."""
    tok = byte_level_tokenizer()
    vocab = hf_vocabulary(tok)
    by = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    # maxLength strings: xgrammar allows raw control bytes and no escapes at all
    only_x, only_ours = allowed_after(tok, PERSON, '{"name":"')
    assert by[b"\x01"] in only_x and by[b"\\"] in only_ours
    with pytest.raises(ValueError):
        json.loads('"\x01"')
    jsonschema.validate({"name": "a\nb", "born": "2024-01-01", "age": 3}, PERSON)  # an escape, 3 chars
    # integers: "-0" is valid JSON and an integer; xgrammar refuses it
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    only_x, only_ours = allowed_after(tok, schema, '{"a":-')
    assert only_x == set() and only_ours == {by[b"0"]}
    jsonschema.validate(json.loads('{"a":-0}'), schema)
    # format date: xgrammar allows February 30 and 31
    date = {"type": "string", "format": "date"}
    only_x, only_ours = allowed_after(tok, date, '"2024-02-')
    assert by[b"3"] in only_x and only_ours == set()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("2024-02-30", date, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize("case", range(len(EQUAL_CASES)))
def test_forced_text_equals_xgrammar_jump_forward_string(tokenizer, case):
    """Equal at every step but inside a UTF-8 character: xgrammar returns a str, so "" there,
    where the forced bytes may start with the character's continuation bytes."""
    schema, instances = EQUAL_CASES[case]
    xgr, xm, m = xgrammar_pair(tokenizer, schema)
    vocab = hf_vocabulary(tokenizer)
    for inst in instances:
        xm.reset()
        m.reset()
        ids = longest_match(vocab, canonical_json(inst, schema).encode())
        for k, t in enumerate(ids):
            ours, theirs = m.forced_text(), xm.find_jump_forward_string().encode()
            try:
                b"".join(vocab.token_bytes[i] for i in ids[:k]).decode("utf-8")
                assert ours == theirs, (inst, k)
            except UnicodeDecodeError:
                assert theirs == b"" and (ours == b"" or 0x80 <= ours[0] < 0xC0)
            assert xm.accept_token(t) and m.accept_token(t)


def test_one_processor_serves_successive_generate_calls(setup):
    """A new generate() (other prompt length) is detected: rows are not read from the old offset."""
    model, tok = setup
    proc = JSONSchemaLogitsProcessor(FLAGS, tok)
    token_bytes = hf_vocabulary(tok, model.config.vocab_size).token_bytes
    for prompts in (["a"], ["a much longer prompt here", "b"]):
        batch = tok(prompts, return_tensors="pt", padding=True)
        out = model.generate(**batch, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=30,
                             do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        for row, complete in zip(out[:, batch["input_ids"].shape[1]:].tolist(), proc.complete(out)):
            gen = row[:row.index(tok.eos_token_id)] if tok.eos_token_id in row else row
            assert complete
            jsonschema.validate(json.loads(b"".join(token_bytes[t] for t in gen)), FLAGS)


def _greedy(model, tok, proc, ids, **kw):
    out = model.generate(ids, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=12,
                         do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **kw)
    return out, out[0, ids.shape[1]:].tolist()


def test_a_reused_processor_answers_as_a_fresh_one(setup):
    """transformers gives a processor no sign of a new generate(): prompts of the last output's
    length and prompts that extend the last prompt with other tokens are each new calls,
    constrained as a fresh processor constrains them."""
    model, tok = setup
    proc = JSONSchemaLogitsProcessor(FLAGS, tok)
    first = tok(["a"], return_tensors="pt")["input_ids"]
    out, _ = _greedy(model, tok, proc, first)
    others = tok(["z" * 40], return_tensors="pt")["input_ids"][0]
    for ids in (others[:out.shape[1]], others[:out.shape[1] + 3], others[:out.shape[1] + 3]):
        got = _greedy(model, tok, proc, ids[None])[1]
        assert got == _greedy(model, tok, JSONSchemaLogitsProcessor(FLAGS, tok), ids[None])[1]


BOOL = {"type": "boolean"}


def _finished(model, tok, proc):
    """A greedy output that took EOS after a whole instance (BOOL: a few tokens)."""
    out, gen = _greedy(model, tok, proc, tok(["a"], return_tensors="pt")["input_ids"])
    assert tok.eos_token_id in gen and proc.complete(out) == [True]
    return out


def test_a_finished_output_fed_back_goes_on_with_eos_only_until_reset(setup):
    """A finished output fed back looks like its call going on, and is taken so (warned of):
    only EOS; after reset() it is a new call, as a fresh processor's."""
    model, tok = setup
    proc = JSONSchemaLogitsProcessor(BOOL, tok)
    out = _finished(model, tok, proc)
    with pytest.warns(UserWarning, match="every row has taken EOS"):
        _, gen = _greedy(model, tok, proc, out)
    assert gen == [tok.eos_token_id]
    proc.reset()
    assert _greedy(model, tok, proc, out)[1] == _greedy(model, tok, JSONSchemaLogitsProcessor(BOOL, tok), out)[1]


def test_generate_stopping_on_another_id_yields_one_instance(setup):
    """generate() stopping on an id that is not the tokenizer's EOS goes on past the instance:
    the rows then hold EOS alone (a second instance used to follow, and complete() said True of
    text that was two instances); with eos_token_id= the processor allows generate()'s id."""
    model, tok = setup
    other = tok.bos_token_id if tok.bos_token_id not in (None, tok.eos_token_id) else None
    if other is None:
        pytest.skip("the tokenizer has one special token")
    ids = tok(["a"], return_tensors="pt")["input_ids"]
    proc = JSONSchemaLogitsProcessor(BOOL, tok)
    with pytest.warns(UserWarning, match="eos_token_id=model.generation_config.eos_token_id"):
        out = model.generate(ids, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=12,
                             do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=other)
    gen = out[0, ids.shape[1]:].tolist()
    first = gen.index(tok.eos_token_id)
    assert set(gen[first:]) == {tok.eos_token_id} and proc.complete(out) == [True]
    assert json.loads(tok.decode(gen, skip_special_tokens=True)) in (True, False)
    for stop in (other, [other]):
        proc = JSONSchemaLogitsProcessor(BOOL, tok, eos_token_id=stop)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = model.generate(ids, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=12,
                                 do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=other)
        gen = out[0, ids.shape[1]:].tolist()
        assert gen[-1] == other and tok.eos_token_id not in gen and proc.complete(out) == [True]
    proc = JSONSchemaLogitsProcessor(BOOL, tok, eos_token_id=[other, tok.eos_token_id])  # either, once whole
    out = model.generate(ids, logits_processor=transformers.LogitsProcessorList([proc]), max_new_tokens=12,
                         do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=[other, tok.eos_token_id])
    gen = out[0, ids.shape[1]:].tolist()
    assert gen[-1] in (other, tok.eos_token_id) and proc.complete(out) == [True]
    scores = torch.zeros(1, model.config.vocab_size)
    proc(ids, scores)                                               # a new call: nothing written yet
    assert not torch.isfinite(scores[0, [other, tok.eos_token_id]]).any()
    with pytest.raises(InferlabError, match="eos_token_id: expected a token id"):
        JSONSchemaLogitsProcessor(BOOL, tok, eos_token_id=[])


def test_complete_answers_for_the_last_call_only(setup):
    model, tok = setup
    proc = JSONSchemaLogitsProcessor(BOOL, tok)
    with pytest.raises(InferlabError, match="served no generate"):
        proc.complete([[1, 2]])
    out = _finished(model, tok, proc)
    assert proc.complete(out.tolist()) == [True]                     # a list of rows as a tensor
    with pytest.raises(InferlabError, match=r"expected generate\(\)'s \(rows, length\)"):
        proc.complete(out[0])
    _greedy(model, tok, proc, tok(["z" * 10], return_tensors="pt")["input_ids"])
    with pytest.raises(InferlabError, match="do not begin with the prompts of the last"):
        proc.complete(out)                                           # it said False of a whole instance


def test_prompt_lookup_decoding_steps_several_tokens_and_stays_valid(setup):
    """Prompt-lookup decoding checks candidate tokens several at a time (and steps back): each
    row's state is found from the prefixes the call has seen, so the output equals greedy's."""
    model, tok = setup
    ids = tok(['[true, false] [true'], return_tensors="pt")["input_ids"]
    plain = _greedy(model, tok, JSONSchemaLogitsProcessor(FLAGS, tok), ids)[1]
    looked = _greedy(model, tok, JSONSchemaLogitsProcessor(FLAGS, tok), ids, prompt_lookup_num_tokens=3)[1]
    assert looked == plain


def test_bad_tokenizers_are_refused_in_one_line(setup):
    model, tok = setup
    with pytest.raises(InferlabError, match="tokenizer: expected a transformers fast tokenizer .* got str"):
        JSONSchemaLogitsProcessor(FLAGS, "gpt2")
    no_eos = copy.deepcopy(tok)
    no_eos.eos_token = None
    proc = JSONSchemaLogitsProcessor(FLAGS, no_eos)
    with pytest.raises(InferlabError, match="no EOS token"):
        proc(torch.tensor([[1, 2]]), torch.zeros(1, model.config.vocab_size))


def test_compile_json_schema_takes_a_transformers_tokenizer(setup):
    """compile_json_schema reads a fast tokenizer's bytes itself (hf_vocabulary, checked against
    its decode()), and names what it got where it gets neither kind of tokenizer."""
    _, tok = setup
    grammar = compile_json_schema(FLAGS, tok, warm_ms=0)
    assert grammar.vocab.token_bytes == hf_vocabulary(tok).token_bytes
    with pytest.raises(InferlabError, match="got str"):
        compile_json_schema(FLAGS, "gpt2")


def test_a_vocabulary_without_eos_accepts_no_negative_token():
    """eos_id -1 means there is none: -1 is not a token, however complete the text is."""
    from inferlab.constrain.vocab import Vocabulary

    vocab = Vocabulary((b"[", b"]", b"true", b","), -1, frozenset())
    m = GrammarMatcher(compile_json_schema({"type": "array", "maxItems": 0}, vocab, warm_ms=0))
    assert m.accept_token(0) and m.accept_token(1) and not m.accept_token(-1) and not m.is_terminated()
