"""Lab 15-attention-perf (seed 001): where the time goes in causal attention, op by op, on the roofline.

Measures the engine's five attention ops (inferlab.attention_perf) over the T sweep with 1 BLAS
thread, compares the whole forward at 1 and all BLAS threads in one interleaved run per T, places
the ops on this machine's roofline (one `Roofline` at the profile's thread count, read from an
`inferlab roofline` run, else measured now), and adds the Phase 27 preview: flash attention's
modelled bytes, peak memory and time against the naive ops (interleaved). Every comparison is a
verdict (measure.verdicts); the report (attention_report.render) renders README, figures and
perf.py from results.json alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Iterator

import numpy as np

from inferlab import roofline
from inferlab.attention_perf import (
    OPS, T2_OPS, SweepConfig, memory_bound_threshold, op_costs, profile_sweep, seed_shortcut_threshold,
    sweep_inputs,
)
from inferlab.flash import DEFAULT_BLOCK, flash_cost, flash_mha, naive_t2_cost, traced_peak_bytes
from inferlab.labs import Lab, LabOptions, add_report
from inferlab.labs.attention_report import render
from inferlab.labs.attention_results import EXPERIMENT, SUMMARY_T, largest_point, point_at, summary_json
from inferlab.measure import ExperimentWriter, blas_threads, build_manifest, measure_interleaved, summarize
from inferlab.measure.machine import data_caches
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S, Budget
from inferlab.measure.verdicts import (CONFIDENCE, MIN_ROUNDS, Claim, Interval, Looks, decide, paired, paired_ratio,
                                       quotient)
from inferlab.roofline import Roofline

QUICK_SAMPLES = 10
SOFTMAX_ROOF_PCT = 10.0   # seed 001: "softmax reaches < 10% of its roof"
# Equivalence margins, fixed before any run: the numpy flash forward against the naive one reads
# near 1 at small T, and at the profile's small T one more BLAS thread has little to split; a
# difference under 5% of the forward is none that matters for either question.
FLASH_MARGIN = 0.05
THREADS_MARGIN = 0.05


@dataclass(frozen=True)
class AttentionLabConfig:
    sweep: SweepConfig = field(default_factory=SweepConfig)
    threads: int = 1                    # the per-op profile's BLAS threads
    all_threads: int = os.cpu_count() or 1   # compared with `threads` on the whole forward
    roofline_dir: Path | None = None    # an `inferlab roofline` folder; None: measure the ceilings now
    quick: bool = False
    flash_T: tuple[int, ...] = (256, 512, 1024, 2048, 4096)   # peak-memory sweep (naive: 771 MiB at 4096)
    flash_block: int = DEFAULT_BLOCK
    flash_samples: int = 20             # interleaved rounds: naive vs flash, and 1 vs all threads
    budget_s: float = DEFAULT_BUDGET_S  # extra rounds while a comparison is unresolved
    model: str | None = None            # the --model folder whose attention shape the sweep has

    @classmethod
    def build(cls, *, quick: bool = False, seed: int = 0, T_sweep: tuple[int, ...] = (64, 128, 256, 512),
              d_model: int = 64, n_heads: int = 4, n_kv_heads: int | None = None, qkv_bias: bool = False,
              model: str | None = None, threads: int = 1, roofline_dir: Path | None = None,
              budget_s: float | None = None) -> AttentionLabConfig:
        """The CLI's and `inferlab run all`'s config. --quick keeps every profile shape but takes
        QUICK_SAMPLES samples per point and stops the memory sweep at T = 1024 (the README says so).
        n_kv_heads (a Llama-family shape, GQA when < n_heads) gives a Llama layer's weights."""
        sweep = SweepConfig(T_sweep=tuple(T_sweep), d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
                            qkv_bias=qkv_bias, samples=QUICK_SAMPLES if quick else SweepConfig.samples, seed=seed)
        config = cls(sweep=sweep, threads=threads, roofline_dir=roofline_dir, quick=quick, model=model,
                     flash_samples=MIN_ROUNDS if quick else 20, budget_s=QUICK_BUDGET_S if quick else DEFAULT_BUDGET_S)
        if quick:
            config = replace(config, flash_T=(256, 512, 1024))
        return config if budget_s is None else replace(config, budget_s=budget_s)


