"""Recursive schemas end to end (issue 15: "A recursive schema accepts and generates instances
nested 20 levels deep"): the matcher accepts a 20-level instance token by token, and generate()
(plain and jump-forward), `inferlab generate --schema` and the Hugging Face processor generate
one when a stand-in model's logits push towards it. The mask decides what is allowed: jsonschema
validates the output and the nesting depth is counted on the parsed instance. The flat regex DFA
(recursion unrolled to max_ref_depth) cannot follow the same model, which shows the test is not
vacuous.
"""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest

from inferlab.constrain import build_mask
from inferlab.constrain.matcher import GrammarMatcher, MatcherMask, compile_json_schema
from inferlab.model.checkpoints import load_default_model
from inferlab.model.generate import generate

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer", "minimum": 0, "maximum": 9},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
    "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node"}
DEPTH = 20


def nested_tree(depth: int) -> dict:
    return {"v": depth % 10} if depth == 0 else {"v": depth % 10, "kids": [nested_tree(depth - 1)]}


TARGET = json.dumps(nested_tree(DEPTH), separators=(",", ":")).encode()


def depth_of(instance: dict) -> int:
    depth = 0
    while "kids" in instance:
        instance, depth = instance["kids"][0], depth + 1
    return depth


def check_deep(text: str) -> None:
    instance = json.loads(text)
    jsonschema.validate(instance, TREE)
    assert depth_of(instance) == DEPTH


def preferred(token_bytes, text: bytes, target: bytes) -> np.ndarray:
    """(V,) float32 bias: the tokens that continue `target` after `text`, longer ones more."""
    rest = target[len(text):] if target.startswith(text) else b""
    return np.array([len(b) if b and rest.startswith(b) else -1.0 for b in token_bytes], dtype=np.float32)


@dataclass(frozen=True)
class _Config:
    vocab_size: int
    context: int = 4096


class _Cache:
    def __init__(self):
        self.ids: list[int] = []
        self.length = 0


class TargetModel:
    """A stand-in for inferlab's generate(): its logits favour the longest token that continues
    TARGET after the text fed so far (specials skipped), and EOS once all of it is written."""

    def __init__(self, tok, target: bytes = TARGET):
        self.tok, self.target = tok, target
        self.config = _Config(tok.vocab_size)

    def new_cache(self, kind="contiguous"):
        return _Cache()

    def decode(self, ids, cache):
        cache.ids += list(ids)
        cache.length += len(ids)
        text = b"".join(self.tok.token_bytes[i] for i in cache.ids if i != self.tok.eos_id)
        logits = preferred(self.tok.token_bytes, text, self.target)              # (V,)
        logits[self.tok.eos_id] = 100.0 if text == self.target else -5.0
        return np.broadcast_to(logits, (len(ids), logits.size)).copy()           # (len(ids), V)


@pytest.fixture(scope="module")
def tok():
    return load_default_model().tokenizer


def test_matcher_accepts_a_20_level_instance(tok):
    grammar = compile_json_schema(TREE, tok)
    assert grammar.machine.uses_stack
    m = GrammarMatcher(grammar)
    ids = tok.encode(TARGET.decode())
    assert all(m.accept_token(t) for t in ids)
    assert m.accept_token(tok.eos_id) and m.is_terminated()
    m.reset()
    assert all(m.accept_token(t) for t in tok.encode(TARGET[:-1].decode()))
    assert not m.accept_token(tok.eos_id)                 # one "}" short: not complete


@pytest.mark.parametrize("jump_forward", [False, True])
def test_generate_reaches_20_levels(tok, jump_forward):
    mask = MatcherMask(compile_json_schema(TREE, tok))
    g = generate(TargetModel(tok), tok, "", mask=mask, max_new_tokens=400, temperature=0.0,
                 jump_forward=jump_forward)
    assert g.stop_reason == "eos" and g.complete
    check_deep(g.text)
    if jump_forward:
        assert g.forward_passes_saved > 0
    # The flat regex DFA unrolls the $ref to max_ref_depth levels: the same model cannot get there.
    flat = generate(TargetModel(tok), tok, "", mask=build_mask(TREE, tok, kind="indexed"), max_new_tokens=400,
                    temperature=0.0)
    assert flat.text.encode() != TARGET


def test_cli_generate_reaches_20_levels(tok, tmp_path, monkeypatch, capsys):
    from inferlab.cli import generate as cli_generate
    from inferlab.cli import main

    ckpt = SimpleNamespace(model=TargetModel(tok), tokenizer=tok, trained=True, source="stand-in")
    monkeypatch.setattr(cli_generate, "load_default_model", lambda: ckpt)
    path = tmp_path / "tree.json"
    path.write_text(json.dumps(TREE))
    for extra in ([], ["--jump-forward"]):
        rc = main(["generate", "", "--schema", str(path), "--temperature", "0", "--max-new-tokens", "400",
                   "--json", *extra])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["valid"] and out["stop_reason"] == "eos"
        check_deep(out["text"])


@pytest.mark.slow  # ~5 s (transformers generate); generate() and the CLI reach 20 levels in the default run
def test_hf_processor_reaches_20_levels():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hf_helpers import byte_level_tokenizer

    from inferlab.constrain.hf import JSONSchemaLogitsProcessor
    from inferlab.constrain.hf_vocab import hf_vocabulary

    tok = byte_level_tokenizer()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=1, n_head=2, n_positions=512,
                                  bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    token_bytes = hf_vocabulary(tok, len(tok)).token_bytes
    batch = tok(["x"], return_tensors="pt")
    n_prompt = batch["input_ids"].shape[1]

    class PushTowardsTarget(transformers.LogitsProcessor):
        """Before the schema's processor: favour the tokens that continue TARGET, then EOS."""

        def __call__(self, input_ids, scores):
            for r, seq in enumerate(input_ids[:, n_prompt:].tolist()):
                text = b"".join(token_bytes[t] for t in seq)
                bias = torch.from_numpy(10.0 * preferred(token_bytes, text, TARGET))
                bias[tok.eos_token_id] = 1000.0 if text == TARGET else -50.0
                scores[r] += bias
            return scores

    proc = JSONSchemaLogitsProcessor(TREE, tok)
    out = model.generate(**batch, logits_processor=transformers.LogitsProcessorList([PushTowardsTarget(), proc]),
                         max_new_tokens=400, do_sample=False, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id)
    assert proc.complete(out) == [True]
    gen = out[0, n_prompt:].tolist()
    gen = gen[:gen.index(tok.eos_token_id)]
    check_deep(b"".join(token_bytes[t] for t in gen).decode())
