"""schema-bench: the compiler on real schemas (JSONSchemaBench files), per schema and per category.

For each schema: compile (schema -> stack grammar: one regex and byte DFA per automaton,
schema.compile_grammar and constrain.stack), or record the refusal reason; re-serialise each
test instance canonically (`canonical_json`) and ask the grammar whether it accepts it; a valid
instance should be accepted (completeness), an invalid one must be rejected (soundness); then,
for a vocabulary, time the first mask of a fresh grammar (rows are built lazily) and the
per-token mask over the tokens of the first accepted valid instance: fill an int32 bitmask row
and advance, after a first walk that built the rows (the first walk is reported apart), and
the other accepted valid instances walked in turn after it on the same grammar.

File formats: JSONSchemaBench, one file per schema (`<Category>---<name>.json`): {"schema": ...,
"tests": [{"valid": bool, "data": ...}]}, see the folder's README; or the JSON-Schema-Test-Suite's
own, a folder (searched recursively) or one file of lists of groups {"description", "schema",
"tests"}: each group is one case, its category the file's path in the folder ("allOf",
"optional/format/date"), its format policy the one the suite assumes (`assert` under
optional/format/ and in optional/format-assertion, where the suite tests format assertion; `annotate` elsewhere, the
specification's default) unless BenchConfig.format names one for every case.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from inferlab.bench.schema_peers import PEER_NAMES
from inferlab.constrain.keys import key_index
from inferlab.constrain.matcher import MatcherMask
from inferlab.constrain.schema import SchemaError, canonical_json
from inferlab.constrain.stack import WARM_MS, StackGrammar, StackMachine, compile_machine
from inferlab.errors import InferlabError
from inferlab.gcpause import gc_disabled
from inferlab.jsonfile import read_json
from inferlab.measure.bounded import TimeBoundExceeded, peak_rss_mb, reset_peak_rss, time_bound
from inferlab.measure.timing import token_walk_us, walks_us

DEFAULT_DIR = Path("../shared/jsonschemabench")
# Subset construction in Python: beyond this an automaton's DFA takes minutes; refused with a reason.
BENCH_MAX_STATES = 20_000
# A regex whose NFA would exceed this (counted repeats such as maxLength 8192 unrolled) is refused
# before the automaton is built: building it only to hit the state limit costs tens of seconds.
BENCH_MAX_NFA = 300_000
# Bounds on each engine's work on one schema (compile, instances, mask timing): past them the
# engine refuses that schema ("exceeded 120 s"), and the run goes on.
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_PEER_MEMORY = 4 * 2**30


@dataclass(frozen=True)
class BenchConfig:
    directory: Path = DEFAULT_DIR
    limit: int | None = None       # None: every file; else a stratified sample of this size
    seed: int = 0                  # fixes the stratified sample
    whitespace: str = "compact"
    max_ref_depth: int = 3
    any_depth: int = 1             # nesting generated for unconstrained values (compile_schema's)
    extra_keys: bool = True
    max_states: int = BENCH_MAX_STATES
    peers: bool = False            # also run llguidance, xgrammar, outlines-core (schema_peers)
    peer_names: tuple = PEER_NAMES  # the peers run when `peers`
    mask_samples: int = 1          # timing samples per schema (each >= mask_min_sample_s of fill work)
    mask_min_sample_s: float = 0.05
    timeout_s: float = DEFAULT_TIMEOUT_S   # wall time per schema for each engine (ours and each peer)
    peer_memory: int = DEFAULT_PEER_MEMORY  # bytes of RSS per peer child (measure.bounded)
    warm_ms: float = WARM_MS       # our grammar's warm-up before its first mask (StackGrammar.warm; 0: lazy)
    format: str | None = None      # "assert" | "annotate" for every case; None: each case's own (Case.format)
    ref_dir: Path | None = None    # local registry of remote $ref documents (schema.compile_grammar's ref_dir)


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
    # with a vocabulary, the counts above are the engine's token masks' (_count_by_masks): the
    # instances on which they and the byte machine's accepts() disagree (an engine defect: 0)
    mask_disagreements: int | None = None
    compile_ms: float | None = None    # schema -> regexes -> minimal DFAs
    refuse_ms: float | None = None     # time spent before a refusal (size limits cost the most)
    first_mask_ms: float | None = None  # a fresh grammar over the compiled machine, and its first bitmask (vocabulary preprocessed)
    warm_configs: int = 0              # configurations whose masks that grammar built before it (StackGrammar.warm)
    dfa_states: int | None = None      # summed over the automata
    automata: int | None = None
    uses_stack: bool | None = None
    narrowed: int = 0
    mask_us_per_token: float | None = None        # fill bitmask (median of single readings), rows built
    step_us_per_token: float | None = None        # fill bitmask + advance (+ 2 clock reads), per token of a walk
    first_walk_us_per_token: float | None = None  # fill only, mean over the first walk (rows built lazily)
    first_walk_us: list[float] = field(default_factory=list)  # that walk's single readings (pooled: MaskBench's TBM)
    first_walk_kinds: str = ""  # what each of those steps did, a letter each (STEP_KINDS; _replay_first_walk)
    first_walk_advance_us: list[float] = field(default_factory=list)  # advancing by each of its tokens (ours: rows built)
    later_walk_us: list[float] = field(default_factory=list)  # the other accepted valid instances' walks, in turn after
    #                                                           it on the same grammar: their single readings
    mask_tokens: int = 0
    mask_us_p99: float | None = None
    apply_us_per_token: float | None = None  # lookup + apply to float32 logits (MatcherMask), warm: median
    apply_us_p99: float | None = None
    peak_rss_mb: float | None = None  # this process's peak while it ran ours (None: not measurable)
    peers: dict = field(default_factory=dict)     # peer name -> schema_peers.PeerResult as a dict


STEP_KINDS = {  # a first-walk step, by what its fill did (StackGrammar: fill_kept, stats)
    "s": "state seen",      # the state was filled before: its fill was kept
    "c": "mask cached",     # a new state whose mask was cached (its mask key, or its top frame's)
    "n": "narrow walk",     # a walk of a few trie nodes in Python made the mask
    "b": "frame split",     # frame splits (or one walk of the whole trie) made it
    "w": "native walk",     # the native engine made it (its splits and walks: docs/native-engine.md)
}


STEP_COLORS = ("tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:gray")  # (not the engines' colours in the other panels)


def category_of(path: Path) -> str:
    return path.name.split("---", 1)[0] if "---" in path.name else "uncategorised"


@dataclass(frozen=True)
class Case:
    """One schema with its tests: a JSONSchemaBench file (group None), or group `group` of a
    JSON-Schema-Test-Suite file."""
    path: Path
    name: str
    category: str
    group: int | None = None
    format: str = "assert"   # the format policy its tests assume
    dialect: str | None = None  # the $schema of a suite's draft folder: a schema without one is read in it

    def load(self) -> tuple:
        """(schema, tests) (check_bench_file or suite_cases has read the file once: nesting past
        Python's recursion limit included)."""
        doc = read_json(self.path)
        if self.group is not None:
            doc = doc[self.group]
        schema = doc["schema"]
        if self.dialect and isinstance(schema, dict) and "$schema" not in schema:
            schema = {"$schema": self.dialect, **schema}
        return schema, doc.get("tests", [])


def is_suite(path: Path) -> bool:
    """Whether `path` holds JSON-Schema-Test-Suite files (lists of groups) rather than
    JSONSchemaBench files (one object each): one file, or a folder whose first .json file, in
    sorted order, opens a list (a suite's tests/ folder holds only folders: searched recursively)."""
    if path.is_file():
        return _opens_list(path)
    top = sorted(path.glob("*.json"))
    if top:
        return _opens_list(top[0])
    return any(path.rglob("*.json"))


def _opens_list(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4096).lstrip()[:1] == b"["


# the suite's folders, by the dialect their schemas are written in (the suite's README: a schema
# without $schema is read in its folder's draft)
SUITE_DIALECTS = {"draft2020-12": "https://json-schema.org/draft/2020-12/schema",
                  "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
                  "draft7": "http://json-schema.org/draft-07/schema#",
                  "draft6": "http://json-schema.org/draft-06/schema#",
                  "draft4": "http://json-schema.org/draft-04/schema#"}


def suite_cases(path: Path) -> list[Case]:
    """Every group of the suite file or folder `path`, in file order; a file that is not a list of
    {"schema", "tests": [{"data", "valid"}]} groups is one InferlabError naming it and the pointer.
    A group's schema without $schema is read in the draft its folder names (SUITE_DIALECTS)."""
    files = [path] if path.is_file() else sorted(path.rglob("*.json"))
    # a file is named from its draft folder ("optional/format/date"), as in a run of the folder
    root = path.parent if path.is_file() else path
    root = next((a for a in [root, *root.parents] if a.name in SUITE_DIALECTS), root) if path.is_file() else root
    cases = []
    for f in files:
        rel = f.relative_to(root).with_suffix("").as_posix()
        doc = read_json(f)
        if not isinstance(doc, list):
            raise InferlabError(f"{f}: not a JSON-Schema-Test-Suite file (a list of groups at /)")
        policy = "assert" if re.search(r"(^|/)optional/format[/-]", rel) else "annotate"  # (format-assertion too)
        dialect = next((SUITE_DIALECTS[d] for d in reversed(f.resolve().parts) if d in SUITE_DIALECTS), None)
        for i, group in enumerate(doc):
            if not (isinstance(group, dict) and isinstance(group.get("schema"), (dict, bool))
                    and isinstance(group.get("tests", []), list)):
                raise InferlabError(f"{f}: /{i} is not a group {{\"schema\": object|boolean, \"tests\": [...]}}")
            for j, test in enumerate(group.get("tests", [])):
                if not isinstance(test, dict) or "data" not in test or not isinstance(test.get("valid"), bool):
                    raise InferlabError(f"{f}: /{i}/tests/{j} is not {{\"data\": ..., \"valid\": true|false}}")
            cases.append(Case(f, f"{rel}/{i}: {group.get('description', '')}", rel, i, policy, dialect))
    if not cases:
        raise InferlabError(f"schema-bench: no suite groups in {path}")
    return cases


def bench_cases(directory: Path, limit: int | None, seed: int) -> list[Case]:
    """The cases to run: a suite's groups (is_suite), or JSONSchemaBench files (list_cases);
    `limit` samples either the same way."""
    if directory.exists() and is_suite(directory):
        return _stratified(suite_cases(directory), lambda c: c.category, limit, seed)
    return [Case(p, p.stem, category_of(p)) for p in list_cases(directory, limit, seed)]


def list_cases(directory: Path, limit: int | None, seed: int) -> list[Path]:
    """The files to run: all of them, or `limit` taken round-robin over categories (each category
    shuffled with `seed`), so every category is represented in proportion until it runs out."""
    if not directory.is_dir():
        raise InferlabError(f"schema-bench: {directory} is not a folder (expected JSONSchemaBench files)")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise InferlabError(f"schema-bench: no .json files in {directory}")
    return _stratified(files, category_of, limit, seed)


def _stratified(items: list, category, limit: int | None, seed: int) -> list:
    """All of `items`, or `limit` of them round-robin over category(item), each category shuffled
    with `seed`."""
    if limit is None or limit >= len(items):
        return items
    rng = random.Random(seed)
    by_cat: dict[str, list] = defaultdict(list)
    for f in items:
        by_cat[category(f)].append(f)
    queues = []
    for cat in sorted(by_cat):
        items = by_cat[cat][:]
        rng.shuffle(items)
        queues.append(items)
    out: list = []
    while len(out) < limit:
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop())
    return out


