"""schema-bench --peers: llguidance, xgrammar and outlines-core on the same schemas, instances and
tokens as inferlab's stack grammar, in the same run (MaskBench's method).

Per peer and schema: compile or the peer's refusal; every test instance's canonical text, as our
tokenizer's tokens, consumed token by token, then "may it end here" read from the EOS bit of the
peer's own bitmask (a valid instance accepted: completeness; an invalid one accepted: a soundness
failure, shown as such); the time to the first mask of a fresh matcher; the per-token mask on the
first accepted valid instance's tokens, each peer filling an int32 bitmask row in place on its
fastest native path (llguidance fill_next_token_bitmask into numpy, xgrammar
fill_next_token_bitmask into its torch int32 bitmask, outlines-core Guide.write_mask_into):
the first walk on a fresh matcher, then the other valid instances in turn and the repeated
walks, each on a matcher at its start as the peer serves a compiled grammar best (_Peer.walker).
Peers are imported here only, lazily; one that is absent is reported, never silently dropped.
The tokenizer conversion of each peer is vocabulary preprocessing: done once, timed apart, in
the parent. Each peer's work on a schema then runs in a forked child (run_peer_bounded), which
inherits that preprocessing copy-on-write: a peer past the memory or time bound, or one that
crashes, is refused for that schema, and what it allocated goes with the child.
The mask-overhead lab (labs/peers.py) walks the same adapters along its token path.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from inferlab.gcpause import gc_disabled
from inferlab.measure.bounded import run_forked
from inferlab.measure.timing import token_walk_us, walks_us

PEER_NAMES = ("llguidance", "xgrammar", "outlines-core")
# outlines-core's Index build has no size limit of its own and can run for many minutes, or take
# many GB, on a big regex or a large counted repeat (maxLength 8192 unrolls); above these it is
# not attempted (reported as such, never counted as compiled).
OUTLINES_MAX_REGEX = 20_000
OUTLINES_MAX_REPEAT = 256
MIN_TIMING_S = 0.05
INSTALL_HINT = "pip install 'inferlab[peers]'"   # pyproject.toml's extra with all three peers


@dataclass
class PeerResult:
    compiled: bool
    reason: str | None = None
    valid_total: int = 0
    valid_accepted: int = 0
    invalid_total: int = 0
    invalid_rejected: int = 0
    unsound: list[str] = field(default_factory=list)
    compile_ms: float | None = None
    first_mask_ms: float | None = None
    mask_us_per_token: float | None = None  # median over per-token readings
    mask_us_p99: float | None = None
    first_walk_us_per_token: float | None = None  # fill only, the first walk of a fresh matcher
    first_walk_us: list[float] = field(default_factory=list)  # that walk's single readings
    first_walk_advance_us: list[float] = field(default_factory=list)  # consuming each of its tokens (_time_advances)
    later_walk_us: list[float] = field(default_factory=list)  # the other valid instances' walks, in turn after it
    peak_rss_mb: float | None = None  # the peer's child process at its peak (measure.bounded)
    messages: list[str] = field(default_factory=list)  # what the peer wrote on stderr (its warnings)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class _Peer:
    """A peer adapter: compile(schema) -> handle; matcher(handle) -> (fill, consume, words): a
    fresh matcher, its bitmask row's words (EOS bit: may it end here). `note`: what its compile
    time covers and how its mask is filled, for the reports. setup(vocab, tok): `vocab`
    (constrain.vocab.Vocabulary.from_tokenizer(tok)) gives the ids, bytes (b"" for a special) and
    EOS the peer must see as ours; `tok` gives what only llguidance needs, the pre-tokenizer
    pattern and the special tokens' names."""

    name = ""
    note = ""

    def __init__(self, vocab, tok):
        self.vocab_size = vocab.vocab_size
        self.eos = vocab.eos_id
        t0 = time.perf_counter()
        self.setup(vocab, tok)
        self.preprocessing_ms = (time.perf_counter() - t0) * 1e3

    def walker(self, handle):
        """new_walk() -> (fill, consume, words) at the start, for walk after walk on the compiled
        `handle` as the peer serves it best: a fresh matcher at its first call (the first walk),
        then by default a fresh one each time (the compiled grammar holds what is precomputed)."""
        return lambda: self.matcher(handle)


