"""`inferlab schema-bench [DIR] [--limit N] [--vocab 512|cl100k|qwen|PATH|none] [--peers] [--timeout S]
[--peer-memory SIZE] [--warm-ms MS] [--json] [--out DIR]`.

Runs the JSON-schema compiler over a folder of JSONSchemaBench files (bench.schema_bench) and prints
coverage, completeness and soundness per category, with the top refusal reasons, and where masks
are timed our first walks' steps by what they did and the peers beside us. --out writes
results.json, summary.png, masks.png (masks timed) and manifest.json (atomically; --force to
replace).
"""

from __future__ import annotations

import os
import sys

from pathlib import Path

from rich.console import Console
from rich.table import Table

from inferlab.cli.common import non_negative_float, non_negative_int, positive_float, positive_int, print_json
from inferlab.cli.schema import add_policy_arguments, ref_dir_of
from inferlab.bench.schema_bench import (BENCH_MAX_STATES, DEFAULT_DIR, DEFAULT_PEER_MEMORY, DEFAULT_TIMEOUT_S,
                                         BenchConfig, bench_cases, is_suite, list_cases, plot_masks, plot_summary,
                                         preprocess, run_bench)
from inferlab.bench.schema_peers import PEER_NAMES
from inferlab.constrain import native
from inferlab.constrain.stack import WARM_MS
from inferlab.engine import ENGINES
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.progress import progress_bar
from inferlab.units import fmt_binary, parse_bytes

NAME = "schema-bench"
HELP = "compile real JSON schemas (JSONSchemaBench): coverage, completeness, soundness, mask time"
EXAMPLES = (
    'inferlab schema-bench path/to/jsonschemabench --limit 100',
    'inferlab schema-bench DIR --vocab qwen --out /tmp/schema-bench',
    'inferlab schema-bench DIR --limit 100 --engine python',
)


def add_arguments(p):
    p.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR,
                   help=f"folder of JSONSchemaBench files, one {{\"schema\", \"tests\"}} JSON file per schema "
                        f"(github.com/guidance-ai/jsonschemabench; default {DEFAULT_DIR}), or a JSON-Schema-Test-Suite "
                        "folder or file (each group one case; format policy: assert under optional/format/, "
                        "annotate elsewhere, unless --format names one)")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="a stratified sample of N schemas (round-robin over categories, fixed seed)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the stratified sample (default 0)")
    p.add_argument("--vocab", default="512",
                   help="vocabulary for the mask timing: 512, cl100k, qwen, a tokenizer.json path, "
                        "or none to skip it (default 512)")
    p.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                   help="compact: no whitespace between JSON tokens; flexible: optional whitespace "
                        "where JSON allows it (default compact)")
    p.add_argument("--any-depth", type=int, default=1, choices=range(0, 5), metavar="0..4",
                   help="nesting generated for unconstrained values (default 1)")
    p.add_argument("--no-extra-keys", dest="extra_keys", action="store_false",
                   help="forbid extra keys where additionalProperties is absent, as structured-output strict modes "
                        "do (default: generated, as JSON Schema allows them)")
    p.add_argument("--max-states", type=positive_int, default=BENCH_MAX_STATES,
                   help=f"DFA state limit per schema (default {BENCH_MAX_STATES})")
    p.add_argument("--peers", nargs="?", const=",".join(PEER_NAMES), default=None, metavar="NAMES",
                   help="also run peers on the same schemas and tokens: all of llguidance, xgrammar and "
                        "outlines-core, or those named (comma-separated, e.g. --peers llguidance,xgrammar)")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="wall time for each engine's work on one schema (ours, and each peer's child); "
                        f"past it that engine refuses the schema, \"exceeded N s\" (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--peer-memory", default=fmt_binary(DEFAULT_PEER_MEMORY).replace(" ", ""), metavar="SIZE",
                   help="resident memory of each peer's child process per schema, with a unit (4GiB, 500MB); "
                        "past it the peer refuses the schema, \"exceeded SIZE\" "
                        f"(default {fmt_binary(DEFAULT_PEER_MEMORY).replace(' ', '')})")
    p.add_argument("--warm-ms", type=non_negative_float, default=WARM_MS, metavar="MS",
                   help="our grammar's warm-up before its first mask, as compile_json_schema's: the masks nearest "
                        f"the start built for this long, in the time to first mask (0: every mask lazily; default {WARM_MS:g})")
    add_policy_arguments(p)
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="our mask engine: native (C++, the default where built) or python (the reference); "
                        "sets INFERLAB_ENGINE for the run")
    p.add_argument("--json", action="store_true", help="print the full results as JSON on stdout")
    p.add_argument("--out", type=Path, default=None, help="also write results.json, summary.png, masks.png, manifest.json here")
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _median_p90(s: dict, key: str, digits: int) -> str:
    """"median / p90" of summary keys key_median and key_p90, or "-" where nothing was timed."""
    if s[f"{key}_median"] is None:
        return "-"
    return f"{s[f'{key}_median']:.{digits}f} / {s[f'{key}_p90']:.{digits}f}"


