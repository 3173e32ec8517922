"""Lab 22: KV-cache sizing on paper (seed 002), generated: derivations.md, results.json,
kv_sizes.png, manifest.json, README.md and derive.py. Pure arithmetic: nothing is timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.patches import Patch

from inferlab.kv import derivations
from inferlab.labs import Lab, LabOptions, add_report
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.plots import new_figure
from inferlab.units import fmt_binary

_COLORS = {"MHA": "#4c72b0", "GQA": "#dd8452", "MQA": "#dd8452", "MLA": "#55a868"}

_DERIVE_PY = '''"""Regenerate this folder through the package (seed 002's derivations): python derive.py"""
from pathlib import Path

from inferlab.cli import main

raise SystemExit(main(["kv", "derivations", "--force", "--out", str(Path(__file__).resolve().parent)]))
'''


def sizes_figure(results: dict):
    """Horizontal bars per model, 4k and 32k, on a log axis ticked in binary units (the labels'
    units); colour = attention kind, hatch = 32k. Every bar is labelled. The chart is at fp16/bf16
    for every model; a model whose own cache dtype differs (MiniGPT runs in fp32) says so."""
    models = results["models"]
    own_dtype = {row["model"]: row["dtype"] for row in results["forward"]}
    fig, ax = new_figure(figsize=(11.0, 0.5 * len(models) + 1.8))
    ys = range(len(models))
    for offset, ctx, hatch in ((-0.2, "4096", None), (0.2, "32768", "//")):
        ax.barh([y + offset for y in ys], [m["totals"][ctx] for m in models], height=0.38,
                color=[_COLORS[m["attention"]] for m in models], hatch=hatch, edgecolor="white")
        for y, m in zip(ys, models):
            ax.annotate(fmt_binary(m["totals"][ctx]), (m["totals"][ctx], y + offset), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=6.5)

    def label(m: dict) -> str:
        text = m["model"]
        if m["sliding_window"]:
            text += f"  (window {m['sliding_window']} on {m['sliding_layers']}/{m['layers']} layers)"
        if own_dtype.get(m["model"], "fp16") not in ("fp16", "bf16"):
            text += f"  (shown at fp16; its own {own_dtype[m['model']]} cache is 2x: derivations.md)"
        return text

    ax.set_yticks(list(ys), [label(m) for m in models], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log", base=2)
    lo = min(m["totals"]["4096"] for m in models)
    hi = max(m["totals"]["32768"] for m in models)
    # the axis starts two octaves below the smallest bar, so that bar has a visible length
    ticks = [2**k for k in range(int(np.floor(np.log2(lo))) - 2, int(np.ceil(np.log2(hi))) + 2, 2)]
    ax.set_xticks(ticks, [fmt_binary(t) for t in ticks], fontsize=8)
    ax.set_xlim(ticks[0], ticks[-1] * 4)
    ax.set_xlabel("KV cache per sequence (log scale, binary units); fp16/bf16 cache, batch 1")
    handles = [Patch(color=_COLORS[k], label=k) for k in ("MHA", "GQA", "MLA")]
    handles += [Patch(facecolor="grey", label="ctx 4k"), Patch(facecolor="grey", hatch="//", label="ctx 32k")]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.set_title("KV cache per model at 4k and 32k tokens (GQA and MLA marked by colour)")
    return fig


def _readme(r: dict) -> str:
    fwd = {row["model"]: row for row in r["forward"]}
    a100 = r["inverse"]["a100_llama_2_7b"]
    h = r["inverse"]["h100_gpt_3"]
    h100 = {row["dtype"]: row["gpus_needed"] for row in h["from_params"]}
    gqa = r["gqa_check"]["4096"]
    w = r["pitfalls"]["waste"]
    return "\n".join([
        "# 22-cache-sizing: the KV-cache size, derived", "",
        "Seed 002's lab 00 answered by the calculator (`inferlab.kv`); the full answer sheet is "
        "[derivations.md](derivations.md), the data results.json, the figure kv_sizes.png. "
        "Regenerate with `python derive.py` or `inferlab kv derivations --force`.", "",
        f"- Llama-2-7B fp16: {fwd['llama-2-7b']['formula']}; "
        f"{fmt_binary(fwd['llama-2-7b']['totals']['4096'])} at 4k, {fmt_binary(fwd['llama-2-7b']['totals']['32768'])} at 32k.",
        f"- Llama-2-7B fp16 on {a100['gpu']} with {a100['weights']} of weights: S_max {a100['s_max']['1']} at batch 1, {a100['s_max']['8']} at batch 8.",
        f"- GPT-3 175B on {h['gpu']}: {h100['fp16']} GPUs for the fp16 weights, {h100['int8']} in int8.",
        f"- Mistral-7B vs Llama-2-7B per token: ratio {gqa['ratio']}, the \"4x\" claim is {gqa['verdict']}.",
        f"- Preallocating {w['max_len']} for a mean of {w['mean_len']} at batch {w['batch']} wastes "
        f"{fmt_binary(w['wasted_bytes'])} ({w['waste_fraction']:.2%}); paged blocks of {w['block_size']}: at most "
        f"{fmt_binary(w['paged_wasted_bytes'])}.", "",
        "![KV cache per model](kv_sizes.png)", ""])


def run(opts: LabOptions) -> dict:
    writer = ExperimentWriter(opts.out, force=opts.force)   # fails before any work if out exists
    results = derivations.compute()
    writer.add_json("results.json", results)
    add_report(writer, render(results, {}, opts.out))
    a100 = results["inverse"]["a100_llama_2_7b"]
    writer.add_json("manifest.json", build_manifest(
        experiment=derivations.EXPERIMENT, seed=opts.seed,
        config={"contexts": list(derivations.CONTEXTS), "forward": [list(f) for f in derivations.FORWARD],
                "waste": derivations.WASTE, "timed": False},
        depends_on=None,
        results_summary={"llama_2_7b_per_token_bytes": results["forward"][2]["per_token_bytes"],
                         "a100_s_max_batch_1": a100["s_max"]["1"], "a100_s_max_batch_8": a100["s_max"]["8"],
                         "gqa_verdict": results["gqa_check"]["4096"]["verdict"]},
        threads=opts.threads))
    writer.commit()
    return results


def render(results: dict, manifest: dict, folder: Path) -> dict[str, object]:
    """The report: derivations.md, kv_sizes.png, README.md and derive.py from results.json."""
    return {"derivations.md": derivations.render(results), "kv_sizes.png": sizes_figure(results),
            "README.md": _readme(results), "derive.py": _DERIVE_PY}


LAB = Lab(order=22, name=derivations.EXPERIMENT, title="KV-cache sizing on paper (seed 002)", run=run,
          report=render)
