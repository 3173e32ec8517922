"""The mask engine in use: the native one (csrc/, a C++17 extension built by `pip install .`)
or the Python one (grammar.py), its reference and the fallback where no compiler built it.

`INFERLAB_ENGINE=python|native` selects it; the default is engine.DEFAULT (native, where built).
Where the native one is asked for (or the default) but was not built, masks use the Python
engine, and one stderr line says so, once, when the first mask is built (not at import).

What is native (docs/native-engine.md): a configuration's token mask, by the Python engine's
frame split (token_split: per top frame the tokens decided inside its automaton, cached and
shared by shape, region, delta base or signature; counted and map frames' walks with the items
each token begins), only the rest walked through the configuration: configuration stepping,
closures (pushes, pops), counted and map frames, EOS; the GIL released; a batch's rows on
parallel threads (fill_next_token_bitmask_par). In Python behind the same API (StackGrammar): the
configuration interning and byte rows the text reads, the mask cache, and the written keys
(keys.py: no repeated key, uniqueItems) resolved against the cached row per state.
"""

from __future__ import annotations

import importlib
import sys
import threading
import weakref

import numpy as np

from inferlab import engine as engines
from inferlab.constrain.caches import CACHES
from inferlab.constrain.tables import compiled_machine
from inferlab.errors import InferlabError

_notice = threading.Event()
_TRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # TokenTrie -> trie_arrays (one per vocabulary)
_NATIVE_TRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # TokenTrie -> the engine's trie
_lock = threading.Lock()


_EXTENSION: list = []  # [the extension module, or None where it does not import], once looked up


def _module():
    # looked up once: every native fill asks for it, and a failed import searches the path again
    if not _EXTENSION:
        # by name: `from inferlab.constrain import _native` reads, to the import graph (grimp), as
        # an import of the package itself, whose __init__ imports the matcher that imports this module
        try:
            _EXTENSION.append(importlib.import_module("inferlab.constrain._native"))
        except ImportError:
            _EXTENSION.append(None)
    return _EXTENSION[0]


def built() -> bool:
    """Was the native extension built (importable)?"""
    return _module() is not None


def requested() -> str:
    """The engine asked for: INFERLAB_ENGINE's, else engine.DEFAULT (in_use says whether native is built)."""
    try:
        name = engines.asked()
    except ValueError as exc:
        raise InferlabError(str(exc)) from None
    return name or engines.DEFAULT


def in_use(name: str | None = None) -> str:
    """The engine masks will use: the one asked for (else requested()), python where native is not built."""
    name = name or requested()
    if name not in engines.ENGINES:
        raise InferlabError(f"--engine {name!r}: expected one of {', '.join(engines.ENGINES)}")
    return "native" if name == "native" and built() else "python"


def announce_fallback(name: str | None = None) -> None:
    """The one stderr line, once per process, where native masks were asked for and cannot be had."""
    if (name or requested()) == "native" and not built() and not _notice.is_set():
        _notice.set()
        print("inferlab: the native mask engine is not built (no C++ compiler at install?): masks use the "
              "Python engine", file=sys.stderr)


def write_row():
    """The extension's write_row(out, row, cleared): out = row (a (words,) row, or a tuple of the token
    ids it allows), then the token ids in the tuple `cleared` cleared."""
    return _module().write_row


def build_info() -> dict:
    """{engine, native_built, compiler, flags}: what results.json and manifests record."""
    return engines.record(built())