def _print_summary(results: dict, console: Console) -> None:
    table = Table(title="schema-bench by category")
    widest = max(map(len, results["summary"]), default=8)
    for col in ("category", "schemas", "coverage", "completeness", "soundness",
                "compile ms (median)", "compile + first mask ms (median / p90)", "mask µs/token (median)",
                "lookup + apply µs (median)"):  # (a category's name is never cut)
        table.add_column(col, justify="left" if col == "category" else "right", no_wrap=col == "category",
                         min_width=widest if col == "category" else None)
    for cat, s in results["summary"].items():
        mask = s["mask_us_per_token_median"]
        table.add_row(cat, str(s["schemas"]), f"{_pct(s['coverage'])} ({s['compiled']})",
                      f"{_pct(s['completeness'])} ({s['valid_accepted']}/{s['valid']})",
                      f"{_pct(s['soundness'])} ({s['invalid_rejected']}/{s['invalid']})",
                      "-" if s["compile_ms_median"] is None else f"{s['compile_ms_median']:.1f}",
                      _median_p90(s, "ttfm_ms", 1),
                      "-" if mask is None else f"{mask:.1f}",
                      "-" if s["apply_us_per_token_median"] is None else f"{s['apply_us_per_token_median']:.1f}")
    console.print(table)
    disagree = results["summary"]["all"].get("mask_disagreements")
    if disagree is not None:  # (with a vocabulary: the counts above are the token masks')
        console.print(f"  completeness and soundness through the {results['config'].get('engine', {}).get('engine', '')} "
                      f"engine's token masks; instances where they and the byte machine disagree: {disagree}")
    _print_steps(results["summary"]["all"], console)
    _print_peers(results, console)
    refusals = results["summary"]["all"]["refusals"]
    if refusals:
        console.print("[bold]top refusal reasons[/bold]")
        for reason, n in list(refusals.items())[:15]:
            console.print(f"  {n:5d}  {reason}")
    unsound = [r for r in results["schemas"] if r["unsound"]]
    for r in unsound:
        console.print(f"[red]UNSOUND[/red] {r['name']}: accepted invalid {r['unsound'][0]}")


def _print_steps(s: dict, console: Console) -> None:
    """Our first walks' tokens by what their step did: where the first walk's time goes."""
    steps = s.get("first_walk_by_step")
    if not steps:
        return
    table = Table(title=f"inferlab's first walks: {s['first_walk_tokens']:,} tokens by what their step did")
    for col in ("step", "tokens", "share of the time", "µs (p50 / p90)"):
        table.add_column(col, justify="left" if col == "step" else "right")
    for name, k in steps.items():
        table.add_row(name, f"{k['tokens']:,} ({100 * k['token_share']:.0f}%)", f"{100 * k['time_share']:.0f}%",
                      f"{k['us_p50']:.1f} / {k['us_p90']:.1f}")
    console.print(table)
    if s.get("all_walks_us_p50") is not None:
        console.print(f"  every accepted valid instance in turn on its schema's grammar ({s['all_walks_tokens']:,} tokens, "
                      f"MaskBench's population): p50 {s['all_walks_us_p50']:.1f} µs, p99 {s['all_walks_us_p99']:.1f} µs, "
                      f"mean {s['all_walks_us_mean']:.1f} µs")
    if s.get("first_walk_advance_us_p50") is not None:
        console.print("  advancing the grammar by each of those tokens (where our rows are built; timed apart from "
                      f"the fills): p50 {s['first_walk_advance_us_p50']:.1f} µs, p99 {s['first_walk_advance_us_p99']:.1f} µs, "
                      f"mean {s['first_walk_advance_us_mean']:.1f} µs")


