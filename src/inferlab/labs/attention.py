"""Lab 15-attention-perf (seed 001): where the time goes in causal attention, op by op, on the roofline.

Measures the engine's five attention ops (inferlab.attention_perf) over the T sweep with 1 BLAS
thread (and a second pass with all threads), places them on this machine's roofline (read from an
`inferlab roofline` run through depends_on, else measured on the fly), and adds the Phase 27
preview: flash attention's modelled bytes, measured peak memory and time against the naive ops.
Writes perf.py, results.json, perf.png, roofline.png, flash.png, manifest.json and README.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inferlab import roofline
from inferlab.attention_perf import (
    OPS, T2_OPS, SweepConfig, attainable_gflops, bound_by, memory_bound_threshold, op_costs,
    profile_sweep, seed_shortcut_threshold, sweep_inputs,
)
from inferlab.flash import (
    DEFAULT_BLOCK, flash_cost, flash_mha, naive_t2_cost, traced_peak_bytes,
)
from inferlab.labs import Lab, LabOptions
from inferlab.measure import ExperimentWriter, blas_threads, build_manifest, measure, new_figure, summarize
from inferlab.measure.machine import data_caches
from inferlab.measure.progress import progress_bar

EXPERIMENT = "15-attention-perf"

OP_COLORS = {"qkv_proj": "tab:blue", "scores": "tab:orange", "softmax": "tab:red", "av": "tab:green",
             "out_proj": "tab:purple"}
SUMMARY_T = 512   # the seed's results_summary keys are all "at_T_512"
QUICK_SAMPLES = 15


@dataclass(frozen=True)
class AttentionLabConfig:
    sweep: SweepConfig = field(default_factory=SweepConfig)
    threads: int = 1                    # the per-op profile: 2 BLAS threads on these small matmuls are erratic
    all_threads: int = os.cpu_count() or 1   # the second pass, reported beside it
    roofline_dir: Path | None = None    # an `inferlab roofline` folder; None: measure the ceilings now
    quick: bool = False
    flash_T: tuple[int, ...] = (256, 512, 1024, 2048, 4096)   # peak-memory sweep, up to the issue's 4096
    flash_block: int = DEFAULT_BLOCK
    flash_samples: int = 20             # flash vs naive forward timing per T (a comparison, not the profile)

    @classmethod
    def build(cls, *, quick: bool = False, seed: int = 0, T_sweep: tuple[int, ...] = (64, 128, 256, 512),
              d_model: int = 64, n_heads: int = 4, threads: int = 1,
              roofline_dir: Path | None = None) -> AttentionLabConfig:
        """The CLI's and `inferlab run all`'s config. --quick keeps every shape but takes
        QUICK_SAMPLES samples per point (noisier; the README says so)."""
        sweep = SweepConfig(T_sweep=tuple(T_sweep), d_model=d_model, n_heads=n_heads,
                            samples=QUICK_SAMPLES if quick else SweepConfig.samples, seed=seed)
        return cls(sweep=sweep, threads=threads, roofline_dir=roofline_dir, quick=quick,
                   flash_samples=5 if quick else 20)


# --- measuring -------------------------------------------------------------------------------------

def resolve_roofline(roofline_dir: Path | None, threads: int) -> tuple[dict, str | None]:
    """The machine ceilings at the profile's thread count, and the manifest they came from (None:
    measured now, because no `inferlab roofline` run was found).

    Measured now, it is the roofline's --quick configuration at the profile's thread count: the
    same >= 10 STREAM trials and DRAM-sized arrays, a coarser cache sweep and one GEMM size, which
    keeps a standalone default run within its 10-minute budget.
    """
    if roofline_dir is None:
        results = roofline.run_roofline(roofline.RooflineConfig.for_run(quick=True, threads=threads))
        return ceilings(results, threads), None
    roofline.load_roofline(roofline_dir)   # one-line errors for a missing or foreign results.json
    results = json.loads((Path(roofline_dir) / "results.json").read_text())
    return ceilings(results, threads), str(Path(roofline_dir) / "manifest.json")


def ceilings(roof: dict, threads: int) -> dict:
    """float32 GEMM peak and DRAM triad bandwidth at `threads` from a roofline results dict.

    The roofline's own ridge uses all threads; a 1-thread profile belongs under the 1-thread roofs,
    which the roofline run always measures too. Falls back to the ridge's count (and says so).
    """
    t = str(threads)
    if t not in roof["peak_GFLOPS"]["float32"] or t not in roof["bandwidth_GBps"]["triad"]:
        t = str(roof["ridge"]["threads"])
    peak = roof["peak_GFLOPS"]["float32"][t]["best"]
    bw = roof["bandwidth_GBps"]["triad"][t]["best"]
    return {"threads": int(t), "peak_gflops": peak, "bandwidth_gbs": bw, "i_crit": peak / bw,
            "peak_from": f"peak_GFLOPS.float32.{t}.best", "bandwidth_from": f"bandwidth_GBps.triad.{t}.best",
            "cache_roofs_gbs_1_thread": dict(roof["cache_roofs_GBps"])}


def fitting_level(nbytes: float, roof: dict) -> str:
    """The smallest cache level (from sysfs) that holds an op's modelled bytes, else "DRAM"."""
    for cache in data_caches():
        name = f"L{cache['level']}"
        if nbytes <= cache["size_bytes"] and roof["cache_roofs_gbs_1_thread"].get(name):
            return name
    return "DRAM"


