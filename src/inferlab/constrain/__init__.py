"""Constrained decoding: schema -> regex -> byte DFA -> token index -> masks.

    compile_schema (schema.py)  JSON Schema -> regex string (the dialect of regex.py)
    compile_regex (dfa.py)      regex -> Thompson NFA over UTF-8 bytes -> minimal DFA
    TokenIndex.build (index.py) DFA x vocabulary trie -> per-state allowed tokens, next states
    masks.py                    NaiveJSONSchemaMask (seed baseline), IndexedJSONSchemaMask
"""

from __future__ import annotations

import weakref

from inferlab.constrain.dfa import DEFAULT_MAX_STATES, compile_regex
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.masks import IndexedJSONSchemaMask, NaiveJSONSchemaMask
from inferlab.constrain.schema import compile_schema
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError

MASK_KINDS = ("naive", "indexed")

# One Vocabulary (and so one trie, the preprocessing) per live tokenizer object.
_VOCABS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def vocabulary_of(tokenizer) -> Vocabulary:
    """The cached Vocabulary of `tokenizer`; its trie is built once, on first use."""
    vocab = _VOCABS.get(tokenizer)
    if vocab is None:
        vocab = _VOCABS[tokenizer] = Vocabulary.from_tokenizer(tokenizer)
    return vocab


def build_mask(schema: dict, tokenizer, kind: str = "indexed", *, max_states: int = DEFAULT_MAX_STATES,
               **compile_options):
    """A TokenMask enforcing `schema` over `tokenizer`'s vocabulary.

    compile_options go to compile_schema (whitespace, lenient, max_ref_depth, ...); max_states
    bounds the DFA.
    """
    if kind not in MASK_KINDS:
        raise InferlabError(f"mask kind {kind!r}: expected one of {', '.join(MASK_KINDS)}")
    compiled = compile_schema(schema, **compile_options)
    dfa = compile_regex(compiled.regex, max_states=max_states)
    vocab = vocabulary_of(tokenizer)
    if kind == "naive":
        return NaiveJSONSchemaMask(dfa, vocab)
    return IndexedJSONSchemaMask(TokenIndex.build(dfa, vocab))
