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
built before it, as a compile that precomputes them would, so how far that alone goes.
The grammar warms up as schema-bench's does (`--warm-ms`, 0: lazy; the timers slow the warm-up
too, so it reaches fewer configurations).

    python benchmarks/first_walk_phases.py ../shared/jsonschemabench --limit 200 --every 2 --vocab qwen --out /tmp/phases.json

The timers cost a fraction of a µs per call, included in every figure: the step times here are
above schema-bench's, and only their split is meant. Calls nest (narrow_tokens calls the row
readers _dfa_rows and _config_rows, which call StackMachine.row and _handles; _frame calls
token_split's frame functions; _walk_mask calls kept_tokens or walk_nodes), so the functions'
times do not add up to the step's.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

from inferlab.cli.schema_bench import _load_vocab
from inferlab.constrain import bench, stack, token_split
from inferlab.constrain.stack import StackGrammar, StackMachine
from inferlab.errors import InferlabError
from inferlab.measure import atomic_write_json
from inferlab.measure.machine import machine_info, provenance
from inferlab.measure.progress import progress_bar

# (owner, name): what a narrow mask calls, from the mask key to the row written
PHASES = ((StackMachine, "mask_key"), (StackGrammar, "_plain_top"), (StackGrammar, "_narrow_rows"),
          (token_split, "narrow_tokens"), (StackGrammar, "_dfa_rows"), (StackGrammar, "_handles"),
          (StackGrammar, "_config_rows"), (StackMachine, "row"), (StackMachine, "closure"),
          (token_split, "with_duplicates"), (StackGrammar, "_list_bits"), (stack, "_write"),
          (StackGrammar, "_refused"),
          # what a frame split calls: the splits of the closure's top frames, and the walks of
          # their context-dependent tokens through the configurations
          (StackGrammar, "_frame"), (token_split, "region"), (token_split, "_signature"),
          (token_split, "_shaped_frame"), (token_split, "delta_frame"), (token_split, "_narrow_frame"),
          (token_split, "_walk_frame"), (StackGrammar, "_counted_bits"), (StackGrammar, "_walk_mask"),
          (token_split, "kept_tokens"), (token_split, "walk_nodes"), (StackMachine, "ensure_rows"))


def timed(spent: dict, owner, name: str) -> None:
    """Replace owner.name by a wrapper adding its wall ns to spent[name] (restored by the caller),
    outermost calls only: _frame calls itself for a delta state's base, and its time is counted once."""
    fn = getattr(owner, name)
    clock = time.perf_counter_ns
    depth = [0]

    def wrapper(*args, **kwargs):
        depth[0] += 1
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                spent[name] += clock() - t0
    setattr(owner, name, wrapper)