def _reason_key(message: str) -> str:
    """A refusal message with its pointers and schema-specific numbers made generic, for the
    histogram; limits written with thousands separators (1,000,000) stay as they are."""
    key = re.sub(r" at #\S*?: ", ": ", message)   # pointers may hold ":" (not ": ") themselves
    key = re.sub(r"#/?\S*|(?<=\s)/\S*", "#…", key)
    key = re.sub(r"~[\d,]+", "~N", key)
    key = re.sub(r"(?<![\w,])\d+(?![\d,])", "N", key)
    return key[:120]


def run_schema(path: Path, config: BenchConfig, vocab=None, peers=None) -> SchemaResult:
    """One JSONSchemaBench file; `peers` = {name: bench_peers adapter} to run beside ours (needs `vocab`)."""
    return run_case(Case(path, path.stem, category_of(path)), config, vocab, peers)


def run_case(case: Case, config: BenchConfig, vocab=None, peers=None) -> SchemaResult:
    """One case (a bench file or a suite group), as run_schema."""
    schema, tests = case.load()
    res = SchemaResult(name=case.name, category=case.category, compiled=False)
    config = replace(config, format=config.format or case.format)
    measured = reset_peak_rss()
    t0 = time.perf_counter()
    try:
        with time_bound(config.timeout_s):
            _ours(res, schema, tests, config, vocab)
    except TimeBoundExceeded as exc:  # the whole of ours is refused, as a peer's child would be
        res = SchemaResult(name=res.name, category=res.category, compiled=False, reason=str(exc),
                           refuse_ms=(time.perf_counter() - t0) * 1e3)
    res.peak_rss_mb = peak_rss_mb() if measured else None
    if peers and vocab is not None:
        _run_peers(res, schema, tests, config, vocab, peers)
    return res


