"""Token-index compile time and per-step mask time at a real vocabulary (issue 6).

Targets, on Qwen's 151k vocabulary and the conjugation schema: the index builds in <= 1 s (the
vocabulary preprocessing, a byte trie built once per tokenizer, reported apart), and a decode
step's mask (lookup + apply to float32 logits of size V) takes a median <= 20 us over the steps
of real outputs. Also timed: the regex -> DFA compile, and seed 000's naive mask on a few steps.

    python benchmarks/mask_index.py --out benchmarks/results/mask_index [--vocab qwen]
        [--schema FILE --instances FILE] [--force] [--quick] [--json]

Writes results.json (every Stats with its raw samples), manifest.json and mask_index.png into
--out, published atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int, print_json
from inferlab.constrain import vocabulary_of
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.index import TokenIndex
from inferlab.constrain.masks import IndexedJSONSchemaMask, NaiveJSONSchemaMask
from inferlab.constrain.schema import canonical_json, compile_schema
from inferlab.constrain.vocab import build_trie
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.machine import blas_threads
from inferlab.measure.plots import new_figure
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import measure, measure_interleaved
from inferlab.model.tokenizer_loaders import load_vocab

EXPERIMENT = "mask-index"
COMPILE_TARGET_S = 1.0
STEP_TARGET_US = 20.0
# Outputs of the conjugation task (the record MiniGPT is trained to emit), one per tense.
CONJUGATIONS = [
    {"verbo": "hablar", "tiempo": "presente", "persona": "yo", "forma": "hablo"},
    {"verbo": "comer", "tiempo": "pretérito", "persona": "nosotros", "forma": "comimos"},
    {"verbo": "vivir", "tiempo": "futuro", "persona": "ellos", "forma": "vivirán"},
]


def load_inputs(schema_path: Path | None, instances_path: Path | None) -> tuple[dict, list]:
    if (schema_path is None) != (instances_path is None):
        raise InferlabError("--schema and --instances go together (the instances must fit the schema)")
    if schema_path is None:
        text = (resources.files("inferlab") / "data" / "conjugation.schema.json").read_text(encoding="utf-8")
        return json.loads(text), CONJUGATIONS
    docs = []
    for flag, path in (("--schema", schema_path), ("--instances", instances_path)):
        try:
            docs.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise InferlabError(f"{flag} {path}: {exc}") from None
    if not isinstance(docs[1], list) or not docs[1]:
        raise InferlabError(f"--instances {instances_path}: expected a non-empty JSON list of instances")
    return docs[0], docs[1]


def step_fn(mask: IndexedJSONSchemaMask, logits: np.ndarray):
    def step():  # one decode step's mask work: lookup, then apply in place
        mask.apply(logits, mask.allowed_mask())
    return step


def time_steps(mask, tokens: list[int], logits, samples: int, step) -> list[dict]:
    """Per-step Stats of lookup + apply at every state the tokens pass through (EOS step last),
    each interleaved with a fill of all V logits with -inf (fill_us_*): a step that keeps few
    tokens does that fill and a scatter, so the two, taken in the same rounds, show what the
    fill alone costs beside it (timed apart, in another minute of a shared host, it read above
    most of the steps that include it)."""
    out = []
    fill = lambda: logits.fill(np.float32(-np.inf))  # noqa: E731
    for k in range(len(tokens) + 1):
        mask.reset()
        for t in tokens[:k]:
            mask.advance(t)
        keep, ids = mask.allowed_mask()
        stats = measure_interleaved({"step": step_fn(mask, logits), "fill": fill}, samples=samples)
        f = stats["fill"].to_json("us")
        out.append({"step": k, "apply": "keep_allowed" if keep else "write_disallowed", "ids": int(len(ids)),
                    "n_allowed": int(len(mask.allowed_ids())), **stats["step"].to_json("us"),
                    "fill_us_median": f["median_us"], "fill_us_p10": f["p10_us"], "fill_us_p90": f["p90_us"]})
        step(f"step {k}")
    return out


def run(args) -> dict:
    schema, instances = load_inputs(args.schema, args.instances)
    quick = args.quick
    samples, compile_samples = (3, 2) if quick else (args.samples, args.compile_samples)
    tok = load_vocab(args.vocab)
    vocab = vocabulary_of(tok)
    if quick:
        instances = instances[:1]
    texts = [canonical_json(doc, schema) for doc in instances]
    token_lists = [tok.encode(t) for t in texts]
    n_naive = 1 if quick else args.naive_steps
    total = 3 + sum(len(ts) + 1 for ts in token_lists) + n_naive
    dfa = compile_regex(compile_schema(schema).regex)
    for text in texts:  # refuse before any timing
        if not dfa.fullmatch(text):
            raise InferlabError(f"--instances: {text[:80]} does not match the schema's automaton")
    with blas_threads(args.threads), progress_bar(total, "mask-index") as step:
        trie_stats = measure(lambda: build_trie(vocab.token_bytes, vocab.special_ids), samples=compile_samples)
        trie = vocab.trie()
        step("regex -> DFA")
        dfa_stats = measure(lambda: compile_regex(compile_schema(schema).regex), samples=compile_samples * 3)
        step("index build")
        index_stats = measure(lambda: TokenIndex.build(dfa, vocab), samples=compile_samples)
        index = TokenIndex.build(dfa, vocab)
        step("per-step mask")
        mask = IndexedJSONSchemaMask(index)
        logits = np.random.default_rng(args.seed).standard_normal(vocab.vocab_size).astype(np.float32)  # (V,)
        per_doc = [time_steps(mask, ts, logits, samples, step) for ts in token_lists]
        mask.reset()
        lookup_stats = measure(mask.allowed_mask, samples=samples)
        naive = NaiveJSONSchemaMask(dfa, vocab)
        naive_steps = []
        for k in range(n_naive):  # the first steps of the first output: the seed's baseline
            naive.reset()
            for t in token_lists[0][:k]:
                naive.advance(t)
            stats = measure(lambda: naive.apply(logits, naive.allowed_mask()), samples=3)
            naive_steps.append({"step": k, **stats.to_json("us")})
            step(f"naive step {k}")
    step_medians = np.array([s["median_us"] for doc in per_doc for s in doc])  # (steps,)
    fill_medians = np.array([s["fill_us_median"] for doc in per_doc for s in doc])  # (steps,) beside each step
    summary = {
        "vocab": args.vocab, "vocab_size": vocab.vocab_size,
        "vocab_preprocessing_ms": trie_stats.median * 1e3, "trie_nodes": trie.n_nodes,
        "trie_nbytes": trie.nbytes,
        "regex_dfa_compile_ms": dfa_stats.median * 1e3, "dfa_states": dfa.n_states,
        "index_build_ms": index_stats.median * 1e3, "index_rows": index.n_rows,
        "index_allowed_pairs": int(len(index.allowed)), "index_nbytes": index.nbytes,
        "step_us_median": float(np.median(step_medians)), "step_us_p10": float(np.percentile(step_medians, 10)),
        "step_us_p90": float(np.percentile(step_medians, 90)), "steps": int(len(step_medians)),
        "fill_floor_us": float(np.median(fill_medians)), "lookup_us": lookup_stats.median * 1e6,
        "naive_step_us_median": float(np.median([s["median_us"] for s in naive_steps])),
        "compile_target_s": COMPILE_TARGET_S, "step_target_us": STEP_TARGET_US,
        "meets_compile_target": index_stats.median <= COMPILE_TARGET_S,
        "meets_step_target": float(np.median(step_medians)) <= STEP_TARGET_US,
    }
    config = {"vocab": args.vocab, "schema": str(args.schema or "inferlab/data/conjugation.schema.json"),
              "instances": len(instances), "samples": samples, "compile_samples": compile_samples,
              "naive_steps": n_naive, "threads": args.threads, "quick": quick, "seed": args.seed}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "summary": summary,
            "texts": texts, "tokens": token_lists,
            "timings": {"vocab_preprocessing": trie_stats.to_json("ms"), "regex_dfa_compile": dfa_stats.to_json("ms"),
                        "index_build": index_stats.to_json("ms"),
                        "lookup": lookup_stats.to_json("us")},
            "steps": per_doc, "naive_steps": naive_steps}


def plot(results: dict):
    fig, ax = new_figure(figsize=(9.0, 5.2))
    colors = {"keep_allowed": "tab:blue", "write_disallowed": "tab:orange"}
    for x, s in _bar_positions(results):
        ax.bar(x, s["median_us"], color=colors[s["apply"]],
               yerr=[[s["median_us"] - s["p10_us"]], [s["p90_us"] - s["median_us"]]], capsize=1.5)
    ax.axhline(STEP_TARGET_US, color="red", ls="--", lw=1, label=f"target median {STEP_TARGET_US:.0f} us")
    xs = [x for x, _ in _bar_positions(results)]
    fills = [s["fill_us_median"] for _, s in _bar_positions(results)]
    ax.scatter(xs, fills, marker="D", s=14, color="tab:gray", edgecolor="black", linewidth=0.5, zorder=3,
               label=f"logits.fill(-inf) over all V, timed beside each step (median {results['summary']['fill_floor_us']:.1f} us)")
    from matplotlib.patches import Patch

    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=colors["keep_allowed"], label="few allowed: fill -inf, scatter back"),
                Patch(color=colors["write_disallowed"], label="few disallowed: write -inf")]
    s = results["summary"]
    ax.set_title(f"indexed mask, lookup + apply per decode step, V = {s['vocab_size']} ({s['vocab']}); "
                 f"median {s['step_us_median']:.1f} us")
    ax.set_xlabel("decode step (outputs side by side)")
    ax.set_ylabel("us per step (median, p10-p90)")
    # below the axes: at the top it hid the whiskers of the tallest steps
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    ax.grid(alpha=0.3, axis="y")
    return fig


def _bar_positions(results: dict) -> list[tuple[int, dict]]:
    """(x, step) of each bar: the outputs side by side, a gap between them."""
    out, x = [], 0
    for doc in results["steps"]:
        for s in doc:
            out.append((x, s))
            x += 1
        x += 1
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/mask_index")
    p.add_argument("--vocab", default="qwen", help="512 | cl100k | qwen | tokenizer.json PATH (default qwen)")
    p.add_argument("--schema", type=Path, help="JSON schema file (default: the conjugation schema)")
    p.add_argument("--instances", type=Path, help="JSON list of instances of --schema, tokenized as outputs")
    p.add_argument("--samples", type=positive_int, default=10, help="samples per decode step (default 10)")
    p.add_argument("--compile-samples", type=positive_int, default=5, help="samples of each compile (default 5)")
    p.add_argument("--naive-steps", type=positive_int, default=3, help="steps timed with the naive mask (default 3)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)  # refuses before any work
        results = run(args)
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", build_manifest(experiment=EXPERIMENT, seed=args.seed, config=results["config"],
                                                        depends_on=None, results_summary=results["summary"],
                                                        threads=args.threads))
        writer.add_figure("mask_index.png", plot(results))
        writer.commit()
    except InferlabError as exc:
        print(f"mask_index: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        s = results["summary"]
        print(f"V={s['vocab_size']} ({s['vocab']}): vocabulary preprocessing {s['vocab_preprocessing_ms']:.0f} ms; "
              f"regex->DFA {s['regex_dfa_compile_ms']:.1f} ms ({s['dfa_states']} states); "
              f"index build {s['index_build_ms']:.0f} ms (target <= {COMPILE_TARGET_S * 1e3:.0f}), "
              f"{s['index_nbytes'] / 1e6:.1f} MB, {s['index_rows']} rows")
        print(f"per-step mask: median {s['step_us_median']:.1f} us over {s['steps']} steps "
              f"(p10 {s['step_us_p10']:.1f}, p90 {s['step_us_p90']:.1f}; target <= {STEP_TARGET_US:.0f}); "
              f"fill of V logits beside the steps {s['fill_floor_us']:.1f} us; lookup {s['lookup_us']:.2f} us; "
              f"naive mask {s['naive_step_us_median'] / 1e3:.0f} ms per step")
        print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