def _point_json(T: int, stats: dict, threads: int, config: AttentionLabConfig, roof: dict) -> dict:
    """One T of one pass: per-op Stats plus FLOPs, bytes, intensity, GFLOP/s and roofline position.

    pct_of_total is the op's median over the forward's composed median: the five op medians plus
    the median unattributed rest (the stacked bar's height), so shares add up to 100% and match
    perf.png. total's own median is reported beside it; on a quiet machine the two agree.
    """
    sweep = config.sweep
    costs = op_costs(T, sweep.d_model, sweep.n_heads)
    # total also brackets building the causal mask and the timer reads, which no op owns; the
    # samples of every op come from the same forwards, so the rest is taken sample by sample
    rest = summarize([t - sum(stats[n].samples[i] for n in OPS) for i, t in enumerate(stats["total"].samples)],
                     iters_per_sample=stats["total"].iters_per_sample)
    forward = sum(stats[n].median for n in OPS) + max(rest.median, 0.0)
    ops_json = {}
    for name in OPS:
        c, s = costs[name], stats[name]
        gflops = c.flops / s.median / 1e9
        roof_here = attainable_gflops(c.intensity, roof["peak_gflops"], roof["bandwidth_gbs"])
        ops_json[name] = {**s.to_json("ms"), "flops": c.flops, "bytes": c.bytes, "intensity": c.intensity,
                          "gflops": gflops, "bound": bound_by(c.intensity, roof["i_crit"]),
                          "attainable_gflops": roof_here, "pct_of_attainable": 100 * gflops / roof_here,
                          "pct_of_total": 100 * s.median / forward}
        if threads == 1:   # the cache roofs are 1-thread measurements
            level = fitting_level(c.bytes, roof)
            bw = roof["bandwidth_gbs"] if level == "DRAM" else roof["cache_roofs_gbs_1_thread"][level]
            ops_json[name].update(fits_in=level, pct_of_fitting_roof=100 * gflops / attainable_gflops(
                c.intensity, roof["peak_gflops"], bw))
    return {"T": T, "ops": ops_json, "total": stats["total"].to_json("ms"), "forward_ms": forward * 1e3,
            "unattributed": rest.to_json("ms"),
            "dominant": max(OPS, key=lambda name: stats[name].median)}


def _flash_points(config: AttentionLabConfig, on_point) -> list[dict]:
    """Flash vs naive: peak memory (tracemalloc), modelled bytes, max difference, forward time."""
    sweep = config.sweep
    mha, _ = sweep_inputs(sweep)   # the profile's weights (mha does not depend on the context length)
    rng = np.random.default_rng(sweep.seed)
    points = []
    with blas_threads(config.threads):
        for T in flash_sizes(config):
            x = rng.standard_normal((T, sweep.d_model)).astype(np.float32)     # (T, d)
            naive_out, flash_out = mha.forward(x), flash_mha(x, mha, block=config.flash_block)
            naive = naive_t2_cost(T, sweep.d_head, sweep.n_heads)
            flash = flash_cost(T, sweep.d_head, sweep.n_heads, block=config.flash_block, causal=True)
            point = {"T": T,
                     "max_abs_diff": float(np.abs(naive_out - flash_out).max()),
                     "max_abs_output": float(np.abs(naive_out).max()),
                     "naive_peak_bytes": traced_peak_bytes(lambda: mha.forward(x)),
                     "flash_peak_bytes": traced_peak_bytes(lambda: flash_mha(x, mha, block=config.flash_block)),
                     "one_TxT_matrix_bytes": 4 * sweep.n_heads * T * T,
                     "flops": naive.flops,
                     "naive_t2_bytes_model": naive.bytes, "flash_bytes_model": flash.bytes,
                     "naive_t2_intensity": naive.intensity, "flash_intensity": flash.intensity}
            if T in sweep.T_sweep:   # time both forwards where the profile has a point
                point["naive_forward"] = measure(lambda: mha.forward(x), samples=config.flash_samples,
                                                 min_sample_s=sweep.min_sample_s).to_json("ms")
                point["flash_forward"] = measure(lambda: flash_mha(x, mha, block=config.flash_block),
                                                 samples=config.flash_samples,
                                                 min_sample_s=sweep.min_sample_s).to_json("ms")
            points.append(point)
            on_point(T)
    return points


