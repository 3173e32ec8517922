"""Token bytes of a Hugging Face fast tokenizer, checked against its own decode().

Masks work on bytes; an HF vocabulary stores strings whose meaning depends on the decoder:
  - ByteLevel (GPT-2, Llama-3, Qwen): each character stands for one byte (GPT-2's bytes_to_unicode);
  - SentencePiece style (Llama-2, Mistral; a Metaspace decoder, or Replace("▁", " ") with
    ByteFallback/Fuse/Strip): "▁" is a space and "<0xNN>" is the single byte NN;
  - added tokens: special ones (BOS, EOS, pad, ...) are b"" (never allowed but EOS where the text
    may end); the others are their text as the decoder renders it.
The derivation is then checked on every token: decode([anchor, t]) must equal the derived bytes
of anchor + t read as UTF-8 (invalid bytes -> U+FFFD, as the decoders do). The anchor, a plain
ASCII token, takes the decoders' start-of-text rules (Strip's leading space) upon itself.
The module takes the tokenizer object and never imports transformers.
"""

from __future__ import annotations

import json
import re

from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError
from inferlab.model.bpe import bytes_to_unicode

BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
SP_DECODER_PARTS = {"Replace", "ByteFallback", "Fuse", "Strip"}


def _decoder_kind(doc: dict) -> str:
    dec = doc.get("decoder") or {}
    kind = dec.get("type")
    if kind == "ByteLevel":
        return "byte_level"
    if kind == "Metaspace":
        return "sentencepiece"
    if kind == "Sequence":
        parts = dec.get("decoders", [])
        types = {d.get("type") for d in parts}
        if types == {"ByteLevel"}:
            return "byte_level"
        replaces_metaspace = any(d.get("type") == "Replace" and d.get("content") == " "
                                 and d.get("pattern", {}).get("String") == "▁" for d in parts)
        if types <= SP_DECODER_PARTS and replaces_metaspace:
            return "sentencepiece"
    raise InferlabError(f"tokenizer decoder {json.dumps(dec)[:120]}: only ByteLevel and SentencePiece-style "
                        "(Metaspace, or Replace '▁' + ByteFallback/Fuse/Strip) vocabularies are supported")


def _piece_bytes(piece: str, kind: str, byte_of: dict[str, int], byte_fallback: bool) -> bytes:
    if kind == "byte_level":
        try:
            return bytes(byte_of[c] for c in piece)
        except KeyError:  # an added token written as plain text, not in the byte alphabet
            return piece.encode("utf-8")
    m = BYTE_FALLBACK.fullmatch(piece) if byte_fallback else None
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace("▁", " ").encode("utf-8")


def hf_token_bytes(tokenizer, vocab_size: int | None = None) -> tuple[list[bytes], frozenset[int]]:
    """(bytes per id, special ids) for ids 0..max(len(tokenizer), vocab_size)-1; ids no token uses
    (a model's padded rows) get b"" and are never allowed."""
    doc = json.loads(tokenizer.backend_tokenizer.to_str())
    kind = _decoder_kind(doc)
    byte_fallback = bool((doc.get("model") or {}).get("byte_fallback"))
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    n = max(len(tokenizer), vocab_size or 0)
    out = [b""] * n
    for piece, i in tokenizer.get_vocab().items():
        if i < n:
            out[i] = _piece_bytes(piece, kind, byte_of, byte_fallback)
    special = set()
    for i, added in tokenizer.added_tokens_decoder.items():
        if added.special:
            special.add(i)
            out[i] = b""
        else:  # added tokens bypass the model; the decoder still renders them
            out[i] = _piece_bytes(added.content, kind, byte_of, byte_fallback)
    return out, frozenset(special)


def check_against_decode(tokenizer, token_bytes: list[bytes], special: frozenset[int]) -> None:
    """Raise InferlabError naming the first token whose derived bytes disagree with decode()."""
    anchor = next((i for i, b in enumerate(token_bytes)  # "<0x61>" would fuse with a byte token after it
                   if b == b"a" and not BYTE_FALLBACK.fullmatch(tokenizer.convert_ids_to_tokens(i))), None)
    if anchor is None:
        raise InferlabError("tokenizer has no token for 'a' to check the derived token bytes against decode()")
    ids = [i for i in range(min(len(tokenizer), len(token_bytes))) if i not in special]
    texts = tokenizer.batch_decode([[anchor, i] for i in ids], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    for i, got in zip(ids, texts):
        want = (b"a" + token_bytes[i]).decode("utf-8", errors="replace")
        if got != want:
            raise InferlabError(f"token {i} {tokenizer.convert_ids_to_tokens(i)!r}: derived bytes "
                                f"{token_bytes[i]!r} but tokenizer.decode gives {got[1:]!r}")


def hf_vocabulary(tokenizer, vocab_size: int | None = None, *, check: bool = True) -> Vocabulary:
    """The Vocabulary of a PreTrainedTokenizerFast (EOS: tokenizer.eos_token_id, -1 if none),
    padded to the model's vocab_size; checked against decode() on every token unless check=False."""
    token_bytes, special = hf_token_bytes(tokenizer, vocab_size)
    if check:
        check_against_decode(tokenizer, token_bytes, special)
    eos = tokenizer.eos_token_id
    return Vocabulary(tuple(token_bytes), -1 if eos is None else int(eos), special)
