"""Where a first walk's fills spend their time: each step by kind, and a narrow step by the functions it calls.

schema-bench's `first_walk_by_step` says which kind of step (a state seen before, a cached mask,
a narrow walk, a frame split) holds the time. This script goes one level down, for the narrow
walks: it walks each compiled schema's first accepted valid instance on a fresh grammar, as
schema-bench's first walk does (gc off; the kind of each step read as its replay reads it), with
the functions a narrow mask and a frame split call wrapped in timers, and reports per function
the µs it took per step (mean and median) and its share of the steps' summed time, over all
narrow steps, over their cheapest fifth (the steps nearest the pooled median), and over the
frame splits (where the p99 lies). Last, the steps' p50, p90 and p99 less their frame splits'
time (`without_frame_splits`): what a walk would cost if every (automaton, state)'s split were
built before it, as a compile that precomputes them would, so how far that alone goes. Then
the steps less the walks' own time (`without_walks`: every function of token_split, the DFA rows
and the bit writes, their time less the calls they make to the rest): what a native kernel over
the trie and the DFA tables would leave to Python if it did the walks in no time, and, over the
steps still past 100 µs without them, which functions of the rest (the configurations' closures,
rows and interning, the written keys) hold that time, each by its own time. Finally, the steps
at or over the p99 against all (`slowest_percent`): how many top frames their configuration has,
and how many built a frame split new to the process.
The grammar warms up as schema-bench's does (`--warm-ms`, 0: lazy; the timers slow the warm-up
too, so it reaches fewer configurations).

    python benchmarks/first_walk_phases.py ../shared/jsonschemabench --limit 200 --every 2 --vocab qwen --out /tmp/phases.json

The timers cost about half a µs per call (measured, `timer_overhead_ns`), included in every
figure: the step times here are above schema-bench's, and only their split is meant. Calls nest
(narrow_tokens calls the row readers _dfa_rows and _config_rows, which call StackMachine.row and
_handles; _frame calls token_split's frame functions; _walk_mask calls kept_tokens or
walk_nodes), so the functions' outermost times do not add up to the step's; their own times do.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from inferlab.cli.schema_bench import open_sample
from inferlab.bench import schema_bench as bench
from inferlab.constrain import grammar, keys, machine, token_split
from inferlab.constrain.stack import StackGrammar, StackMachine
from inferlab.errors import InferlabError
from inferlab.measure import atomic_write_json
from inferlab.measure.machine import machine_info, provenance
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import gc_disabled

# (owner, name): what a narrow mask calls, from the mask key to the row written
PHASES = ((StackMachine, "mask_key"), (StackGrammar, "_plain_top"), (StackGrammar, "_narrow_rows"),
          (token_split, "narrow_tokens"), (StackGrammar, "_dfa_rows"), (StackGrammar, "_handles"),
          (StackGrammar, "_config_rows"), (StackMachine, "row"), (StackMachine, "closure"),
          (token_split, "with_duplicates"), (StackGrammar, "_list_bits"), (grammar, "_write"),
          (StackGrammar, "_refused"),
          # what a frame split calls: the splits of the closure's top frames, and the walks of
          # their context-dependent tokens through the configurations
          (StackGrammar, "_frame"), (token_split, "region"), (token_split, "_signature"),
          (token_split, "_shaped_frame"), (token_split, "delta_frame"), (token_split, "_narrow_frame"),
          (token_split, "_walk_frame"), (StackGrammar, "_counted_bits"), (StackGrammar, "_walk_mask"),
          (token_split, "kept_tokens"), (token_split, "walk_nodes"), (StackMachine, "ensure_rows"))


# the walks that a native kernel over the trie and the DFA tables would take over: every function
# of token_split (trie walkers, frame splits, bit writers) and grammar.py's DFA rows and bit writes.
# What is left is the configurations (closures, rows of stacks, interning), the written keys and
# the caches: how far such a kernel alone could go (`without_walks`)
WALKS = tuple((token_split, name) for name, fn in sorted(vars(token_split).items())
              if inspect.isfunction(fn) and fn.__module__ == token_split.__name__) + \
    ((token_split, "_expand"), (StackGrammar, "_dfa_rows"), (StackGrammar, "_handles"), (StackGrammar, "_list_bits"),
     (grammar, "_write"))

# the rest, wrapped for its own time only (where the steps left over 100 µs without the walks spend it)
REST = tuple(f for f in
             [(owner, name) for owner in (StackMachine, StackGrammar, grammar._Interned, grammar._Stepped, keys.KeyIndex)
              for name, fn in sorted(vars(owner).items()) if inspect.isfunction(fn) and name != "__init__"] +
             [(module, name) for module in (machine, grammar, keys) for name, fn in sorted(vars(module).items())
              if inspect.isfunction(fn) and fn.__module__ == module.__name__]
             if f not in WALKS)


def qualified(owner, name: str) -> str:
    """`StackMachine.row`, `keys.step`: the key of a function's own time (two are named step)."""
    return f"{owner.__name__.rsplit('.', 1)[-1]}.{name}"