def flash_sizes(config: AttentionLabConfig) -> list[int]:
    """The flash comparison's T: the memory sweep plus the profile's own T (where both are timed)."""
    return sorted(set(config.flash_T) | set(config.sweep.T_sweep))


def measure_all(config: AttentionLabConfig) -> tuple[dict, str | None]:
    """Every measurement of the lab, as the results.json dict, and the roofline manifest used."""
    sweep = config.sweep
    passes = [config.threads] + ([config.all_threads] if config.all_threads != config.threads else [])
    roof, depends_on = resolve_roofline(config.roofline_dir, config.threads)
    flash_T = flash_sizes(config)
    profiles = {}
    with progress_bar(len(passes) * len(sweep.T_sweep) + len(flash_T), "attention") as step:
        for threads in passes:
            profiles[threads] = profile_sweep(
                sweep, threads=threads, on_point=lambda T, th=threads: step(f"T={T} done, {th} thread(s)"))
        flash = _flash_points(config, lambda T: step(f"flash vs naive, T={T} done"))
    results = {
        "schema_version": 1,
        "experiment": EXPERIMENT,
        "config": config_json(config),
        "roofline": {"source": depends_on or ("measured now with the roofline's --quick configuration "
                                              "(no roofline experiment given or found)"), **roof},
        "threshold": threshold_json(sweep.d_head, roof["i_crit"]),
        "passes": [{"threads": threads, "points": [_point_json(T, profiles[threads][T], threads, config, roof)
                                                   for T in sweep.T_sweep]} for threads in passes],
        "flash": {"block": config.flash_block, "causal": True, "points": flash},
    }
    results["summary"] = summary_json(results)
    return results, depends_on


def config_json(config: AttentionLabConfig) -> dict:
    s = config.sweep
    return {"d_model": s.d_model, "n_heads": s.n_heads, "d_head": s.d_head, "T_sweep": list(s.T_sweep),
            "samples": s.samples, "min_sample_s": s.min_sample_s, "seed": s.seed, "dtype": "float32",
            "causal": True, "threads": config.threads, "all_threads": config.all_threads,
            "quick": config.quick, "flash_T": list(config.flash_T), "flash_block": config.flash_block,
            "flash_samples": config.flash_samples}


def threshold_json(d_k: int, i_crit: float) -> dict:
    """Block E.1: T* for scores/av, exact and by the seed's shortcut (None: no T is compute-bound)."""
    return {"d_k": d_k, "i_crit": i_crit, "intensity_limit": d_k / 2,
            "T_star_exact": memory_bound_threshold(d_k, i_crit),
            "T_star_seed_shortcut": seed_shortcut_threshold(d_k, i_crit)}


def _point_at(results: dict, T: int) -> dict | None:
    return next((p for p in results["passes"][0]["points"] if p["T"] == T), None)