class _LLGuidance(_Peer):
    name = "llguidance"
    note = ("compile = grammar_from_json_schema + LLMatcher (the tokenizer's slices are built before, untimed); "
            "mask = fill_next_token_bitmask into a numpy int32 bitmask")

    def setup(self, vocab, tok):
        import llguidance
        import llguidance.numpy as lln

        from inferlab.model.pretokenize import REFERENCE_PATTERNS
        self.ll, self.lln = llguidance, lln
        # tiktoken's layout: bytes -> rank. Our ids are ranks (merge order), so they carry over as is.
        encoder = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
        self.tokenizer = llguidance.LLTokenizer.from_tiktoken(
            encoder=encoder, special_tokens=dict(tok.special_tokens), pattern=REFERENCE_PATTERNS[tok.pattern],
            eos_token=vocab.eos_id, n_vocab=vocab.vocab_size, slices=None)
        self.bitmask = lln.allocate_token_bitmask(1, vocab.vocab_size)  # (1, ceil(V/32)) int32

    def compile(self, schema):
        grammar = self.ll.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        m = self.ll.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return grammar

    def matcher(self, grammar):
        return self._bind(self.ll.LLMatcher(self.tokenizer, grammar, log_level=0))

    def walker(self, grammar):
        """One matcher, reset() before each walk after the first: it keeps what its walks built
        (its lexer's states), where a new LLMatcher compiles the grammar's text again, cold."""
        m = []

        def new_walk():
            if m:
                m[0].reset()
            else:
                m.append(self.ll.LLMatcher(self.tokenizer, grammar, log_level=0))
            return self._bind(m[0])
        return new_walk

    def _bind(self, m):
        bitmask, lln = self.bitmask, self.lln

        def consume(t):
            return m.consume_token(t) and not m.is_error()
        return (lambda: lln.fill_next_token_bitmask(m, bitmask)), consume, bitmask[0]


class _XGrammar(_Peer):
    name = "xgrammar"
    note = ("compile = GrammarCompiler.compile_json_schema (TokenizerInfo and the compiler are built before, "
            "untimed); mask = fill_next_token_bitmask into a torch int32 bitmask")

    def setup(self, vocab, tok):
        import xgrammar as xgr
        self.xgr = xgr
        info = xgr.TokenizerInfo(list(vocab.token_bytes), xgr.VocabType.RAW, vocab_size=vocab.vocab_size,
                                 stop_token_ids=[vocab.eos_id])
        self.compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab.vocab_size)  # torch int32 (1, ceil(V/32))

    def compile(self, schema):
        # strict_mode=False: extra keys where additionalProperties is absent, as JSON Schema and
        # our default (extra_keys=True) allow them; strict mode would reject those valid instances
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"),
                                                 strict_mode=False)

    def matcher(self, compiled):
        m = self.xgr.GrammarMatcher(compiled)
        bitmask = self.bitmask
        return (lambda: m.fill_next_token_bitmask(bitmask)), m.accept_token, bitmask[0].numpy()


class _Outlines(_Peer):
    name = "outlines-core"
    note = ("compile = build_regex_from_schema + Index; mask = Guide.write_mask_into a numpy int32 bitmask; "
            "outlines-core does not enforce every keyword (e.g. integer minimum) and allows a space around "
            "the separators")

    def setup(self, vocab, tok):
        import outlines_core as oc
        self.oc = oc
        by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocab.token_bytes):
            if i not in vocab.special_ids and b:
                by_bytes.setdefault(b, []).append(i)
        self.vocabulary = oc.Vocabulary(vocab.eos_id, by_bytes)
        self.bitmask = np.zeros((1, (vocab.vocab_size + 31) // 32), dtype=np.int32)

    def compile(self, schema):
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema))
        if len(regex) > OUTLINES_MAX_REGEX:
            raise ValueError(f"not attempted: its regex has {len(regex):,} characters (> {OUTLINES_MAX_REGEX:,}; "
                             "the Index build is unbounded)")
        repeat = max((int(n) for n in re.findall(r"\{\d*,?(\d+)\}", regex)), default=0)
        if repeat > OUTLINES_MAX_REPEAT:
            raise ValueError(f"not attempted: its regex repeats a part {repeat:,} times (> {OUTLINES_MAX_REPEAT}; "
                             "the Index build unrolls it)")
        return self.oc.Index(regex, self.vocabulary)

    def matcher(self, index):
        guide = self.oc.Guide(index)
        bitmask = self.bitmask
        ptr, n, size = bitmask.ctypes.data, bitmask.size, bitmask.itemsize

        def consume(t):
            try:
                guide.advance(t)
                return True
            except Exception:  # outlines-core raises on a token the guide does not allow
                return False
        return (lambda: guide.write_mask_into(ptr, n, size)), consume, bitmask[0]


_ADAPTERS = {"llguidance": _LLGuidance, "xgrammar": _XGrammar, "outlines-core": _Outlines}


def load_peers(vocab, tok, names=PEER_NAMES) -> tuple[dict, dict]:
    """({name: adapter} for the installed peers among `names`, {name: info}) with versions,
    preprocessing time, and a note for each peer that could not be loaded or was not selected."""
    peers, info = {}, {}
    for name, cls in _ADAPTERS.items():
        if name not in names:
            info[name] = {"available": False, "note": f"not selected (--peers {','.join(names)})"}
            continue
        try:
            peers[name] = cls(vocab, tok)
            info[name] = {"available": True, "version": _version(name),
                          "vocab_preprocessing_ms": peers[name].preprocessing_ms}
        except ImportError as exc:
            info[name] = {"available": False, "note": f"not installed ({exc.name}); {INSTALL_HINT}"}
        except Exception as exc:  # a peer that cannot take this vocabulary is a finding, reported
            info[name] = {"available": False, "note": f"{type(exc).__name__}: {exc}"}
    return peers, info


