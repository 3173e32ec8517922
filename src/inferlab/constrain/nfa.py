"""Thompson NFA over UTF-8 bytes, built from the regex AST of regex.py.

Every CharSet (a set of code-point ranges) becomes a small byte automaton: its ranges are cut
into UTF-8 byte-range sequences, the algorithm of Rust's regex-syntax `Utf8Sequences`
(https://docs.rs/regex-syntax/latest/regex_syntax/utf8/), e.g. U+0080..U+07FF becomes
[C2-DF][80-BF]. So the automaton runs on bytes, and a token that ends in the middle of a
multi-byte character simply leaves the DFA in an intermediate state.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from inferlab.constrain.regex import Alt, Call, CharSet, Concat, Node, Repeat
from inferlab.errors import InferlabError
from inferlab.nesting import REGEX_FRAMES, recursion_room

DEFAULT_MAX_NFA_STATES = 2_000_000  # ~200 MB of Python lists; beyond it a regex is a blow-up

ByteSeq = tuple[tuple[int, int], ...]  # one UTF-8 byte range per position

# A Call(k) is written as bytes no UTF-8 text contains (F8-FF): CALL_MARK, then k in CALL_DIGITS
# base-CALL_BASE digits, each CALL_MARK + 1 + digit. So a called automaton is an ordinary edge
# path of the DFA (determinised and minimised with the rest); the stack machine reads it as a
# call, and text (tokens) never walks it.
CALL_MARK = 0xF8
CALL_BASE = 7
CALL_DIGITS = 5
MAX_CALL_TARGETS = CALL_BASE ** CALL_DIGITS


def call_bytes(target: int) -> bytes:
    """The marker path of a call of automaton `target`."""
    if not 0 <= target < MAX_CALL_TARGETS:
        raise InferlabError(f"call target {target} outside 0..{MAX_CALL_TARGETS - 1}")
    digits = []
    for _ in range(CALL_DIGITS):
        target, d = divmod(target, CALL_BASE)
        digits.append(CALL_MARK + 1 + d)
    return bytes([CALL_MARK, *digits])


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8")


@lru_cache(maxsize=4096)
def utf8_sequences(lo: int, hi: int) -> tuple[ByteSeq, ...]:
    """Cut the code-point range [lo, hi] into byte-range sequences of equal UTF-8 length.

    Each sequence matches exactly the encodings of a sub-range; together they match exactly the
    encodings of [lo, hi] minus the surrogates. Mirrors regex-syntax's Utf8Sequences.
    """
    out: list[ByteSeq] = []
    # Cut out the surrogates first: they have no UTF-8 encoding.
    pieces = [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)] if lo <= 0xDFFF and hi >= 0xD800 else [(lo, hi)]
    stack = [p for p in reversed(pieces) if p[0] <= p[1]]
    while stack:
        start, end = stack.pop()
        while True:
            split = False
            for max_cp in (0x7F, 0x7FF, 0xFFFF):  # encoding-length boundaries
                if start <= max_cp < end:
                    stack.append((max_cp + 1, end))
                    end = max_cp
                    split = True
                    break
            if split:
                continue
            if end <= 0x7F:
                out.append(((start, end),))
                break
            for i in (1, 2, 3):  # make every continuation-byte position a full range
                m = (1 << (6 * i)) - 1
                if (start & ~m) != (end & ~m):
                    if start & m:
                        stack.append(((start | m) + 1, end))
                        end = start | m
                        split = True
                        break
                    if (end & m) != m:
                        stack.append((end & ~m, end))
                        end = (end & ~m) - 1
                        split = True
                        break
            if split:
                continue
            out.append(tuple(zip(_encode(start), _encode(end))))
            break
    return tuple(out)


@lru_cache(maxsize=4096)
def charset_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[ByteSeq, ...]:
    return tuple(seq for lo, hi in ranges for seq in utf8_sequences(lo, hi))


@dataclass
class NFA:
    """Thompson NFA: eps[s] epsilon successors, edges[s] byte edges (lo, hi, target)."""

    eps: list[list[int]]
    edges: list[list[tuple[int, int, int]]]
    start: int
    final: int

    @property
    def n_states(self) -> int:
        return len(self.eps)


class _Builder:
    def __init__(self, max_states: int):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.max_states = max_states

    def state(self) -> int:
        if len(self.eps) >= self.max_states:
            raise InferlabError(f"the regex's NFA exceeds {self.max_states} states; "
                                "simplify the schema (smaller repeat counts / maxLength / enums)")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: Node, start: int) -> int:
        """Add a fragment matching `node` that is entered at `start`; return its end state.

        Fragments share their entry state instead of linking to it by an epsilon (fewer states,
        smaller closures). That is sound because no fragment ever leads back to its entry: a
        star loops through a state of its own.
        """
        if isinstance(node, CharSet):
            return self.charset(node, start)
        if isinstance(node, Concat):
            for item in node.items:
                start = self.build(item, start)
            return start
        if isinstance(node, Alt):
            end = self.state()
            for item in node.items:
                self.eps[self.build(item, start)].append(end)
            return end
        if isinstance(node, Repeat):
            return self.repeat(node, start)
        if isinstance(node, Call):
            for b in call_bytes(node.target):
                nxt = self.state()
                self.edges[start].append((b, b, nxt))
                start = nxt
            return start
        raise TypeError(f"not a regex AST node: {node!r}")

    def charset(self, node: CharSet, start: int) -> int:
        end = self.state()
        prefix_state: dict[ByteSeq, int] = {}  # a trie over the byte-range sequences
        for seq in charset_sequences(node.ranges):
            cur = start
            for k, (lo, hi) in enumerate(seq):
                if k == len(seq) - 1:
                    self.edges[cur].append((lo, hi, end))
                    break
                key = seq[:k + 1]
                nxt = prefix_state.get(key)
                if nxt is None:
                    nxt = prefix_state[key] = self.state()
                    self.edges[cur].append((lo, hi, nxt))
                cur = nxt
        return end

    def repeat(self, node: Repeat, start: int) -> int:
        cur = start
        for _ in range(node.min):  # the mandatory copies
            cur = self.build(node.item, cur)
        if node.max is None:  # then a Kleene star, looping through a state of its own
            loop = self.state()
            self.eps[cur].append(loop)
            self.eps[self.build(node.item, loop)].append(loop)
            return loop
        # x{0,k} as nested optionals (x(x(x)?)?)?: every exit goes to one end state, which keeps
        # epsilon closures small (a chain x?x?x? would give closures of size k).
        out = self.state()
        for _ in range(node.max - node.min):
            self.eps[cur].append(out)
            cur = self.build(node.item, cur)
        self.eps[cur].append(out)
        return out


def build_nfa(node: Node, *, max_states: int = DEFAULT_MAX_NFA_STATES) -> NFA:
    """Thompson construction over bytes for a regex AST."""
    b = _Builder(max_states)
    start = b.state()
    with recursion_room(REGEX_FRAMES):  # one level per AST node: the parser bounds their nesting
        final = b.build(node, start)
    return NFA(b.eps, b.edges, start, final)
