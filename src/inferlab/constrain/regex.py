"""The regex dialect of the constrain pipeline, and its parser: pattern string -> AST.

The regex STRING is the seam between the JSON-schema compiler (schema.py) and the automaton
(nfa.py -> dfa.py). The dialect is a subset of Python's `re` syntax, chosen so that
`re.fullmatch(pattern, text, re.ASCII)` is an independent oracle for every pattern we accept.

Matching is always whole-string (there is no search mode), so there are no anchors.

Supported
- literal characters: any Unicode code point except the metacharacters `\\ . [ ] ( ) | * + ?`
  (`{` is literal when it does not start a valid quantifier, `}` and `]` outside a class are
  literal, as in Python);
- escapes: a backslash before any non-alphanumeric ASCII character is that character (so
  `re.escape` output is valid); `\\n \\t \\r \\f \\v \\a`, `\\xHH`, `\\uXXXX`, `\\UXXXXXXXX`;
- `\\d \\w \\s` and their complements `\\D \\W \\S`, with ASCII meanings
  (`[0-9]`, `[A-Za-z0-9_]`, `[ \\t\\n\\r\\f\\v]`); unlike Python's default Unicode meanings;
  tests compare with re.ASCII;
- `.`: any code point except `\\n`;
- classes `[...]` and `[^...]` with ranges `a-z`, escapes, and `\\d \\w \\s \\D \\W \\S` inside;
  `]` first in a class and `-` first or last are literal; `\\b` in a class is backspace;
- groups `(...)`, `(?:...)` and `(?P<name>...)` (captures are irrelevant to a DFA);
- alternation `|` (empty alternatives allowed);
- quantifiers `* + ? {m} {m,} {,n} {m,n}`; the lazy forms `*? +? ?? {m,n}?` are accepted and
  treated as greedy: under whole-string matching they accept the same strings.

Rejected with an InferlabError naming the construct and its position: groups nested deeper
than nesting.MAX_REGEX_DEPTH, anchors (`^ $ \\A \\Z \\b
\\B`), backreferences (`\\1`, `(?P=name)`), lookaround (`(?= (?! (?<= (?<!`), inline flags
(`(?i)`), possessive quantifiers, a quantifier with nothing to repeat, and unknown escapes.

The code-point domain excludes the surrogates U+D800..U+DFFF: they have no UTF-8 encoding, and
the automaton works on UTF-8 bytes.

AST (frozen dataclasses; `parse` returns one of them):
    CharSet(ranges)        one code point from sorted, disjoint, non-adjacent inclusive ranges
    Concat(items)          the items in sequence; Concat(()) is the empty string
    Alt(items)             any one of the items
    Repeat(item, min, max) item repeated min..max times (max None = unbounded)
    Call(target)           `(?&N)`: a call of automaton N of a stack grammar (constrain.stack);
                           not Python `re` syntax, written only by the schema compiler
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from inferlab.errors import InferlabError
from inferlab.nesting import MAX_REGEX_DEPTH, REGEX_FRAMES, recursion_room

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


@dataclass(frozen=True)
class CharSet:
    ranges: tuple[tuple[int, int], ...]  # sorted, disjoint, non-adjacent, surrogates removed


@dataclass(frozen=True)
class Concat:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Alt:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Repeat:
    item: "Node"
    min: int
    max: int | None  # None = unbounded


@dataclass(frozen=True)
class Call:
    target: int  # the called automaton's number in its grammar


Node = CharSet | Concat | Alt | Repeat | Call


def normalize_ranges(ranges) -> tuple[tuple[int, int], ...]:
    """Sort and merge inclusive code-point ranges; drop the surrogate block."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out = []
    for lo, hi in merged:
        # Cut out U+D800..U+DFFF: no UTF-8 encoding exists for them.
        if lo < SURROGATES[0]:
            out.append((lo, min(hi, SURROGATES[0] - 1)))
        if hi > SURROGATES[1]:
            out.append((max(lo, SURROGATES[1] + 1), hi))
    return tuple(out)


def charset(ranges) -> CharSet:
    return CharSet(normalize_ranges(ranges))


