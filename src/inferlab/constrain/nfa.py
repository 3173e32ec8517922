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
from inferlab.constrain.caches import CACHES

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


class NfaLimit(InferlabError):
    """The Thompson construction reached its max_states."""

    def __init__(self, max_states: int):
        super().__init__(f"the regex's NFA exceeds {max_states} states; "
                         "simplify the schema (smaller repeat counts / maxLength / enums)")


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
    """Thompson's construction run backwards: a fragment is built for its continuation (the
    state reached after it), so a subexpression that occurs many times with one continuation is
    built once. Schema regexes repeat whole suffixes: the rest of a key after it leaves the
    declared names is one `(char)*"` per trie node of the names, all followed by the same state.
    Shared, those are one set of NFA states, and the subset construction meets each DFA state
    once instead of once per copy (the minimiser would merge the copies, but only after the
    state limit counted them)."""

    def __init__(self, max_states: int):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.max_states = max_states
        self.ids: dict[int, int] = {}        # id(node) -> structural id (equal subtrees, equal ids)
        self.table: dict[tuple, int] = {}    # structural key -> structural id
        self.keep: list[Node] = []           # the nodes whose id() is a key of self.ids
        self.built: dict[tuple[int, int], int] = {}  # (structural id, continuation) -> entry

    def state(self) -> int:
        if len(self.eps) >= self.max_states:
            raise NfaLimit(self.max_states)
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def sid(self, node: Node) -> int:
        """The structural id of `node`: equal subtrees (the parser builds each anew) share one."""
        out = self.ids.get(id(node))
        if out is None:
            if isinstance(node, CharSet):
                key = (0, node.ranges)
            elif isinstance(node, (Concat, Alt)):
                key = (1 if isinstance(node, Concat) else 2, tuple(self.sid(item) for item in node.items))
            elif isinstance(node, Repeat):
                key = (3, self.sid(node.item), node.min, node.max)
            elif isinstance(node, Call):
                key = (4, node.target)
            else:
                raise TypeError(f"not a regex AST node: {node!r}")
            out = self.ids[id(node)] = self.table.setdefault(key, len(self.table))
            self.keep.append(node)
        return out

    def build(self, node: Node, end: int) -> int:
        """A fragment matching `node` that leads to state `end`; return its entry state.

        States get edges only when they are created, so a state's language never changes once
        returned, and an entry built for (node, end) serves every occurrence of that pair."""
        if isinstance(node, Concat):
            for item in reversed(node.items):
                end = self.build(item, end)
            return end
        key = (self.sid(node), end)
        entry = self.built.get(key)
        if entry is None:
            entry = self.built[key] = self._build(node, end)
        return entry

    def _build(self, node: Node, end: int) -> int:
        if isinstance(node, CharSet):
            return self.charset(node, end)
        if isinstance(node, Alt):
            entry = self.state()
            self.eps[entry] = list(dict.fromkeys(self.build(item, end) for item in node.items))
            return entry
        if isinstance(node, Repeat):
            return self.repeat(node, end)
        if isinstance(node, Call):
            marks = call_bytes(node.target)
            for b in reversed(marks):
                prev = self.state()
                self.edges[prev].append((b, b, end))
                end = prev
            return end
        raise TypeError(f"not a regex AST node: {node!r}")

    def charset(self, node: CharSet, end: int) -> int:
        start = self.state()
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
        return start

    def repeat(self, node: Repeat, end: int) -> int:
        if node.max is None:  # a Kleene star, looping through a state of its own
            cur = self.state()
            self.eps[cur] = [self.build(node.item, cur), end]
        else:
            # x{0,k} as nested optionals (x(x(x)?)?)?: every exit goes to `end`, which keeps
            # epsilon closures small (a chain x?x?x? would give closures of size k).
            cur = end
            for _ in range(node.max - node.min):
                opt = self.state()
                self.eps[opt] = [self.build(node.item, cur), end]
                cur = opt
        for _ in range(node.min):  # the mandatory copies
            cur = self.build(node.item, cur)
        return cur


def build_nfa(node: Node, *, max_states: int = DEFAULT_MAX_NFA_STATES) -> NFA:
    """Thompson construction over bytes for a regex AST."""
    b = _Builder(max_states)
    final = b.state()
    with recursion_room(REGEX_FRAMES):  # one level per AST node: the parser bounds their nesting
        start = b.build(node, final)
    return NFA(b.eps, b.edges, start, final)


def size_estimate(node: Node) -> int:
    """Roughly the NFA states of a regex AST, as a tree (a shared subtree counted at each use):
    a counted repeat multiplies its item. Cheap beside the construction, so a caller can refuse
    a regex that unrolls too far before building it (dfa.compile_regex's max_nfa_estimate;
    the native extension's estimate, csrc/regex_ast.cpp, computes the same on its own parse)."""
    memo: dict[int, int] = {}

    def size(n: Node) -> int:
        out = memo.get(id(n))
        if out is None:
            if isinstance(n, CharSet):
                out = len(n.ranges) + 1
            elif isinstance(n, (Concat, Alt)):
                out = sum(size(item) for item in n.items) + 1
            elif isinstance(n, Call):
                out = 6
            else:
                copies = n.max if n.max is not None else n.min + 1
                out = size(n.item) * max(copies, 1) + 1
            memo[id(n)] = out
        return out

    with recursion_room(REGEX_FRAMES):  # one level per AST node, as the construction
        return size(node)


# kept across compiles: the one owner names, sizes and clears them (caches.CACHES)
CACHES.register_lru(utf8_sequences, "compile")
CACHES.register_lru(charset_sequences, "compile")