class Timers:
    """Wall ns per wrapped function, both outermost calls only (`total`, by name: _frame calls itself
    for a delta state's base, and its time is counted once) and its own time less the wrapped
    calls inside it (`own`, by qualified name); `calls` counts every wrapped call. A generator function's time is that of
    its iterations (walk_trie yields a trie level at a time, and its callers work in between)."""

    def __init__(self):
        self.total: dict[str, int] = defaultdict(int)
        self.own: dict[str, int] = defaultdict(int)
        self.calls = 0
        self._open: list[int] = []  # per open wrapped call: the ns of the wrapped calls inside it
        self._depth: dict[str, int] = defaultdict(int)
        self._saved: list = []

    def wrap(self, owner, name: str) -> None:
        """Replace owner.name by a timed wrapper (restore() puts it back)."""
        fn = getattr(owner, name)
        self._saved.append((owner, name, fn))
        key = qualified(owner, name)
        if inspect.isgeneratorfunction(fn):
            def wrapper(*args, **kwargs):
                it = fn(*args, **kwargs)  # (runs nothing yet)
                while True:
                    t0 = self._enter(name)
                    try:
                        value = next(it)
                    except StopIteration:
                        return
                    finally:
                        self._leave(name, key, t0)
                    yield value
        else:
            def wrapper(*args, **kwargs):
                t0 = self._enter(name)
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._leave(name, key, t0)
        setattr(owner, name, wrapper)

    def restore(self) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved.clear()

    def _enter(self, name: str) -> int:
        self._depth[name] += 1
        self._open.append(0)
        return time.perf_counter_ns()

    def _leave(self, name: str, key: str, t0: int) -> None:
        spent = time.perf_counter_ns() - t0
        self.own[key] += spent - self._open.pop()
        if self._open:
            self._open[-1] += spent
        self._depth[name] -= 1
        if not self._depth[name]:
            self.total[name] += spent
        self.calls += 1


def timer_overhead_ns(n: int = 20_000) -> float:
    """Median ns a Timers wrapper adds to one call, over 5 runs of n calls of an empty function."""
    class Owner:
        @staticmethod
        def f():
            return None
    plain = Owner.f
    timers = Timers()
    timers.wrap(Owner, "f")
    wrapped = Owner.f
    timers.restore()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            plain()
        t1 = time.perf_counter_ns()
        for _ in range(n):
            wrapped()
        runs.append(((time.perf_counter_ns() - t1) - (t1 - t0)) / n)
    return float(np.median(runs))


class Step(NamedTuple):
    """One fill of a first walk."""
    kind: str                # bench.STEP_KINDS
    us: float
    parts: dict              # PHASES: outermost µs per name
    walks_us: float          # the WALKS' own time
    calls: int               # wrapped calls (each costs a timer)
    rest_us: dict            # REST: own µs per qualified name (those above 0)
    tops: int                # distinct top frames (automaton, state) of the configuration
    built_split: bool        # token_split.frame_tokens ran: a frame split new to the process
    wide_top: bool           # a top frame reads token_split.REGION_MIN_BYTES bytes or more (a string's content)


