"""benchmarks/mask_oracle.py's harness: its prefix-sharing oracle equals advance() token by token,
it finds no mismatch on sound masks, and it reports every checked step of a mask with a flipped
bit (so a run that finds none has looked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferlab.bench import schema_bench as bench
from inferlab.constrain import keys, native
from inferlab.constrain.machine import State
from inferlab.constrain.stack import StackGrammar
from inferlab.constrain.vocab import Vocabulary
from inferlab.model.tokenizer_loaders import load_vocab

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"},
                                      "n": {"type": "integer", "minimum": 3}}, "required": ["name"]},
    {"type": "array", "items": {"enum": ["yes", "no", 12]}, "maxItems": 3},
    {"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
     "$ref": "#/$defs/t"},
]
TESTS = [
    [{"data": {"name": "ana", "n": 4}, "valid": True}, {"data": {"name": "Ana"}, "valid": False}],
    [{"data": ["yes", 12], "valid": True}, {"data": ["maybe"], "valid": False}],
    [{"data": {"kids": [{"kids": []}, {}]}, "valid": True}, {"data": {"kids": 3}, "valid": False}],
]


@pytest.fixture(scope="module")
def oracle_module(load_benchmark):
    return load_benchmark("mask_oracle")


@pytest.fixture(scope="module")
def vocab():
    tok = load_vocab("512")
    return Vocabulary.from_tokenizer(tok), tok


def test_prefix_sharing_oracle_equals_advance_token_by_token(oracle_module, vocab):
    v, tok = vocab
    config = bench.BenchConfig(directory=Path("."))
    oracle = oracle_module.Oracle(v)
    for schema, tests in zip(SCHEMAS, TESTS):
        _, machine = bench.compile_within_limits(schema, config)
        text = bench._canonical(tests[0]["data"], schema, config).encode()
        grammar = StackGrammar(machine, v)
        for cut in range(len(text) + 1):  # every prefix of a valid text
            state = machine.feed(State(machine.start, keys.START), text[:cut])
            got, want = oracle.allowed(machine, state), oracle_module.literal_allowed(grammar, state)
            assert np.array_equal(got, want) and got.any(), (schema, text[:cut])


@pytest.mark.parametrize("mutate", [False, True])
def test_audit_finds_nothing_on_sound_masks_and_every_flipped_bit(oracle_module, vocab, mutate):
    v, tok = vocab
    audit = oracle_module.Audit(v, tok, checks=4, literal=2, mutate=mutate)
    config = bench.BenchConfig(directory=Path("."))
    for k, (schema, tests) in enumerate(zip(SCHEMAS, TESTS)):
        audit.schema(f"s{k}", schema, tests, config)
    c = audit.counts
    assert c["compiled"] == 3 and c["walks"] == 9 and c["steps_checked"] >= 18  # valid, invalid, random tokens
    assert c["advance_mismatches"] == 0 and c["literal_mismatches"] == 0 and c["literal_checks"] == 2
    assert c["mismatch_steps"] == (c["steps_checked"] if mutate else 0)
    assert c["unsound_tokens"] + c["incomplete_tokens"] == (c["steps_checked"] if mutate else 0)


@pytest.mark.skipif(not native.built(), reason="the native extension is not built")
@pytest.mark.parametrize("brute_force", [True, False])
def test_native_mode_compares_every_filled_step_with_python(oracle_module, vocab, brute_force):
    v, tok = vocab
    audit = oracle_module.Audit(v, tok, checks=2, literal=0, mutate=False, engine="native", brute_force=brute_force)
    config = bench.BenchConfig(directory=Path("."))
    for k, (schema, tests) in enumerate(zip(SCHEMAS, TESTS)):
        audit.schema(f"s{k}", schema, tests, config)
    c = audit.counts
    assert c["walks"] == 9 and c["engine_steps_compared"] == c["steps_filled"] > 9
    assert c["engine_mismatch_steps"] == 0 and c["mismatch_steps"] == 0
    assert (c["steps_checked"] >= 18) if brute_force else (c["steps_checked"] == 0)  # --engines-only: no oracle