def summary_json(results: dict) -> dict:
    """The seed's results_summary (null where T=512 was not measured), plus what README needs.

    phase_27_motivation_pct_memory: the share (%) of the forward's median time at T=512, 1st pass,
    spent in the T^2 ops that flash attention fuses (scores, softmax, av) AND that sit left of the
    ridge point (memory-bound) on this machine: the time whose cost is bytes that flash removes.
    """
    p = _point_at(results, SUMMARY_T)
    if p is None:
        return {"softmax_GFLOPS_at_T_512": None, "softmax_pct_of_total_at_T_512": None,
                "scores_GFLOPS_at_T_512": None, "phase_27_motivation_pct_memory": None}
    ops_ = p["ops"]
    memory_t2 = [name for name in T2_OPS if ops_[name]["bound"] == "memory"]
    return {
        "softmax_GFLOPS_at_T_512": ops_["softmax"]["gflops"],
        "softmax_pct_of_total_at_T_512": ops_["softmax"]["pct_of_total"],
        "scores_GFLOPS_at_T_512": ops_["scores"]["gflops"],
        "phase_27_motivation_pct_memory": sum(ops_[name]["pct_of_total"] for name in memory_t2),
        "phase_27_motivation_ops": memory_t2,
        "t2_ops_pct_of_total_at_T_512": sum(ops_[name]["pct_of_total"] for name in T2_OPS),
        "softmax_pct_of_memory_roof_at_T_512": ops_["softmax"]["pct_of_attainable"],
    }


# --- figures ---------------------------------------------------------------------------------------

def perf_figure(results: dict):
    """Block C: stacked per-op bars per T (ms, and share of the forward), dominant op annotated.

    The grey top segment is the forward's unattributed rest (mask building, timer reads).
    """
    points = results["passes"][0]["points"]
    segments = [(name, OP_COLORS[name], [p["ops"][name]["median_ms"] for p in points]) for name in OPS]
    segments.append(("other (mask, timers)", "lightgray", [max(p["unattributed"]["median_ms"], 0.0) for p in points]))
    heights = np.array([p["forward_ms"] for p in points])      # (n_T,) the composed forward
    fig, (ax_ms, ax_pct) = new_figure(1, 2, figsize=(11, 4.5))
    xs = np.arange(len(points))
    bottom_ms, bottom_pct = np.zeros(len(points)), np.zeros(len(points))
    for label, color, ms in segments:
        ms = np.asarray(ms)
        ax_ms.bar(xs, ms, bottom=bottom_ms, color=color, label=label)
        ax_pct.bar(xs, 100 * ms / heights, bottom=bottom_pct, color=color, label=label)
        bottom_ms, bottom_pct = bottom_ms + ms, bottom_pct + 100 * ms / heights
    for x, p, top in zip(xs, points, bottom_ms):
        dom = p["dominant"]
        ax_ms.annotate(f"{dom}\n{p['ops'][dom]['pct_of_total']:.0f}%", (x, top), ha="center", va="bottom",
                       fontsize=8)
    ax_ms.set_ylabel("median time per forward (ms)")
    ax_ms.set_ylim(0, heights.max() * 1.15)
    ax_pct.set_ylabel("share of the forward (%)")
    for ax in (ax_ms, ax_pct):
        ax.set_xticks(xs, [str(p["T"]) for p in points])
        ax.set_xlabel("T (tokens)")
    ax_pct.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.suptitle(f"Causal MHA forward, d_model={results['config']['d_model']}, "
                 f"{results['config']['n_heads']} heads, {results['passes'][0]['threads']} BLAS thread(s): "
                 "where the time goes (dominant op annotated)")
    return fig


