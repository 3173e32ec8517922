"""schema-bench: the compiler on real schemas (JSONSchemaBench files), per schema and per category.

For each schema: compile (schema -> regex -> byte DFA), or record the refusal reason; re-serialise
each test instance canonically (`canonical_json`) and ask the DFA whether it accepts it; a valid
instance should be accepted (completeness), an invalid one must be rejected (soundness); then
build the token index for a vocabulary and time the indexed mask over the tokens of the first
accepted valid instance (mask build + apply + advance, per token).

File format (one file per schema, `<Category>---<name>.json`): {"schema": ..., "tests":
[{"valid": bool, "data": ...}]}; see the folder's README.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from inferlab.constrain import regex as rx
from inferlab.constrain.dfa import compile_ast
from inferlab.constrain.schema import SchemaError, canonical_json, compile_schema
from inferlab.errors import InferlabError
from inferlab.measure.timing import measure

DEFAULT_DIR = Path("../shared/jsonschemabench")
# Subset construction in Python: beyond this a schema's DFA takes minutes; refused with a reason.
BENCH_MAX_STATES = 20_000
# A regex whose NFA would exceed this (counted repeats such as maxLength 8192 unrolled) is refused
# before the automaton is built: building it only to hit the state limit costs tens of seconds.
BENCH_MAX_NFA = 300_000


@dataclass(frozen=True)
class BenchConfig:
    directory: Path = DEFAULT_DIR
    limit: int | None = None       # None: every file; else a stratified sample of this size
    seed: int = 0                  # fixes the stratified sample
    whitespace: str = "compact"
    max_ref_depth: int = 3
    any_depth: int = 1             # nesting generated for unconstrained values (compile_schema's)
    allow_extra_keys: bool = False
    max_states: int = BENCH_MAX_STATES
    mask_samples: int = 5          # timing samples per schema (each >= mask_min_sample_s of work)
    mask_min_sample_s: float = 0.05


@dataclass
class SchemaResult:
    name: str
    category: str
    compiled: bool
    reason: str | None = None          # why it was refused (one line)
    valid_total: int = 0
    valid_accepted: int = 0
    invalid_total: int = 0
    invalid_rejected: int = 0
    unsound: list[str] = field(default_factory=list)  # canonical texts of accepted invalid instances
    compile_ms: float | None = None    # schema -> regex -> minimal DFA
    index_ms: float | None = None      # DFA x vocabulary -> token index
    dfa_states: int | None = None
    ref_depth: int | None = None
    narrowed: int = 0
    mask_us_per_token: float | None = None
    mask_tokens: int = 0


def category_of(path: Path) -> str:
    return path.name.split("---", 1)[0] if "---" in path.name else "uncategorised"


def list_cases(directory: Path, limit: int | None, seed: int) -> list[Path]:
    """The files to run: all of them, or `limit` taken round-robin over categories (each category
    shuffled with `seed`), so every category is represented in proportion until it runs out."""
    if not directory.is_dir():
        raise InferlabError(f"schema-bench: {directory} is not a folder (expected JSONSchemaBench files)")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise InferlabError(f"schema-bench: no .json files in {directory}")
    if limit is None or limit >= len(files):
        return files
    rng = random.Random(seed)
    by_cat: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        by_cat[category_of(f)].append(f)
    queues = []
    for cat in sorted(by_cat):
        items = by_cat[cat][:]
        rng.shuffle(items)
        queues.append(items)
    out: list[Path] = []
    while len(out) < limit:
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop())
    return out


def _reason_key(message: str) -> str:
    """A refusal message without its pointer, for the histogram."""
    key = re.sub(r" at #\S*?: ", ": ", message)   # pointers may hold ":" (not ": ") themselves
    key = re.sub(r" #\S*", "", key)
    key = re.sub(r"/\S*", "", key)
    key = re.sub(r"\d+", "N", key)
    return key[:90]


def run_schema(path: Path, config: BenchConfig, vocab=None) -> SchemaResult:
    doc = json.loads(path.read_text(encoding="utf-8"))
    schema, tests = doc["schema"], doc.get("tests", [])
    res = SchemaResult(name=path.stem, category=category_of(path), compiled=False)
    t0 = time.perf_counter()
    try:
        compiled, dfa = compile_within_limits(schema, config)
    except SchemaError as exc:
        res.reason = str(exc)
        return res
    except InferlabError as exc:  # the automaton's limits (states) or its parser
        res.reason = f"dfa: {exc}"
        return res
    res.compile_ms = (time.perf_counter() - t0) * 1e3
    res.compiled = True
    res.dfa_states = dfa.n_states
    res.ref_depth = compiled.ref_depth
    res.narrowed = len(compiled.narrowed)
    first_accepted = None
    for test in tests:
        text = canonical_json(test["data"], schema, max_ref_depth=config.max_ref_depth,
                              allow_extra_keys=config.allow_extra_keys, any_depth=config.any_depth)
        accepted = dfa.fullmatch(text)
        if test["valid"]:
            res.valid_total += 1
            res.valid_accepted += accepted
            if accepted and first_accepted is None:
                first_accepted = text
        else:
            res.invalid_total += 1
            res.invalid_rejected += not accepted
            if accepted:
                res.unsound.append(text[:200])
    if vocab is not None and first_accepted is not None:
        _time_mask(res, dfa, vocab, first_accepted, config)
    return res


def compile_within_limits(schema, config: BenchConfig):
    """schema -> (CompiledSchema, DFA); a recursive schema whose automaton is over the limits is
    retried with a shallower max_ref_depth (its ref_depth and narrowed say so)."""
    depth = config.max_ref_depth
    while True:
        compiled = compile_schema(schema, whitespace=config.whitespace, max_ref_depth=depth,
                                  any_depth=config.any_depth, allow_extra_keys=config.allow_extra_keys)
        try:
            ast = rx.parse(compiled.regex)
            size = nfa_size_estimate(ast)
            if size > BENCH_MAX_NFA:
                raise InferlabError(f"the regex unrolls to ~{size:,} NFA states (bench limit {BENCH_MAX_NFA:,})")
            return compiled, compile_ast(ast, max_states=config.max_states)
        except InferlabError:
            if compiled.ref_depth <= 1:
                raise
            depth = compiled.ref_depth - 1


def nfa_size_estimate(node) -> int:
    """Roughly the NFA states of a regex AST: counted repeats multiply their item."""
    if isinstance(node, rx.CharSet):
        return len(node.ranges) + 1
    if isinstance(node, (rx.Concat, rx.Alt)):
        return sum(nfa_size_estimate(item) for item in node.items) + 1
    copies = node.max if node.max is not None else node.min + 1
    return nfa_size_estimate(node.item) * max(copies, 1) + 1


def _time_mask(res: SchemaResult, dfa, vocab, text: str, config: BenchConfig) -> None:
    """Index build time, then the per-token cost of a walk over `text`'s tokens."""
    from inferlab.constrain.index import TokenIndex
    from inferlab.constrain.masks import IndexedJSONSchemaMask

    vocabulary, tok = vocab
    index = TokenIndex.build(dfa, vocabulary)
    res.index_ms = index.build_seconds * 1e3
    tokens = tok.encode(text)
    mask = IndexedJSONSchemaMask(index)
    logits = np.zeros(index.vocab_size, dtype=np.float32)  # (V,)

    def walk():
        mask.reset()
        for t in tokens:
            m = mask.allowed_mask()
            mask.apply(logits, m)
            mask.advance(t)

    try:
        walk()  # a tokenization the index rejects is a bug to report, not to time
    except InferlabError as exc:
        res.reason = f"mask walk failed: {exc}"
        return
    stats = measure(walk, samples=config.mask_samples, min_sample_s=config.mask_min_sample_s)
    res.mask_us_per_token = stats.median / max(len(tokens), 1) * 1e6
    res.mask_tokens = len(tokens)


