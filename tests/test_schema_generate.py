"""Every complete output of generate() under a compiled schema validates with jsonschema, on a
stratified sample of the real benchmark schemas (issue 6: "and on the benchmark sample").

The model is a stand-in whose logits prefer short tokens and the characters that close JSON
values, so constrained random walks finish within the token budget; what is under test is the
mask and generate, not a model. Slow, and skipped when ../shared/jsonschemabench is absent.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracles import ClosingBiasedModel

from inferlab.constrain import vocabulary_of
from inferlab.bench.schema_bench import DEFAULT_DIR, BenchConfig, compile_within_limits, list_cases
from inferlab.constrain.masks import NEG_INF
from inferlab.constrain.stack import StackGrammar
from inferlab.errors import InferlabError
from inferlab.model.generate import generate
from inferlab.model.tokenizer_loaders import load_vocab

jsonschema = pytest.importorskip("jsonschema")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="../shared/jsonschemabench is not here")]


class GrammarTokenMask:
    """The TokenMask hook driven by the Grammar protocol methods (test-local: the library's
    adapter over GrammarMatcher is constrain.matcher's)."""

    def __init__(self, grammar):
        self.grammar = grammar
        self.vocab_size = grammar.vocab_size
        self.row = np.zeros((grammar.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
        self.reset()

    def reset(self):
        self.state = self.grammar.initial_state()

    def allowed_mask(self):
        self.grammar.fill_bitmask(self.state, self.row)
        return self.row

    def apply(self, logits, m):
        keep = np.unpackbits(m.view(np.uint8), count=len(logits), bitorder="little")  # (V,)
        logits[keep == 0] = NEG_INF

    def advance(self, token):
        nxt = self.grammar.advance(self.state, token)
        if nxt is None:
            raise InferlabError(f"token {token} is not allowed")
        self.state = nxt

    def is_complete(self):
        return self.grammar.can_end(self.state)

    def allowed_ids(self):
        return self.grammar.allowed_ids(self.state)


def test_complete_outputs_validate_on_the_benchmark_sample():
    tok = load_vocab("512")
    vocab = vocabulary_of(tok)
    model = ClosingBiasedModel(tok)
    config = BenchConfig(limit=60)
    checked = complete = 0
    for path in list_cases(DEFAULT_DIR, limit=config.limit, seed=1):
        schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
        try:
            _, machine = compile_within_limits(schema, config)
        except InferlabError:
            continue                      # refused: nothing is generated for it
        mask = GrammarTokenMask(StackGrammar(machine, vocab))
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for seed in range(3):
            g = generate(model, tok, "", mask=mask, max_new_tokens=400, seed=seed)
            checked += 1
            if not g.complete:
                continue                  # ran out of tokens: reported incomplete, never as valid
            complete += 1
            errors = list(validator.iter_errors(json.loads(g.text)))
            assert not errors, f"{path.name} seed {seed}: {g.text[:200]!r} -> {errors[0].message}"
    # Not vacuous: most walks end, and in an accepting state.
    assert checked >= 60 and complete >= checked // 2, (checked, complete)
