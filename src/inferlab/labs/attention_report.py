"""The 15-attention-perf report: README.md, perf.png, roofline.png, flash.png and perf.py,
rendered from the folder's results.json alone. Every comparison is a verdict's statement, quoted
verbatim; the rest are numbers with their sample counts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab.attention_perf import OPS, memory_bound_threshold, op_costs
from inferlab.measure import new_figure
from inferlab.measure.plots import LABEL_BOX
from inferlab.measure.verdicts import rule_paragraph, verdict_lines
from inferlab.labs.attention_results import (EXPERIMENT, SEED_SUMMARY_KEYS, SUMMARY_T, largest_point, point_at,
                                            summary_json)
from inferlab.roofline import Roofline, draw_roofline

OP_COLORS = {"qkv_proj": "tab:blue", "scores": "tab:orange", "softmax": "tab:red", "av": "tab:green",
             "out_proj": "tab:purple"}
OTHER = ("other (mask, timers)", "lightgray")
# The two projections share an intensity at every T, so their tracks run side by side: their
# T labels go above (qkv_proj) and below (out_proj) their markers, and only at the largest T
PROJECTION_SIDE = {"qkv_proj": 1, "out_proj": -1}
LABEL_GAP_PT = 7   # from a marker's centre: clears the largest marker's 5-point radius


def _segments(points: list[dict]) -> list[tuple[str, str, np.ndarray]]:
    """(label, colour, median ms per T) of the stacked forward: five ops and the unattributed rest."""
    segs = [(name, OP_COLORS[name], np.array([p["ops"][name]["median_ms"] for p in points])) for name in OPS]
    return segs + [(*OTHER, np.array([max(p["unattributed"]["median_ms"], 0.0) for p in points]))]


def perf_figure(results: dict):
    """Block C: per-op median ms against T (log-log, p10-p90 bars), and each op's share of the
    composed forward (stacked to 100%, the forward's total in ms above each bar: the README's)."""
    points = results["profile"]["points"]
    T = np.array([p["T"] for p in points])
    fig, (ax_ms, ax_pct) = new_figure(1, 2, figsize=(11.5, 4.6))
    for name in OPS:
        med = np.array([p["ops"][name]["median_ms"] for p in points])
        err = np.array([[m - p["ops"][name]["p10_ms"], p["ops"][name]["p90_ms"] - m] for m, p in zip(med, points)]).T
        ax_ms.errorbar(T, med, yerr=err, fmt="o-", color=OP_COLORS[name], label=name, capsize=3, ms=4)
    ax_ms.plot(T, [p["forward_ms"] for p in points], "k--", lw=1, label="forward (sum of medians + rest)")
    ax_ms.set_xscale("log", base=2)
    ax_ms.set_yscale("log")
    ax_ms.set_xticks(T, [str(t) for t in T])
    ax_ms.set_xlabel("T (tokens)")
    ax_ms.set_ylabel("median ms per forward (log; bars: p10-p90)")
    ax_ms.legend(fontsize=8)
    xs = np.arange(len(points))
    heights = np.array([p["forward_ms"] for p in points])  # (n_T,)
    bottom = np.zeros(len(points))
    for label, color, ms in _segments(points):
        ax_pct.bar(xs, 100 * ms / heights, bottom=bottom, color=color, label=label)
        bottom += 100 * ms / heights
    for x, h in zip(xs, heights):
        ax_pct.annotate(f"{h:.3g} ms", (x, 100), ha="center", va="bottom", fontsize=8)
    ax_pct.set_ylim(0, 110)
    ax_pct.set_xticks(xs, [str(t) for t in T])
    ax_pct.set_xlabel("T (tokens)")
    ax_pct.set_ylabel("share of the forward (%)")
    ax_pct.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    cfg = results["config"]
    kv = cfg.get("kv_heads", cfg["n_heads"])
    fig.suptitle(f"Causal {'MHA' if kv == cfg['n_heads'] else 'GQA'} forward, d_model={cfg['d_model']}, "
                 f"{cfg['n_heads']} heads{'' if kv == cfg['n_heads'] else f' / {kv} KV heads'}, "
                 f"{results['profile']['threads']} BLAS thread(s): time per op (left), share of the forward (right)")
    return fig


def _label_side(xs: list[float], ys: list[float], i: int, vertical: int | None) -> tuple[int, int]:
    """(dx, dy) in {-1, 0, 1}: where point i's T label goes. Beside the marker (dy 0), on the side
    away from the neighbouring T of the same op (the track's next point, or the previous one at the
    end), so that marker cannot cover it and the label stays off the ridge text above the track;
    a vertical track (softmax's constant intensity) labels right, up or down away from its
    neighbour; `vertical` (the projections) fixes right and up or down. A single point: right."""
    j = i - 1 if i == len(xs) - 1 else i + 1
    if vertical or j < 0:
        return 1, vertical or 0
    dx, dy = np.log(xs[i] / xs[j]), np.log(ys[i] / ys[j])
    if dx == 0:
        return 1, 1 if dy >= 0 else -1
    return (1 if dx > 0 else -1), 0


def roofline_figure(results: dict):
    """Block D: each op as (intensity, GFLOP/s) under the roofline of the profile's thread count;
    marker size grows with T and only the smallest and largest T are labelled (the largest only for
    the projections)."""
    roof = Roofline.from_json(results["roofline"])
    points = results["profile"]["points"]
    fig, ax = new_figure(figsize=(11, 6))
    intensities = [p["ops"][n]["intensity"] for p in points for n in OPS] + [
        p["flash_intensity"] for p in results["flash"]["points"]]
    lo, hi = min(intensities + [roof.ridge.value]) / 2, max(intensities + [roof.ridge.value]) * 2
    draw_roofline(ax, roof, span=(lo, hi))
    sizes = np.linspace(4, 10, len(points))
    for name in OPS:
        xs = [p["ops"][name]["intensity"] for p in points]
        ys = [p["ops"][name]["gflops"] for p in points]
        ax.plot(xs, ys, "-", color=OP_COLORS[name], lw=0.8)
        for i, (x, y) in enumerate(zip(xs, ys)):
            ax.plot([x], [y], "o", color=OP_COLORS[name], ms=sizes[i], label=name if i == len(points) - 1 else None)
        for i in ({len(points) - 1} if name in PROJECTION_SIDE else {0, len(points) - 1}):
            dx, dy = _label_side(xs, ys, i, PROJECTION_SIDE.get(name))
            # above the markers and lines, on a light box: a neighbouring marker cannot hide it
            ax.annotate(f"T={points[i]['T']}", (xs[i], ys[i]), textcoords="offset points",
                        xytext=(dx * LABEL_GAP_PT, dy * LABEL_GAP_PT), ha="left" if dx > 0 else "right",
                        va={1: "bottom", 0: "center", -1: "top"}[dy], fontsize=7, color=OP_COLORS[name], zorder=5,
                        bbox=LABEL_BOX)
    fused = [p for p in results["flash"]["points"] if p["T"] in {q["T"] for q in points}]
    fx = [p["flash_intensity"] for p in fused]
    fy = [roof.attainable_GFLOPS(i) for i in fx]
    ax.plot(fx, fy, "kD", mfc="none", ms=7, label="flash core, modelled bytes (roof it could reach)")
    for k, (p, x, y) in enumerate(zip(fused, fx, fy)):  # which T each diamond is (intensity grows with T);
        up = k % 2 == 0                                  # below and above in turn: neighbours sit close
        ax.annotate(f"T={p['T']}", (x, y), textcoords="offset points", xytext=(0, 7 if up else -8), ha="center",
                    va="bottom" if up else "top", fontsize=7, zorder=5, bbox=LABEL_BOX)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, seed 001's byte model)")
    ax.set_ylabel("GFLOP/s (ops: measured median)")
    ax.set_title(f"Attention ops under this machine's {roof.threads}-thread roofline "
                 "(marker size grows with T)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def flash_figure(results: dict):
    """Phase 27 preview: measured peak memory and modelled bytes of naive vs flash attention."""
    points = results["flash"]["points"]
    T = [p["T"] for p in points]
    fig, (ax_mem, ax_bytes) = new_figure(1, 2, figsize=(11, 4.5))
    mib = 1 / 2**20
    ax_mem.plot(T, [p["naive_peak_bytes"] * mib for p in points], "o-", color="tab:red", label="naive (engine mha)")
    ax_mem.plot(T, [p["flash_peak_bytes"] * mib for p in points], "s-", color="tab:green", label="flash_mha")
    ax_mem.plot(T, [p["one_TxT_matrix_bytes"] * mib for p in points], "k:", label="one (H, T, T) float32 matrix")
    ax_mem.set_ylabel("peak traced memory (MiB, tracemalloc)")
    ax_mem.set_title("peak memory of one attention forward")
    ax_bytes.plot(T, [p["naive_t2_bytes_model"] * mib for p in points], "o-", color="tab:red",
                  label="naive scores+softmax+av")
    ax_bytes.plot(T, [p["flash_bytes_model"] * mib for p in points], "s-", color="tab:green",
                  label=f"flash, block {results['flash']['block']}")
    ax_bytes.set_ylabel("modelled DRAM traffic (MiB)")
    ax_bytes.set_title("bytes moved by the T^2 ops (model)")
    for ax in (ax_mem, ax_bytes):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(T, [str(t) for t in T])
        ax.set_xlabel("T (tokens)")
        ax.legend(fontsize=8)
    return fig


def perf_script(config: dict) -> str:
    """perf.py: reproduces this run through the package."""
    roof = f"Path({config['roofline_dir']!r})" if config.get("roofline_dir") else "None"
    return f'''"""Reproduce experiments/{EXPERIMENT} (seed 001) through the inferlab package.

Usage: python perf.py [OUT] [--force]      (OUT defaults to experiments/{EXPERIMENT})
The timed forward is inferlab.attention_perf.attention_forward_timed(x, mha): the engine's five ops
(inferlab.model.attention), each bracketed by time.perf_counter_ns.
"""
import sys
from pathlib import Path

from inferlab.attention_perf import SweepConfig
from inferlab.errors import InferlabError
from inferlab.labs.attention import AttentionLabConfig, run_attention

config = AttentionLabConfig(
    sweep=SweepConfig(T_sweep={tuple(config["T_sweep"])!r}, d_model={config["d_model"]}, n_heads={config["n_heads"]},
                      n_kv_heads={config.get("n_kv_heads")!r}, qkv_bias={config.get("qkv_bias", False)!r},
                      samples={config["samples"]}, min_sample_s={config["min_sample_s"]}, seed={config["seed"]}),
    threads={config["threads"]}, all_threads={config["all_threads"]}, roofline_dir={roof},
    quick={config["quick"]}, flash_T={tuple(config["flash_T"])!r}, flash_block={config["flash_block"]},
    flash_samples={config["flash_samples"]}, budget_s={config["budget_s"]}, model={config.get("model")!r},
)
args = [a for a in sys.argv[1:] if a != "--force"]
out = Path(args[0]) if args else Path("experiments/{EXPERIMENT}")
try:
    run_attention(config, out, force="--force" in sys.argv)
except InferlabError as exc:
    print(f"perf.py: error: {{exc}}", file=sys.stderr)
    sys.exit(2)
print(f"wrote {{out}}/")
'''


def _num(x, fmt: str = ".3g") -> str:
    return "n/a" if x is None else format(x, fmt)


def _verdicts(results: dict, prefix: str) -> list[str]:
    return verdict_lines([v for v in results["verdicts"] if v["id"].startswith(prefix)])


MINIGPT = {"d_model": 64, "n_heads": 4, "kv_heads": 4}   # the lab's default shape, MiniGPT's attention


def _shape_sentence(cfg: dict) -> str:
    kv = cfg.get("kv_heads", cfg["n_heads"])
    head = (f"Causal attention with the shape of {cfg['model']}" if cfg.get("model")
            else "Causal multi-head attention")
    gqa = (f", {kv} KV heads (grouped-query: {cfg['n_heads'] // kv} query heads share each K/V head"
           f"{', q/k/v biases' if cfg.get('qkv_bias') else ''})" if kv != cfg["n_heads"] else "")
    return f"{head}: d_model = {cfg['d_model']}, {cfg['n_heads']} heads of d_head = {cfg['d_head']}{gqa}"


def _shape_lines(results: dict) -> list[str]:
    """What changes from the MiniGPT defaults (d_model 64, 4 heads, MHA): the modelled bytes and
    intensities from the cost formulas at this run's largest T, T* from this run's ridge point."""
    cfg, thr = results["config"], results["threshold"]
    shape = {"d_model": cfg["d_model"], "n_heads": cfg["n_heads"], "kv_heads": cfg.get("kv_heads", cfg["n_heads"])}
    if shape == MINIGPT:
        return []
    p = largest_point(results)
    T, H, kv, d_k = p["T"], cfg["n_heads"], shape["kv_heads"], cfg["d_head"]
    lines = ["## What changes from the MiniGPT defaults", "",
             f"The defaults (MiniGPT's attention) are d_model = 64, 4 heads of d_head = 16, 4 KV heads; this run "
             f"has d_model = {cfg['d_model']}, {H} heads of d_head = {d_k}, {kv} KV heads. This run did not time the "
             "defaults (`inferlab attention` without --model does); the figures below are the cost model's at this "
             f"run's largest T = {T} and the measured times beside them.", ""]
    mini_ridge = memory_bound_threshold(16, thr["i_crit"])
    if kv != H:
        mha = {name: op_costs(T, cfg["d_model"], H)[name] for name in ("qkv_proj", "scores", "av")}
        lines += ["| op | bytes (GQA, this shape) | bytes if every head had its own K/V | intensity (GQA) | "
                  "intensity (MHA) | measured median (ms) |", "|---|---|---|---|---|---|"]
        for name, c in mha.items():
            op = p["ops"][name]
            lines.append(f"| {name} | {op['bytes'] / 1e6:.4g} MB | {c.bytes / 1e6:.4g} MB | {op['intensity']:.3g} | "
                         f"{c.intensity:.3g} | {op['median_ms']:.4g} ({op['p10_ms']:.3g}-{op['p90_ms']:.3g}) |")
        lines += ["", f"Grouped-query attention reads K and V once per KV head ({kv}) instead of once per query "
                  f"head ({H}): the modelled bytes above. Softmax and out_proj do not change."]
    lines += ["", f"d_head = {d_k} (MiniGPT: 16) moves the scores/av threshold: with this run's ridge point "
              f"I_crit = {thr['i_crit']:.3g} FLOP/byte, at this shape {_t_star_sentence(thr['T_star_exact'], d_k, 2)}; "
              f"at MiniGPT's (MHA, d_head 16) {_t_star_sentence(mini_ridge, 16, 2)}. Share of the forward at T = {T} "
              "(measured medians): " + ", ".join(f"{n} {p['ops'][n]['pct_of_total']:.0f}%" for n in OPS) + ".",
              "RoPE (applied to q and k between qkv_proj and scores in the model) is not one of the five ops and "
              "is not timed here.", ""]
    return lines


def _t_star_sentence(t_star, d_k: int, limit_factor: int) -> str:
    if t_star is None:
        return (f"none: I_crit >= d_k/{limit_factor} = {d_k / limit_factor:g}, so no T puts scores/av "
                "right of the ridge")
    return f"T* = {t_star:.1f} (right of the ridge above it, left below)"


def _timing_table(points: list[dict]) -> list[str]:
    lines = ["| T | " + " | ".join(OPS) + " | forward (sum) | largest median |", "|---" * (len(OPS) + 3) + "|"]
    for p in points:
        cells = [f"{p['ops'][n]['median_ms']:.4g} ({p['ops'][n]['p10_ms']:.3g}-{p['ops'][n]['p90_ms']:.3g})"
                 for n in OPS]
        lines.append(f"| {p['T']} | " + " | ".join(cells)
                     + f" | {p['forward_ms']:.4g} | {p['largest']} ({p['ops'][p['largest']]['pct_of_total']:.0f}%) |")
    return lines


def _roofline_table(points: list[dict]) -> list[str]:
    lines = ["| op | " + " | ".join(f"T={p['T']}: I, GFLOP/s" for p in points) + " |",
             "|---" * (len(points) + 1) + "|"]
    for n in OPS:
        cells = [f"{p['ops'][n]['intensity']:.3g}, {p['ops'][n]['gflops']:.3g}" for p in points]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def _summary_bullets(summ: dict, keys: dict[str, str], T: int) -> list[str]:
    """results_summary's figures at one T; keys maps each figure to its results.json key there."""
    ops = summ[keys["phase_27_motivation_ops"]]
    return [*(f"- {keys[name]} = {_num(summ[keys[name]])}" for name in ("softmax_GFLOPS", "softmax_pct_of_total",
                                                                       "scores_GFLOPS")),
            f"- {keys['phase_27_motivation_pct_memory']} = {_num(summ[keys['phase_27_motivation_pct_memory']])}: "
            f"the share (%) of the forward's median time at T = {T} spent in the T^2 ops that flash attention fuses "
            "(scores, softmax, av) and whose median intensity is left of the median ridge point "
            f"({', '.join(ops) or 'none of them'}): the sum of their `pct_of_total`. All three T^2 ops together take "
            f"{_num(summ[keys['t2_ops_pct_of_total']])}% of the forward at T = {T}."]


def _summary_lines(summ: dict) -> list[str]:
    """The seed's keys (at T = 512) when that T was measured; the largest T's keys when it differs."""
    largest = {name: f"{name}_at_largest_T" for name in SEED_SUMMARY_KEYS}
    T = summ["largest_T"]
    lines = ["## results_summary", ""]
    if summ["softmax_GFLOPS_at_T_512"] is None:
        return lines + [f"The seed's keys are at T = {SUMMARY_T}, which this run did not measure (null in "
                        f"results.json). At the largest T measured, T = {T}:", "",
                        *_summary_bullets(summ, largest, T), ""]
    lines += _summary_bullets(summ, SEED_SUMMARY_KEYS, SUMMARY_T)
    if T != SUMMARY_T:
        lines += ["", f"At the largest T measured, T = {T}:", "", *_summary_bullets(summ, largest, T)]
    return lines + [""]


def _rule_sentence(results: dict) -> str:
    """How the comparisons were decided (verdicts.rule_paragraph), with the margins results.json records."""
    return " " + rule_paragraph(results["comparison_rule"]["equivalence_margins"])


def _three_measures(results: dict) -> list[str]:
    """Why the 1-thread forward at one T reads differently in the three tables: each is its own
    run of different code under different conditions (the numbers quoted are the tables')."""
    comp = results["threads_comparison"]
    T = max(c["T"] for c in comp)
    one, many = comp[0]["threads"]
    here = next(c for c in comp if c["T"] == T)["forward"][str(one)]
    flash = next((p for p in results["flash"]["points"] if p["T"] == T and "naive_forward" in p), None)
    in_flash = (f", {flash['naive_forward']['median_ms']:.3g} ms in the flash comparison (the plain forward "
                "alternating with the flash forward)" if flash else "")
    return [f"At T = {T} the {one}-thread forward reads {here['median_ms']:.3g} ms in this table, "
            f"{point_at(results, T)['forward_ms']:.3g} ms in the per-op table (the instrumented forward with "
            f"{one} thread(s) held for the whole sweep){in_flash}. Each is its own run: here every {one}-thread "
            f"sample follows a {many}-thread one, whose BLAS threads and load can still occupy the cores, so "
            "compare figures within one table, not across tables."]


def _over_roof_lines(points: list[dict]) -> list[str]:
    """Points above 100% of the DRAM roofline, each with the reason that fits its side of the
    ridge: a memory-bound op's bytes may come from a cache with a higher roof; a compute-bound
    op's roof is the measured GEMM peak, which no cache raises."""
    def over(bound: str) -> list[str]:
        return [f"{n}@T={p['T']} ({p['ops'][n]['pct_of_attainable']:.0f}%)" for p in points for n in OPS
                if p["ops"][n]["pct_of_attainable"] > 100 and p["ops"][n]["bound"] == bound]
    lines = []
    if over("memory"):
        lines.append(f"Points left of the ridge (medians) at more than 100% of the DRAM roofline ({', '.join(over('memory'))}): "
                     "the op's bytes fit in a cache whose roof is higher, or the measured bandwidth is low "
                     "(load lowers a measured ceiling).")
    if over("compute"):
        lines.append(f"Points right of the ridge (medians) at more than 100% of the roofline ({', '.join(over('compute'))}): "
                     "their roof is the measured float32 GEMM peak, which these ops exceeded; that peak was measured "
                     "low (load lowers it), or the op's BLAS call reaches a higher rate than the GEMM sizes measured.")
    return [x for line in lines for x in (line, "")]   # (a blank line after each)


def _fitting_roof_clause(op: dict, cache_GBps: float, peak_GFLOPS: float) -> str:
    """Where an op's bytes fit in a cache: its share of that cache's roof at its intensity, saying
    which of the two ceilings (cache bandwidth x I, or the compute peak) bounds it."""
    level, memory_roof = op["fits_in"], cache_GBps * op["intensity"]
    bound = (f"against the {level} roof ({cache_GBps:.3g} GB/s, 1 thread, x I = {memory_roof:.3g} GFLOP/s)"
             if memory_roof <= peak_GFLOPS else
             f"the {level} roof ({cache_GBps:.3g} GB/s, 1 thread, x I = {memory_roof:.3g} GFLOP/s) lies above the "
             f"compute peak ({peak_GFLOPS:.3g} GFLOP/s), so against that peak")
    return f"{bound} it reaches {op['pct_of_fitting_roof']:.1f}% (medians)."


def readme_text(results: dict) -> str:
    """README.md from this run's own numbers: the setup, then Block E's three answers."""
    # the summary recomputed (a pure function of the profile): a results.json from before the
    # largest-T keys renders too
    cfg, roof, thr, summ = results["config"], results["roofline"], results["threshold"], summary_json(results)
    points = results["profile"]["points"]
    d_k = cfg["d_head"]
    flash = results["flash"]["points"]
    big = flash[-1]
    ridge = roof["ridge_flop_per_byte"]
    L = [f"# {EXPERIMENT}: where the time goes in causal attention (seed 001)", ""]
    L += [f"{_shape_sentence(cfg)}, "
          f"float32, T in {cfg['T_sweep']}: the engine's own five ops (`inferlab.model.attention`, the code "
          "`generate` runs), each bracketed by `perf_counter_ns` in `attention_forward_timed`. "
          f"Each point: {cfg['samples']} samples, each >= {cfg['min_sample_s'] * 1e3:g} ms of back-to-back "
          "forwards, after a discarded warm-up, gc disabled; median (p10-p90). "
          f"Per-op profile with {cfg['threads']} BLAS thread(s), set with threadpoolctl. Comparisons are "
          f"interleaved runs of {cfg['flash_samples']} rounds or more (more while undecided, within a "
          f"{cfg['budget_s']:g} s budget), each a verdict below." + _rule_sentence(results)]
    if cfg["quick"]:
        L += ["", f"**Quick run**: {cfg['samples']} samples per point instead of 100, comparisons of "
              f"{cfg['flash_samples']} rounds, and the memory sweep stops at T = {max(cfg['flash_T'])}; the "
              "numbers are noisier."]
    noisy = [f"{n}@T={p['T']}" for p in points for n in OPS if p["ops"][n]["noisy"]]
    if noisy:
        L += ["", f"Spread (p90-p10)/median above 10% (noisy, shared machine): {', '.join(noisy)}."]
    L += ["", f"Roofline ({roof['source']}), the {roof['threads']}-thread ceilings: beta = "
          f"{roof['bandwidth_GBps']['value']:.3g} GB/s (triad median, p10-p90 {roof['bandwidth_GBps']['p10']:.3g}-"
          f"{roof['bandwidth_GBps']['p90']:.3g}), pi = {roof['peak_GFLOPS']['value']:.3g} GFLOP/s (float32 GEMM median), "
          f"ridge point I_crit = pi/beta = {ridge['value']:.3g} FLOP/byte (p10-p90 {ridge['p10']:.3g}-{ridge['p90']:.3g})."]
    if roof["wide_ceilings"]:
        L += ["", "**Caution: this roofline has wide ceilings** (" + "; ".join(roof["wide_ceilings"])
              + "); the verdicts that use it carry that spread."]
    L += ["", "## Time per op (ms per forward, median (p10-p90))", "",
          f"The instrumented forward (`attention_forward_timed`: a timer read around each op), "
          f"{cfg['threads']} BLAS thread(s) held for the whole sweep, {cfg['samples']} samples per T:", "",
          *_timing_table(points), "",
          "`forward (sum)` is the five op medians plus the median unattributed rest (building the causal mask, "
          "the timer reads; total minus the five ops, sample by sample): "
          + ", ".join(f"{p['unattributed']['median_ms']:.3g} ms at T={p['T']}" for p in points)
          + ". It is the height of each bar in perf.png. The bracketing timer's own median: "
          + ", ".join(f"{p['total']['median_ms']:.4g} ms at T={p['T']}" for p in points) + ".",
          "", "![perf](perf.png)", "",
          "The seed expects the projections to take most of the time at small T and the T^2 ops at large T:", "",
          *_verdicts(results, "projections_vs_t2"), ""]
    L += _shape_lines(results)
    L += ["## Block E", "", "### 1. Which ops are memory-bound on this machine, and for which T?", "",
          "Intensity I (FLOP/byte, the seed's byte model) and measured GFLOP/s (median):", "",
          *_roofline_table(points), "",
          "Each op's side of the ridge point, decided by the ridge's own p10-p90:", "",
          *_verdicts(results, "bound_"), "",
          "Softmax's intensity is 0.625 at every T. For scores and av, "
          + (f"with G = {thr.get('group', 1)} query heads per KV head, I = T d_k / (2 d_k (1 + 1/G) + 2T) "
             if thr.get("group", 1) > 1 else "I = T d_k / (4 d_k + 2T) ")
          + f"rises with T towards d_k/2 = {thr['intensity_limit']:g}. Solving I = I_crit exactly gives "
          + ("T* = 2 (1 + 1/G) d_k I_crit / (d_k - 2 I_crit)" if thr.get("group", 1) > 1 else
             "T* = 4 d_k I_crit / (d_k - 2 I_crit)")
          + f": {_t_star_sentence(thr['T_star_exact'], d_k, 2)}. "
          "The seed's (MHA) shortcut T d_k > 4(d_k + T) I_crit solves to T* = 4 d_k I_crit / (d_k - 4 I_crit): "
          f"{_t_star_sentence(thr['T_star_seed_shortcut'], d_k, 4)}. The two differ because the shortcut's "
          "denominator 4(d_k + T) counts 8 T^2 bytes for the T x T matrix where the seed's own byte formula "
          "counts 4 T^2, so it caps the intensity at d_k/4 instead of d_k/2 and gives no T* once "
          f"I_crit >= {d_k / 4:g}.", "", "![roofline](roofline.png)", ""]
    L += _over_roof_lines(points)
    soft = point_at(results, SUMMARY_T) or largest_point(results)
    sm = soft["ops"]["softmax"]
    L += ["### 2. Softmax against its roof", "",
          f"At T = {soft['T']} softmax runs at {sm['gflops']:.3g} GFLOP/s (median); its roof at I = 0.625 is "
          f"beta x I = {sm['attainable_gflops']:.3g} GFLOP/s, so it reaches **{sm['pct_of_attainable']:.1f}% of "
          f"the memory roof** (medians). The seed expects under 10%:", "",
          *_verdicts(results, "softmax_below"), "",
          "The engine's softmax is five numpy passes over the (H, T, T) array: max (read), subtract "
          "(read, write a temporary), exp (read, write), sum (read), divide in place (read, write): "
          "seven sweeps where the model counts two. At the other T: "
          + ", ".join(f"{p['ops']['softmax']['pct_of_attainable']:.1f}% at T={p['T']}" for p in points) + "."]
    if sm.get("fits_in", "DRAM") != "DRAM":
        L += ["", f"At T = {soft['T']} softmax's modelled bytes ({sm['bytes'] / 2**20:.1f} MiB: S read, A written) "
              f"fit in the {sm['fits_in']}, so its data need not come from DRAM; "
              + _fitting_roof_clause(sm, roof["cache_roofs_GBps"][sm["fits_in"]], roof["peak_GFLOPS"]["value"])]
    L += ["", "### 3. What would flash attention change on the roofline?", "",
          "Flash attention keeps the FLOPs of scores, softmax and av; it changes the bytes, "
          "because it never writes the T x T matrices S and A to memory. Fused and tiled, the three T^2 "
          "ops become one op whose intensity grows with the tile size instead of staying near "
          "0.6-8 FLOP/byte, so they climb the memory slope towards the compute roof.", "",
          f"Measured here (`inferlab.flash`, tiles of {results['flash']['block']}, causal): at T = {big['T']} "
          f"the modelled traffic of the T^2 ops is {big['naive_t2_bytes_model'] / 2**20:.1f} MiB naive and "
          f"{big['flash_bytes_model'] / 2**20:.1f} MiB fused (intensity {big['naive_t2_intensity']:.2f} and "
          f"{big['flash_intensity']:.1f} FLOP/byte, I_crit = {ridge['value']:.3g}); the peak traced memory of "
          f"one attention forward (tracemalloc, exact for this run) is {big['naive_peak_bytes'] / 2**20:.1f} MiB naive "
          f"and {big['flash_peak_bytes'] / 2**20:.2f} MiB flash; one (H, T, T) float32 matrix is "
          f"{big['one_TxT_matrix_bytes'] / 2**20:.0f} MiB. The largest difference between the two outputs is "
          f"{max(p['max_abs_diff'] for p in flash):.2g} (outputs up to {big['max_abs_output']:.2g}).", ""]
    timed = [p for p in flash if "flash_forward" in p]
    if timed:
        L += [f"Forward time of the plain forwards (no per-op timers), naive (`MHAWeights.forward`) and flash, "
              f"{cfg['threads']} BLAS thread(s), one sample of each in turn (median ms): "
              + ", ".join(f"T={p['T']}: {p['naive_forward']['median_ms']:.3g} and "
                          f"{p['flash_forward']['median_ms']:.3g} ({p['naive_forward']['n']} rounds)" for p in timed)
              + ". In numpy each tile is a Python-level loop iteration:", "",
              *_verdicts(results, "flash_vs_naive"), ""]
    L += ["![flash](flash.png)", ""]
    L += _summary_lines(summ)
    comp = results["threads_comparison"]
    if comp:
        one, many = comp[0]["threads"]
        L += [f"## BLAS threads: {one} vs {many}", "",
              f"The plain forward (`MHAWeights.forward`, no per-op timers), {one} and {many} BLAS threads "
              "interleaved sample by sample (threadpoolctl switches the limit between samples, outside the timer):",
              "", f"| T | forward ms, {one} thread(s) (p10-p90) | forward ms, {many} threads (p10-p90) | "
              f"paired time ratio {one}/{many} (p10-p90) | rounds | noisy ({one} / {many}) |",
              "|---|---|---|---|---|---|"]
        for c in comp:
            a, b, s = c["forward"][str(one)], c["forward"][str(many)], c["speedup"]
            L.append(f"| {c['T']} | {a['median_ms']:.4g} ({a['p10_ms']:.3g}-{a['p90_ms']:.3g}) | {b['median_ms']:.4g} "
                     f"({b['p10_ms']:.3g}-{b['p90_ms']:.3g}) | {s['value']:.2f} ({s['p10']:.2f}-{s['p90']:.2f}) | "
                     f"{a['n']} | {'yes' if a['noisy'] else 'no'} / {'yes' if b['noisy'] else 'no'} |")
        L += ["", *_verdicts(results, "threads_"), "", *_three_measures(results), ""]
    L += ["## Notes", "",
          "- The byte model is the seed's: one read of each input and one write of S/A. The engine's "
          "`scores` op also scales S in place and adds the causal mask (two more read-write sweeps of "
          "the T x T array), and softmax takes seven sweeps, so their real traffic is higher than modelled.",
          "- The projections' byte formula (4 T d + 4 d^2) reads x and W but leaves out writing the output; "
          "kept as the seed has it so the intensities match the curriculum.",
          "- Reproduce with `python perf.py OUT` (through the package) or `inferlab attention`.", ""]
    return "\n".join(L)


def render(results: dict, manifest: dict, folder: Path) -> dict[str, object]:
    return {"perf.py": perf_script(results["config"]), "perf.png": perf_figure(results),
            "roofline.png": roofline_figure(results), "flash.png": flash_figure(results),
            "README.md": readme_text(results)}