# --- measuring -------------------------------------------------------------------------------------

def fitting_level(nbytes: float, roof: Roofline) -> str:
    """The smallest cache level (from sysfs) that holds an op's modelled bytes, else "DRAM"."""
    for cache in data_caches():
        name = f"L{cache['level']}"
        if nbytes <= cache["size_bytes"] and roof.cache_roofs_GBps.get(name):
            return name
    return "DRAM"


def _point_json(T: int, stats: dict, config: AttentionLabConfig, roof: Roofline) -> dict:
    """One T: per-op Stats plus FLOPs, bytes, intensity, GFLOP/s and roofline position.

    forward_ms is the composed forward: the five op medians plus the median unattributed rest
    (mask building, timer reads), the stacked bar's height in perf.png and the README's total;
    pct_of_total is an op's median over it. total (the bracketing timer's own median) is kept too.
    """
    sweep = config.sweep
    costs = op_costs(T, sweep.d_model, sweep.n_heads, sweep.kv_heads)
    rest = summarize([t - sum(stats[n].samples[i] for n in OPS) for i, t in enumerate(stats["total"].samples)],
                     iters_per_sample=stats["total"].iters_per_sample)
    forward = sum(stats[n].median for n in OPS) + max(rest.median, 0.0)
    # projections over the T^2 ops, sample by sample (the same forwards): a paired share, and each
    # side's own times, for the rule that takes a ratio paired only where both sides are quiet
    sides = {"projections": [stats["qkv_proj"].samples[i] + stats["out_proj"].samples[i] for i in range(stats["total"].n)],
             "t2_ops": [sum(stats[n].samples[i] for n in T2_OPS) for i in range(stats["total"].n)]}
    proj = [a / b for a, b in zip(sides["projections"], sides["t2_ops"])]
    ops_json = {}
    for name in OPS:
        c, s = costs[name], stats[name]
        gflops = c.flops / s.median / 1e9
        roof_here = roof.attainable_GFLOPS(c.intensity)
        ops_json[name] = {**s.to_json("ms"), "flops": c.flops, "bytes": c.bytes, "intensity": c.intensity,
                          "gflops": gflops, "gflops_p10": c.flops / s.p90 / 1e9, "gflops_p90": c.flops / s.p10 / 1e9,
                          "bound": roof.bound_by(c.intensity),
                          "attainable_gflops": roof_here, "pct_of_attainable": 100 * gflops / roof_here,
                          "pct_of_total": 100 * s.median / forward}
        if roof.cache_roofs_GBps:   # measured with 1 thread: the profile's own count
            level = fitting_level(c.bytes, roof)
            ops_json[name].update(fits_in=level, pct_of_fitting_roof=100 * gflops / roof.attainable_GFLOPS(
                c.intensity, memory=level))
    return {"T": T, "ops": ops_json, "total": stats["total"].to_json("ms"), "forward_ms": forward * 1e3,
            "unattributed": rest.to_json("ms"), "projections_over_t2": Interval.from_samples(proj).to_json(),
            **{f"{side}_time": summarize(times, iters_per_sample=stats["total"].iters_per_sample).to_json("ms")
               for side, times in sides.items()},
            "largest": max(OPS, key=lambda name: stats[name].median)}


def _unresolved(num: str, den: str, margin: float) -> Looks:
    """more() for measure_interleaved: rounds until time(num) / time(den) is decided (verdicts.Looks)."""
    return Looks([Claim(num, den, margin=margin)])