def roofline_figure(results: dict):
    """Block D: each op at each T as (intensity, GFLOP/s) on the machine's roofline, coloured by op."""
    roof = results["roofline"]
    points = results["passes"][0]["points"]
    fig, ax = new_figure(figsize=(8, 5.5))
    intensities = [p["ops"][n]["intensity"] for p in points for n in OPS] + [
        p["flash_intensity"] for p in results["flash"]["points"]]
    lo, hi = min(intensities + [roof["i_crit"]]) / 2, max(intensities + [roof["i_crit"]]) * 2
    grid = np.geomspace(lo, hi, 200)
    ax.plot(grid, np.minimum(roof["peak_gflops"], roof["bandwidth_gbs"] * grid), "k-", lw=1.5,
            label=f"DRAM roof {roof['bandwidth_gbs']:.1f} GB/s (triad), float32 GEMM {roof['peak_gflops']:.1f} GFLOP/s")
    if roof["threads"] == 1:   # the cache roofs are measured with 1 thread only
        for level, bw in roof["cache_roofs_gbs_1_thread"].items():
            if bw is not None and level != "DRAM":
                ax.plot(grid, np.minimum(roof["peak_gflops"], bw * grid), "--", lw=0.8, color="gray",
                        label=f"{level} roof {bw:.0f} GB/s")
    ax.axvline(roof["i_crit"], color="gray", ls=":", lw=1)
    ax.annotate(f"ridge I_crit = {roof['i_crit']:.1f}", (roof["i_crit"], roof["peak_gflops"]),
                textcoords="offset points", xytext=(4, -12), fontsize=8, color="gray")
    for name in OPS:
        xs = [p["ops"][name]["intensity"] for p in points]
        ys = [p["ops"][name]["gflops"] for p in points]
        ax.plot(xs, ys, "o-", color=OP_COLORS[name], label=name, ms=6, lw=0.8)
        for p, x, y in zip(points, xs, ys):
            ax.annotate(str(p["T"]), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7,
                        color=OP_COLORS[name])
    # Phase 27 preview: where the fused scores+softmax+av would sit (modelled bytes, attainable roof)
    fused = [p for p in results["flash"]["points"] if p["T"] in {q["T"] for q in points}]
    fx = [p["flash_intensity"] for p in fused]
    ax.plot(fx, [attainable_gflops(i, roof["peak_gflops"], roof["bandwidth_gbs"]) for i in fx], "kD",
            mfc="none", ms=7, label="flash core, modelled bytes (roof it could reach)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, seed 001's byte model)")
    ax.set_ylabel("measured GFLOP/s (median)")
    ax.set_title(f"Attention ops on this machine's roofline ({results['passes'][0]['threads']} thread(s); "
                 "labels: T)")
    ax.legend(fontsize=8, loc="lower right")
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
        ax.set_xlabel("T (tokens)")
        ax.legend(fontsize=8)
    return fig


# --- the written folder ----------------------------------------------------------------------------

def perf_script(config: AttentionLabConfig) -> str:
    """perf.py: reproduces this run through the package."""
    s = config.sweep
    roof = f"Path({str(config.roofline_dir)!r})" if config.roofline_dir else "None"
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
    sweep=SweepConfig(T_sweep={tuple(s.T_sweep)!r}, d_model={s.d_model}, n_heads={s.n_heads},
                      samples={s.samples}, min_sample_s={s.min_sample_s}, seed={s.seed}),
    threads={config.threads}, all_threads={config.all_threads}, roofline_dir={roof},
    quick={config.quick}, flash_T={tuple(config.flash_T)!r}, flash_block={config.flash_block},
    flash_samples={config.flash_samples},
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


def _t_star_sentence(t_star, d_k: int, limit_factor: int) -> str:
    if t_star is None:
        return (f"none: I_crit >= d_k/{limit_factor} = {d_k / limit_factor:g}, so no T makes scores/av "
                "compute-bound")
    return f"T* = {t_star:.1f} (compute-bound above it, memory-bound below)"


def _timing_table(points: list[dict]) -> list[str]:
    lines = ["| T | " + " | ".join(OPS) + " | total | dominant |", "|---" * (len(OPS) + 3) + "|"]
    for p in points:
        cells = [f"{p['ops'][n]['median_ms']:.4g} ({p['ops'][n]['p10_ms']:.3g}-{p['ops'][n]['p90_ms']:.3g})"
                 for n in OPS]
        lines.append(f"| {p['T']} | " + " | ".join(cells)
                     + f" | {p['total']['median_ms']:.4g} | {p['dominant']} ({p['ops'][p['dominant']]['pct_of_total']:.0f}%) |")
    return lines


def _roofline_table(points: list[dict]) -> list[str]:
    lines = ["| op | " + " | ".join(f"T={p['T']}: I, GFLOP/s, bound" for p in points) + " |",
             "|---" * (len(points) + 1) + "|"]
    for n in OPS:
        cells = [f"{p['ops'][n]['intensity']:.3g}, {p['ops'][n]['gflops']:.3g}, **{p['ops'][n]['bound']}**"
                 for p in points]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def _observations(points: list[dict]) -> list[str]:
    """The seed's three expected observations, checked against this run (not assumed)."""
    out = []
    first, last = points[0], points[-1]
    proj = lambda p: p["ops"]["qkv_proj"]["pct_of_total"] + p["ops"]["out_proj"]["pct_of_total"]
    t2 = lambda p: sum(p["ops"][n]["pct_of_total"] for n in T2_OPS)
    out.append(f"- At T = {first['T']} the seed expects the projections to dominate: qkv_proj + out_proj "
               f"take {proj(first):.0f}% against {t2(first):.0f}% for scores + softmax + av, so this "
               f"{'holds' if proj(first) > t2(first) else 'does not hold'} here.")
    out.append(f"- At T = {last['T']} the seed expects the T^2 ops to dominate: they take {t2(last):.0f}% "
               f"against {proj(last):.0f}% for the projections, so this "
               f"{'holds' if t2(last) > proj(last) else 'does not hold'} here.")
    smallest = [p["T"] for p in points if min(OPS, key=lambda n: p["ops"][n]["median_ms"]) == "softmax"]
    out.append("- The seed expects softmax never to be the smallest component: "
               + ("it is not the smallest at any T." if not smallest
                  else f"it is the smallest at T = {', '.join(map(str, smallest))}."))
    return out


