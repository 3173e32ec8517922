"""SentencePiece-style BPE with byte fallback, as the tokenizer.json of Llama 2 and Mistral defines it.

Unlike byte-level BPE there is no regex pre-tokenization and no byte-to-unicode alphabet:
- spaces become "▁" (U+2581) and a "▁" is put in front of the text, either by the normalizer
  (Prepend "▁" + Replace " " -> "▁": every segment between added tokens gets one) or by a
  Metaspace pre-tokenizer with split false (prepend_scheme "first": only the segment that starts
  the input, and never a second "▁" before one already there);
- the text, one piece, starts as one symbol per character: the character's own token when the
  vocabulary has it, else one "<0xNN>" token per UTF-8 byte (byte fallback);
- the listed merges then apply by rank (bpe.merge, the same rule as byte-level BPE).
A token's bytes (`token_bytes`, what constrained decoding and decode_bytes see) are its text with
"▁" as a space, or the byte NN for "<0xNN>". decode() then drops one leading space, as the
`tokenizers` decoders of these files do (Strip after Fuse; Metaspace), so decode(encode(text)) is
text; decoding a continuation alone loses its first space, as with transformers.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.model import bpe
from inferlab.model.tokenizer import LONE_SURROGATE, Tokenizer

SPACE = "\u2581"
PREPEND = ("every_segment", "first", "always", "never")


class SentencePieceBPE(Tokenizer):
    def __init__(self, token_bytes: list[bytes], *, vocab: dict[str, int], prepend: str, **options):
        if prepend not in PREPEND:
            raise InferlabError(f"prepend {prepend!r} is not one of {', '.join(PREPEND)}")
        super().__init__(token_bytes, pattern=None, **options)
        self.prepend = prepend
        self._char_ids = {t: i for t, i in vocab.items() if len(t) == 1}
        missing = [b for b in range(256) if f"<0x{b:02X}>" not in vocab]
        if missing:
            raise InferlabError(f"vocabulary {self.name!r} lacks the byte-fallback token <0x{missing[0]:02X}>")
        self._fallback = [vocab[f"<0x{b:02X}>"] for b in range(256)]

    def _encode_text(self, text: str, at_start: bool) -> list[int]:
        if LONE_SURROGATE.search(text):
            raise InferlabError("text contains a lone surrogate code point; it is not valid Unicode")
        text = text.replace(" ", SPACE)
        metaspace = self.prepend == "always" or (self.prepend == "first" and at_start)
        if self.prepend == "every_segment" or (metaspace and not text.startswith(SPACE)):
            text = SPACE + text
        ids: list[int] = []
        for ch in text:
            i = self._char_ids.get(ch)
            if i is None:
                ids += [self._fallback[b] for b in ch.encode("utf-8")]
            else:
                ids.append(i)
        return bpe.merge(ids, self._lookup)

    def decode(self, ids) -> str:
        text = super().decode(ids)
        return text[1:] if text.startswith(" ") else text

    def to_hf_json(self, pattern: str | None = None) -> dict:
        raise InferlabError(f"{self.name!r} is SentencePiece-style; writing its tokenizer.json is not supported")


def metaspace_options(doc: dict, path: Path) -> dict:
    """{"prepend": ...} from a SentencePiece-style tokenizer.json's normalizer / pre_tokenizer."""
    norm, pre = doc.get("normalizer"), doc.get("pre_tokenizer")
    if pre is None and isinstance(norm, dict) and norm.get("type") == "Sequence":
        normalizers = norm.get("normalizers", [])
        if not (isinstance(normalizers, list) and all(isinstance(n, dict) for n in normalizers)
                and all(isinstance(n.get("pattern") or {}, dict) for n in normalizers)):
            raise InferlabError(f"{path}: /normalizer/normalizers must be a list of objects")
        steps = [(n.get("type"), n.get("prepend"), (n.get("pattern") or {}).get("String"), n.get("content"))
                 for n in normalizers]
        if steps == [("Prepend", SPACE, None, None), ("Replace", None, " ", SPACE)]:
            return {"prepend": "every_segment"}
    if norm is None and isinstance(pre, dict) and pre.get("type") == "Metaspace" and pre.get("replacement") == SPACE:
        if pre.get("split", True):
            raise InferlabError(f"{path}: /pre_tokenizer/split true (Metaspace splitting on spaces) is not supported")
        scheme = pre.get("prepend_scheme") or ("always" if pre.get("add_prefix_space", True) else "never")
        if scheme in ("first", "always", "never"):
            return {"prepend": scheme}
    raise InferlabError(f"{path}: /normalizer and /pre_tokenizer are not a supported SentencePiece-style pair "
                        "(Prepend + Replace normalizers, or a Metaspace pre-tokenizer with split false)")
