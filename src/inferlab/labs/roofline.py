"""Lab 01-roofline: this machine's ceilings (seed 001's "Phase 1" roofline, beta_peak and pi_peak).

Composes inferlab.roofline into one experiment folder: bench.py (reproduces the measurement),
results.json, manifest.json, roofline.png, sweep.png and a README.md written from the run's own
numbers. When benchmarks/likwid_compare.py has written its folder next to this one
(LIKWID_EXPERIMENT), the README quotes its ratios.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from inferlab.labs import Lab, LabOptions
from inferlab.measure import ExperimentWriter, build_manifest, new_figure
from inferlab.roofline import EXPERIMENT, STREAM_KERNELS, RooflineConfig, draw_roofline, run_roofline

LIKWID_EXPERIMENT = "01-roofline-likwid"


def summary(results: dict) -> dict:
    """results_summary of the manifest: the numbers other labs read first."""
    ridge = results["ridge"]
    t = str(ridge["threads"])
    return {"ridge_point_flop_per_byte": results["ridge_point_flop_per_byte"],
            "ridge_threads": ridge["threads"],
            "dram_triad_GBps_best": ridge["bandwidth_GBps"],
            "dram_copy_GBps_best": results["bandwidth_GBps"]["copy"][t]["best"],
            "float32_GEMM_GFLOPS_best": results["peak_GFLOPS"]["float32"][t]["best"],
            "float64_GEMM_GFLOPS_best": results["peak_GFLOPS"]["float64"][t]["best"],
            "cache_roofs_GBps_1_thread": results["cache_roofs_GBps"]}


def bench_script(config: RooflineConfig) -> str:
    return f'''"""Reproduce this folder's measurements through the package; prints results.json to stdout.

Equivalent to `inferlab roofline --threads {config.threads}{" --quick" if config.quick else ""} --json`, without writing files.
"""
import json

from inferlab.roofline import RooflineConfig, run_roofline

config = {config!r}
print(json.dumps(run_roofline(config), indent=2))
'''


def sweep_figure(results: dict):
    """Bandwidth against working-set size, cache sizes marked, each level's plateau drawn."""
    fig, ax = new_figure(figsize=(7.5, 4.5))
    points = results["sweep"]["points"]
    ws = np.array([p["working_set_bytes"] for p in points]) / 1024  # (P,) KiB
    ax.plot(ws, [p["GBps_best"] for p in points], "o-", label="best")
    ax.plot(ws, [p["GBps_median"] for p in points], ".--", alpha=0.6, label="median")
    for level in results["sweep"]["levels"]:
        lo, hi = level["band_bytes"]
        roof = results["cache_roofs_GBps"][level["name"]]
        if level["size_bytes"]:
            ax.axvline(level["size_bytes"] / 1024, color="grey", lw=0.8, ls=":")
            ax.text(level["size_bytes"] / 1024, 0.98, level["name"],
                    transform=ax.get_xaxis_transform(), ha="right", va="top", fontsize=8)
        if roof is not None:
            right = (hi or lo * 2) / 1024
            ax.hlines(roof, max(lo / 1024, ws[0]), right, colors="C3", lw=2)
            ax.text(right, roof, f" {level['name']} {roof:.0f} GB/s", fontsize=7, va="bottom", ha="right")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (KiB)")
    ax.set_ylabel("GB/s (STREAM add counting, 24 B/elem)")
    ax.set_title("working-set sweep, 1 thread: the plateau of each cache level")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def roofline_figure(results: dict):
    fig, ax = new_figure(figsize=(7.5, 5))
    draw_roofline(ax, results)
    ax.set_title(f"roofline of this machine ({results['ridge']['threads']} thread(s))")
    return fig


def _fmt(x, digits=1) -> str:
    return "unknown" if not isinstance(x, (int, float)) else f"{x:.{digits}f}"


def _machine_lines(manifest: dict) -> list[str]:
    hw, blas = manifest["hardware"], manifest["versions"]["blas"]
    lines = [f"- CPU: {hw['cpu_model']}, {hw['cores']} cores, {hw['logical_cpus']} logical CPUs; "
             f"caches: " + ", ".join(f"L{c['level']} {c['type']} {c['size_bytes'] // 1024} KiB"
                                     for c in hw["caches"]),
             f"- governor at run: {hw['cpu_governor_at_run']}"
             + (f" ({hw['governor_note']})" if hw.get("governor_note") else ""),
             "- BLAS: " + (", ".join(f"{b['internal_api']} {b['version']}, kernel {b['kernel']}, "
                                     f"{b['threading_layer']}" for b in blas) or "none found"),
             "- environment: " + ", ".join(f"{k}={v}" for k, v in hw["env"].items() if v is not None)
             if any(v is not None for v in hw["env"].values()) else "- environment: no OPENBLAS_*/OMP_* variables set"]
    return lines