def readme_text(results: dict) -> str:
    """README.md from this run's own numbers: the setup, then Block E's three answers."""
    cfg, roof, thr, summ = results["config"], results["roofline"], results["threshold"], results["summary"]
    points = results["passes"][0]["points"]
    d_k = cfg["d_head"]
    at512 = _point_at(results, SUMMARY_T)
    flash = results["flash"]["points"]
    big = flash[-1]
    L = [f"# {EXPERIMENT}: where the time goes in causal attention (seed 001)", ""]
    L += [f"Causal multi-head attention, d_model = {cfg['d_model']}, {cfg['n_heads']} heads of d_head = {d_k}, "
          f"float32, T in {cfg['T_sweep']}: the engine's own five ops (`inferlab.model.attention`, the code "
          "`generate` runs), each bracketed by `perf_counter_ns` in `attention_forward_timed`. "
          f"Each point: {cfg['samples']} samples, each >= {cfg['min_sample_s'] * 1e3:g} ms of back-to-back "
          "forwards, after a discarded warm-up, gc disabled; median (p10-p90). "
          f"Per-op profile with {cfg['threads']} BLAS thread(s), set with threadpoolctl."]
    if cfg["quick"]:
        L += ["", f"**Quick run**: {cfg['samples']} samples per point instead of 100; the numbers are noisier."]
    noisy = [f"{n}@T={p['T']}" for p in points for n in OPS if p["ops"][n]["noisy"]]
    if noisy:
        L += ["", f"Spread (p90-p10)/median above 10% (noisy, shared machine): {', '.join(noisy)}."]
    L += ["", f"Roofline ({roof['source']}): beta = {roof['bandwidth_gbs']:.3g} GB/s, "
          f"pi = {roof['peak_gflops']:.3g} GFLOP/s, ridge point I_crit = pi/beta = {roof['i_crit']:.3g} FLOP/byte "
          f"(the {roof['threads']}-thread ceilings: {roof['bandwidth_from']}, {roof['peak_from']}).",
          "", "## Time per op (ms per forward, median (p10-p90))", "", *_timing_table(points), "",
          "`total` brackets the whole forward; it also holds building the causal mask and the timer reads "
          "(median of total minus the five ops, sample by sample): "
          + ", ".join(f"{p['unattributed']['median_ms']:.3g} ms at T={p['T']}" for p in points) + ".",
          "", "![perf](perf.png)", "", *_observations(points), ""]
    L += ["## Block E", "", "### 1. Which ops are memory-bound on this machine, and for which T?", "",
          "Intensity I (FLOP/byte, the seed's byte model), measured GFLOP/s and the side of the ridge point "
          f"(I_crit = {roof['i_crit']:.3g}):", "", *_roofline_table(points), "",
          "Softmax (I = 0.625) is memory-bound at every T. For scores and av, I = T d_k / (4 d_k + 2T) "
          f"rises with T towards d_k/2 = {thr['intensity_limit']:g}. Solving I = I_crit exactly gives "
          f"T* = 4 d_k I_crit / (d_k - 2 I_crit): {_t_star_sentence(thr['T_star_exact'], d_k, 2)}. "
          "The seed's shortcut T d_k > 4(d_k + T) I_crit solves to T* = 4 d_k I_crit / (d_k - 4 I_crit): "
          f"{_t_star_sentence(thr['T_star_seed_shortcut'], d_k, 4)}. The two differ because the shortcut's "
          "denominator 4(d_k + T) counts 8 T^2 bytes for the T x T matrix where the seed's own byte formula "
          "counts 4 T^2, so it caps the intensity at d_k/4 instead of d_k/2: it is more pessimistic, and "
          f"gives up entirely once I_crit >= {d_k / 4:g}.",
          "", "![roofline](roofline.png)", ""]
    above = [f"{n}@T={p['T']} ({p['ops'][n]['pct_of_attainable']:.0f}%)" for p in points for n in OPS
             if p["ops"][n]["pct_of_attainable"] > 100]
    if above:
        L += [f"Points above the roof ({', '.join(above)} of the DRAM roofline): the op runs from cache "
              "(its bytes fit in L2/L3, whose roofs are higher), or the ceilings were measured lower "
              "than these small matmuls reach (a busy machine lowers a measured peak).", ""]
    if at512 is not None:
        sm = at512["ops"]["softmax"]
        achieved_gbs = sm["bytes"] / (sm["median_ms"] * 1e-3) / 1e9
        L += ["### 2. Softmax against its roof", "",
              f"At T = 512 softmax runs at {sm['gflops']:.3g} GFLOP/s; its roof at I = 0.625 is "
              f"beta x I = {sm['attainable_gflops']:.3g} GFLOP/s, so it reaches "
              f"**{sm['pct_of_attainable']:.1f}% of the memory roof** (it moves {achieved_gbs:.3g} GB/s of "
              f"the modelled 8 T^2 H bytes against beta = {roof['bandwidth_gbs']:.3g} GB/s). The seed expects "
              f"under 10%: {'confirmed' if sm['pct_of_attainable'] < 10 else 'not what we measure here'}. "
              "The engine's softmax is five numpy passes over the (H, T, T) array: max (read), subtract "
              "(read, write a temporary), exp (read, write), sum (read), divide in place (read, write): "
              "seven sweeps where the model counts two, and none of them is a tuned fused kernel. "
              "At the other T: "
              + ", ".join(f"{p['ops']['softmax']['pct_of_attainable']:.1f}% at T={p['T']}" for p in points)
              + "."]
        if "fits_in" in sm and sm["fits_in"] != "DRAM":
            L += ["", f"Caveat on the seed's comparison: at T = 512 softmax's modelled bytes (S read, A written: "
                  f"{sm['bytes'] / 2**20:.0f} MiB) fit in the {sm['fits_in']}, so its data need not come from "
                  f"DRAM; against the {sm['fits_in']} roof "
                  f"({roof['cache_roofs_gbs_1_thread'][sm['fits_in']]:.3g} GB/s, 1 thread) it reaches "
                  f"**{sm['pct_of_fitting_roof']:.1f}%**."]
        L += [""]
    else:
        L += ["### 2. Softmax against its roof", "", "T = 512 was not in this run's sweep: "
              + ", ".join(f"{p['ops']['softmax']['pct_of_attainable']:.1f}% of the memory roof at T={p['T']}"
                          for p in points) + ".", ""]
    L += ["### 3. What would flash attention change on the roofline?", "",
          "Flash attention does not change the FLOPs of scores, softmax and av; it changes the bytes, "
          "because it never writes the T x T matrices S and A to memory. Fused and tiled, the three T^2 "
          "ops become one op whose intensity grows with the tile size instead of being pinned near "
          "0.6-8 FLOP/byte, so they climb the memory slope towards the compute roof.", "",
          f"Measured here (`inferlab.flash`, tiles of {results['flash']['block']}, causal): at T = {big['T']} "
          f"the modelled traffic of the T^2 ops falls from {big['naive_t2_bytes_model'] / 2**20:.1f} MiB to "
          f"{big['flash_bytes_model'] / 2**20:.1f} MiB (intensity {big['naive_t2_intensity']:.2f} -> "
          f"{big['flash_intensity']:.1f} FLOP/byte, vs I_crit = {roof['i_crit']:.3g}), and the peak memory of "
          f"one attention forward (tracemalloc) falls from {big['naive_peak_bytes'] / 2**20:.1f} MiB to "
          f"{big['flash_peak_bytes'] / 2**20:.2f} MiB; one (H, T, T) float32 matrix is "
          f"{big['one_TxT_matrix_bytes'] / 2**20:.0f} MiB. The largest difference between the two outputs is "
          f"{max(p['max_abs_diff'] for p in flash):.2g} (outputs up to {big['max_abs_output']:.2g}).", ""]
    timed = [p for p in flash if "flash_forward" in p]
    if timed:
        L += ["Forward time, naive vs flash (numpy, the same projections; median ms): "
              + ", ".join(f"T={p['T']}: {p['naive_forward']['median_ms']:.3g} vs {p['flash_forward']['median_ms']:.3g}"
                          for p in timed)
              + ". In numpy each tile is a Python-level loop iteration, so at small T the loop overhead "
              "can outweigh the saved traffic; the modelled bytes are the point of the preview.", ""]
    L += ["![flash](flash.png)", ""]
    L += ["## results_summary", "",
          f"- softmax_GFLOPS_at_T_512 = {_num(summ['softmax_GFLOPS_at_T_512'])}",
          f"- softmax_pct_of_total_at_T_512 = {_num(summ['softmax_pct_of_total_at_T_512'])}",
          f"- scores_GFLOPS_at_T_512 = {_num(summ['scores_GFLOPS_at_T_512'])}",
          f"- phase_27_motivation_pct_memory = {_num(summ['phase_27_motivation_pct_memory'])}: the share (%) "
          "of the forward's median time at T = 512 (first pass) spent in the T^2 ops that flash attention "
          "fuses (scores, softmax, av) and that sit left of the ridge point on this machine "
          f"({', '.join(summ.get('phase_27_motivation_ops') or []) or 'none'}): the sum of their "
          "`pct_of_total`. It is the time whose cost is bytes that flash attention removes. All three T^2 ops "
          f"together take {_num(summ.get('t2_ops_pct_of_total_at_T_512'))}% of the forward at T = 512.", ""]
    if len(results["passes"]) > 1:
        other = results["passes"][1]
        L += [f"## BLAS threads: {results['passes'][0]['threads']} vs {other['threads']}", "",
              "| T | total ms, " + f"{results['passes'][0]['threads']} thread(s) | total ms, {other['threads']} threads | ratio |",
              "|---|---|---|---|"]
        for a, b in zip(points, other["points"]):
            L.append(f"| {a['T']} | {a['total']['median_ms']:.4g} | {b['total']['median_ms']:.4g} | "
                     f"{b['total']['median_ms'] / a['total']['median_ms']:.2f} |")
        L += ["", "On this small-matmul workload more BLAS threads are not reliably faster (thread "
              "start-up and synchronisation per tiny GEMM), which is why the per-op profile uses "
              f"{results['passes'][0]['threads']} thread(s). Per-op numbers of both passes are in results.json.", ""]
    L += ["## Notes", "",
          "- The byte model is the seed's: one read of each input and one write of S/A. The engine's "
          "`scores` op also scales S in place and adds the causal mask (two more read-write sweeps of "
          "the T x T array), and softmax takes seven sweeps, so their real traffic is higher and their "
          "distance to the roof partly reflects that, not only slow arithmetic.",
          "- The projections' byte formula (4 T d + 4 d^2) reads x and W but leaves out writing the output; "
          "kept as the seed has it so the intensities match the curriculum.",
          "- Reproduce with `python perf.py OUT` (through the package) or `inferlab attention`.", ""]
    return "\n".join(L)


def run_attention(config: AttentionLabConfig, out: Path, *, force: bool) -> dict:
    """Measure, then publish the whole experiment folder atomically; returns results.json's dict."""
    writer = ExperimentWriter(out, force=force)   # refuses an existing --out before any measuring
    results, depends_on = measure_all(config)
    manifest = build_manifest(
        experiment=EXPERIMENT, seed=config.sweep.seed, config=results["config"],
        depends_on=depends_on,
        results_summary={k: results["summary"][k] for k in (
            "softmax_GFLOPS_at_T_512", "softmax_pct_of_total_at_T_512", "scores_GFLOPS_at_T_512",
            "phase_27_motivation_pct_memory")},
        threads=config.threads)
    writer.add_text("perf.py", perf_script(config))
    writer.add_json("results.json", results)
    writer.add_figure("perf.png", perf_figure(results))
    writer.add_figure("roofline.png", roofline_figure(results))
    writer.add_figure("flash.png", flash_figure(results))
    writer.add_json("manifest.json", manifest)
    writer.add_text("README.md", readme_text(results))
    writer.commit()
    return results


def _run_lab(options: LabOptions) -> dict:
    config = AttentionLabConfig.build(quick=options.quick, seed=options.seed, threads=options.threads or 1,
                                      roofline_dir=options.sibling(roofline.EXPERIMENT))
    return run_attention(config, options.out, force=options.force)


LAB = Lab(order=15, name=EXPERIMENT, title="attention performance profile on the roofline (seed 001)",
          run=_run_lab)