def summarize(results: list[SchemaResult]) -> dict:
    """Per category (and "all"): coverage, completeness, soundness, timings, refusal histogram."""
    groups: dict[str, list[SchemaResult]] = defaultdict(list)
    for r in results:
        groups[r.category].append(r)
    groups_all = dict(sorted(groups.items()))
    groups_all["all"] = results
    out = {}
    for cat, rs in groups_all.items():
        comp = [r for r in rs if r.compiled]
        v_tot = sum(r.valid_total for r in comp)
        v_acc = sum(r.valid_accepted for r in comp)
        i_tot = sum(r.invalid_total for r in comp)
        i_rej = sum(r.invalid_rejected for r in comp)
        masks = [r.mask_us_per_token for r in comp if r.mask_us_per_token is not None]
        compile_ms = [r.compile_ms for r in comp]
        out[cat] = {
            "schemas": len(rs),
            "compiled": len(comp),
            "coverage": len(comp) / len(rs) if rs else None,
            "valid": v_tot, "valid_accepted": v_acc,
            "completeness": v_acc / v_tot if v_tot else None,
            "invalid": i_tot, "invalid_rejected": i_rej,
            "soundness": i_rej / i_tot if i_tot else None,
            "compile_ms_median": float(np.median(compile_ms)) if compile_ms else None,
            "mask_us_per_token_median": float(np.median(masks)) if masks else None,
            "refusals": dict(Counter(_reason_key(r.reason) for r in rs if not r.compiled).most_common()),
        }
    return out


def run_bench(config: BenchConfig, *, vocab=None, step=None) -> dict:
    """Every selected schema; `vocab` = (Vocabulary, Tokenizer) for mask timing or None;
    `step(name)` is called after each schema (the CLI's progress bar)."""
    files = list_cases(config.directory, config.limit, config.seed)
    results = []
    for path in files:
        results.append(run_schema(path, config, vocab))
        if step is not None:
            step(path.stem)
    config_json = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}
    return {
        "schema_version": 1,
        "experiment": "schema-bench",
        "config": config_json,
        "summary": summarize(results),
        "schemas": [asdict(r) for r in results],
    }


def plot_summary(results: dict):
    """Coverage, completeness and soundness per category, as grouped bars (a Figure). A share
    with no cases to measure (None) is marked "no data", never drawn as 0%."""
    from inferlab.measure.plots import new_figure

    summary = results["summary"]
    cats = list(summary)
    fig, ax = new_figure(figsize=(10, 4.5))
    width = 0.27
    for k, (key, label) in enumerate((("coverage", "coverage (compiled / schemas)"),
                                      ("completeness", "completeness (valid accepted)"),
                                      ("soundness", "soundness (invalid rejected)"))):
        xs = [i + (k - 1) * width for i in range(len(cats))]
        values = [summary[c][key] for c in cats]
        ax.bar(xs, [100 * (v or 0) for v in values], width, label=label)
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 1, "no data", rotation=90, ha="center", va="bottom", fontsize=7, color="dimgrey")
            elif v == 0:
                ax.text(x, 1, "0%", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(cats)), [c.replace("_", " ") for c in cats], rotation=30, ha="right")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.set_title(f"schema-bench: {summary['all']['schemas']} schemas")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig
