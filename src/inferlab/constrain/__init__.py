"""Constrained decoding: JSON Schema -> grammar over a vocabulary -> token masks.

The compile path (docs/architecture.md, "constrain/"): the stack grammar of v2.
    compile_grammar (schema/)   JSON Schema -> regexes of automata that call each other
    stack.compile_machine       automata -> minimal byte DFAs -> StackMachine (configurations:
                                sets of stacks), with outlining retried while one is too large
    matcher.compile_json_schema StackMachine x vocabulary -> StackGrammar (lazy, cached masks),
                                the Grammar that GrammarMatcher, MatcherMask (the engine's hook)
                                and hf.JSONSchemaLogitsProcessor run on
    keys.py                     the keys written in the open objects: no object repeats a key
The flat regex path, kept as the baselines of the mask lab (naive scan against token index):
    compile_schema (schema/)    JSON Schema -> one regex (recursion unrolled to max_ref_depth)
    compile_regex (dfa.py)      regex -> Thompson NFA over UTF-8 bytes -> minimal DFA
    TokenIndex.build (index.py) DFA x vocabulary trie -> per-state allowed tokens, next states
    masks.py                    NaiveJSONSchemaMask (seed baseline), IndexedJSONSchemaMask
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from inferlab.constrain.dfa import DEFAULT_MAX_STATES, compile_regex
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.masks import IndexedJSONSchemaMask, NaiveJSONSchemaMask
from inferlab.constrain.matcher import (Grammar, GrammarMatcher, MatcherMask, allocate_token_bitmask,
                                        apply_token_bitmask_inplace, compile_json_schema)
from inferlab.constrain.schema import compile_schema
from inferlab.constrain.stack import StackGrammar, compile_machine
from inferlab.constrain.tokenizer_vocab import check_tokenizer, vocabulary_of
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError

# The package's API (xgrammar's names at the top level, as `import xgrammar` offers them):
__all__ = ["MASK_KINDS", "CompileReport", "Grammar", "GrammarMatcher", "MatcherMask", "Vocabulary",
           "allocate_token_bitmask", "apply_token_bitmask_inplace", "build_mask", "check_tokenizer",
           "compile_json_schema", "compile_mask", "compile_schema", "vocabulary_of"]

MASK_KINDS = ("naive", "indexed", "stack")  # the flat DFA's two baselines; the matcher on the stack grammar


@dataclass(frozen=True)
class CompileReport:
    """Where a mask's set-up time went; vocabulary preprocessing is paid once per tokenizer."""

    vocab_preprocessing_ms: float   # Vocabulary + trie (0 when cached from an earlier mask)
    schema_to_dfa_ms: float         # compile_schema + compile_regex (NFA, subsets, minimisation)
    index_build_ms: float           # TokenIndex.build (0 for the naive mask: it has no index)
    dfa_states: int
    unenforced: tuple[str, ...]     # lenient compiles only: the constraints the mask does not enforce

    @property
    def compile_ms(self) -> float:
        """Per schema: everything but the vocabulary preprocessing."""
        return self.schema_to_dfa_ms + self.index_build_ms


def compile_mask(schema: dict, tokenizer, kind: str = "stack", *, max_states: int = DEFAULT_MAX_STATES,
                 **compile_options):
    """(TokenMask enforcing `schema` over `tokenizer`'s vocabulary, CompileReport).

    kind "stack": matcher.MatcherMask over compile_json_schema (compile_options go to
    schema.compile_grammar; rows are built on first visit, so index_build_ms is 0 and their cost
    lands in the steps). "naive" / "indexed": the flat regex DFA (compile_options go to
    compile_schema: whitespace, lenient, max_ref_depth, ...). max_states bounds each DFA.
    """
    if kind not in MASK_KINDS:
        raise InferlabError(f"mask kind {kind!r}: expected one of {', '.join(MASK_KINDS)}")
    t0 = time.perf_counter()
    vocab = vocabulary_of(tokenizer)
    vocab.trie()
    t1 = time.perf_counter()
    if kind == "stack":
        return _compile_stack_mask(schema, vocab, max_states, compile_options, (t1 - t0) * 1e3)
    compiled = compile_schema(schema, **compile_options)
    dfa = compile_regex(compiled.regex, max_states=max_states)
    t2 = time.perf_counter()
    mask = NaiveJSONSchemaMask(dfa, vocab) if kind == "naive" else IndexedJSONSchemaMask(TokenIndex.build(dfa, vocab))
    t3 = time.perf_counter()
    report = CompileReport(vocab_preprocessing_ms=(t1 - t0) * 1e3, schema_to_dfa_ms=(t2 - t1) * 1e3,
                           index_build_ms=(t3 - t2) * 1e3, dfa_states=int(dfa.trans.shape[0]),
                           unenforced=tuple(compiled.unenforced))
    return mask, report


def _compile_stack_mask(schema, vocab: Vocabulary, max_states: int, compile_options: dict, vocab_ms: float):
    t0 = time.perf_counter()
    compiled, machine = compile_machine(schema, max_states=max_states, **compile_options)
    report = CompileReport(vocab_preprocessing_ms=vocab_ms, schema_to_dfa_ms=(time.perf_counter() - t0) * 1e3,
                           index_build_ms=0.0, dfa_states=machine.n_states, unenforced=tuple(compiled.unenforced))
    return MatcherMask(StackGrammar(machine, vocab)), report


def build_mask(schema: dict, tokenizer, kind: str = "stack", **options):
    """A TokenMask enforcing `schema` over `tokenizer`'s vocabulary (compile_mask without the report)."""
    return compile_mask(schema, tokenizer, kind, **options)[0]
