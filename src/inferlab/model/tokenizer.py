"""Byte-level BPE: the Tokenizer (encode/decode with explicit special tokens) and its training.

- `train_bpe(text, vocab_size)` learns a GPT-2-style tokenizer (GPT-2 pre-tokenization, byte
  base vocabulary, merges) whose ids are: the 256 bytes, then the merged tokens in merge order,
  then the special tokens. MiniGPT's default 512-token vocabulary is trained with it.
- `Tokenizer.save(path)` writes a Hugging Face `tokenizer.json` (BPE model with merges, ByteLevel
  pre-tokenizer, GPT-2's byte-to-unicode map), so the HF `tokenizers` library loads what we ship;
  it is also our oracle in the tests. Reading tokenizer.json, .tiktoken files and the shipped
  vocabularies (load_vocab) is model/tokenizer_loaders.py's.

Special tokens are never matched silently: like tiktoken, `encode` raises when the text contains
one that is not in `allowed_special`; pass `disallowed_special=()` to encode it as plain text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Iterable
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Literal

from inferlab.errors import InferlabError
from inferlab.model import bpe
from inferlab.model.pretokenize import PATTERN_NAMES, REFERENCE_PATTERNS, pretokenize

ENDOFTEXT = "<|endoftext|>"
_CACHE_LIMIT = 1 << 16          # pre-tokens remembered per tokenizer (prompts repeat words a lot)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")   # str allows lone surrogates; UTF-8 does not


class Tokenizer:
    """A byte-level BPE tokenizer.

    token_bytes[i] is the exact byte string of id i (possibly a partial UTF-8 character); it is
    b"" for special tokens and for ids no token uses (cl100k_base leaves 100261..100275 empty).
    `merges` given: Hugging Face's merge rule over those (left id, right id) pairs, in rank order.
    `merges` None: tiktoken's rule, where an id is the rank of its bytes.
    """

    def __init__(
        self,
        token_bytes: list[bytes],
        *,
        special_tokens: dict[str, int],
        pattern: str | None,
        merges: list[tuple[int, int]] | None,
        eos_token: str,
        normalization: Literal["NFC"] | None = None,
        ignore_merges: bool = False,
        name: str = "bpe",
        added_tokens: dict[str, int] | None = None,
        bos_token: str | None = None,
    ):
        if pattern is not None and pattern not in PATTERN_NAMES:   # None: sp_bpe.SentencePieceBPE
            raise InferlabError(f"unknown pre-tokenization pattern {pattern!r}; known: {', '.join(PATTERN_NAMES)}")
        if eos_token not in special_tokens:
            raise InferlabError(f"eos token {eos_token!r} is not among the special tokens")
        self.name = name
        self.pattern = pattern
        self.normalization = normalization
        self.special_tokens = dict(special_tokens)
        self.special_ids = frozenset(special_tokens.values())
        if max(self.special_ids) >= len(token_bytes):
            raise InferlabError(f"special token id {max(self.special_ids)} is outside the vocabulary of {len(token_bytes)}")
        self.eos_id = special_tokens[eos_token]
        if bos_token is not None and bos_token not in special_tokens:
            raise InferlabError(f"bos token {bos_token!r} is not among the special tokens")
        # the id a prompt starts with when the tokenizer.json's post_processor prepends one (Llama)
        self.bos_id = None if bos_token is None else special_tokens[bos_token]
        # non-special added tokens: ordinary ids with their own bytes, but always matched whole
        self.added_tokens = dict(added_tokens or {})
        self.token_bytes = [b"" if i in self.special_ids else t for i, t in enumerate(token_bytes)]
        self.vocab_size = len(self.token_bytes)
        self.merges = None if merges is None else list(merges)
        self._id_of = {t: i for i, t in enumerate(self.token_bytes) if t}
        missing = [b for b in range(256) if bytes([b]) not in self._id_of]
        if missing:
            raise InferlabError(f"vocabulary {name!r} lacks the single byte 0x{missing[0]:02x}; byte-level BPE needs all 256")
        self._byte_ids = [self._id_of[bytes([b])] for b in range(256)]
        if self.merges is None:
            self._lookup = self._tiktoken_lookup
            self._whole_piece = True            # tiktoken takes a piece that is a token as is
        else:
            pair_rank: dict[tuple[int, int], tuple[int, int]] = {}
            for rank, (a, b) in enumerate(self.merges):
                merged = self._id_of.get(self.token_bytes[a] + self.token_bytes[b])
                if merged is None:
                    raise InferlabError(f"merge {rank} ({a}, {b}) makes bytes that are not in the vocabulary")
                pair_rank.setdefault((a, b), (rank, merged))
            self._lookup = pair_rank.get
            self._whole_piece = ignore_merges   # HF's ignore_merges (Llama 3) does the same
        self._special_bytes = {i: t.encode("utf-8") for t, i in self.special_tokens.items()}
        self._cache: dict[str, tuple[int, ...]] = {}

    def pad_to(self, vocab_size: int) -> None:
        """Cover a model's padded embedding rows (Qwen2.5: 151,936 rows, 151,665 tokens): the ids
        no token uses get b"" (never produced by encode, never allowed by a mask)."""
        if vocab_size > self.vocab_size:
            self.token_bytes.extend([b""] * (vocab_size - self.vocab_size))
            self.vocab_size = vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, vocab_size={self.vocab_size}, pattern={self.pattern!r})"

    # --- encode -----------------------------------------------------------------------------
    def encode(
        self,
        text: str,
        *,
        allowed_special: Collection[str] | Literal["all"] = frozenset(),
        disallowed_special: Collection[str] | Literal["all"] = "all",
    ) -> list[int]:
        """Token ids of `text`, with tiktoken's special-token semantics.

        A special token in `allowed_special` becomes its id. One in `disallowed_special` (by
        default every special not allowed) raises InferlabError. Any other occurrence of a
        special token's text is encoded as ordinary text. Non-special added tokens (a
        tokenizer.json's added_tokens with "special": false) always become their ids, as in
        the `tokenizers` library.
        """
        text = self._normalize(text)
        allowed = self._special_set(allowed_special, "allowed_special")
        if disallowed_special == "all":
            disallowed = set(self.special_tokens) - allowed
        else:
            disallowed = self._special_set(disallowed_special, "disallowed_special")
        for token in sorted(disallowed):
            if token in text:
                raise InferlabError(
                    f"text contains the special token {token!r}: pass allowed_special to encode it "
                    "as its id, or disallowed_special=() to encode it as plain text"
                )
        return self._encode_split(text, allowed)

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of `text` with special tokens treated as plain text."""
        return self._encode_split(text, ())

    def _encode_split(self, text: str, allowed: Collection[str]) -> list[int]:
        """Split out the allowed specials and the added tokens, encode the text between them."""
        if not allowed and not self.added_tokens:
            return self._encode_text(text, at_start=True)
        ids: list[int] = []
        start = 0
        for m in _alternation(frozenset(allowed) | frozenset(self.added_tokens)).finditer(text):
            if m.start() > start:
                ids += self._encode_text(text[start:m.start()], at_start=start == 0)
            token = m.group()
            ids.append(self.added_tokens[token] if token in self.added_tokens else self.special_tokens[token])
            start = m.end()
        if start < len(text):
            ids += self._encode_text(text[start:], at_start=start == 0)
        return ids

    def _encode_text(self, text: str, at_start: bool) -> list[int]:
        """Ids of text holding no special or added token; `at_start`: it begins the input."""
        if LONE_SURROGATE.search(text):
            raise InferlabError("text contains a lone surrogate code point; it is not valid Unicode")
        get, miss = self._cache.get, self._encode_new_piece
        # one C-level pass over the pieces; only the pieces never seen before run BPE
        return list(chain.from_iterable([get(piece) or miss(piece) for piece in pretokenize(text, self.pattern)]))

    def _encode_new_piece(self, piece: str) -> tuple[int, ...]:
        """BPE of a pre-token seen for the first time, remembered (the `tokenizers` library's word cache)."""
        ids = self.encode_piece(piece.encode("utf-8"))
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[piece] = ids
        return ids

    def encode_piece(self, data: bytes) -> tuple[int, ...]:
        """BPE-merge the bytes of one pre-token (any bytes, not only UTF-8) into ids."""
        if self._whole_piece and data in self._id_of:
            return (self._id_of[data],)
        return tuple(bpe.merge([self._byte_ids[b] for b in data], self._lookup))

    def _tiktoken_lookup(self, pair: tuple[int, int]) -> tuple[int, int] | None:
        merged = self._id_of.get(self.token_bytes[pair[0]] + self.token_bytes[pair[1]])
        return None if merged is None else (merged, merged)

    def _normalize(self, text: str) -> str:
        return unicodedata.normalize(self.normalization, text) if self.normalization else text

    def _special_set(self, value: Collection[str] | str, flag: str) -> set[str]:
        if value == "all":
            return set(self.special_tokens)
        if isinstance(value, str):
            raise InferlabError(f"{flag} must be 'all' or a collection of special tokens, got the string {value!r}")
        unknown = sorted(set(value) - set(self.special_tokens))
        if unknown:
            raise InferlabError(f"{flag}: {unknown[0]!r} is not a special token of {self.name!r}")
        return set(value)

    # --- decode -----------------------------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The raw bytes of `ids`; a special token contributes its text."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise InferlabError(f"token id {i} is outside the vocabulary of {self.vocab_size}")
            data = self.token_bytes[i] or self._special_bytes.get(i)
            if data is None:
                raise InferlabError(f"token id {i} is unused in vocabulary {self.name!r}")
            out.append(data)
        return b"".join(out)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`. Bytes that are not valid UTF-8 (a character cut between tokens) become
        U+FFFD, as tiktoken and HF's ByteLevel decoder do; use decode_bytes to keep them."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # --- tokenizer.json ---------------------------------------------------------------------
    def to_hf_json(self, pattern: str | None = None) -> dict:
        """This tokenizer as a Hugging Face tokenizer.json document. A tiktoken vocabulary (no
        merges list) gets the merges transformers' TikTokenConverter derives from its ranks, with
        ignore_merges, as Llama 3's tokenizer.json was made from its tiktoken file. `pattern`
        replaces the pre-tokenizer (e.g. "llama3" for cl100k's vocabulary in Llama 3's style).

        cl100k's own regex is refused: `tokenizers` (Oniguruma) reads its possessive `{1,3}+` as
        "repeat {1,3} one or more times", so the file would split digits differently."""
        pattern = pattern or self.pattern
        if pattern == "cl100k":
            raise InferlabError("cl100k's regex cannot be written to tokenizer.json (tokenizers reads "
                                "'{1,3}+' as a repeat, not possessive); pass pattern='llama3'")
        if pattern not in PATTERN_NAMES:
            raise InferlabError(f"{self.name!r} has no byte-level pre-tokenization pattern to write")
        merges = self.merges if self.merges is not None else bpe.merges_from_ranks(self.token_bytes)
        table = bpe.bytes_to_unicode()
        as_text = [bpe.encode_bytes_as_unicode(t, table) for t in self.token_bytes]
        vocab = {s: i for i, s in enumerate(as_text) if self.token_bytes[i]}
        added = [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t, i in sorted(self.special_tokens.items(), key=lambda kv: kv[1])
        ] + [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False}
            for t, i in sorted(self.added_tokens.items(), key=lambda kv: kv[1])
        ]
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": pattern == "gpt2"}
        if pattern == "gpt2":
            pre = byte_level
        else:
            split = {"type": "Split", "pattern": {"Regex": REFERENCE_PATTERNS[pattern]},
                     "behavior": "Isolated", "invert": False}
            pre = {"type": "Sequence", "pretokenizers": [split, byte_level]}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": {"type": self.normalization} if self.normalization else None,
            "pre_tokenizer": pre,
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {
                "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                "ignore_merges": self._whole_piece,
                "vocab": vocab,
                "merges": [f"{as_text[a]} {as_text[b]}" for a, b in merges],
            },
        }

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write tokenizer.json atomically; an existing file is kept unless force."""
        from inferlab.measure.artifacts import atomic_write_text

        path = Path(path)
        if path.exists() and not force:
            raise InferlabError(f"{path} exists; pass force to overwrite it")
        atomic_write_text(path, json.dumps(self.to_hf_json(), ensure_ascii=False, indent=1) + "\n")
        return path


@lru_cache(maxsize=64)
def _alternation(tokens: frozenset[str]) -> re.Pattern:
    # Longest first, so that of two specials starting at one position the longer one wins.
    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=lambda t: (-len(t), t))))


# --- training -------------------------------------------------------------------------------
def train_bpe(
    text: str,
    vocab_size: int,
    special_tokens: tuple[str, ...] = (ENDOFTEXT,),
    *,
    progress: bool = False,
) -> Tokenizer:
    """Learn a byte-level BPE of exactly `vocab_size` ids (256 bytes + merges + special tokens).

    The text is split on the special tokens (they never take part in merges), pre-tokenized with
    GPT-2's pattern, and merged by pair frequency (bpe.train_merges). The EOS token is
    "<|endoftext|>" when present, else the first special token. Raises InferlabError if the text
    is too small to learn that many tokens, rather than returning a smaller vocabulary.
    """
    specials = tuple(special_tokens)
    if not specials:
        raise InferlabError("train_bpe: special_tokens is empty; an EOS token is required")
    if len(set(specials)) != len(specials) or any(not s for s in specials):
        raise InferlabError(f"train_bpe: special_tokens must be distinct and non-empty, got {specials!r}")
    n_merged = vocab_size - len(specials)
    if n_merged < 256:
        raise InferlabError(f"train_bpe: vocab_size {vocab_size} is below 256 bytes + {len(specials)} special tokens")
    chunks = _alternation(frozenset(specials)).split(text)
    words = bpe.count_words(piece for chunk in chunks for piece in pretokenize(chunk, "gpt2"))
    token_bytes = [bytes([b]) for b in range(256)]
    if progress:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("training BPE", total=n_merged - 256)
            merges = bpe.train_merges(words, n_merged, token_bytes, on_token=lambda: bar.advance(task))
    else:
        merges = bpe.train_merges(words, n_merged, token_bytes)
    if len(token_bytes) < n_merged:
        raise InferlabError(
            f"train_bpe: the text only supports {len(token_bytes) + len(specials)} tokens, "
            f"vocab_size {vocab_size} asked for; give more text or a smaller vocab_size"
        )
    special_ids = {s: n_merged + k for k, s in enumerate(specials)}
    eos = ENDOFTEXT if ENDOFTEXT in special_ids else specials[0]
    return Tokenizer(token_bytes + [b""] * len(specials), special_tokens=special_ids, pattern="gpt2",
                     merges=merges, eos_token=eos, name="trained")