def thread_comparison(config: AttentionLabConfig, budgets: Iterator[Budget], step) -> list[dict]:
    """The whole forward with config.threads and config.all_threads BLAS threads, interleaved
    per T (the thread limit is switched between samples, outside the timer)."""
    sweep = config.sweep
    mha, xs = sweep_inputs(sweep)
    one, many = str(config.threads), str(config.all_threads)
    out = []
    for T in sweep.T_sweep:
        fwd = partial(mha.forward, xs[T])
        stats = measure_interleaved({one: fwd, many: fwd}, around={t: partial(blas_threads, int(t)) for t in (one, many)},
                                    samples=config.flash_samples, min_sample_s=sweep.min_sample_s,
                                    more=_unresolved(one, many, THREADS_MARGIN), budget=next(budgets), seed=sweep.seed)
        out.append({"T": T, "threads": [config.threads, config.all_threads],
                    "forward": {t: s.to_json("ms") for t, s in stats.items()},
                    "speedup": paired_ratio(stats[one], stats[many]).to_json()})   # time(1) / time(N)
        step(f"T={T}: {one} vs {many} threads")
    return out


def _flash_points(config: AttentionLabConfig, budgets: Iterator[Budget], on_point) -> list[dict]:
    """Flash vs naive: peak memory (tracemalloc), modelled bytes, max difference, forward time."""
    sweep = config.sweep
    mha, _ = sweep_inputs(sweep)   # the profile's weights (mha does not depend on the context length)
    rng = np.random.default_rng(sweep.seed)
    points = []
    with blas_threads(config.threads):
        for T in flash_sizes(config):
            x = rng.standard_normal((T, sweep.d_model)).astype(np.float32)     # (T, d)
            naive_fwd, flash_fwd = partial(mha.forward, x), partial(flash_mha, x, mha, block=config.flash_block)
            naive_out, flash_out = naive_fwd(), flash_fwd()
            naive = naive_t2_cost(T, sweep.d_head, sweep.n_heads, sweep.kv_heads)
            flash = flash_cost(T, sweep.d_head, sweep.n_heads, block=config.flash_block, causal=True)
            point = {"T": T,
                     "max_abs_diff": float(np.abs(naive_out - flash_out).max()),
                     "max_abs_output": float(np.abs(naive_out).max()),
                     "naive_peak_bytes": traced_peak_bytes(naive_fwd),
                     "flash_peak_bytes": traced_peak_bytes(flash_fwd),
                     "one_TxT_matrix_bytes": 4 * sweep.n_heads * T * T,
                     "flops": naive.flops,
                     "naive_t2_bytes_model": naive.bytes, "flash_bytes_model": flash.bytes,
                     "naive_t2_intensity": naive.intensity, "flash_intensity": flash.intensity}
            del naive_out, flash_out
            if T in sweep.T_sweep:   # time both forwards, interleaved, where the profile has a point
                stats = measure_interleaved({"naive": naive_fwd, "flash": flash_fwd}, samples=config.flash_samples,
                                            min_sample_s=sweep.min_sample_s, more=_unresolved("flash", "naive", FLASH_MARGIN),
                                            budget=next(budgets), seed=sweep.seed)
                point.update(naive_forward=stats["naive"].to_json("ms"), flash_forward=stats["flash"].to_json("ms"),
                             flash_over_naive=paired_ratio(stats["flash"], stats["naive"]).to_json())
            points.append(point)
            on_point(T)
    return points


def flash_sizes(config: AttentionLabConfig) -> list[int]:
    """The flash comparison's T: the memory sweep plus the profile's own T (where both are timed)."""
    return sorted(set(config.flash_T) | set(config.sweep.T_sweep))