def _print_peers(results: dict, console: Console) -> None:
    summary = results["summary"]
    names = list(summary["all"].get("peers", {}))
    if not names:
        return
    table = Table(title="inferlab and its peers, same schemas and tokens (all categories)")
    for col in ("engine", "coverage", "completeness", "soundness", "first mask ms (median / p90)",
                "compile + first mask ms (median / p90)", "mask µs/token (median)",
                "first walk µs/token (p50 / p99 of all tokens)",
                "every valid instance in turn µs/token (p50 / p99)", "its advances µs/token (p50 / mean)"):
        table.add_column(col, justify="left" if col == "engine" else "right")
    for name, s in [("inferlab", summary["all"]), *summary["all"]["peers"].items()]:
        mask = s["mask_us_per_token_median"]
        table.add_row(name, f"{_pct(s['coverage'])} ({s['compiled']}/{s['schemas']})",
                      f"{_pct(s['completeness'])} ({s['valid_accepted']}/{s['valid']})",
                      f"{_pct(s['soundness'])} ({s['invalid_rejected']}/{s['invalid']})",
                      _median_p90(s, "first_mask_ms", 2), _median_p90(s, "ttfm_ms", 1),
                      "-" if mask is None else f"{mask:.1f}",
                      "-" if s["first_walk_us_p50"] is None else f"{s['first_walk_us_p50']:.1f} / {s['first_walk_us_p99']:.1f}",
                      "-" if s.get("all_walks_us_p50") is None else f"{s['all_walks_us_p50']:.1f} / {s['all_walks_us_p99']:.1f}",
                      "-" if s.get("first_walk_advance_us_p50") is None else
                      f"{s['first_walk_advance_us_p50']:.1f} / {s['first_walk_advance_us_mean']:.1f}")
    console.print(table)
    done = [(n, i["vocab_preprocessing_ms"]) for n, i in results.get("peers", {}).items() if i.get("available")]
    if results.get("vocab_preprocessing_ms") is not None:
        done.insert(0, ("inferlab", results["vocab_preprocessing_ms"]))
    if done:
        console.print("  vocabulary preprocessing, once, apart from the schemas' times: "
                      + ", ".join(f"{n} {ms:,.0f} ms" for n, ms in done))


def _peer_names(arg: str | None) -> tuple[str, ...]:
    if arg is None:
        return PEER_NAMES
    names = tuple(dict.fromkeys(n.strip() for n in arg.split(",") if n.strip()))
    unknown = [n for n in names if n not in PEER_NAMES]
    if unknown or not names:
        raise InferlabError(f"--peers {arg!r}: not a comma-separated list of {', '.join(PEER_NAMES)}")
    return names


def _load_vocab(name: str):
    if name == "none":
        return None
    from inferlab.constrain.vocab import Vocabulary
    from inferlab.model.tokenizer_loaders import load_vocab

    tok = load_vocab(name)
    return Vocabulary.from_tokenizer(tok), tok


WHERE = "JSONSchemaBench: github.com/guidance-ai/jsonschemabench, see docs/schema-bench.md"


def open_sample(directory: Path, vocab_name: str, limit: int, every: int = 1):
    """(vocabulary preprocessed, tokenizer, BenchConfig, every `every`-th path of the stratified
    sample's first `limit`, seed 0): the set-up of the scripts that walk the sample as
    schema-bench does (benchmarks/first_walk_phases.py, mask_oracle.py); InferlabError naming
    the problem."""
    if not directory.is_dir():
        raise InferlabError(f"{directory} is not a folder of JSONSchemaBench files")
    vocab, tok = _load_vocab(vocab_name)
    preprocess(vocab)
    config = BenchConfig(directory=directory, limit=limit, seed=0)
    return vocab, tok, config, list_cases(directory, limit, 0)[::every]


