"""The Vocabulary (token bytes, EOS id, trie) of a tokenizer: an inferlab Tokenizer or a transformers
fast tokenizer, made once per live tokenizer object."""

from __future__ import annotations

import weakref

from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError

# One Vocabulary (and so one trie, the preprocessing) per live tokenizer object.
_VOCABS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def check_tokenizer(tokenizer) -> None:
    """InferlabError unless `tokenizer` is one a grammar can read its token bytes from: a
    transformers fast tokenizer (duck-typed: backend_tokenizer) or one with token_bytes."""
    if not (hasattr(tokenizer, "backend_tokenizer") or hasattr(tokenizer, "token_bytes")):
        raise InferlabError(f"tokenizer: expected a transformers fast tokenizer or an inferlab Tokenizer (or a "
                            f"Vocabulary), got {type(tokenizer).__name__}")


def vocabulary_of(tokenizer) -> Vocabulary:
    """The cached Vocabulary of `tokenizer`: an inferlab Tokenizer, or a transformers fast
    tokenizer (hf_vocab.hf_vocabulary, its own size: pass hf_vocabulary(tok, model's vocab_size)
    where the model pads its logits); its trie is built once, on first use."""
    check_tokenizer(tokenizer)
    vocab = _VOCABS.get(tokenizer)
    if vocab is None:
        if hasattr(tokenizer, "backend_tokenizer"):
            from inferlab.constrain.hf_vocab import hf_vocabulary  # (no transformers import: duck-typed)
            vocab = hf_vocabulary(tokenizer)
        else:
            vocab = Vocabulary.from_tokenizer(tokenizer)
        _VOCABS[tokenizer] = vocab
    return vocab
