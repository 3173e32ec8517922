"""The stack grammar's mask times alone, over the compiled schemas of a stratified sample.

schema-bench (`inferlab schema-bench DIR --limit N --vocab qwen`) is the acceptance command; it
also checks every test instance, which takes most of its time. This script times the masks only,
with schema-bench's own harness (constrain.bench._time_mask: a fresh grammar's first mask, the
first walk over the first accepted valid instance's tokens, then single fill_bitmask readings),
and can keep the compiled machines in a pickle so that a rerun after a change to the mask code
skips compiling:

    PYTHONPATH=$PWD/src python benchmarks/stack_mask_speed.py ../shared/jsonschemabench \\
        --limit 100 --vocab qwen --cache /tmp/stack-mask-cases.pkl --out /tmp/stack-mask-speed.json

It prints, and writes with --out, the summary keys of schema-bench (first_mask_ms_median / p90,
mask_us_per_token_median, mask_us_p99_median, first_walk_us_per_token_median) and per schema.
The cache holds the automata only: delete it after a change to the compiler.

With --ab-delta it instead times each schema's first walk twice in one process, with and without
delta frames (token_split.delta_frame: a state near a loop state derives its split from that
state's), in alternating order after a few warm-up cases, and prints the per-schema ratio (with /
without: median, p10, p90) of the first walk's mean us per token.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np

from inferlab.cli.schema_bench import _load_vocab
from inferlab.constrain import bench, token_split
from inferlab.constrain.stack import StackMachine
from inferlab.errors import InferlabError
from inferlab.measure import atomic_write_json
from inferlab.measure.progress import progress_bar


def compile_cases(config: bench.BenchConfig) -> list[tuple[str, tuple, str]]:
    """(name, (dfas, counts, maps), first accepted valid instance's text) per compiled schema."""
    out = []
    files = bench.list_cases(config.directory, config.limit, config.seed)
    with progress_bar(len(files), "compile") as advance:
        for path in files:
            advance(path.stem)
            doc = json.loads(path.read_text(encoding="utf-8"))
            try:
                _, machine = bench.compile_within_limits(doc["schema"], config)
            except InferlabError:
                continue
            for test in doc.get("tests", []):
                if not test["valid"]:
                    continue
                try:
                    text = bench._canonical(test["data"], doc["schema"], config)
                except InferlabError:
                    continue
                if machine.accepts(text):
                    out.append((path.stem, (machine.dfas, machine.counts, machine.maps), text))
                    break
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", default="qwen")
    p.add_argument("--cache", type=Path, default=None, help="pickle of the compiled cases (read if present)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--ab-delta", action="store_true", help="first walks with and without delta frames, interleaved")
    args = p.parse_args(argv)
    config = bench.BenchConfig(directory=args.directory, limit=args.limit, seed=args.seed, mask_samples=1)
    if args.cache is not None and args.cache.exists():
        cases = pickle.loads(args.cache.read_bytes())
    else:
        cases = compile_cases(config)
        if args.cache is not None:
            args.cache.write_bytes(pickle.dumps(cases))
    vocab = _load_vocab(args.vocab)
    if args.ab_delta:
        return _ab_delta(cases, vocab, config, args.out)
    rows = []
    with progress_bar(len(cases), "masks") as advance:
        for name, (dfas, counts, maps), text in cases:
            advance(name)
            res = bench.SchemaResult(name=name, category=bench.category_of(Path(name)), compiled=True)
            bench._time_mask(res, StackMachine(dfas, counts, maps), vocab, text, config)
            rows.append({k: getattr(res, k) for k in ("name", "reason", "first_mask_ms", "first_walk_us_per_token",
                                                      "mask_us_per_token", "mask_us_p99", "mask_tokens")})
    timed = [r for r in rows if r["reason"] is None]

    def pct(key, q):
        return float(np.percentile([r[key] for r in timed], q)) if timed else None
    summary = {"schemas": len(rows), "timed": len(timed), "vocab": args.vocab,
               "first_mask_ms_median": pct("first_mask_ms", 50), "first_mask_ms_p90": pct("first_mask_ms", 90),
               "mask_us_per_token_median": pct("mask_us_per_token", 50),
               "mask_us_per_token_p90": pct("mask_us_per_token", 90),
               "mask_us_p99_median": pct("mask_us_p99", 50),
               "first_walk_us_per_token_median": pct("first_walk_us_per_token", 50),
               "first_walk_us_per_token_p90": pct("first_walk_us_per_token", 90)}
    print(json.dumps(summary, indent=1))
    for r in rows:
        if r["reason"] is not None:
            print(f"{r['name']}: {r['reason']}", file=sys.stderr)
    if args.out is not None:
        atomic_write_json(args.out, {"summary": summary, "schemas": rows})
    return 0


def _first_walk_us(machine_parts, vocab, text: str, config) -> float | None:
    res = bench.SchemaResult(name="", category="", compiled=True)
    bench._time_mask(res, StackMachine(*machine_parts), vocab, text, config)
    return res.first_walk_us_per_token


AB_WARM = 5  # --ab-delta: the first cases only warm the process (its shape cache), both ways, untimed


def _ab_delta(cases, vocab, config, out: Path | None) -> int:
    """Per schema, the first walk's mean with delta frames and without, in alternating order,
    after AB_WARM cases walked both ways untimed: the first walks of a process also build the
    shapes every schema shares (string contents), which would be charged to whichever ran first.
    Each way keeps its own shape cache, as if it ran alone in its process."""
    real = token_split.delta_base
    trie = vocab[0].trie()
    shapes = {True: token_split.ShapeCache(), False: token_split.ShapeCache()}  # one process each

    def walk(on: bool, parts, text: str) -> float | None:
        token_split.delta_base = real if on else (lambda trans, state: None)
        token_split._SHAPES[trie] = shapes[on]  # neither reuses the shapes the other built
        try:
            return _first_walk_us(parts, vocab, text, config)
        finally:
            token_split.delta_base = real
    rows = []
    with progress_bar(len(cases), "first walks, delta frames on/off") as advance:
        for i, (name, parts, text) in enumerate(cases):
            advance(name)
            us = {on: walk(on, parts, text) for on in ((True, False) if i % 2 == 0 else (False, True))}
            if i >= AB_WARM and us[True] and us[False]:
                rows.append({"name": name, "with_us": us[True], "without_us": us[False], "ratio": us[True] / us[False]})
    ratios = np.array([r["ratio"] for r in rows])
    summary = {"schemas": len(rows), "ratio_median": float(np.median(ratios)),
               "ratio_p10": float(np.percentile(ratios, 10)), "ratio_p90": float(np.percentile(ratios, 90)),
               "with_us_median": float(np.median([r["with_us"] for r in rows])),
               "without_us_median": float(np.median([r["without_us"] for r in rows]))}
    print(json.dumps(summary, indent=1))
    if out is not None:
        atomic_write_json(out, {"summary": summary, "schemas": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