def _canonical(instance, schema, config: BenchConfig) -> str:
    return canonical_json(instance, schema, max_ref_depth=config.max_ref_depth,
                          extra_keys=config.extra_keys, any_depth=config.any_depth, ref_dir=config.ref_dir)


def _run_peers(res: SchemaResult, schema, tests, config: BenchConfig, vocab, peers) -> None:
    from inferlab.bench.schema_peers import run_peer_bounded

    tok = vocab[1]
    cases = []
    for test in tests:
        try:
            text = _canonical(test["data"], schema, config)
        except InferlabError:  # a schema we refuse may not give a canonical order: compact JSON
            text = json.dumps(test["data"], ensure_ascii=False, separators=(",", ":"))
        cases.append((bool(test["valid"]), text, tok.encode(text)))
    timing = next((tokens for valid, _, tokens in cases if valid), None)
    for name, peer in peers.items():
        res.peers[name] = run_peer_bounded(peer, schema, cases, timing, memory_bytes=config.peer_memory,
                                           timeout_s=config.timeout_s)


def _ours(res: SchemaResult, schema, tests, config: BenchConfig, vocab) -> None:
    t0 = time.perf_counter()
    try:
        with gc_disabled():  # (a timing: the cyclic GC's pauses would land in random schemas)
            compiled, machine = compile_within_limits(schema, config)
    except InferlabError as exc:  # SchemaError, or the automaton's limits (states) or its parser
        res.reason = str(exc) if isinstance(exc, SchemaError) else f"dfa: {exc}"
        res.refuse_ms = (time.perf_counter() - t0) * 1e3
        return
    res.compile_ms = (time.perf_counter() - t0) * 1e3
    res.compiled = True
    res.dfa_states = machine.n_states
    res.automata = machine.n_automata
    res.uses_stack = machine.uses_stack
    res.narrowed = len(compiled.narrowed)
    labelled = []  # (valid, canonical text, accepted by the byte machine)
    for test in tests:
        text = _canonical(test["data"], schema, config)
        labelled.append((test["valid"], text, machine.accepts(text)))
    _count(res, labelled)
    if vocab is not None:
        grammar = _time_mask(res, machine, vocab, [t for valid, t, ok in labelled if valid and ok], config)
        _count_by_masks(res, grammar, vocab[1], labelled)