def trie_arrays(trie) -> tuple:
    """A TokenTrie flattened for the engine: global node ids level after level; (child_start
    (N,) int64 global, child_count (N,) int32, byte (N,) uint8, tok_offset (N + 1,) int64,
    tokens (T,) int32 (each node's end token and the tokens with the same bytes), roots)."""
    with _lock:
        got = _TRIES.get(trie)
        if got is not None:
            return got
    levels = trie.levels
    starts = np.cumsum([0] + [len(lv.byte) for lv in levels])                  # (levels + 1,)
    n = int(starts[-1])
    child_start = np.zeros(n, dtype=np.int64)
    child_count = np.zeros(n, dtype=np.int32)
    byte = np.zeros(n, dtype=np.uint8)
    end = np.full(n, -1, dtype=np.int64)
    for d, lv in enumerate(levels):
        sl = slice(int(starts[d]), int(starts[d + 1]))
        child_start[sl] = lv.child_start + (starts[d + 1] if d + 1 < len(levels) else 0)
        child_count[sl] = lv.child_count
        byte[sl] = lv.byte
        end[sl] = lv.end_token
    has = np.flatnonzero(end >= 0)                                           # (E,) nodes with a token
    dup = trie.duplicates.astype(np.int64)                                   # (D, 2) (token, same-bytes token)
    node_of = np.full(int(end.max()) + 1 if len(has) else 0, -1, dtype=np.int64)
    node_of[end[has]] = has
    dup_nodes = node_of[dup[:, 1]] if len(dup) else np.zeros(0, dtype=np.int64)
    nodes = np.concatenate([has, dup_nodes])                                 # (E + D,) each entry's node
    order = np.lexsort((np.arange(len(nodes)), nodes))                       # by node; its own token first
    tokens = np.concatenate([end[has], dup[:, 0]]).astype(np.int32)[order]
    tok_offset = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(nodes, minlength=n), out=tok_offset[1:])
    got = child_start, child_count, byte, tok_offset, tokens, int(len(levels[0].byte)) if levels else 0
    with _lock:
        _TRIES[trie] = got
    return got


def native_trie(vocab):
    """The vocabulary's trie in the engine (checked once, shared by every grammar over it)."""
    trie = vocab.trie()
    with _lock:
        got = _NATIVE_TRIES.get(trie)
    if got is None:
        got = _module().trie(trie_arrays(trie), vocab.vocab_size, vocab.eos_id)
        with _lock:
            got = _NATIVE_TRIES.setdefault(trie, got)
    return got


def _split_caches(clear: bool) -> int:
    """Frame splits the native engine keeps per vocabulary (on its trie): their count, then cleared if asked."""
    with _lock:
        tries = list(_NATIVE_TRIES.values())
    return sum(_module().split_cache(trie, clear)[0] for trie in tries)


CACHES.register("native_splits", "masks", lambda: _split_caches(True), lambda: _split_caches(False),
                "SPLIT_CACHE_BYTES (64 MB) per vocabulary, in csrc/split_cache.hpp")


def row_tokens(row: np.ndarray) -> list[int]:
    """The token ids set in a (words,) 32-bit row, ascending (a row of few tokens: its nonzero words
    read bit by bit, where unpacking the whole row would cost more)."""
    words = row.view(np.uint32)
    out = []
    for w in np.flatnonzero(words).tolist():
        x = int(words[w])
        while x:
            low = x & -x
            out.append(32 * w + low.bit_length() - 1)
            x ^= low
    return out


NARROW_SPLIT_NODES = 4096  # a frame split that looks at fewer trie nodes is walked directly (no shape)


class NativeMasks:
    """A machine's tables and a vocabulary's trie in the native engine (built on first use).
    narrow: walk narrow frame splits directly (StackGrammar's narrow_nodes > 0; else every plain
    split goes through its shape, as the Python engine's every mask through its frame splits)."""

    def __init__(self, machine, vocab, narrow: bool = True):
        self.machine, self.vocab, self.narrow = machine, vocab, narrow
        self.words = (vocab.vocab_size + 31) // 32
        self._engine = None

    def engine(self):
        if self._engine is None:
            tables = tuple(compiled_machine(self.machine).arrays().values())
            self._engine = _module().build(tables, native_trie(self.vocab), NARROW_SPLIT_NODES if self.narrow else 0)
        return self._engine

    def row(self, cid: int) -> tuple[np.ndarray, int, bool]:
        """((words,) int32 configuration `cid`'s mask (the written keys aside), its tokens' count up
        to 1,024, and whether it is its plain top frame's alone: one stack, no token left the top's
        plain states, so every configuration with that top (StackGrammar._plain_top) has it)."""
        out = np.zeros(self.words, dtype=np.int32)
        allowed, top_only = _module().fill(self.engine(), self.machine.configs[cid], None, out)
        return out, allowed, top_only

    def rows(self, cids: list[int], threads: int) -> np.ndarray:
        """(len(cids), words) int32: their masks, walked on up to `threads` threads at once."""
        out = np.zeros((len(cids), self.words), dtype=np.int32)
        configs = [(self.machine.configs[c], None) for c in cids]
        _module().fill_next_token_bitmask_par(self.engine(), configs, out, np.arange(len(cids), dtype=np.int64),
                                              threads)
        return out