def compile_timed(peer: _Peer, schema) -> tuple[object, float]:
    """(the compiled handle, its compile time in ms, gc off as ours); raises the peer's refusal."""
    with gc_disabled():
        t0 = time.perf_counter()
        handle = peer.compile(schema)
        return handle, (time.perf_counter() - t0) * 1e3


def refusal(exc: Exception) -> str:
    """A peer's exception as one short line: its type and the first line of its message."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _eos_allowed(words: np.ndarray, eos: int) -> bool:
    return bool((int(words[eos // 32]) >> (eos % 32)) & 1)


def _accepts(peer: _Peer, handle, tokens: list[int]) -> bool:
    fill, consume, words = peer.matcher(handle)
    for t in tokens:
        if not consume(t):
            return False
    fill()
    return _eos_allowed(words, peer.eos)


def _first_mask_ms(peer: _Peer, handle) -> float:
    """The first mask of a fresh matcher, in ms (every compiled schema has one: no text needed)."""
    with gc_disabled():
        fill, _, _ = peer.matcher(handle)
        t0 = time.perf_counter_ns()
        fill()
        return (time.perf_counter_ns() - t0) / 1e6


def _time_walks(res: PeerResult, peer: _Peer, handle, tokens: list[int], later: list[list[int]]) -> None:
    """The first walk of `tokens` on a fresh matcher (its single readings), the `later` valid
    instances' walks in turn, then repeated walks of `tokens` (per-token median and p99), all
    from one walker (_Peer.walker), as bench times ours."""
    walk = peer.walker(handle)

    def new_walk():
        return walk()[:2]
    first = token_walk_us(new_walk, tokens, 0.0)  # (T,): one walk
    res.first_walk_us_per_token, res.first_walk_us = float(first.mean()), np.round(first, 2).tolist()
    res.later_walk_us = np.round(walks_us(new_walk, later), 2).tolist()
    us = token_walk_us(new_walk, tokens, MIN_TIMING_S)
    res.mask_us_per_token, res.mask_us_p99 = float(np.median(us)), float(np.percentile(us, 99))


def _time_advances(peer: _Peer, handle, tokens: list[int]) -> np.ndarray:
    """The first walk again on a fresh matcher, its fills untimed: the us each consume took
    (gc off), as bench times our grammar's advances."""
    fill, consume, _ = peer.matcher(handle)
    out = []
    with gc_disabled():
        for t in tokens:
            fill()
            t0 = time.perf_counter_ns()
            ok = consume(t)
            out.append(time.perf_counter_ns() - t0)
            if not ok:
                raise ValueError(f"token {t} rejected on the timing walk")
    return np.asarray(out, dtype=np.float64) / 1e3  # (T,) us


def run_peer_bounded(peer: _Peer, schema, cases, timing_tokens, *, memory_bytes: int, timeout_s: float) -> dict:
    """run_peer in a forked child within the bounds, as a dict; a bound exceeded or a crash is the
    peer's refusal ("exceeded 4 GiB", "exceeded 120 s", "crashed (signal 6)"). Its peak RSS and
    its stderr lines (xgrammar's warnings that it loosens a keyword, for one) either way."""
    out = run_forked(lambda: asdict(run_peer(peer, schema, cases, timing_tokens)),
                     memory_bytes=memory_bytes, timeout_s=timeout_s)
    record = out.value if out.refusal is None else asdict(PeerResult(compiled=False, reason=out.refusal))
    record["peak_rss_mb"] = out.peak_rss_mb
    record["messages"] = list(out.stderr_lines)
    return record


def run_peer(peer: _Peer, schema, cases: list[tuple[bool, str, list[int]]], timing_tokens) -> PeerResult:
    """`cases`: (valid, canonical text, its tokens) per test instance."""
    try:
        handle, compile_ms = compile_timed(peer, schema)
    except Exception as exc:  # the peer's refusal, in its words
        return PeerResult(compiled=False, reason=refusal(exc))
    res = PeerResult(compiled=True, compile_ms=compile_ms)
    for valid, text, tokens in cases:
        ok = _accepts(peer, handle, tokens)
        if valid:
            res.valid_total += 1
            res.valid_accepted += ok
        else:
            res.invalid_total += 1
            res.invalid_rejected += not ok
            if ok:
                res.unsound.append(text[:200])
    try:
        res.first_mask_ms = _first_mask_ms(peer, handle)
    except Exception:  # noqa: BLE001 (a peer's failure to fill a mask leaves its TTFM out, reported as None)
        pass
    if timing_tokens:
        later = [tokens for valid, _, tokens in cases if valid][1:]  # (timing_tokens: the first valid's)
        try:
            _time_walks(res, peer, handle, timing_tokens, later)
            res.first_walk_advance_us = np.round(_time_advances(peer, handle, timing_tokens), 2).tolist()
        except ValueError:
            pass  # the peer rejects our valid instance: its completeness already says so
    return res