def _count(res: SchemaResult, judged) -> None:
    """The completeness and soundness counts of `judged`: (valid, canonical text, accepted)."""
    res.valid_total = res.valid_accepted = res.invalid_total = res.invalid_rejected = 0
    res.unsound = []
    for valid, text, accepted in judged:
        if valid:
            res.valid_total += 1
            res.valid_accepted += accepted
        else:
            res.invalid_total += 1
            res.invalid_rejected += not accepted
            if accepted:
                res.unsound.append(text[:200])


def _count_by_masks(res: SchemaResult, grammar: StackGrammar, tok, labelled) -> None:
    """The counts again, each instance accepted through the engine's token masks (after every
    timing, on the timed grammar: its walks must not warm what was timed), so that coverage,
    completeness and soundness test the engine and not only the byte machine it is built from;
    where the two disagree, the masks' answer counts, and the disagreement is counted. A mask that
    allowed a token the machine refuses (mask_accepts' None) counts against the engine either way:
    an invalid instance as accepted, a valid one as rejected."""
    answers = [mask_accepts(grammar, tok.encode(text)) for _, text, _ in labelled]
    _count(res, [(valid, text, (not valid) if got is None else got) for (valid, text, _), got in zip(labelled, answers)])
    res.mask_disagreements = sum(got != byte for got, (_, _, byte) in zip(answers, labelled))


def mask_accepts(grammar: StackGrammar, tokens: list[int]) -> bool | None:
    """Is `tokens` accepted through the grammar's token masks: each token's bit set in the mask
    of the state before it, then the EOS bit at the end (where the vocabulary has no EOS, the
    state's can_end)? None where a mask allowed a token that advance (the byte machine) refuses:
    the masks and the machine disagree."""
    row = np.zeros(grammar.words, dtype=np.int32)                            # (ceil(V/32),)
    words = row.view(np.uint32)
    state = grammar.initial_state()
    for t in tokens:
        grammar.fill_bitmask(state, row)
        if not (int(words[t >> 5]) >> (t & 31)) & 1:
            return False
        state = grammar.advance(state, t)
        if state is None:
            return None
    if grammar.eos_id < 0:
        return grammar.can_end(state)
    grammar.fill_bitmask(state, row)
    return bool((int(words[grammar.eos_id >> 5]) >> (grammar.eos_id & 31)) & 1)


def compile_within_limits(schema, config: BenchConfig):
    """schema -> (CompiledGrammar, StackMachine), each automaton within the bench's limits
    (stack.compile_machine: over them, subschemas are outlined from a smaller size on; a regex
    whose NFA size estimate is over BENCH_MAX_NFA is refused before its NFA is built)."""
    return compile_machine(schema, max_states=config.max_states, max_nfa_estimate=BENCH_MAX_NFA,
                           whitespace=config.whitespace, extra_keys=config.extra_keys,
                           format=config.format or "assert", ref_dir=config.ref_dir)