def first_walk(machine: StackMachine, vocab, tokens: list[int], timers: Timers, warm_ms: float) -> list[Step]:
    """A Step per token of a fresh grammar's first walk (warmed up as schema-bench's)."""
    grammar = StackGrammar(machine.unbuilt(), vocab, warm_ms=warm_ms)
    row = np.zeros((grammar.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
    state = grammar.initial_state()
    grammar.fill_bitmask(state, row)  # the first mask, as schema-bench times it apart
    walks, rest = {qualified(*f) for f in WALKS}, {qualified(*f) for f in REST}
    out = []
    for t in tokens:
        kept, before = grammar.fill_kept(state), grammar.stats()
        was, own, calls_before = dict(timers.total), dict(timers.own), timers.calls
        t0 = time.perf_counter_ns()
        grammar.fill_bitmask(state, row)
        us = (time.perf_counter_ns() - t0) / 1e3
        parts = {name: (timers.total[name] - was.get(name, 0)) / 1e3 for _, name in PHASES}
        mine = {name: (timers.own[name] - own.get(name, 0)) / 1e3 for name in walks | rest}
        calls = timers.calls - calls_before  # (read before stats(), itself wrapped)
        kind = bench.step_kind(kept, before, grammar.stats())
        m = grammar.machine
        tops = {st[-1][:2] for st in m.closure(state[0])}  # (automaton, state) on top
        wide = any(np.count_nonzero(m.text_trans[a][q] >= 0) >= token_split.REGION_MIN_BYTES for a, q in tops)
        out.append(Step(kind, us, parts, sum(mine[k] for k in walks), calls, {k: v for k in rest if (v := mine[k])},
                        len(tops), mine["token_split.frame_tokens"] > 0, wide))
        state = grammar.advance(state, t)
    return out


def split(steps: list[Step]) -> dict:
    """Per function: µs per step, mean and median, and its share of the steps' summed time."""
    total = sum(s.us for s in steps)
    return {name: {"us_mean": float(np.mean(v)), "us_p50": float(np.median(v)), "time_share": float(np.sum(v) / total)}
            for name in steps[0].parts for v in [[s.parts[name] for s in steps]]}


def _tail(us: np.ndarray) -> dict:
    return {"us_p50": float(np.median(us)), "us_p90": float(np.percentile(us, 90)),
            "us_p99": float(np.percentile(us, 99)), "over_100us_share": float(np.mean(us > 100))}


def summarize(steps: list[Step], overhead_ns: float) -> dict:
    us = np.array([s.us for s in steps])
    out = {"tokens": len(steps), "us_p50": float(np.median(us)), "us_p99": float(np.percentile(us, 99)), "by_kind": {}}
    for k, name in bench.STEP_KINDS.items():
        v = np.array([s.us for s in steps if s.kind == k])
        if len(v):
            p10, p50, p90 = np.percentile(v, [10, 50, 90])
            out["by_kind"][name] = {"tokens": len(v), "token_share": len(v) / len(us), "time_share": float(v.sum() / us.sum()),
                                    "us_p10": float(p10), "us_p50": float(p50), "us_p90": float(p90)}
    narrow = [s for s in steps if s.kind == "n"]
    if narrow:
        cut = np.percentile([s.us for s in narrow], 20)
        cheap = [s for s in narrow if s.us <= cut]
        out["narrow"] = {"steps": len(narrow), "functions": split(narrow)}
        out["narrow_cheapest_fifth"] = {"steps": len(cheap), "us_max": float(cut),
                                        "us_p50": float(np.median([s.us for s in cheap])), "functions": split(cheap)}
    splits = [s for s in steps if s.kind == "b"]
    if splits:
        out["frame_split"] = {"steps": len(splits), "functions": split(splits)}
    # every step less its frame splits' time: the walk if every (automaton, state)'s split were
    # built before it (xgrammar precomputes its masks in its compile), timers included
    rest = us - np.array([s.parts["_frame"] for s in steps])
    out["without_frame_splits"] = {**_tail(rest), "with_them_over_100us_share": float(np.mean(us > 100))}
    # every step less the walks' own time (WALKS): what is left for Python if a native kernel did
    # the walks in no time. The timers' own cost stays in it: `upper` keeps all of it, `lower`
    # takes a whole wrapper's cost off per wrapped call (part of which the walks' time holds)
    walks = np.array([s.walks_us for s in steps])
    calls = np.array([s.calls for s in steps])
    upper = us - walks
    lower = upper - calls * overhead_ns / 1e3
    out["without_walks"] = {"walks_time_share": float(walks.sum() / us.sum()), "timer_overhead_ns": overhead_ns,
                            "wrapped_calls_per_step_mean": float(np.mean(calls)),
                            "upper": _tail(upper), "lower": _tail(lower),
                            "over_100us_by_function": _rest_by_function(steps, upper > 100, upper)}
    out["slowest_percent"] = _slowest(steps, us >= np.percentile(us, 99))
    return out


def _slowest(steps: list[Step], slow: np.ndarray) -> dict:
    """The steps at or over the p99 against all: how many top frames their configuration has
    (1, 2, 3 or more; two with one of them wide: a string's content beside another frame), how
    many built a frame split of their own (token_split.frame_tokens: an (automaton, state) new to
    the process), and the share of their time in _frame."""
    def shares(sel: list[Step]) -> dict:
        tops = np.array([s.tops for s in sel])
        return {"steps": len(sel), "top_frames_1": float(np.mean(tops == 1)), "top_frames_2": float(np.mean(tops == 2)),
                "top_frames_3_or_more": float(np.mean(tops >= 3)),
                "top_frames_2_one_wide": float(np.mean((tops == 2) & np.array([s.wide_top for s in sel]))),
                "built_a_frame_split": float(np.mean([s.built_split for s in sel])),
                "frame_time_share": float(sum(s.parts["_frame"] for s in sel) / sum(s.us for s in sel))}
    return {"at_or_over_p99": shares([s for s, x in zip(steps, slow) if x]), "all": shares(steps)}


def _rest_by_function(steps: list[Step], slow: np.ndarray, upper: np.ndarray, top: int = 15) -> dict:
    """Over the steps still over 100 µs without the walks: the share of that time (upper) in each
    REST function's own time, the largest `top`, and what no wrapped function holds (fill_bitmask's
    callers' lines, the timers' own cost)."""
    total = float(upper[slow].sum())
    own: dict[str, float] = defaultdict(float)
    for s, is_slow in zip(steps, slow):
        if is_slow:
            for name, v in s.rest_us.items():
                own[name] += v
    shares = {name: v / total for name, v in sorted(own.items(), key=lambda kv: -kv[1])[:top]} if total else {}
    return {"steps": int(slow.sum()), "shares": shares, "unwrapped_share": 1 - sum(own.values()) / total if total else None}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--limit", type=int, default=200, help="the stratified sample's first N schemas (seed 0)")
    p.add_argument("--every", type=int, default=1, help="every k-th of them")
    p.add_argument("--vocab", default="qwen")
    p.add_argument("--warm-ms", type=float, default=grammar.WARM_MS, help="the grammar's warm-up before its first mask (0: lazy)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    if args.out is not None and args.out.exists() and not args.force:
        print(f"first_walk_phases: --out {args.out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    if args.limit < 1 or args.every < 1 or not args.warm_ms >= 0:
        print("first_walk_phases: --limit and --every must be >= 1, --warm-ms >= 0", file=sys.stderr)
        return 2
    try:
        vocab, tok, config, paths = open_sample(args.directory, args.vocab, args.limit, args.every)
    except InferlabError as exc:
        print(f"first_walk_phases: {exc}", file=sys.stderr)
        return 2
    overhead = timer_overhead_ns()
    timers = Timers()
    for owner, name in dict.fromkeys(PHASES + WALKS + REST):
        timers.wrap(owner, name)
    steps: list = []
    try:
        with progress_bar(len(paths), "first walks") as advance:
            for path in paths:
                advance(path.stem)
                doc = json.loads(path.read_text(encoding="utf-8"))
                try:
                    _, machine = bench.compile_within_limits(doc["schema"], config)
                except InferlabError:
                    continue
                texts = (bench._canonical(t["data"], doc["schema"], config) for t in doc.get("tests", []) if t["valid"])
                text = next((t for t in texts if machine.accepts(t)), None)
                if text is None:
                    continue
                with gc_disabled():
                    steps += first_walk(machine, vocab, tok.encode(text), timers, args.warm_ms)
    finally:
        timers.restore()
    result = {"provenance": provenance(), "schemas": len(paths), "warm_ms": args.warm_ms, "hardware": machine_info(None),
              "summary": summarize(steps, overhead)}
    print(json.dumps(result["summary"], indent=1))
    if args.out is not None:
        atomic_write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
