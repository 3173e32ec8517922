"""Object keys: the written keys of the text, so no object repeats a key.

No automaton can forbid repeats among unboundedly many keys, so the stack grammar pairs its
configuration with a *key context*: the text's open containers, innermost last, each object with
the set of keys written so far (their decoded UTF-8 bytes: a key spelled with escapes is the same
key), and the raw bytes of a key being written. It depends on the text alone (JSON structure is
unambiguous), so every stack of a configuration shares it. A key whose closing quote would repeat
a key of its object is refused at that quote. An array of unique strings (uniqueItems) is
tracked the same way, its items as the keys; only which arrays those are is the grammar's to say
(at the array's `[`: step's `unique`), and a configuration says so if any of its stacks does
(enforcing uniqueness on an array that need not be unique only rejects more: never unsound).

`completions(dfa)` counts the strings a key automaton can still write from each state: a map
whose keys come from a finite language can run out of keys (constrain.stack prunes those
stacks), and `KeyIndex` finds the tokens whose answer a key context can change (constrain.stack
resolves only those against the actual context).
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from inferlab.constrain.nfa import CALL_MARK

QUOTE, BACKSLASH = 0x22, 0x5C
_SHORT = {ord("b"): b"\b", ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t",
          QUOTE: b'"', BACKSLASH: b"\\", ord("/"): b"/"}

# (containers, key, in_string, escaped, expect_key): containers is a tuple, innermost last, of
# frozenset (an object's keys, or an array of unique strings' items) or None (an array); key is
# the raw bytes of a key (or unique item) being written.
class KeyContext(NamedTuple):
    objs: tuple          # the open containers, innermost last: frozenset (keys or unique items) or None
    key: bytes | None    # the raw bytes of a key (or unique item) being written
    in_string: bool      # inside a string that is no key
    escaped: bool        # right after a backslash
    expect_key: bool     # a quote here opens a key


START = KeyContext((), None, False, False, False)
_ctx = KeyContext  # (step builds one per byte)


def unescape(raw: bytes) -> bytes | None:
    """Raw JSON string content -> the UTF-8 bytes it decodes to; None when it ends inside an
    escape (bytes of a character split across tokens pass through as they are)."""
    if BACKSLASH not in raw:
        return raw
    out, i, n = bytearray(), 0, len(raw)
    while i < n:
        b = raw[i]
        if b != BACKSLASH:
            out.append(b)
            i += 1
            continue
        if i + 1 >= n:
            return None
        c = raw[i + 1]
        if c == ord("u"):
            if i + 6 > n:
                return None
            out += chr(int(raw[i + 2:i + 6], 16)).encode("utf-8", "surrogatepass")
            i += 6
        else:
            out += _SHORT.get(c, bytes([c]))
            i += 2
    return bytes(out)


def step(ctx: KeyContext, b: int, unique: bool = False) -> KeyContext | None:
    """The context after byte b of a JSON text; None when b closes a repeated key. `unique`: a
    `[` opens an array of unique strings (uniqueItems), whose items are tracked as keys are."""
    objs, key, in_str, esc, expect_key = ctx
    if key is not None:
        if esc or b == BACKSLASH:
            return _ctx(objs, key + bytes([b]), False, not esc, False)
        if b != QUOTE:
            return _ctx(objs, key + bytes([b]), False, False, False)
        name = unescape(key)
        if name in objs[-1]:
            return None
        return _ctx(objs[:-1] + (objs[-1] | {name},), None, False, False, False)
    if in_str:
        if esc:
            return _ctx(objs, None, True, False, False)
        return _ctx(objs, None, b != QUOTE, b == BACKSLASH, False)
    if b == QUOTE:
        if expect_key:
            return _ctx(objs, b"", False, False, False)
        return _ctx(objs, None, True, False, False)
    if b == 0x7B:                                   # {
        return _ctx(objs + (frozenset(),), None, False, False, True)
    if b == 0x5B:                                   # [
        return _ctx(objs + ((frozenset(),) if unique else (None,)), None, False, False, unique)
    if b in (0x7D, 0x5D):                           # } ]
        return _ctx(objs[:-1], None, False, False, False)
    if b == 0x2C:                                   # ,
        return _ctx(objs, None, False, False, objs[-1] is not None if objs else False)
    if b == 0x3A:                                   # :
        return _ctx(objs, None, False, False, False)
    return ctx


def closes_repeat(ctx: KeyContext, data: bytes) -> bool:
    """Does `data`, read from `ctx`, close a repeated key? (step byte by byte, with no array of
    unique strings opened: the caller's grammar has none.)"""
    for b in data:
        ctx = step(ctx, b)
        if ctx is None:
            return True
    return False


def written(ctx: KeyContext) -> tuple[frozenset, bytes | None]:
    """(the keys of the innermost object, the raw bytes of the key being written or None)."""
    objs, key = ctx.objs, ctx.key
    return (objs[-1] if objs and objs[-1] is not None else frozenset()), key


def after_quote(dfa) -> list[int]:
    """The states a key automaton is in right after its opening quote: the first quote read
    from the start (the key's own quotes are escaped)."""
    seen, work, out = {dfa.start}, [dfa.start], set()
    while work:
        row = dfa.trans[work.pop(), :CALL_MARK]
        if row[QUOTE] >= 0:
            out.add(int(row[QUOTE]))
        for t in np.unique(np.delete(row, QUOTE)).tolist():
            if t >= 0 and t not in seen:
                seen.add(t)
                work.append(t)
    return sorted(out)


def completions(dfa) -> list[float]:
    """Per state: how many byte strings lead from it to an accepting state with no byte after
    (math.inf when a loop can be taken); a key automaton's accepting states end the key."""
    n = dfa.n_states
    trans = dfa.trans[:, :CALL_MARK]                                      # (S, 248) text bytes
    succ = [np.unique(trans[s][trans[s] >= 0]).tolist() for s in range(n)]
    mult = [{t: int((trans[s] == t).sum()) for t in succ[s]} for s in range(n)]
    out: list[float | None] = [None] * n
    on_path = [False] * n
    for root in range(n):
        if out[root] is not None:
            continue
        work = [(root, 0)]
        on_path[root] = True
        while work:
            s, i = work[-1]
            if i < len(succ[s]):
                work[-1] = (s, i + 1)
                t = succ[s][i]
                if on_path[t]:
                    out[t] = math.inf  # a loop: every state on it reaches accepting (all states live)
                elif out[t] is None:
                    on_path[t] = True
                    work.append((t, 0))
                continue
            work.pop()
            on_path[s] = False
            total = math.inf if out[s] == math.inf else int(dfa.accepting[s]) + sum(
                mult[s][t] * out[t] for t in succ[s])
            out[s] = total
    return out


WRITTEN_CACHE = 4096  # KeyIndex.named's entries (open objects' keys) kept


class KeyIndex:
    """Tokens by the keys they could close: `closing[u]`, tokens whose bytes before one of their
    quotes decode to u (a key being written ends with them); `quoted[u]`, tokens holding a whole
    quoted string that decodes to u; `repeats`, tokens holding one quoted string twice;
    `many_quotes`, tokens with a comma, `{` or `[` between their first quote and two more (they
    can close a key and write another: a key opens only after one of those);
    `two_quotes`, those with two or more; `member_start`, tokens with a quote, a comma or white
    space (only they can begin a member); `first_byte[b]`, tokens beginning with byte b;
    `after_quote[b]`, tokens with a quote followed by byte b; `has_quote[t]`, 1 where token t
    holds a quote; `holds_key[t]`, 1 where it holds a whole quoted string (outside a key being
    written, only such a token can close a repeated key); and `parts[t]`, what the sets above
    say of token t (may_close_repeat)."""

    def __init__(self, token_bytes):
        closing, quoted = defaultdict(list), defaultdict(list)
        first_byte, after_quote = defaultdict(list), defaultdict(list)
        many, two, repeats, any_quote = [], [], [], []
        self.parts: dict[int, tuple[tuple[bytes, ...], frozenset, bool, bool]] = {}  # may_close_repeat
        self.member_start = np.asarray([t for t, data in enumerate(token_bytes) if any(c in data for c in b'", \t\n\r')],
                                       dtype=np.int64)
        for t, data in enumerate(token_bytes):
            if data:
                first_byte[data[0]].append(t)
            if b'"' not in data:
                continue
            any_quote.append(t)
            quotes = [j for j, b in enumerate(data) if b == QUOTE]
            for b in {data[j + 1] for j in quotes if j + 1 < len(data)}:
                after_quote[b].append(t)
            if len(quotes) >= 2:
                two.append(t)
            # a key (or unique item) opens only after a comma, `{` or `[`, and needs two quotes after
            can_open = len(quotes) >= 3 and any(c in data[quotes[0] + 1:quotes[-2]] for c in b",{[")
            if can_open:
                many.append(t)
            closes = tuple(u for u in (unescape(data[:j]) for j in quotes) if u is not None)
            for u in closes:
                closing[u].append(t)
            inside = [u for k, j in enumerate(quotes) for u in (unescape(data[i + 1:j]) for i in quotes[:k])
                      if u is not None]
            for u in set(inside):
                quoted[u].append(t)
            repeat = len(set(inside)) < len(inside)
            if repeat:
                repeats.append(t)
            self.parts[t] = closes, frozenset(inside), repeat, can_open
        self.closing = {u: np.asarray(ts, dtype=np.int64) for u, ts in closing.items()}
        self.quoted = {u: np.asarray(ts, dtype=np.int64) for u, ts in quoted.items()}
        self.many_quotes = np.asarray(many, dtype=np.int64)
        self.two_quotes = np.asarray(two, dtype=np.int64)
        self.first_byte = {b: np.asarray(ts, dtype=np.int64) for b, ts in first_byte.items()}
        self.after_quote = {b: np.asarray(ts, dtype=np.int64) for b, ts in after_quote.items()}
        self.repeats = np.asarray(repeats, dtype=np.int64)
        self.any_quote = np.asarray(any_quote, dtype=np.int64)
        # the candidates whatever the keys written: repeats; inside a key, also many_quotes
        self.fixed = (self.repeats, np.concatenate([self.repeats, self.many_quotes]))
        self.has_quote = bytearray(len(token_bytes))  # (V,) 1 for a token with a quote
        self.holds_key = bytearray(len(token_bytes))  # (V,) 1 for a token with a whole quoted string
        for t in any_quote:
            self.has_quote[t] = 1
            self.holds_key[t] = 1 if self.parts[t][1] else 0
        self._by_objs: dict[tuple, np.ndarray] = {}  # named

    def candidates(self, ctx: KeyContext) -> np.ndarray | None:
        """Token ids whose walk may close a repeated key from `ctx` (a superset, an id may come
        more than once); None when the key being written ends inside an escape (then every
        token with a quote is one).

        A repeated key closes in the token. Either it was written before (the token holds it
        quoted, or ends the key being written with it), or the token writes both: quoted twice,
        or the key being written (ended in the token) and a whole quoted key after it."""
        varying = self.varying(ctx)
        if varying is None:
            return None
        return np.concatenate([self.fixed[ctx.key is not None]] + varying)  # (a token may repeat: the
        #                                                         caller filters, then dedupes)

    def varying(self, ctx: KeyContext) -> list[np.ndarray] | None:
        """candidates(ctx) but for fixed[ctx.key is not None] (a function of whether a key is being
        written alone), in parts: the written keys quoted (named), and the tokens ending the key
        being written as a written one; None as candidates."""
        objs, key = ctx.objs, ctx.key
        out = [self.named(objs)]
        if key is not None:
            prefix = unescape(key)
            if prefix is None:
                return None
            for name in objs[-1]:
                if name.startswith(prefix):
                    out.append(self.closing.get(name[len(prefix):], self.repeats[:0]))
        return out

    def may_close_repeat(self, tokens: list[int], ctx: KeyContext) -> list[int]:
        """Those of `tokens` (each with a quote) that are among candidates(ctx): the same test,
        token by token, for a mask of a few tokens rather than building the candidates."""
        objs, key = ctx.objs, ctx.key
        written = [names for names in objs if names]
        prefix = None if key is None else unescape(key)
        if key is not None and prefix is None:
            return list(tokens)
        last = objs[-1] if key is not None else None
        out = []
        for t in tokens:  # (loops, not any(): a few tokens, each a few checks)
            closes, inside, repeat, many = self.parts[t]
            hit = repeat or many and key is not None
            for names in written if inside and not hit else ():
                if not inside.isdisjoint(names):
                    hit = True
                    break
            for u in closes if key is not None and not hit else ():
                if prefix + u in last:
                    hit = True
                    break
            if hit:
                out.append(t)
        return out

    def named(self, objs) -> np.ndarray:
        """The tokens holding a written key quoted (an id may come more than once), per open
        objects' keys (cached: they change at a key's end, not at each byte)."""
        out = self._by_objs.get(objs)
        if out is None:
            if len(self._by_objs) >= WRITTEN_CACHE:
                self._by_objs.clear()
            parts = [self.quoted[name] for names in objs for name in names or () if name in self.quoted]
            out = self._by_objs[objs] = np.concatenate(parts) if parts else self.repeats[:0]
        return out


_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def key_index(vocab) -> KeyIndex:
    """The vocabulary's KeyIndex, built on first use and cached (vocabulary preprocessing)."""
    index = _INDEXES.get(vocab)
    if index is None:
        index = _INDEXES[vocab] = KeyIndex(vocab.token_bytes)
    return index