def measure_all(config: AttentionLabConfig) -> dict:
    """Every measurement of the lab, as the results.json dict."""
    sweep = config.sweep
    roof = roofline.resolve_roofline(config.roofline_dir, threads=config.threads)
    compare = config.all_threads != config.threads
    flash_T = flash_sizes(config)
    budget = Budget(config.budget_s)
    # every interleaved comparison gets an even share of what the ones before it left
    timed = (len(sweep.T_sweep) if compare else 0) + sum(T in sweep.T_sweep for T in flash_T)
    budgets = budget.shares(timed)
    with progress_bar(len(sweep.T_sweep) * (1 + compare) + len(flash_T), "attention") as step:
        profile = profile_sweep(sweep, threads=config.threads, on_point=lambda T: step(f"T={T} profiled"))
        threads = thread_comparison(config, budgets, step) if compare else []
        flash = _flash_points(config, budgets, lambda T: step(f"flash vs naive, T={T} done"))
    results = {
        "schema_version": 1,
        "experiment": EXPERIMENT,
        "config": config_json(config),
        "roofline": roof.to_json(),
        "threshold": threshold_json(sweep.d_head, roof.ridge.value, sweep.group),
        "profile": {"threads": config.threads,
                    "points": [_point_json(T, profile[T], config, roof) for T in sweep.T_sweep]},
        "threads_comparison": threads,
        "flash": {"block": config.flash_block, "causal": True, "points": flash},
        "comparison_rule": {"confidence": CONFIDENCE, "min_rounds": MIN_ROUNDS,
                            "equivalence_margins": {"flash vs naive": FLASH_MARGIN, "1 vs all threads": THREADS_MARGIN}},
        "budget": {"seconds": config.budget_s, "left_s": budget.left()},
    }
    results["summary"] = summary_json(results)
    results["verdicts"] = attention_verdicts(results)
    return results


def attention_verdicts(results: dict) -> list[dict]:
    """Every comparison the report states, decided by its interval: memory- vs compute-bound per op
    and T, softmax against 10% of its roof, projections against the T^2 ops, threads, flash."""
    roof = Roofline.from_json(results["roofline"])
    points = results["profile"]["points"]
    out = []
    for p in points:
        for name in OPS:
            op = p["ops"][name]
            # intensity (exact, the model's) over the ridge point (its measured interval)
            rel = quotient(Interval.exact(op["intensity"]), roof.ridge)
            out.append(decide(f"bound_{name}_T{p['T']}", rel, 1.0,
                              quantity=f"{name}'s intensity over the ridge point at T={p['T']}",
                              above=f"At T={p['T']} {name} is compute-bound here (right of the ridge point)",
                              below=f"At T={p['T']} {name} is memory-bound here (left of the ridge point)",
                              question=f"at T={p['T']} whether {name} is memory- or compute-bound here").to_json())
    soft = point_at(results, SUMMARY_T) or largest_point(results)
    sm = soft["ops"]["softmax"]
    pct = quotient(Interval(sm["gflops"], sm["gflops_p10"], sm["gflops_p90"]),
                   roof.attainable_interval(sm["intensity"])).scaled(100)
    out.append(decide("softmax_below_10pct", pct, SOFTMAX_ROOF_PCT,
                      quantity=f"softmax's share of its DRAM roof at T={soft['T']} (%)",
                      above=f"At T={soft['T']} softmax reaches more than {SOFTMAX_ROOF_PCT:g}% of its memory roof",
                      below=f"At T={soft['T']} softmax stays under {SOFTMAX_ROOF_PCT:g}% of its memory roof",
                      question=f"at T={soft['T']} whether softmax reaches {SOFTMAX_ROOF_PCT:g}% of its memory roof",
                      fmt=".3g").to_json())
    ends = (min(points, key=lambda p: p["T"]), largest_point(results))
    for p in {e["T"]: e for e in ends}.values():
        ratio = paired(p["projections_time"], p["t2_ops_time"])
        out.append(decide(f"projections_vs_t2_T{p['T']}", ratio, 1.0,
                          quantity=f"projection time over T^2-op time at T={p['T']} ({ratio.basis})",
                          above=f"At T={p['T']} the projections take more time than scores + softmax + av",
                          below=f"At T={p['T']} scores + softmax + av take more time than the projections",
                          question=f"at T={p['T']} whether the projections or the T^2 ops take more time").to_json())
    for c in results["threads_comparison"]:
        one, many = c["threads"]
        ratio = paired(c["forward"][str(one)], c["forward"][str(many)])
        out.append(decide(f"threads_T{c['T']}", ratio, 1.0,
                          quantity=f"forward time with {one} thread(s) over {many} threads at T={c['T']} ({ratio.basis})",
                          above=f"At T={c['T']} the forward runs faster with {many} BLAS threads than with {one}",
                          below=f"At T={c['T']} the forward runs slower with {many} BLAS threads than with {one}",
                          question=f"at T={c['T']} whether {many} BLAS threads change the forward time",
                          margin=THREADS_MARGIN,
                          equivalent=(f"At T={c['T']} {many} BLAS threads change the forward time by less than "
                                      f"{THREADS_MARGIN:.0%}")).to_json())
    for p in results["flash"]["points"]:
        if "flash_over_naive" in p:
            ratio = paired(p["flash_forward"], p["naive_forward"])
            out.append(decide(f"flash_vs_naive_T{p['T']}", ratio, 1.0,
                              quantity=f"flash forward time over naive at T={p['T']} ({ratio.basis})",
                              above=f"At T={p['T']} the numpy flash forward is slower than the naive one",
                              below=f"At T={p['T']} the numpy flash forward is faster than the naive one",
                              question=f"at T={p['T']} whether the numpy flash forward differs in time from the naive one",
                              margin=FLASH_MARGIN,
                              equivalent=(f"At T={p['T']} the numpy flash forward and the naive one differ in time by "
                                          f"less than {FLASH_MARGIN:.0%}")).to_json())
    return out