def negate(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The complement over the whole code-point domain (surrogates excluded)."""
    out, nxt = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return normalize_ranges(out)


_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE = ((0x09, 0x0D), (0x20, 0x20))  # \t \n \v \f \r and space: Python's re.ASCII \s
_CLASS_ESCAPES = {
    "d": _DIGIT, "w": _WORD, "s": _SPACE,
    "D": negate(_DIGIT), "W": negate(_WORD), "S": negate(_SPACE),
}
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_ANCHOR_ESCAPES = {"A": "anchor \\A", "Z": "anchor \\Z", "b": "word boundary \\b",
                   "B": "word boundary \\B", "z": "anchor \\z", "G": "anchor \\G"}
_DOT = charset(((0, 0x09), (0x0B, MAX_CODE_POINT)))


# Candidate spans of groups and classes, for the parser's memo: an escape, a class (`]` first
# is literal), or a parenthesis. A span only proposes a key; a memo entry is made where the
# parser ended there too, so a wrong proposal costs a miss, never a wrong parse.
_SPANS = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|[()]", re.S)
_CLASS = re.compile(r"\[\^?\]?(?:\\.|[^\]\\])*\]", re.S)
_CLASS_MEMO: dict[str, "CharSet"] = {}  # class text -> its CharSet, across patterns
_CLASS_MEMO_MAX = 50_000
# A run of plain literal characters (no metacharacter, no `{`, no anchor): schema regexes are
# mostly such runs (keys, punctuation), and each character is one CharSet of itself.
_LITERAL_RUN = re.compile(r"[^\\.\[()|*+?{^$]+")
# Group texts -> (node, groups nested in it), across patterns: a schema's regexes repeat the same
# groups (a string's characters, a number, a key's rest) in every automaton, and schemas share
# them. Bounded by the characters its keys hold (forgotten at once past the budget).
_GROUP_MEMO: dict[str, tuple] = {}
_GROUP_MEMO_CHARS = 4096         # a longer group's text is not kept
_GROUP_MEMO_BUDGET = 4_000_000   # characters over all kept texts
_group_memo_chars = [0]
_LITERALS: dict[str, "CharSet"] = {}  # a character -> its CharSet (at most one per code point met)


class _Parser:
    """Recursive descent: alt := concat ('|' concat)* ; concat := (atom quantifier*)*.

    Schema regexes repeat the same groups and classes thousands of times (a string's
    characters, the rest of a key after the declared names): each distinct group text is parsed
    once (across patterns, _GROUP_MEMO, up to _GROUP_MEMO_CHARS; longer ones once per pattern),
    and each class text once, so equal subtrees are one node object."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.depth = 0  # groups open around self.i
        self.close: dict[int, int] = {}  # '(' position -> the position after its ')', by _SPANS
        self.long_groups: dict[str, tuple[Node, int]] = {}  # (texts past _GROUP_MEMO_CHARS: this pattern's)
        self.deepest = 0  # the deepest self.depth reached so far
        opens = []
        for m in _SPANS.finditer(pattern):
            c = m.group()
            if c == "(":
                opens.append(m.start())
            elif c == ")" and opens:
                self.close[opens.pop()] = m.end()

    def error(self, what: str, pos: int | None = None) -> InferlabError:
        pos = self.i if pos is None else pos
        # Schema regexes run to 10^5 characters: quote only the neighbourhood of the problem.
        shown = self.p if len(self.p) <= 80 else f"...{self.p[max(0, pos - 40):pos + 40]}..."
        return InferlabError(f"regex {shown!r}: {what} at position {pos}")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self) -> Node:
        node = self.alt()
        if self.i < len(self.p):  # only an unbalanced ')' stops alt() early
            raise self.error("unbalanced ')'")
        return node

    def alt(self) -> Node:
        items = [self.concat()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.concat())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def concat(self) -> Node:
        items: list[Node] = []
        while (c := self.peek()) is not None and c not in "|)":
            run = _LITERAL_RUN.match(self.p, self.i)
            if run is not None and run.end() - self.i > 1:
                # all but the run's last character at once; the last may take a quantifier
                items.extend(_literal(ch) for ch in self.p[self.i:run.end() - 1])
                self.i = run.end() - 1
            start = self.i
            atom = self.atom()
            items.append(self.quantifiers(atom, start))
        return items[0] if len(items) == 1 else Concat(tuple(items))

    def quantifiers(self, atom: Node, start: int) -> Node:
        if self.i >= len(self.p) or self.p[self.i] not in "*+?{":  # (most atoms: no quantifier)
            return atom
        quantified = False
        while True:
            pos = self.i
            q = self.quantifier()
            if q is None:
                return atom
            if quantified:
                raise self.error("multiple repeat (possessive quantifiers are not supported)", pos)
            quantified = True
            if self.peek() == "?":  # lazy == greedy under whole-string matching
                self.i += 1
            atom = Repeat(atom, q[0], q[1])

    def quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c == "{":
            return self.braces()
        return None

    def braces(self) -> tuple[int, int | None] | None:
        """`{m}`, `{m,}`, `{,n}`, `{m,n}`; anything else leaves `{` a literal (as Python does)."""
        end = self.p.find("}", self.i)
        if end < 0:
            return None
        body = self.p[self.i + 1:end]
        lo_s, comma, hi_s = body.partition(",")
        if not (lo_s.isascii() and hi_s.isascii()) or not (lo_s.isdigit() or (comma and lo_s == "")):
            return None
        if hi_s and not hi_s.isdigit():
            return None
        lo = int(lo_s) if lo_s else 0
        hi = (int(hi_s) if hi_s else None) if comma else lo
        if hi is not None and lo > hi:
            raise self.error(f"min repeat greater than max repeat {{{body}}}")
        self.i = end + 1
        return lo, hi

    def atom(self) -> Node:
        c = self.p[self.i]
        if c in "*+?" or (c == "{" and self._starts_quantifier()):
            raise self.error(f"nothing to repeat before {c!r}")
        if c == "(":
            return self.group()
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return _DOT
        if c == "^" or c == "$":
            raise self.error(f"anchor {c!r} is not supported (matching is always whole-string)")
        if c == "\\":
            ranges = self.escape(in_class=False)
            return charset(ranges)
        self.i += 1
        return charset(((ord(c), ord(c)),))

    def _starts_quantifier(self) -> bool:
        save = self.i
        try:
            return self.braces() is not None
        finally:
            self.i = save

    def group(self) -> Node:
        """A group, from the memo where its text was parsed before (the parse of a group depends
        on its text alone, and on the groups open around it for the nesting limit)."""
        open_pos = self.i
        end = self.close.get(open_pos)
        text = self.p[open_pos:end] if end is not None else None
        memo = _GROUP_MEMO if text is None or len(text) <= _GROUP_MEMO_CHARS else self.long_groups
        hit = memo.get(text) if text is not None else None
        if hit is not None and self.depth + hit[1] <= MAX_REGEX_DEPTH:
            self.i = end
            self.deepest = max(self.deepest, self.depth + hit[1])
            return hit[0]
        outer, self.deepest = self.deepest, self.depth
        node = self._group()
        inner = self.deepest - self.depth
        self.deepest = max(outer, self.deepest)
        if text is not None and self.i == end:
            if memo is _GROUP_MEMO:
                _group_memo_chars[0] += len(text)
                if _group_memo_chars[0] > _GROUP_MEMO_BUDGET:
                    memo.clear()
                    _group_memo_chars[0] = len(text)
            memo[text] = (node, inner)
        return node

    def _group(self) -> Node:
        open_pos = self.i
        self.i += 1
        if self.p.startswith("?", self.i):
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?&", self.i):
                close = self.p.find(")", self.i)
                number = self.p[self.i + 2:close] if close > 0 else ""
                if not (number.isascii() and number.isdigit()):
                    raise self.error("bad call '(?&N)'", open_pos)
                self.i = close + 1
                return Call(int(number))
            elif self.p.startswith("?P<", self.i):
                close = self.p.find(">", self.i)
                name = self.p[self.i + 3:close] if close > 0 else ""
                if not name.isidentifier():
                    raise self.error("bad group name", open_pos)
                self.i = close + 1
            else:
                construct = {"?=": "lookahead", "?!": "negative lookahead", "?<=": "lookbehind",
                             "?<!": "negative lookbehind", "?P=": "backreference",
                             "?#": "comment group", "?(": "conditional group"}
                for prefix, name in sorted(construct.items(), key=lambda kv: -len(kv[0])):
                    if self.p.startswith(prefix, self.i):
                        raise self.error(f"{name} '({prefix}' is not supported", open_pos)
                raise self.error("inline flags / extension group '(?' are not supported", open_pos)
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        if self.depth > MAX_REGEX_DEPTH:
            raise self.error(f"groups nested deeper than {MAX_REGEX_DEPTH:,} (the nesting limit)", open_pos)
        node = self.alt()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ')', unterminated group", open_pos)
        self.i += 1
        return node

    def escape(self, *, in_class: bool) -> tuple[tuple[int, int], ...]:
        """Parse `\\X` at self.i; return the code-point ranges it denotes."""
        pos = self.i
        self.i += 1
        if self.i >= len(self.p):
            raise self.error("bad escape (end of pattern)", pos)
        c = self.p[self.i]
        self.i += 1
        if c in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[c]
        if c in _CHAR_ESCAPES:
            return ((ord(_CHAR_ESCAPES[c]),) * 2,)
        if c == "b" and in_class:
            return ((8, 8),)  # backspace, as in Python
        if c in _HEX_ESCAPES:
            n = _HEX_ESCAPES[c]
            digits = self.p[self.i:self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"bad escape \\{c}{digits} (need {n} hex digits)", pos)
            self.i += n
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                raise self.error(f"bad escape \\{c}{digits} (beyond U+10FFFF)", pos)
            return ((cp, cp),)
        if c in _ANCHOR_ESCAPES and not in_class:
            raise self.error(f"{_ANCHOR_ESCAPES[c]} is not supported (matching is always whole-string)", pos)
        if c.isdigit():
            raise self.error(f"backreference or octal escape \\{c} is not supported", pos)
        if c.isascii() and c.isalnum():
            raise self.error(f"bad escape \\{c}", pos)
        return ((ord(c), ord(c)),)

    def char_class(self) -> Node:
        m = _CLASS.match(self.p, self.i)
        text = m.group() if m else None
        hit = _CLASS_MEMO.get(text) if text is not None else None
        if hit is not None:
            self.i = m.end()
            return hit
        node = self._char_class()
        if text is not None and self.i == m.end():
            if len(_CLASS_MEMO) >= _CLASS_MEMO_MAX:
                _CLASS_MEMO.clear()
            _CLASS_MEMO[text] = node
        return node

    def _char_class(self) -> Node:
        open_pos = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("unterminated character set", open_pos)
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            item_pos = self.i
            lo = self.class_item()
            if self.peek() == "-" and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]":
                self.i += 1
                hi = self.class_item()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
                    raise self.error("bad character range", item_pos)
                if hi[0][0] < lo[0][0]:
                    raise self.error("bad character range (reversed)", item_pos)
                ranges.append((lo[0][0], hi[0][0]))
            else:
                ranges.extend(lo)
        rs = normalize_ranges(ranges)
        return CharSet(negate(rs) if negated else rs)

    def class_item(self) -> tuple[tuple[int, int], ...]:
        c = self.p[self.i]
        if c == "\\":
            return self.escape(in_class=True)
        self.i += 1
        return ((ord(c), ord(c)),)