def _likwid_lines(out: Path) -> list[str]:
    path = out.parent / LIKWID_EXPERIMENT / "results.json"
    if not path.is_file():
        return [f"No likwid comparison next to this folder yet: `python benchmarks/likwid_compare.py "
                f"--out {out.parent / LIKWID_EXPERIMENT}` runs likwid-bench and this roofline in one go."]
    lk = json.loads(path.read_text())
    lines = [f"From [{LIKWID_EXPERIMENT}](../{LIKWID_EXPERIMENT}/README.md) (run {lk.get('date', '?')}, "
             f"threads {', '.join(map(str, lk['threads']))}, likwid kernels {', '.join(lk['likwid_kernels'].values())}):", "",
             "| quantity | inferlab | likwid-bench | inferlab / likwid |", "|---|---|---|---|"]
    for name, row in lk["ratios"].items():
        lines.append(f"| {name} | {_fmt(row['inferlab'])} | {_fmt(row['likwid'])} | {_fmt(row['ratio'], 2)} |")
    return lines


def readme(results: dict, manifest: dict, out: Path) -> str:
    r, ridge = results, results["ridge"]
    t = str(ridge["threads"])
    theory = r["theoretical_peak_GFLOPS"]
    s = r["stream"]
    lines = [f"# {EXPERIMENT}: the roofline of this machine", "",
             f"Measured {manifest['date']} with `inferlab roofline --threads {r['config']['threads']}"
             + (" --quick" if r["config"]["quick"] else "")
             + "`. Every number says the thread count it used. GB = 1e9 bytes.", "",
             "## Machine", "", *_machine_lines(manifest), "",
             "## Ridge point", "",
             f"**{r['ridge_point_flop_per_byte']:.2f} FLOP/byte** = float32 GEMM peak "
             f"{ridge['peak_GFLOPS']:.1f} GFLOP/s / DRAM triad {ridge['bandwidth_GBps']:.1f} GB/s, both with "
             f"{ridge['threads']} thread(s) (`{ridge['peak_from']}` / `{ridge['bandwidth_from']}`). "
             f"A kernel doing fewer FLOPs per byte of DRAM traffic than this is memory-bound here: "
             f"a float32 GEMV (2 FLOP per 4-byte weight, 0.5 FLOP/B) can reach at most "
             f"{min(ridge['peak_GFLOPS'], 0.5 * ridge['bandwidth_GBps']):.1f} GFLOP/s, "
             f"{100 * min(1.0, 0.5 / r['ridge_point_flop_per_byte']):.0f}% of the compute roof. "
             f"With float64 GEMM as the roof the ridge is {r['ridge_points_flop_per_byte']['float64']:.2f} FLOP/B.",
             "", "![roofline](roofline.png)", "",
             "## DRAM bandwidth (STREAM)", "",
             f"Arrays of {s['array_elems']:,} float64 ({s['array_bytes'] / 2**20:.0f} MiB each, "
             f"{s['array_bytes'] / s['llc_bytes']:.1f}x the {s['llc_bytes'] / 2**20:.0f} MiB last-level cache"
             + ("" if s["llc_from_sysfs"] else ", LLC size unreadable: assumed") + "). "
             f"Best and median of {r['config']['trials']} trials after one discarded; each trial aggregates "
             f">= {r['config']['min_sample_s'] * 1e3:.0f} ms.", "",
             "| kernel | B/elem | threads | best GB/s | median GB/s | p10-p90 | noisy |", "|---|---|---|---|---|---|---|"]
    for kernel in STREAM_KERNELS:
        for tk, e in r["bandwidth_GBps"][kernel].items():
            lines.append(f"| {kernel} | {e['bytes_per_elem']} | {tk} | {e['best']:.1f} | {e['median']:.1f} | "
                         f"{e['p10']:.1f}-{e['p90']:.1f} | {'yes' if e['noisy'] else 'no'} |")
    lines += ["", "Bytes are counted as STREAM counts them: copy (c=a) and scale (b=s*c) 16 B/element, "
              "add (c=a+b) and triad (a=b+s*c) 24 B/element. Two effects make the real traffic larger, "
              "so these figures are what STREAM would report, not what the memory bus carried:",
              "- numpy has no fused triad: `np.multiply(c, s, out=a); np.add(a, b, out=a)` is two passes. "
              "They run block by block (1 MiB per array), so the second pass reads a's block from cache "
              "and DRAM sees STREAM's single pass; over whole arrays it would move 40 B/element for the "
              "24 counted.",
              "- write-allocate: a store to a line not in cache first reads that line, so each written "
              "array costs 2x its size unless the copy uses non-temporal stores (glibc's memcpy, behind "
              "`np.copyto`, does for large copies). Counting it, copy moves 24 B/element and add/triad 32.",
              "", "## Cache roofs (working-set sweep, 1 thread)", "",
              f"Kernel: {r['sweep']['kernel']}, counted as STREAM add (24 B/element). A zero-stride view "
              "repeats the same working set inside one numpy call, so numpy's per-call overhead does not "
              "hide the L1 plateau. Each level's roof is the best point between 2x the previous level's "
              "size and half its own (DRAM: >= 4x the LLC), as the Empirical Roofline Toolkit reads plateaus.",
              "", "| level | size | roof GB/s |", "|---|---|---|"]
    for level in r["sweep"]["levels"]:
        size = f"{level['size_bytes'] // 1024} KiB" if level["size_bytes"] else "-"
        lines.append(f"| {level['name']} | {size} | {_fmt(r['cache_roofs_GBps'][level['name']])} |")
    lines += ["", "![sweep](sweep.png)", "", "## Peak compute (GEMM, 2n^3 FLOP)", "",
              "| dtype | threads | n (best) | best GFLOP/s | median | p10-p90 | by n |", "|---|---|---|---|---|---|---|"]
    for dtype, per_t in r["peak_GFLOPS"].items():
        for tk, e in per_t.items():
            by_n = ", ".join(f"{n}: {g:.1f}" for n, g in e["by_n"].items())
            lines.append(f"| {dtype} | {tk} | {e['n']} | {e['best']:.1f} | {e['median']:.1f} | "
                         f"{e['p10']:.1f}-{e['p90']:.1f} | {by_n} |")
    lines += ["", f"Theoretical peak from the CPU flags: ISA {theory['isa']}, FMA {'yes' if theory['fma'] else 'no'}, "
              f"{theory['pipes_assumed']} vector pipes per core assumed, {theory['cores']} core(s), "
              f"{_fmt(theory['ghz'], 2)} GHz (from {theory['ghz_source'] or 'nowhere'}"
              + ("; the current clock under a hypervisor, turbo unknown" if theory["ghz_source"] == "current_mhz" else "")
              + ")."]
    for dtype in ("float32", "float64"):
        th = theory[dtype]
        if isinstance(th, dict):
            lines.append(f"- {dtype}: {th['flop_per_cycle_per_core']} FLOP/cycle/core -> {th['GFLOPS']:.1f} GFLOP/s; "
                         f"measured GEMM with {t} thread(s) is {100 * r['measured_over_theoretical'][dtype]:.0f}% of it.")
        else:
            lines.append(f"- {dtype}: unknown (SIMD width or clock not readable).")
    lines += ["", "## Independent check: likwid-bench", "", *_likwid_lines(out), "",
              "## Caveats", "",
              "- Results marked noisy have (p90-p10)/median above 10%: on a shared machine, rerun "
              "when nothing else is running; the best-of-trials figures are the ones the roofline uses.",
              "- Multi-threaded STREAM runs one Python thread per chunk (numpy releases the GIL in ufunc "
              "loops); multi-threaded GEMM uses the BLAS's own threads, set with threadpoolctl.",
              "- 2-thread BLAS on small matrices has been seen to be erratic on this hardware; compare the "
              "1-thread and all-thread rows before trusting either.", ""]
    return "\n".join(lines)


def write_roofline(config: RooflineConfig, out: Path, *, force: bool, seed: int = 0) -> dict:
    """Measure and publish experiments/01-roofline; returns the results dict."""
    writer = ExperimentWriter(out, force=force)  # fails fast (exists, unwritable) before measuring
    results = run_roofline(config)
    manifest = build_manifest(experiment=EXPERIMENT, seed=seed, config=results["config"], depends_on=None,
                              results_summary=summary(results), threads=config.threads)
    writer.add_text("bench.py", bench_script(config))
    writer.add_json("results.json", results)
    writer.add_json("manifest.json", manifest)
    writer.add_figure("roofline.png", roofline_figure(results))
    writer.add_figure("sweep.png", sweep_figure(results))
    writer.add_text("README.md", readme(results, manifest, Path(out)))
    writer.commit()
    return results


def _run(options: LabOptions) -> dict:
    config = RooflineConfig.for_run(quick=options.quick, threads=options.threads, seed=options.seed)
    return write_roofline(config, options.out, force=options.force, seed=options.seed)


LAB = Lab(order=1, name=EXPERIMENT, title="machine roofline: STREAM bandwidth, cache roofs, GEMM peak, ridge point",
          run=_run)