def first_walk(machine: StackMachine, vocab, tokens: list[int], spent: dict, warm_ms: float) -> list[tuple[str, float, dict]]:
    """(kind, µs, {function: µs}) per token of a fresh grammar's first walk (warmed up as schema-bench's)."""
    grammar = StackGrammar(machine.unbuilt(), vocab, warm_ms=warm_ms)
    row = np.zeros((grammar.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
    state = grammar.initial_state()
    grammar.fill_bitmask(state, row)  # the first mask, as schema-bench times it apart
    out = []
    for t in tokens:
        kept, before, was = grammar.fill_kept(state), grammar.stats(), dict(spent)
        t0 = time.perf_counter_ns()
        grammar.fill_bitmask(state, row)
        us = (time.perf_counter_ns() - t0) / 1e3
        kind = bench.step_kind(kept, before, grammar.stats())
        out.append((kind, us, {k: (spent[k] - was[k]) / 1e3 for k in spent}))
        state = grammar.advance(state, t)
    return out


def split(steps: list[tuple[str, float, dict]]) -> dict:
    """Per function: µs per step, mean and median, and its share of the steps' summed time."""
    total = sum(us for _, us, _ in steps)
    return {name: {"us_mean": float(np.mean(v)), "us_p50": float(np.median(v)), "time_share": float(np.sum(v) / total)}
            for name in steps[0][2] for v in [[parts[name] for _, _, parts in steps]]}


def summarize(steps: list[tuple[str, float, dict]]) -> dict:
    us = np.array([u for _, u, _ in steps])
    out = {"tokens": len(steps), "us_p50": float(np.median(us)), "us_p99": float(np.percentile(us, 99)), "by_kind": {}}
    for k, name in bench.STEP_KINDS.items():
        v = np.array([u for kind, u, _ in steps if kind == k])
        if len(v):
            p10, p50, p90 = np.percentile(v, [10, 50, 90])
            out["by_kind"][name] = {"tokens": len(v), "token_share": len(v) / len(us), "time_share": float(v.sum() / us.sum()),
                                    "us_p10": float(p10), "us_p50": float(p50), "us_p90": float(p90)}
    narrow = [s for s in steps if s[0] == "n"]
    if narrow:
        cut = np.percentile([u for _, u, _ in narrow], 20)
        cheap = [s for s in narrow if s[1] <= cut]
        out["narrow"] = {"steps": len(narrow), "functions": split(narrow)}
        out["narrow_cheapest_fifth"] = {"steps": len(cheap), "us_max": float(cut),
                                        "us_p50": float(np.median([u for _, u, _ in cheap])), "functions": split(cheap)}
    splits = [s for s in steps if s[0] == "b"]
    if splits:
        out["frame_split"] = {"steps": len(splits), "functions": split(splits)}
    # every step less its frame splits' time: the walk if every (automaton, state)'s split were
    # built before it (xgrammar precomputes its masks in its compile), timers included
    rest = us - np.array([parts["_frame"] for _, _, parts in steps])
    out["without_frame_splits"] = {"us_p50": float(np.median(rest)), "us_p90": float(np.percentile(rest, 90)),
                                   "us_p99": float(np.percentile(rest, 99)), "over_100us_share": float(np.mean(rest > 100)),
                                   "with_them_over_100us_share": float(np.mean(us > 100))}
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--limit", type=int, default=200, help="the stratified sample's first N schemas (seed 0)")
    p.add_argument("--every", type=int, default=1, help="every k-th of them")
    p.add_argument("--vocab", default="qwen")
    p.add_argument("--warm-ms", type=float, default=stack.WARM_MS, help="the grammar's warm-up before its first mask (0: lazy)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    if args.out is not None and args.out.exists() and not args.force:
        print(f"first_walk_phases: --out {args.out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    if args.limit < 1 or args.every < 1 or not args.warm_ms >= 0:
        print("first_walk_phases: --limit and --every must be >= 1, --warm-ms >= 0", file=sys.stderr)
        return 2
    if not args.directory.is_dir():
        print(f"first_walk_phases: {args.directory} is not a folder of JSONSchemaBench files", file=sys.stderr)
        return 2
    try:
        vocab, tok = _load_vocab(args.vocab)
    except InferlabError as exc:
        print(f"first_walk_phases: {exc}", file=sys.stderr)
        return 2
    bench._preprocess(vocab)
    config = bench.BenchConfig(directory=args.directory, limit=args.limit, seed=0)
    paths = bench.list_cases(args.directory, args.limit, 0)[::args.every]
    spent = {name: 0 for _, name in PHASES}
    saved = [(owner, name, getattr(owner, name)) for owner, name in PHASES]
    for owner, name in PHASES:
        timed(spent, owner, name)
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
                gc.disable()
                try:
                    steps += first_walk(machine, vocab, tok.encode(text), spent, args.warm_ms)
                finally:
                    gc.enable()
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    result = {"provenance": provenance(), "schemas": len(paths), "warm_ms": args.warm_ms, "hardware": machine_info(None),
              "summary": summarize(steps)}
    print(json.dumps(result["summary"], indent=1))
    if args.out is not None:
        atomic_write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