def _literal(ch: str) -> CharSet:
    node = _LITERALS.get(ch)
    if node is None:
        if len(_LITERALS) >= _CLASS_MEMO_MAX:
            _LITERALS.clear()
        node = _LITERALS[ch] = charset(((ord(ch), ord(ch)),))
    return node


def parse(pattern: str) -> Node:
    """Parse a pattern of the dialect above into an AST; InferlabError names what is rejected.
    Groups nest at most nesting.MAX_REGEX_DEPTH deep, under any Python recursion limit."""
    with recursion_room(REGEX_FRAMES):
        return _Parser(pattern).parse()


def clear_memo() -> None:
    """Forget the class texts and patterns parsed so far (a cold parse)."""
    _CLASS_MEMO.clear()
    _GROUP_MEMO.clear()
    _group_memo_chars[0] = 0
    _LITERALS.clear()
    _parsed.cache_clear()


@lru_cache(maxsize=16)
def _parsed(pattern: str) -> Node:
    return parse(pattern)


def fullmatch(pattern: str, text: str) -> bool:
    """Does `pattern` (this dialect, no calls) match the whole of `text`? The AST is walked over
    the text's code points, memoised by (node, position), so only the branches the text enters
    are visited: Python's re would compile the whole pattern first, which takes seconds at the
    10^5 characters of a flat schema regex. Meanings as `parse` gives them (ASCII \\d \\w \\s)."""
    node = _parsed(pattern)
    with recursion_room(REGEX_FRAMES):  # one level per AST node, as the parser's
        return len(text) in _Matcher(text).ends(node, 0)


