"""Two commits' compile and first-walk times, interleaved schema by schema: ratios per round.

Each round starts this file's child at the base commit and at the working tree, fresh processes
that load the vocabulary, then takes the first `--limit` schemas of the stratified sample one at
a time: each side in turn (alternating which goes first, schema by schema and round by round)
compiles it (as schema-bench does, the cyclic GC off) and walks a fresh grammar's
first masks over its first accepted valid instance (gc off, as schema-bench times it). Only one
side works at a time, and the two sides' readings of a schema are a fraction of a second apart,
so a slow spell of a shared host falls on both: a round per process each would put minutes
between them. Caches shared across schemas (region shapes, small automata) grow in the same
order in both, from empty each round. The base commit is checked out in a temporary git
worktree, removed after:

    python benchmarks/commit_ab.py ../shared/jsonschemabench --base 566be68 --rounds 3 --vocab qwen

With --max-length N, only those of the first `--limit` schemas that hold a maxLength of at most
N (a scan of the schema, before any compile): strings bounded near one token's length, where a
counted frame is near its max from the start. It prints, and writes with --out (never over an
existing file without --force; with the commits both sides ran and whether the tree was clean),
per round and side the compile time summed over schemas (and over only those both sides
compile, compile_s_common) and its p90, the time to first mask (compile, the grammar over the vocabulary and its first mask, on
the schemas with an accepted valid instance) median and p90, the pooled first walk's p50, p99
and mean, the mean advance by a token on that walk (where our rows are built), and per measure
the ratio working tree / base: its median over rounds, with the smallest and largest. The child
builds its machines as an older commit can (no StackMachine.unbuilt). Run it with --base HEAD on a clean tree
to see the spread that identical code shows on the host. Where the base commit has C++
extensions (setup.py's ext_modules), they are built in its worktree first, so both sides run
their native code; the output's "native" lists each side's compiled modules.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MEASURES = ("compile_s", "compile_s_common", "compile_ms_p90", "ttfm_ms_p50", "ttfm_ms_p90", "first_walk_us_p50", "first_walk_us_p99",
            "first_walk_us_mean", "first_walk_advance_us_mean")


def bounded_strings(schema, max_length: int) -> bool:
    """Does the schema hold a maxLength of at most max_length anywhere (a cheap scan, no compile)?"""
    work = [schema]
    while work:
        x = work.pop()
        if isinstance(x, dict):
            n = x.get("maxLength")
            if isinstance(n, int) and not isinstance(n, bool) and n <= max_length:
                return True
            work.extend(x.values())
        elif isinstance(x, list):
            work.extend(x)
    return False


def child(directory: Path, limit: int, vocab_name: str, max_length: int | None = None) -> None:
    """One side, with the inferlab on PYTHONPATH (the commit under test): after "ready", reads a
    schema's index per stdin line and answers with one JSON line, {"compile_ms": float or null
    (refused or skipped), "walk_us": [per token], "advance_us": [per token]}."""
    from inferlab.cli.schema_bench import _load_vocab

    bench = _schema_bench()
    vocab, tok = _load_vocab(vocab_name)
    bench.preprocess(vocab)
    config = bench.BenchConfig(directory=directory, limit=limit, seed=0)
    paths = bench.list_cases(directory, limit, 0)
    print("ready", flush=True)
    for line in sys.stdin:
        doc = json.loads(paths[int(line)].read_text(encoding="utf-8"))
        print(json.dumps(one_schema(doc, config, max_length, vocab, tok)), flush=True)


def _schema_bench():
    """The commit under test's schema-bench module: inferlab.bench.schema_bench since issue 49
    moved it, inferlab.constrain.bench before."""
    try:
        from inferlab.bench import schema_bench
    except ImportError:
        from inferlab.constrain import bench as schema_bench
    return schema_bench


def one_schema(doc, config, max_length, vocab, tok) -> dict:
    """A schema's compile time and its first walk's per-token fill and advance times (in the
    child: the modules are the commit under test's)."""
    from inferlab.constrain.stack import StackGrammar, StackMachine
    from inferlab.errors import InferlabError
    from inferlab.measure.timing import gc_disabled  # (in every commit since the timing harness, cf973fc)

    bench = _schema_bench()
    none = {"compile_ms": None, "first_mask_ms": None, "walk_us": [], "advance_us": []}
    if max_length is not None and not bounded_strings(doc["schema"], max_length):
        return none
    with gc_disabled():
        t0 = time.perf_counter()
        try:
            _, machine = bench.compile_within_limits(doc["schema"], config)
        except InferlabError:
            return none
        compile_ms = (time.perf_counter() - t0) * 1e3
    texts = (bench._canonical(t["data"], doc["schema"], config) for t in doc.get("tests", []) if t["valid"])
    text = next((t for t in texts if machine.accepts(t)), None)
    walk, advance, first_mask_ms = [], [], None
    if text is not None:
        fresh = StackMachine(machine.dfas, machine.counts, machine.maps, machine.uniques)
        row = np.zeros((vocab.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
        warm = {"warm_ms": config.warm_ms} if hasattr(config, "warm_ms") else {}  # (a commit before the warm-up has none)
        with gc_disabled():
            t0 = time.perf_counter()  # the first mask, as schema-bench times it: not a walk reading
            grammar = StackGrammar(fresh, vocab, **warm)
            state = grammar.initial_state()
            grammar.fill_bitmask(state, row)
            first_mask_ms = (time.perf_counter() - t0) * 1e3
            for t in tok.encode(text):
                t0 = time.perf_counter()
                grammar.fill_bitmask(state, row)
                walk.append((time.perf_counter() - t0) * 1e6)
                t0 = time.perf_counter()
                state = grammar.advance(state, t)  # (our rows for the configurations its bytes reach are built here)
                advance.append((time.perf_counter() - t0) * 1e6)
    return {"compile_ms": compile_ms, "first_mask_ms": first_mask_ms, "walk_us": walk, "advance_us": advance}


def summary(readings: list[dict]) -> dict:
    """One side's round: the measures over its schemas."""
    compile_ms = [r["compile_ms"] for r in readings if r["compile_ms"] is not None]
    walk = [us for r in readings for us in r["walk_us"]]
    advance = [us for r in readings for us in r["advance_us"]]
    ttfm = [r["compile_ms"] + r["first_mask_ms"] for r in readings if r.get("first_mask_ms") is not None]
    return {"compile_s": sum(compile_ms) / 1e3, "compile_ms_p90": float(np.percentile(compile_ms, 90)),
            "ttfm_ms_p50": float(np.percentile(ttfm, 50)), "ttfm_ms_p90": float(np.percentile(ttfm, 90)),
            "first_walk_us_p50": float(np.percentile(walk, 50)), "first_walk_us_p99": float(np.percentile(walk, 99)),
            "first_walk_us_mean": float(np.mean(walk)), "first_walk_advance_us_mean": float(np.mean(advance)),
            "schemas": len(compile_ms), "tokens": len(walk)}


def start_side(src: Path, args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}  # (the same set and dict orders in both)
    cmd = [sys.executable, __file__, str(args.directory), "--limit", str(args.limit), "--vocab", args.vocab, "--child"]
    if args.max_length is not None:
        cmd += ["--max-length", str(args.max_length)]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"commit_ab: the child at {src} did not start")
    return proc


def ask(proc: subprocess.Popen, i: int) -> dict:
    proc.stdin.write(f"{i}\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("commit_ab: a child ended early")
    return json.loads(line)


def run_round(k: int, sources: dict[str, Path], n: int, args) -> dict:
    """Round k: both sides, schema by schema, the first side alternating; which side's process
    starts first alternates by round too."""
    starts = list(sources.items())[::-1 if k % 2 else 1]
    procs = {side: start_side(src, args) for side, src in starts}
    readings = {side: [] for side in procs}
    try:
        for i in range(n):
            order = ("base", "tree") if (i + k) % 2 == 0 else ("tree", "base")
            for side in order:
                readings[side].append(ask(procs[side], i))
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
    # compile time over the schemas both sides compile: a side that compiles more schemas (the
    # hard ones a base refused) is not slower for that
    both = [i for i in range(n) if all(readings[side][i]["compile_ms"] is not None for side in readings)]
    return {side: {**summary(r), "compile_s_common": sum(r[i]["compile_ms"] for i in both) / 1e3,
                   "schemas_common": len(both)} for side, r in readings.items()}


def compare(rounds: list[dict]) -> dict:
    """Per measure, the ratio working tree / base per round: median, smallest, largest."""
    out = {}
    for m in MEASURES:
        r = [x["tree"][m] / x["base"][m] for x in rounds]
        out[m] = {"ratio_median": float(np.median(r)), "ratio_min": min(r), "ratio_max": max(r)}
    return out


def _bad_input(args, repo: Path) -> str | None:
    """What is wrong with the arguments, in one line, or None."""
    if args.out is not None and args.out.exists() and not args.force:
        return f"--out {args.out} exists (use --force to replace it)"
    if args.limit < 1 or args.rounds < 1:
        return "--limit and --rounds must be >= 1"
    if not args.directory.is_dir():
        return f"{args.directory} is not a folder of JSONSchemaBench files"
    if subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{args.base}^{{commit}}"],
                      capture_output=True).returncode != 0:
        return f"--base {args.base}: not a commit of {repo}"
    return None


def write_new(path: Path, data: dict) -> None:
    """Atomically, with the umask's permissions (main refused an existing file without --force)."""
    from inferlab.measure import atomic_write_json  # (the parent's inferlab: not at module level, which the child shares)

    atomic_write_json(path, data)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--base", default="HEAD", help="the commit to compare the working tree against")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--vocab", default="qwen")
    p.add_argument("--max-length", type=int, default=None,
                   help="only the schemas with a maxLength of at most this (strings bounded near a token's length)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--force", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.directory.resolve(), args.limit, args.vocab, args.max_length)
        return 0
    args.directory = args.directory.resolve()
    repo = Path(__file__).resolve().parents[1]
    problem = _bad_input(args, repo)  # before any work: a run takes minutes
    if problem is not None:
        print(f"commit_ab: {problem}", file=sys.stderr)
        return 2
    commits = {"base_commit": _git(repo, "rev-parse", args.base), "tree_commit": _git(repo, "rev-parse", "HEAD"),
               "tree_clean": not _git(repo, "status", "--porcelain", "--untracked-files=no")}  # (as the run began)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-q", str(base), args.base], check=True)
        try:
            commits["native"] = {"base": _build_native(base), "tree": _native_modules(repo)}
            from inferlab.bench.schema_bench import list_cases  # (the parent's: it only counts the schemas)

            n = len(list_cases(args.directory, args.limit, 0))
            rounds = []
            for i in range(args.rounds):
                got = run_round(i, {"base": base / "src", "tree": repo / "src"}, n, args)
                rounds.append(got)
                print(f"round {i + 1}: " + "; ".join(f"{side} " + ", ".join(f"{m} {got[side][m]:.1f}" for m in MEASURES)
                                                     for side in ("base", "tree")), file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(base)], check=True)
    result = {"base": args.base, **commits, "limit": args.limit, "max_length": args.max_length, "vocab": args.vocab, "rounds": rounds,
              "ratios": compare(rounds)}
    print(json.dumps(result["ratios"], indent=1))
    if args.out is not None:
        write_new(args.out, result)
    return 0


def _native_modules(root: Path) -> list[str]:
    """The compiled extension modules a checkout holds (built in place), by file name."""
    return sorted(p.name for p in (root / "src" / "inferlab" / "constrain").glob("_*native*.so"))


def _build_native(base: Path) -> list[str]:
    """Build the base commit's C++ extensions in its worktree, as `pip install -e .` would
    (setup.py build_ext --inplace), where it has any: a base without them would run its Python
    fallbacks, and the ratios would be of the engines, not of the change. Returns what was built."""
    if (base / "setup.py").exists() and "ext_modules" in (base / "setup.py").read_text(encoding="utf-8"):
        print("commit_ab: building the base's extensions", file=sys.stderr)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=base, check=True,
                       stdout=subprocess.DEVNULL)
    return _native_modules(base)


def _git(repo: Path, *args: str) -> str:
    """git's output (the commits a result names: read later, HEAD says nothing)."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