def config_json(config: AttentionLabConfig) -> dict:
    s = config.sweep
    return {"d_model": s.d_model, "n_heads": s.n_heads, "d_head": s.d_head, "kv_heads": s.kv_heads,
            "n_kv_heads": s.n_kv_heads, "qkv_bias": s.qkv_bias, "model": config.model, "T_sweep": list(s.T_sweep),
            "samples": s.samples, "min_sample_s": s.min_sample_s, "seed": s.seed, "dtype": "float32",
            "causal": True, "threads": config.threads, "all_threads": config.all_threads,
            "quick": config.quick, "flash_T": list(config.flash_T), "flash_block": config.flash_block,
            "flash_samples": config.flash_samples, "budget_s": config.budget_s,
            "roofline_dir": str(config.roofline_dir) if config.roofline_dir else None}


def threshold_json(d_k: int, i_crit: float, group: int = 1) -> dict:
    """Block E.1: T* for scores/av, exact (at this shape's G query heads per KV head) and by the
    seed's MHA shortcut (None: no T is compute-bound)."""
    return {"d_k": d_k, "i_crit": i_crit, "intensity_limit": d_k / 2, "group": group,
            "T_star_exact": memory_bound_threshold(d_k, i_crit, group),
            "T_star_seed_shortcut": seed_shortcut_threshold(d_k, i_crit)}


def run_attention(config: AttentionLabConfig, out: Path, *, force: bool) -> dict:
    """Measure, then publish the whole experiment folder atomically; returns results.json's dict."""
    writer = ExperimentWriter(out, force=force)   # refuses an existing --out before any measuring
    results = measure_all(config)
    manifest = build_manifest(
        experiment=EXPERIMENT, seed=config.sweep.seed, config=results["config"],
        depends_on=Roofline.from_json(results["roofline"]).source,
        results_summary={k: results["summary"][k] for k in (
            "softmax_GFLOPS_at_T_512", "softmax_pct_of_total_at_T_512", "scores_GFLOPS_at_T_512",
            "phase_27_motivation_pct_memory")},
        threads=config.threads)
    writer.add_json("results.json", results)
    writer.add_json("manifest.json", manifest)
    add_report(writer, render(results, manifest, out))
    writer.commit()
    return results


def _run_lab(options: LabOptions) -> dict:
    config = AttentionLabConfig.build(quick=options.quick, seed=options.seed, threads=options.threads or 1,
                                      budget_s=options.budget_s, roofline_dir=options.sibling(roofline.EXPERIMENT))
    return run_attention(config, options.out, force=options.force)


LAB = Lab(order=15, name=EXPERIMENT, title="attention performance profile on the roofline (seed 001)",
          run=_run_lab, report=render)