class _Matcher:
    def __init__(self, text: str):
        self.cps = [ord(c) for c in text]
        self.memo: dict[tuple[int, int], frozenset[int]] = {}

    def ends(self, node: Node, i: int) -> frozenset[int]:
        """The positions where a match of `node` that starts at `i` can end."""
        key = (id(node), i)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = frozenset(self._ends(node, i))
        return out

    def _ends(self, node: Node, i: int) -> set[int]:
        if isinstance(node, CharSet):
            if i < len(self.cps):
                cp = self.cps[i]
                k = bisect_right(node.ranges, (cp, MAX_CODE_POINT + 1)) - 1
                if k >= 0 and node.ranges[k][0] <= cp <= node.ranges[k][1]:
                    return {i + 1}
            return set()
        if isinstance(node, Concat):
            pos = {i}
            for item in node.items:
                pos = {e for p in pos for e in self.ends(item, p)}
                if not pos:
                    break
            return pos
        if isinstance(node, Alt):
            return {e for item in node.items for e in self.ends(item, i)}
        if isinstance(node, Repeat):
            return self._repeat(node, i)
        raise InferlabError(f"fullmatch: {type(node).__name__} is not supported (a flat pattern has no calls)")

    def _repeat(self, node: Repeat, i: int) -> set[int]:
        """item{min,max}: positions after each count of items. From min on, a position reached
        again (at a higher count, so with fewer items left) adds nothing new."""
        out = {i} if node.min == 0 else set()
        frontier, k = {i}, 0
        while frontier and (node.max is None or k < node.max):
            nxt = {e for p in frontier for e in self.ends(node.item, p)}
            k += 1
            if k >= node.min:
                frontier = nxt - out
                out |= nxt
            elif nxt == frontier:  # a fixed point (a nullable item): every later count gives it too
                out |= nxt
                break
            else:
                frontier = nxt
        return out