def check_bench_file(path: Path) -> None:
    """One line naming the file and the JSON pointer unless `path` is in the bench format
    {"schema": object|bool, "tests": [{"data": ..., "valid": bool}, ...]} (tests optional)."""
    doc = read_json_object(path)
    if "schema" not in doc:
        raise InferlabError(f"{path}: not a JSONSchemaBench file: no \"schema\" key at / ({WHERE})")
    if not isinstance(doc["schema"], (dict, bool)):
        raise InferlabError(f"{path}: /schema is {type(doc['schema']).__name__}, not a JSON schema (object or boolean)")
    tests = doc.get("tests", [])
    if not isinstance(tests, list):
        raise InferlabError(f"{path}: /tests is {type(tests).__name__}, expected an array of tests")
    for i, test in enumerate(tests):
        if not isinstance(test, dict) or "data" not in test or not isinstance(test.get("valid"), bool):
            raise InferlabError(f"{path}: /tests/{i} is not {{\"data\": ..., \"valid\": true|false}}")


def _cases(config: BenchConfig) -> list:
    """The cases this run reads, each checked before any work."""
    if config.directory.exists() and is_suite(config.directory):
        return bench_cases(config.directory, config.limit, config.seed)  # (suite_cases checks each group)
    if not config.directory.is_dir():
        raise InferlabError(f"{config.directory} is not a folder of JSONSchemaBench files ({WHERE})")
    cases = list_cases(config.directory, config.limit, config.seed)
    for path in cases:
        check_bench_file(path)
    return cases


def run(args) -> int:
    if args.engine == "native" and not native.built():
        raise InferlabError("--engine native: the native mask engine is not built (pip install . with a C++17 compiler)")
    before = os.environ.get("INFERLAB_ENGINE")
    if args.engine:
        os.environ["INFERLAB_ENGINE"] = args.engine  # (every grammar of the run: StackGrammar's default)
    try:
        return _run(args)
    finally:
        if before is None:
            os.environ.pop("INFERLAB_ENGINE", None)
        else:
            os.environ["INFERLAB_ENGINE"] = before


def _run(args) -> int:
    native.requested()  # (a malformed INFERLAB_ENGINE: one line, before any work)
    config = BenchConfig(directory=args.directory, limit=args.limit, seed=args.seed,
                         whitespace=args.whitespace, max_states=args.max_states, any_depth=args.any_depth,
                         extra_keys=args.extra_keys, peers=args.peers is not None,
                         peer_names=_peer_names(args.peers), timeout_s=args.timeout,
                         peer_memory=parse_bytes(args.peer_memory, flag="--peer-memory"), warm_ms=args.warm_ms,
                         format=args.format_policy, ref_dir=ref_dir_of(args))
    writer = ExperimentWriter(args.out, force=args.force) if args.out else None  # fails before the work
    total = len(_cases(config))
    vocab = _load_vocab(args.vocab)
    with progress_bar(total, "schema-bench") as step:
        results = run_bench(config, vocab=vocab, step=step)
    results["config"]["vocab"] = args.vocab
    results["config"]["engine"] = native.build_info()
    if writer is not None:
        writer.add_json("results.json", results)
        writer.add_figure("summary.png", plot_summary(results))
        masks = plot_masks(results)
        if masks is not None:
            writer.add_figure("masks.png", masks)
        writer.add_json("manifest.json", build_manifest(
            experiment="schema-bench", seed=config.seed, config=results["config"], depends_on=None,
            results_summary=results["summary"]["all"], threads=None))
        writer.commit()
    if args.json:
        print_json(results)
    else:
        _print_summary(results, Console(width=max(Console().width, 130)))
    for name, info in results.get("peers", {}).items():  # (on stderr: said with --json too)
        if not info.get("available"):
            print(f"{args._prog}: note: peer {name} skipped: {info.get('note')}", file=sys.stderr)
    return 0