def _time_mask(res: SchemaResult, machine: StackMachine, vocab, texts: list[str], config: BenchConfig) -> StackGrammar:
    """A fresh grammar's first mask (every compiled schema's), then where `texts` (the valid
    instances the grammar accepts) has one, a first walk over the first one's tokens (rows built
    lazily on the way: reported apart as first_walk_us_per_token, and the warm-up of what
    follows), and a walk of each other one in turn on the same grammar (later_walk_us: MaskBench
    pools every valid instance's tokens so), then one timing pass of the first one (`mask_samples` samples, default 1) that yields both figures:
    mask_us_per_token / mask_us_p99, the median and p99 of single fill_bitmask readings (the
    peers' unit, timing.token_walk_us as schema_peers times them), walked again until each
    sample holds >= mask_min_sample_s of fill time; and step_us_per_token, the sample's wall time
    per token (fill + advance + its two clock reads, ~0.1 us), the median over samples. Returns
    the grammar (_count_by_masks walks the instances on it after these timings)."""
    vocabulary, tok = vocab
    preprocess(vocabulary)  # once (cached): apart from the schema's times
    fresh = machine.unbuilt()
    row = np.zeros((vocabulary.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
    with gc_disabled():
        t0 = time.perf_counter()  # from the compiled machine: the grammar over the vocabulary, its first mask
        grammar = StackGrammar(fresh, vocabulary, warm_ms=config.warm_ms)
        grammar.fill_bitmask(grammar.initial_state(), row)
        res.first_mask_ms = (time.perf_counter() - t0) * 1e3
    res.warm_configs = grammar.warmed
    tokens = tok.encode(texts[0]) if texts else []
    if not tokens:
        return grammar

    def new_walk():
        state = [grammar.initial_state()]

        def consume(t: int) -> bool:
            state[0] = grammar.advance(state[0], t)
            return state[0] is not None
        return (lambda: grammar.fill_bitmask(state[0], row)), consume

    try:  # the first walk: a tokenization the grammar rejects is a bug to report, not to time
        first = token_walk_us(new_walk, tokens, 0.0)[:len(tokens)]
    except ValueError as exc:
        res.reason = f"mask walk failed: {exc}"
        return grammar
    res.first_walk_us_per_token = float(first.mean())  # rows built on the way
    res.first_walk_us = np.round(first, 2).tolist()
    res.later_walk_us = np.round(walks_us(new_walk, [tok.encode(t) for t in texts[1:]]), 2).tolist()
    kinds, advance = _replay_first_walk(machine, vocabulary, tokens, grammar.warmed)
    res.first_walk_kinds, res.first_walk_advance_us = kinds, np.round(advance, 2).tolist()
    readings, steps = [], []
    for _ in range(config.mask_samples):
        t0 = time.perf_counter_ns()
        us = token_walk_us(new_walk, tokens, config.mask_min_sample_s)  # (walks * T,) gc off
        steps.append((time.perf_counter_ns() - t0) / 1e3 / len(us))
        readings.append(us)
    us = np.concatenate(readings)
    res.step_us_per_token = float(np.median(steps))
    res.mask_tokens = len(tokens)
    res.mask_us_per_token, res.mask_us_p99 = float(np.median(us)), float(np.percentile(us, 99))
    res.apply_us_per_token, res.apply_us_p99 = _time_apply(grammar, tokens, config)
    return grammar


def _replay_first_walk(machine: StackMachine, vocabulary, tokens: list[int], warmed: int = 0) -> tuple[str, np.ndarray]:
    """_time_mask's first walk again on a fresh grammar, whose caches fill as the timed walk's
    did (their bounds count entries, never time; the warm-up is replayed by its count of
    configurations, `warmed`, not by its time): what each step's fill did (STEP_KINDS), a
    letter a token, and the us each advance took (the fills untimed, gc off), where our rows for
    the configurations a token's bytes reach are built. The timed walk times fills alone, as
    the peers' are (schema_peers times their consumes the same way)."""
    grammar = StackGrammar(machine.unbuilt(), vocabulary)
    if warmed:
        grammar.warm(math.inf, configs=warmed)
    row = np.zeros((vocabulary.vocab_size + 31) // 32, dtype=np.int32)  # (ceil(V/32),)
    state = grammar.initial_state()
    grammar.fill_bitmask(state, row)  # the first mask
    kinds, advance = [], []
    with gc_disabled():
        for t in tokens:
            kept, before = grammar.fill_kept(state), grammar.stats()
            grammar.fill_bitmask(state, row)
            after = grammar.stats()
            kinds.append(step_kind(kept, before, after))
            t0 = time.perf_counter_ns()
            state = grammar.advance(state, t)
            advance.append(time.perf_counter_ns() - t0)
    return "".join(kinds), np.asarray(advance, dtype=np.float64) / 1e3  # (T,) us


def step_kind(kept: bool, before, after) -> str:
    """STEP_KINDS's letter of one fill: kept, fill_kept's answer before it; before / after, the
    grammar's stats() around it."""
    if kept:
        return "s"
    if after.split_masks > before.split_masks:
        return "b"
    if after.native_masks > before.native_masks:
        return "w"
    return "n" if after.narrow_masks > before.narrow_masks else "c"


def _time_apply(grammar: StackGrammar, tokens: list[int], config: BenchConfig) -> tuple[float, float]:
    """(median, p99) us of a step's lookup + apply to float32 logits (V,) through the engine's
    hook (MatcherMask: a plan of the allowed or the disallowed ids, whichever is fewer, cached per
    state, so a warm step does not unpack V bits), on walks of `tokens` repeated until
    mask_min_sample_s after one warm-up walk, one hook for all."""
    hook = MatcherMask(grammar)
    logits = np.zeros(grammar.vocab_size, dtype=np.float32)                 # (V,)

    def new_walk():
        hook.reset()
        return (lambda: hook.apply(logits, hook.allowed_mask())), hook.matcher.accept_token
    fill, consume = new_walk()  # warm-up: the plans of the walk's states
    for t in tokens:
        fill()
        consume(t)
    us = token_walk_us(new_walk, tokens, config.mask_min_sample_s)
    return float(np.median(us)), float(np.percentile(us, 99))


def preprocess(vocabulary) -> None:
    """Our vocabulary preprocessing: the token trie and the key index (each built once)."""
    vocabulary.trie()
    key_index(vocabulary)


def _stats(rs: list, get) -> dict:
    """Coverage, completeness, soundness, timings and the largest per-schema peak RSS (MiB) of
    results `rs`; get(r) -> the record (ours: the SchemaResult; a peer's: its PeerResult dict,
    None if the peer did not run)."""
    recs = [x for x in map(get, rs) if x is not None]
    g = (lambda x, k: x.get(k)) if recs and isinstance(recs[0], dict) else getattr  # (a peer has no apply timing)
    comp = [x for x in recs if g(x, "compiled")]
    v_tot, v_acc = sum(g(x, "valid_total") for x in comp), sum(g(x, "valid_accepted") for x in comp)
    i_tot, i_rej = sum(g(x, "invalid_total") for x in comp), sum(g(x, "invalid_rejected") for x in comp)

    def pct(key, q):
        return _q([g(x, key) for x in comp if g(x, key) is not None], q)
    pooled = [us for x in comp for us in g(x, "first_walk_us")]
    # time to first mask from the schema, MaskBench's TTFM: the compile, then the first mask
    # (timed for every compiled schema; a peer whose first mask raised has none)
    ttfm = [g(x, "compile_ms") + g(x, "first_mask_ms") for x in comp if g(x, "first_mask_ms") is not None]
    return {
        "schemas": len(recs), "compiled": len(comp), "coverage": len(comp) / len(recs) if recs else None,
        "valid": v_tot, "valid_accepted": v_acc, "completeness": v_acc / v_tot if v_tot else None,
        "invalid": i_tot, "invalid_rejected": i_rej, "soundness": i_rej / i_tot if i_tot else None,
        # ours with a vocabulary: instances whose acceptance through the token masks differs from
        # the byte machine's (None: not counted, no vocabulary or a peer)
        "mask_disagreements": None if all(g(x, "mask_disagreements") is None for x in comp)
        else sum(g(x, "mask_disagreements") or 0 for x in comp),
        "compile_ms_median": pct("compile_ms", 50), "compile_ms_p90": pct("compile_ms", 90),
        "ttfm_ms_median": _q(ttfm, 50), "ttfm_ms_p90": _q(ttfm, 90),
        "first_mask_ms_median": pct("first_mask_ms", 50), "first_mask_ms_p90": pct("first_mask_ms", 90),
        "mask_us_per_token_median": pct("mask_us_per_token", 50),
        "mask_us_p99_median": pct("mask_us_p99", 50),
        "apply_us_per_token_median": pct("apply_us_per_token", 50), "apply_us_p99_median": pct("apply_us_p99", 50),
        "first_walk_us_per_token_median": pct("first_walk_us_per_token", 50),
        # every token of every first walk pooled (MaskBench's "time between masks": one walk per
        # instance, nothing walked before it but the first mask)
        "first_walk_tokens": len(pooled), "first_walk_us_p50": _q(pooled, 50), "first_walk_us_p99": _q(pooled, 99),
        "first_walk_by_step": _by_step(comp, g),
        # with the later instances' walks: every accepted valid instance's tokens, walked in turn on
        # one grammar per schema (MaskBench's TBM population, fills only)
        **_walks_stats(pooled + [us for x in comp for us in (g(x, "later_walk_us") or [])]),
        # advancing by each first-walk token (our grammar's advance, a peer's consume): pooled as the fills are
        **_advance_stats([us for x in comp for us in (g(x, "first_walk_advance_us") or [])]),
        "peak_rss_mb_max": max((rss for x in recs if (rss := g(x, "peak_rss_mb")) is not None), default=None),
    }


def _walks_stats(pooled: list) -> dict:
    return {"all_walks_tokens": len(pooled), "all_walks_us_p50": _q(pooled, 50), "all_walks_us_p99": _q(pooled, 99),
            "all_walks_us_mean": float(np.mean(pooled)) if pooled else None}


def _advance_stats(pooled: list) -> dict:
    return {"first_walk_advance_us_p50": _q(pooled, 50), "first_walk_advance_us_p99": _q(pooled, 99),
            "first_walk_advance_us_mean": float(np.mean(pooled)) if pooled else None}


def _pool_by_step(recs: list, g) -> dict[str, list[float]]:
    """The first-walk readings (us) of records `recs` pooled by what their step did (STEP_KINDS
    names, in its order; the kinds met). Empty for a peer's (no kinds)."""
    out = {name: [] for name in STEP_KINDS.values()}
    for x in recs:
        for kind, us in zip(g(x, "first_walk_kinds") or "", g(x, "first_walk_us") or []):
            out[STEP_KINDS[kind]].append(us)
    return {name: v for name, v in out.items() if v}


def _by_step(comp: list, g) -> dict:
    """Per kind of step: its share of the first walks' tokens and of their summed time, and its
    p50 / p90 (us)."""
    us = _pool_by_step(comp, g)
    tokens, total = sum(map(len, us.values())), sum(map(sum, us.values())) or 1.0
    return {name: {"tokens": len(v), "token_share": len(v) / tokens, "time_share": sum(v) / total,
                   "us_p50": _q(v, 50), "us_p90": _q(v, 90)} for name, v in us.items()}


def _q(vals: list, q: float) -> float | None:
    return float(np.percentile(vals, q)) if vals else None


def summarize(results: list[SchemaResult]) -> dict:
    """Per category (and "all"): coverage, completeness, soundness, timings, refusal histogram."""
    groups: dict[str, list[SchemaResult]] = defaultdict(list)
    for r in results:
        groups[r.category].append(r)
    groups_all = dict(sorted(groups.items()))
    groups_all["all"] = results
    out = {}
    peer_names = sorted({name for r in results for name in r.peers})
    for cat, rs in groups_all.items():
        out[cat] = {
            **_stats(rs, lambda r: r),
            "size_refusals": sum(1 for r in rs if not r.compiled and _size_refusal(r.reason)),
            "refusals": dict(Counter(_reason_key(r.reason) for r in rs if not r.compiled).most_common()),
            "peers": {name: _stats(rs, lambda r, n=name: r.peers.get(n)) for name in peer_names},
        }
    return out


def _max(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


def _size_refusal(reason: str | None) -> bool:
    return bool(reason) and any(w in reason for w in ("exceeds", "unrolls to", "more than", "too large"))


def run_bench(config: BenchConfig, *, vocab=None, step=None) -> dict:
    """Every selected schema; `vocab` = (Vocabulary, Tokenizer) for mask timing or None;
    `step(name)` is called after each schema (the CLI's progress bar)."""
    cases = bench_cases(config.directory, config.limit, config.seed)
    peers, peer_info, preprocessing_ms = None, {}, None
    if vocab is not None:  # before the first schema, outside its time bound, as the peers' is
        t0 = time.perf_counter()
        preprocess(vocab[0])
        preprocessing_ms = (time.perf_counter() - t0) * 1e3  # (0 if this process built it before)
    if config.peers and vocab is not None:
        from inferlab.bench.schema_peers import load_peers
        peers, peer_info = load_peers(*vocab, names=config.peer_names)
    results = []
    process_peak = peak_rss_mb()  # loading; run_schema then resets the peak for each schema's own
    for case in cases:
        results.append(run_case(case, config, vocab, peers))
        process_peak = _max(process_peak, peak_rss_mb())  # ours and the peers' side in this process
        if step is not None:
            step(case.name)
    config_json = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}
    return {
        "schema_version": 1,
        "experiment": "schema-bench",
        "config": config_json,
        "summary": summarize(results),
        "peers": peer_info,
        "vocab_preprocessing_ms": preprocessing_ms,  # ours: the token trie and the key index
        # this process's peak RSS over the run (MiB), the peers' children apart. Not the rusage
        # maxrss of a wrapper (/usr/bin/time -v): that takes the largest child too, and the
        # per-schema resets of the process's peak (reset_peak_rss) leave only the last schema's
        "peak_rss_mb": process_peak,
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
    peers = [n for n, p in results.get("peers", {}).items() if p.get("available")]
    ax.set_title(f"schema-bench, inferlab's compiler: {summary['all']['schemas']} schemas"
                 + (f" (the peers' figures, {', '.join(peers)}: the printed table and masks.png)" if peers else ""),
                 fontsize=9 if peers else None)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def mask_readings(results: dict) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per engine (ours first, then each peer that ran): (every first-walk reading in us, pooled
    over its compiled schemas; those and every later instance's (MaskBench's population); each
    compiled schema's repeated-walk median in us)."""
    def collect(get):
        recs = [x for x in map(get, results["schemas"]) if x is not None and x["compiled"]]
        first = np.asarray([us for x in recs for us in (x.get("first_walk_us") or [])], dtype=float)
        later = np.asarray([us for x in recs for us in (x.get("later_walk_us") or [])], dtype=float)  # (older runs: none)
        warm = np.asarray([x["mask_us_per_token"] for x in recs if x.get("mask_us_per_token") is not None], dtype=float)
        return first, np.concatenate([first, later]), warm
    out = {"inferlab": collect(lambda x: x)}
    for name in sorted({n for x in results["schemas"] for n in x.get("peers", {})}):
        out[name] = collect(lambda x, n=name: x["peers"].get(n))
    return {name: v for name, v in out.items() if len(v[0]) or len(v[1])}


def step_readings(results: dict) -> dict[str, np.ndarray]:
    """Our first-walk readings (us) pooled by what their step did (_pool_by_step)."""
    recs = [x for x in results["schemas"] if x["compiled"]]
    return {name: np.asarray(v, dtype=float) for name, v in _pool_by_step(recs, lambda x, k: x.get(k)).items()}


def _cdf(ax, vals: np.ndarray, label: str, color=None, linestyle="-") -> None:
    xs = np.sort(vals)
    ax.step(xs, 100 * np.arange(1, len(xs) + 1) / len(xs), where="post", label=label, color=color, linestyle=linestyle)


def plot_masks(results: dict):
    """The time to fill a bitmask row per token, per engine, as the share of readings at or under
    each time (log x): each first-walk token (left; rows built on the way; dashed, with the later
    valid instances walked in turn after it, where a schema has more than one), ours again by what
    the step did (middle), and each schema's repeated-walk median (right). A Figure, or None
    without mask readings (--vocab none)."""
    from matplotlib.ticker import LogFormatter

    from inferlab.measure.plots import new_figure

    readings = mask_readings(results)
    if not readings:
        return None
    fig, (left, middle, right) = new_figure(1, 3, figsize=(16, 6.0))
    for i, (name, (first, walks, warm)) in enumerate(readings.items()):
        color = f"C{i}"  # an engine's colour in both panels
        for ax, vals in ((left, first), (right, warm)):
            if len(vals):
                _cdf(ax, vals, f"{name} (median {np.median(vals):,.1f} µs)", color)
        if len(walks) > len(first):  # dashed: with the later valid instances, walked in turn after it
            _cdf(left, walks, f"{name}, every valid instance in turn (median {np.median(walks):,.1f} µs)", color,
                 linestyle="--")
    shares = results["summary"]["all"].get("first_walk_by_step", {})  # (_by_step: an older run has none)
    colors = dict(zip(STEP_KINDS.values(), STEP_COLORS))  # a kind's colour whatever the kinds met
    for name, vals in step_readings(results).items():
        k = shares[name]
        _cdf(middle, vals, f"{name}: {100 * k['token_share']:.0f}% of tokens, {100 * k['time_share']:.0f}% of time "
                           f"(median {k['us_p50']:,.1f} µs)", colors[name])
    warm = results["config"].get("warm_ms") or 0  # (a run before the warm-up has none: lazy)
    ours = f"inferlab's grammar warmed {warm:g} ms before its first mask" if warm else "inferlab's masks built lazily"
    for ax, title in ((left, f"first walk of a fresh grammar, every token ({results['config'].get('vocab', '')} vocabulary)\n"
                             f"{ours}; dashed: with the later valid\ninstances, in turn on the same grammar"),
                      (middle, "inferlab's first walk, by what the step did"),
                      (right, "repeated walks (rows built): each schema's median")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(LogFormatter(minor_thresholds=(1, 0.4)))  # plain labels ("3", not "3×10⁰") under a decade
        ax.set_xlabel("µs to fill an int32 bitmask row")
        ax.set_ylabel("% at or under")
        ax.set_ylim(0, 100)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(title, fontsize=9)
        if ax.get_legend_handles_labels()[0]:  # below the axes: inside, it hid the curves' low ends
            ax.legend(fontsize=7 if ax is middle else 8, loc="upper center", bbox_to_anchor=(0.5, -0.16))
        else:
            ax.text(0.5, 0.5, "no step kinds recorded" if ax is middle else "no readings", transform=ax.transAxes,
                    ha="center", color="dimgrey")
    return fig
