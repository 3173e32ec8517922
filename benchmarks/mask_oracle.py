"""Our token masks at a real vocabulary against a brute-force walk, over JSONSchemaBench.

The default tests check masks against brute force at small vocabularies; the paths a 151k-token
vocabulary takes (frame splits, region shapes and frame splits shared by every schema of the
process, delta frames, kept context-dependent paths, narrow walks) are checked here. One process
walks the stratified sample (seed 0) in order, so the process-wide caches are shared as in
schema-bench. Per compiled schema, the grammar under test (warmed as schema-bench's) fills a mask
at every step of: its first and second accepted valid instance's tokens; an invalid instance's
tokens up to the one the grammar refuses; and, on a fresh lazy grammar, the first valid instance
cut into tokens at random (states inside strings, numbers and keys). At sampled steps (the first,
steps after a token with a quote, colon, comma or bracket, the one before a refusal, random
ones) the mask is compared bit by bit with the oracle:

    token t is allowed iff StackMachine.feed(state, bytes of t) is not None (EOS: iff the state
    can end; special and empty tokens never),

on a second compile of the schema whose rows no mask ever builds, the feeds shared along the
vocabulary's byte strings in sorted order (a dead prefix skips every token that starts with it).
That shortcut is itself checked against advance(), token by token, at a few steps. Every token
the walks take is also advanced on both sides, which must agree.

    python benchmarks/mask_oracle.py ../shared/jsonschemabench --limit 1000 --every 3 --vocab qwen --out /tmp/oracle.json

Writes counts (steps and tokens compared, mismatching steps, unsound and incomplete tokens) and
every mismatch (schema, walk, step, text so far, the differing tokens). --mutate flips one bit of
each checked mask: a self-test of the harness, every checked step must then mismatch.

--engine native: the grammars under test run the native engine, and a Python-engine grammar (the
reference) walks the same tokens beside each: their masks are compared bit for bit at every
filled step, not only the sampled ones (counts engine_steps_compared, engine_mismatch_steps).

    python benchmarks/mask_oracle.py ../shared/jsonschemabench --limit 1000 --every 1 --vocab qwen --engine native --out /tmp/oracle_native.json

--engines-only (with --engine native): the engines compared at every filled step, no brute-force
check (each costs a walk of the whole vocabulary through the byte machine, ~1 s at Qwen), so that
the whole 1,000-schema sample is compared in well under an hour.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from bisect import bisect_left
from pathlib import Path

import numpy as np

from inferlab.cli.schema_bench import open_sample
from inferlab.bench import schema_bench as bench
from inferlab.constrain import keys, native
from inferlab.constrain.machine import State
from inferlab.constrain.masks import unpack_bitmask
from inferlab.constrain.stack import StackGrammar
from inferlab.engine import ENGINES
from inferlab.errors import InferlabError
from inferlab.measure import atomic_write_json
from inferlab.measure.bounded import TimeBoundExceeded, time_bound
from inferlab.measure.machine import provenance
from inferlab.measure.progress import progress_bar

ORACLE_WARM_MS = 30.0       # the warmed grammar of each schema (the lazy one takes warm_ms=0)
STRUCTURE = b'":,[{'


class Oracle:
    """The allowed tokens of a stack machine's state, by feeding every token's bytes."""

    def __init__(self, vocab):
        self.vocab_size, self.eos = vocab.vocab_size, vocab.eos_id
        by_bytes: dict[bytes, list[int]] = {}
        for t, b in enumerate(vocab.token_bytes):
            if b and t not in vocab.special_ids and t != self.eos:
                by_bytes.setdefault(b, []).append(t)
        self.texts = sorted(by_bytes)                       # distinct byte strings, sorted
        self.ids = [by_bytes[b] for b in self.texts]

    def allowed(self, machine, state) -> np.ndarray:
        """(V,) bool. The feeds of a shared prefix are kept on a path (sorted strings share a
        prefix with the string before them), so each byte of the vocabulary is fed at most once."""
        out = np.zeros(self.vocab_size, dtype=bool)
        texts, i = self.texts, 0
        path, states = [b""], [state]
        while i < len(texts):
            text = texts[i]
            while not text.startswith(path[-1]):
                path.pop()
                states.pop()
            at, st = len(path[-1]), states[-1]
            while at < len(text) and st is not None:
                st = machine.feed(st, text[at:at + 1])
                at += 1
                if st is not None:
                    path.append(text[:at])
                    states.append(st)
            if st is None:                                  # every string with this dead prefix
                dead = text[:at].rstrip(b"\xff")
                i = len(texts) if not dead else bisect_left(texts, dead[:-1] + bytes([dead[-1] + 1]), i + 1)
                continue
            out[self.ids[i]] = True
            i += 1
        if self.eos >= 0 and machine.can_end(state[0]):
            out[self.eos] = True
        return out


def literal_allowed(grammar, state) -> np.ndarray:
    """The definition itself, token by token: grammar.advance(state, t) is not None."""
    return np.array([grammar.advance(state, t) is not None for t in range(grammar.vocab_size)])


class Audit:
    def __init__(self, vocab, tok, *, checks: int, literal: int, mutate: bool, seed: int = 0,
                 engine: str | None = None, brute_force: bool = True):
        self.vocab, self.tok, self.checks, self.literal_left, self.mutate = vocab, tok, checks, literal, mutate
        self.brute_force = brute_force  # False: --engines-only, the engines compared, no oracle step checked
        self.engine = engine  # the grammars under test's (None: StackGrammar's default); native: also vs python
        self.oracle = Oracle(vocab)
        self.rng = random.Random(seed)
        self.counts = dict(schemas=0, compiled=0, walks=0, steps_filled=0, steps_checked=0, tokens_compared=0,
                           mismatch_steps=0, unsound_tokens=0, incomplete_tokens=0, advance_mismatches=0,
                           literal_checks=0, literal_mismatches=0, refused=0, timeouts=0,
                           engine_steps_compared=0, engine_mismatch_steps=0)
        self.mismatches: list[dict] = []
        self.token_of = dict(zip(self.oracle.texts, (ids[0] for ids in self.oracle.ids)))  # a token per byte string
        self.longest = max(map(len, self.token_of))

    def schema(self, name: str, schema, tests, config) -> None:
        self.counts["schemas"] += 1
        try:
            with time_bound(60):
                _, machine = bench.compile_within_limits(schema, config)
                _, judge = bench.compile_within_limits(schema, config)   # the oracle's own compile
        except (InferlabError, TimeBoundExceeded):
            self.counts["refused"] += 1
            return
        self.counts["compiled"] += 1
        valid, invalid = [], []
        for test in tests:
            try:
                text = bench._canonical(test["data"], schema, config)
            except InferlabError:
                continue
            if judge.accepts(text) == test["valid"]:
                (valid if test["valid"] else invalid).append(text)
        # warmed (30 ms, the warm-up default before it became 0) against the lazy one below: the
        # masks a warm-up builds must equal those built when first asked
        grammar = StackGrammar(machine.unbuilt(), self.vocab, warm_ms=ORACLE_WARM_MS, engine=self.engine)
        try:
            with time_bound(240):
                if not valid:
                    self._walk(name, "first mask", grammar, judge, [], self.checks)
                for k, text in enumerate(valid[:2]):
                    self._walk(name, f"valid {k}", grammar, judge, self.tok.encode(text), self.checks)
                if invalid:
                    self._walk(name, "invalid 0", grammar, judge, self.tok.encode(invalid[0]), self.checks)
                if valid:
                    lazy = StackGrammar(machine.unbuilt(), self.vocab, warm_ms=0, engine=self.engine)
                    self._walk(name, "valid 0, random tokens", lazy, judge, self._random_tokens(valid[0]), self.checks)
        except TimeBoundExceeded:
            self.counts["timeouts"] += 1

    def _random_tokens(self, text: str) -> list[int]:
        data, out, i = text.encode("utf-8"), [], 0
        while i < len(data):
            ends = [j for j in range(i + 1, min(len(data), i + self.longest) + 1) if data[i:j] in self.token_of]
            j = self.rng.choice(ends) if self.rng.random() < 0.6 else ends[-1]
            out.append(self.token_of[data[i:j]])
            i = j
        return out

    def _walk(self, name: str, walk: str, grammar, judge, tokens: list[int], checks: int) -> None:
        """Fill at every step, check the sampled ones, advance both sides by each token."""
        self.counts["walks"] += 1
        vb = self.vocab.token_bytes
        after = [i for i in range(1, len(tokens)) if any(c in vb[tokens[i - 1]] for c in STRUCTURE)]
        self.rng.shuffle(after)
        pick = {0, len(tokens), *after[:max(0, checks - 2)], *self.rng.sample(range(len(tokens) + 1), 1)}
        row = np.zeros((self.vocab.vocab_size + 31) // 32, dtype=np.int32)
        ref = StackGrammar(grammar.machine.unbuilt(), self.vocab, engine="python") if grammar.engine == "native" else None
        ref_row, ref_state = row.copy(), ref.initial_state() if ref else None
        state, truth, text = grammar.initial_state(), State(judge.start, keys.START), b""
        for i in range(len(tokens) + 1):
            row.fill(-1)                                      # a fill must write every word
            grammar.fill_bitmask(state, row)
            self.counts["steps_filled"] += 1
            if ref is not None:                               # native vs python, every filled step
                ref_row.fill(-1)
                ref.fill_bitmask(ref_state, ref_row)
                self.counts["engine_steps_compared"] += 1
                if not np.array_equal(row, ref_row):
                    self.counts["engine_mismatch_steps"] += 1
                    if len(self.mismatches) < 200:
                        self.mismatches.append(dict(schema=name, walk=walk, step=i, text=text.decode("utf-8", "replace"),
                                                    engines_differ=np.flatnonzero(unpack_bitmask(row ^ ref_row,
                                                                                  self.vocab.vocab_size))[:20].tolist()))
            t = tokens[i] if i < len(tokens) else None
            nxt_truth = judge.feed(truth, vb[t]) if t is not None and vb[t] else None
            if self.brute_force and (i in pick or (t is not None and nxt_truth is None)):
                self._check(name, walk, i, judge, truth, row, text)
            if t is None:
                return
            nxt = grammar.advance(state, t)
            if (nxt is None) != (nxt_truth is None):
                self.counts["advance_mismatches"] += 1
                self.mismatches.append(dict(schema=name, walk=walk, step=i, token=t, text=text.decode("utf-8", "replace"),
                                            ours_refused=nxt is None))
                return
            if nxt is None:
                return
            state, truth, text = nxt, nxt_truth, text + vb[t]
            ref_state = ref.advance(ref_state, t) if ref is not None else None
            if ref is not None and ref_state is None:  # (advance is the same Python code under both engines)
                self.counts["engine_mismatch_steps"] += 1
                ref = None

    def _check(self, name: str, walk: str, step: int, judge, truth, row: np.ndarray, text: bytes) -> None:
        want = self.oracle.allowed(judge, truth)
        if self.literal_left > 0 and (step == 0 or self.rng.random() < 0.2):
            self.literal_left -= 1                            # the oracle's shortcut, against its definition
            self.counts["literal_checks"] += 1
            lit = literal_allowed(StackGrammar(judge, self.vocab), truth)
            self.counts["literal_mismatches"] += int(not np.array_equal(lit, want))
        got = unpack_bitmask(row, self.vocab.vocab_size).copy()
        if self.mutate:
            flip = self.rng.randrange(self.vocab.vocab_size)
            got[flip] = ~got[flip]
        self.counts["steps_checked"] += 1
        self.counts["tokens_compared"] += self.vocab.vocab_size
        unsound, incomplete = np.flatnonzero(got & ~want), np.flatnonzero(~got & want)
        if len(unsound) or len(incomplete):
            self.counts["mismatch_steps"] += 1
            self.counts["unsound_tokens"] += len(unsound)
            self.counts["incomplete_tokens"] += len(incomplete)
            if len(self.mismatches) < 200:
                show = lambda ids: [(int(t), self.vocab.token_bytes[t].decode("utf-8", "replace")) for t in ids[:20]]  # noqa: E731
                self.mismatches.append(dict(schema=name, walk=walk, step=step, text=text.decode("utf-8", "replace"),
                                            unsound=show(unsound), incomplete=show(incomplete)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--limit", type=int, default=1000, help="the stratified sample's first N schemas (seed 0)")
    p.add_argument("--every", type=int, default=3, help="every k-th of them")
    p.add_argument("--vocab", default="qwen", help="512, cl100k, qwen or a tokenizer.json (default qwen)")
    p.add_argument("--checks", type=int, default=4, help="steps checked per walk, besides the first, last and refused")
    p.add_argument("--literal", type=int, default=12, help="oracle steps also checked token by token by advance()")
    p.add_argument("--mutate", action="store_true", help="flip one bit of each checked mask (a self-test)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="the grammars' engine (default: INFERLAB_ENGINE's, native where built); native: every "
                        "filled step is also compared with the Python engine's")
    p.add_argument("--engines-only", action="store_true",
                   help="with --engine native: compare the engines at every filled step, check no step by brute force")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"mask_oracle: --out {args.out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    if min(args.limit, args.every, args.checks) < 1 or args.literal < 0:
        print("mask_oracle: --limit, --every and --checks must be >= 1, --literal >= 0", file=sys.stderr)
        return 2
    try:
        vocab, tok, config, paths = open_sample(args.directory, args.vocab, args.limit, args.every)
    except InferlabError as exc:
        print(f"mask_oracle: {exc}", file=sys.stderr)
        return 2
    if args.engine == "native" and not native.built():
        print("mask_oracle: --engine native: the native mask engine is not built", file=sys.stderr)
        return 2
    if args.engines_only and args.engine != "native":
        print("mask_oracle: --engines-only compares the engines: add --engine native", file=sys.stderr)
        return 2
    audit = Audit(vocab, tok, checks=args.checks, literal=args.literal, mutate=args.mutate, engine=args.engine,
                  brute_force=not args.engines_only)
    with progress_bar(len(paths), "schemas") as advance:
        for path in paths:
            advance(path.stem)
            doc = json.loads(path.read_text(encoding="utf-8"))
            audit.schema(path.name, doc["schema"], doc.get("tests", []), config)
    result = {"provenance": provenance(), "engine": native.build_info() | {"asked": args.engine},
              "engines_only": args.engines_only, "vocab": args.vocab, "vocab_size": vocab.vocab_size,
              "counts": audit.counts, "mismatches": audit.mismatches}
    atomic_write_json(args.out, result)
    c = audit.counts
    print(f"{c['steps_checked']} steps checked ({c['tokens_compared']:,} token answers) over {c['walks']} walks of "
          f"{c['compiled']} schemas: {c['mismatch_steps']} mismatching steps ({c['unsound_tokens']} unsound, "
          f"{c['incomplete_tokens']} incomplete tokens), {c['advance_mismatches']} advance mismatches; the oracle's "
          f"shortcut against advance(): {c['literal_mismatches']} of {c['literal_checks']} differ"
          + (f"; native vs python: {c['engine_mismatch_steps']} of {c['engine_steps_compared']} filled steps differ"
             if c["engine_steps_compared"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
