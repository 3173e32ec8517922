"""The 01-roofline report: README.md, roofline.png, sweep.png and bench.py, from the folder's
results.json and manifest.json alone (plus benchmarks/likwid_compare.py's folder beside it, when
one exists). `inferlab report DIR` calls `render`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from inferlab.measure import new_figure
from inferlab.measure.plots import LABEL_BOX
from inferlab.measure.verdicts import Interval, quotient, rule_paragraph, verdict_lines
from inferlab.cache_sweep import PLATEAU_TOLERANCE, fmt_size
from inferlab.roofline import (EXPERIMENT, STREAM_ARRAYS, STREAM_KERNELS, WIDE_SPREAD, Roofline, RooflineConfig,
                               draw_roofline, in_band, theoretical_at, theoretical_verdicts)

LIKWID_EXPERIMENT = "01-roofline-likwid"


def bench_script(config: dict) -> str:
    return f'''"""Reproduce this folder's measurements through the package; prints results.json to stdout.

Equivalent to `inferlab roofline --threads {config["threads"]}{" --quick" if config["quick"] else ""} --json`, without writing files.
"""
import json

from inferlab.roofline import RooflineConfig, run_roofline

config = RooflineConfig(**{_config_literal(config)})
print(json.dumps(run_roofline(config), indent=2))
'''


def _config_literal(config: dict) -> str:
    return "{" + ", ".join(f"{k!r}: {tuple(v) if isinstance(v, list) else v!r}" for k, v in config.items()) + "}"


def sweep_figure(results: dict):
    """Bandwidth against working-set size, cache sizes marked, each level's plateau drawn."""
    fig, ax = new_figure(figsize=(7.5, 4.5))
    points = results["sweep"]["points"]
    ws = np.array([p["working_set_bytes"] for p in points]) / 1024  # (P,) KiB
    ax.plot(ws, [p["GBps_median"] for p in points], "o-", label="median of samples (used for the roofs)")
    ax.plot(ws, [p["GBps_best"] for p in points], ".:", alpha=0.6, label="best sample (reference)")
    for k, knee in enumerate(results["sweep"]["knees"]):
        ax.axvspan(knee["from_bytes"] / 1024, knee["to_bytes"] / 1024, color="C2" if knee["dram"] else "C1", alpha=0.12,
                   lw=0, label=("knees found: the fall between two plateaus (green: to DRAM)" if k == 0 else None))
    for level in results["sweep"]["levels"]:
        roof = results["cache_roofs_GBps"][level["name"]]
        if level["band_bytes"] is None:
            continue
        lo, hi = level["band_bytes"]
        if level["size_bytes"]:
            ax.axvline(level["size_bytes"] / 1024, color="grey", lw=0.8, ls=":")
            pretended = " (--llc)" if level["from"] == "--llc" else ""
            ax.text(level["size_bytes"] / 1024, 0.98, level["name"] + pretended, transform=ax.get_xaxis_transform(),
                    ha="right", va="top", fontsize=8, zorder=5, bbox=LABEL_BOX)
        if roof is not None:
            right = (hi or results["sweep"]["points"][-1]["working_set_bytes"]) / 1024
            ax.hlines(roof, max(lo / 1024, ws[0]), right, colors="C3", lw=2)
            # a few points above the 2-point line, so the line does not strike through the text
            ax.annotate(f"{level['name']} {roof:.0f} GB/s", (right, roof), xytext=(0, 3), textcoords="offset points",
                        fontsize=7, va="bottom", ha="right", color="C3", zorder=5, bbox=LABEL_BOX)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (KiB)")
    ax.set_ylabel("GB/s (STREAM add counting, 24 B/elem)")
    ax.set_title("working-set sweep, 1 thread: the plateau of each cache level")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def theory_verdicts(results: dict) -> list[dict]:
    """The GEMM-vs-theoretical-peak verdicts; computed from the ceilings for a results.json
    written before they were stored."""
    stored = [v for v in results["verdicts"] if v["id"].startswith("theoretical_")]
    return stored or theoretical_verdicts(results)


def beaten_theory(results: dict, threads: int) -> frozenset[str]:
    """The dtypes whose theoretical peak at `threads` the measured GEMM beats (verdict "above")."""
    return frozenset(v["id"].split("_")[1] for v in theory_verdicts(results)
                     if v["id"].endswith(f"_{threads}") and v["outcome"] == "above")


def roofline_figure(results: dict):
    """One panel per thread count: every roof in a panel was measured at that panel's count."""
    counts = results["thread_counts"]
    fig, axes = new_figure(1, len(counts), figsize=(7.0 * len(counts), 7.0))
    for ax, t in zip(np.atleast_1d(axes), counts):
        draw_roofline(ax, Roofline.from_results(results, t), theory=results["theoretical_peak_GFLOPS"],
                      beaten=beaten_theory(results, t))
        ax.set_title(f"{t} thread(s): every roof here measured with {t} thread(s)"
                     + (" (cache roofs: 1-thread sweep)" if t == 1 else ""), fontsize=9)
    fig.suptitle("roofline of this machine (medians; shaded: p10-p90)")
    return fig


def _fmt(x, digits=1) -> str:
    return "unknown" if not isinstance(x, (int, float)) else f"{x:.{digits}f}"


def machine_lines(manifest: dict) -> list[str]:
    hw, blas = manifest["hardware"], manifest["versions"]["blas"]
    env = {k: v for k, v in hw.get("env", {}).items() if v is not None}
    return [f"- CPU: {hw['cpu_model']}, {hw['cores']} cores, {hw['logical_cpus']} logical CPUs; "
            "caches: " + ", ".join(f"L{c['level']} {c['type']} {c['size_bytes'] // 1024} KiB"
                                   for c in hw.get("caches", [])),
            f"- governor at run: {hw['cpu_governor_at_run']}"
            + (f" ({hw['governor_note']})" if hw.get("governor_note") else ""),
            "- BLAS: " + (", ".join(f"{b['internal_api']} {b['version']}, kernel {b['kernel']}, "
                                    f"{b['threading_layer']}" for b in blas) or "none found"),
            "- environment: " + (", ".join(f"{k}={v}" for k, v in env.items()) if env
                                 else "no OPENBLAS_*/OMP_* variables set")]


def _likwid_lines(folder: Path) -> list[str]:
    path = folder.parent / LIKWID_EXPERIMENT / "results.json"
    if not path.is_file():
        return [f"No likwid comparison next to this folder yet: `python benchmarks/likwid_compare.py "
                f"--out {folder.parent / LIKWID_EXPERIMENT}` runs likwid-bench and this roofline in one go."]
    lk = json.loads(path.read_text())
    lines = [f"From [{LIKWID_EXPERIMENT}](../{LIKWID_EXPERIMENT}/README.md) (run {lk.get('date', '?')}, "
             f"threads {', '.join(map(str, lk['threads']))}, likwid kernels {', '.join(lk['likwid_kernels'].values())}). "
             "Each side's best, as that run compares them: inferlab's best trial, not the median the ceilings above "
             "use, against likwid's best run; what each can reach, one run each, no interval.", "",
             "| quantity | inferlab, best trial | likwid-bench, best run | inferlab / likwid |", "|---|---|---|---|"]
    for name, row in lk["ratios"].items():
        lines.append(f"| {name} | {_fmt(row['inferlab'])} | {_fmt(row['likwid'])} | {_fmt(row['ratio'], 2)} |")
    return lines


def _float64_ridge_sentence(r: dict) -> str:
    """The float64 ridge with the interval of its two ceilings, paired as the float32 ridge's is
    (the GEMM's p10 with the triad's p90, and vice versa)."""
    t = str(r["ridge"]["threads"])
    ridge = quotient(*(Interval(e["median"], e["p10"], e["p90"])
                       for e in (r["peak_GFLOPS"]["float64"][t], r["bandwidth_GBps"]["triad"][t])))
    return (f"With float64 GEMM as the roof the ridge is {r['ridge_points_flop_per_byte']['float64']:.2f} FLOP/B "
            f"(p10-p90 {ridge.p10:.2f}-{ridge.p90:.2f}).")


def _ridge_bound_sentence(r: dict) -> str:
    """Whether the ridge's bandwidth is DRAM's, and the 1-thread triad beside the sweep's DRAM plateau."""
    ridge = r["ridge"]
    triad1, sweep = r["bandwidth_GBps"]["triad"]["1"]["median"], ridge["sweep_dram_GBps"]
    cross = (f" At 1 thread, for comparison: the triad {triad1:.1f} GB/s, the sweep's DRAM plateau {sweep:.1f} GB/s "
             "(its kernel reads two arrays and writes one, as add does)." if sweep is not None
             else " The sweep shows no DRAM plateau to set it against.")
    if ridge["bound"] == "lower":
        return (f"**A lower bound**: the triad is an upper bound of DRAM bandwidth ({ridge['bound_reason']}), "
                "and a DRAM figure below it would only raise the ridge." + cross)
    return f"The triad's arrays are DRAM-sized by the sweep ({ridge['bound_reason']})." + cross


def _arrays_sentence(r: dict) -> str:
    """The STREAM arrays, the sizing rule that gave them, and whether their figures are DRAM's."""
    s, llc = r["stream"], r["llc"]
    size = (f"Arrays of {s['array_elems']:,} float64 ({fmt_size(s['array_bytes'])} each). The rule: "
            f"{s['llc_multiple']}x the last level ({fmt_size(s['llc_bytes'])}, from {llc['used_from']}), within the "
            f"{fmt_size(s['max_memory_bytes'])} memory budget for the {STREAM_ARRAYS} arrays (--max-memory).")
    if s["bound"] == "upper":
        return size + f" **Upper bounds of DRAM bandwidth**: {s['bound_reason']}."
    return size + f" DRAM bandwidth: {s['bound_reason']}."


def _levels_lines(r: dict) -> list[str]:
    """The plateaus and knees the sweep shows, set against sysfs's levels (or --llc's)."""
    sw, llc = r["sweep"], r["llc"]
    points, dram = sw["points"], sw["dram"]
    stop = (f"once its DRAM plateau spanned {r['config']['sweep_dram_octaves']:g} octaves" if sw["stopped"] == "dram"
            else f"at the memory budget ({fmt_size(sw['max_bytes'])}, --max-memory)")
    lines = ["### The levels this process reaches", "",
             "Read off the sweep itself (inferlab.cache_sweep), since sysfs says what the CPU has, not what this "
             f"process reaches: plateaus of points within {PLATEAU_TOLERANCE:g}x of their median, and the knees "
             f"(falls) between them. The sweep ran from {fmt_size(points[0]['working_set_bytes'])} to "
             f"{fmt_size(points[-1]['working_set_bytes'])} and stopped {stop}.", ""]
    if sw["knees"]:
        lines += ["| knee | last working set before the fall | first one after it | median GB/s before -> after | fall | "
                  "sysfs level within 2x |", "|---|---|---|---|---|---|"]
        for k, knee in enumerate(sw["knees"], 1):
            what = " (to DRAM)" if knee["dram"] else " (inside DRAM's range: load or TLB, no cache)" if knee["past_dram"] else ""
            lines.append(f"| {k}{what} | {fmt_size(knee['from_bytes'])} | "
                         f"{fmt_size(knee['to_bytes'])} | {knee['from_GBps']:.1f} -> {knee['to_GBps']:.1f} | "
                         f"{knee['drop']:.2f}x | {knee['sysfs'] or 'none'} |")
        lines.append("")
    for level in sw["sysfs_levels"]:
        given = f"{level['name']} {fmt_size(level['size_bytes'])} ({'pretended, --llc' if level['from'] == '--llc' else 'sysfs'})"
        knee = sw["knees"][level["knee"]] if level["knee"] is not None else None
        lines.append(f"- {given}: " + (f"the knee at {fmt_size(knee['from_bytes'])}-{fmt_size(knee['to_bytes'])}"
                                       if knee else "**no knee of the sweep within 2x of it**") + ".")
    if dram["reached"]:
        knee = dram["knee"]
        agree = "agrees with" if llc["assumed_agrees"] else "**disagrees with**"
        lines.append(f"- DRAM: from {fmt_size(knee['to_bytes'])} on ({dram['plateau']['median_GBps']:.1f} GB/s median), "
                     f"after a {knee['drop']:.1f}x fall between {fmt_size(knee['from_bytes'])} and "
                     f"{fmt_size(knee['to_bytes'])}: this process reaches less than {fmt_size(llc['sweep_bytes'])} of "
                     f"last-level cache, which {agree} the {fmt_size(llc['assumed_bytes'])} {llc['assumed_from']} gives.")
    else:
        lines.append(f"- DRAM: **not shown**: {dram['why']}. The STREAM arrays were sized from {llc['used_from']} "
                     f"({fmt_size(llc['used_bytes'])}).")
    return lines + [""]


def _ceiling_notes(r: dict) -> list[str]:
    lines = []
    if r["wide_ceilings"]:
        lines += [f"**Wide ceilings** (p10-p90 wider than {WIDE_SPREAD:.0%} of the median; labs that use "
                  "them say so): " + "; ".join(r["wide_ceilings"]) + ".", ""]
    if r["unordered_cache_roofs"]:
        lines += ["**Cache roofs out of order** on this run (the sweep could not separate the levels, "
                  "usually load from other processes): " + "; ".join(r["unordered_cache_roofs"]) + ".", ""]
    return lines


def _theory_lines(r: dict) -> list[str]:
    """The theoretical peak, what it assumes, and each measured GEMM against it at its own thread
    count (1 thread: 1 core), as verdicts: a GEMM above it shows the figure is an underestimate."""
    theory = r["theoretical_peak_GFLOPS"]
    lines = [f"Theoretical peak from the CPU flags: ISA {theory['isa']}, FMA {'yes' if theory['fma'] else 'no'}, "
             f"{theory['pipes_assumed']} vector pipes per core assumed, at most {theory['cores']} core(s), "
             f"{_fmt(theory['ghz'], 2)} GHz (from {theory['ghz_source'] or 'nowhere'}"
             + ("; without cpufreq (e.g. a VM) this is the clock /proc/cpuinfo reports now, usually the nominal "
                "one; the turbo clock a busy core may reach is unknown"
                if theory["ghz_source"] == "current_mhz" else "")
             + ")."]
    rows = [(dtype, tk, e, theoretical_at(theory, dtype, int(tk))) for dtype, per_t in r["peak_GFLOPS"].items()
            for tk, e in per_t.items()]
    if not any(at for *_, at in rows):
        return lines + ["", "Unknown: the SIMD width or the clock is not readable, so no GEMM is compared with it."]
    lines += ["", "| dtype | threads | FLOP/cycle/core | theoretical GFLOP/s (cores) | measured median GFLOP/s "
              "(p10-p90) | measured / theoretical |", "|---|---|---|---|---|---|"]
    for dtype, tk, e, at in rows:
        if at is not None:
            lines.append(f"| {dtype} | {tk} | {theory[dtype]['flop_per_cycle_per_core']} | {at[0]:.1f} ({at[1]}) | "
                         f"{e['median']:.1f} ({e['p10']:.1f}-{e['p90']:.1f}) | {e['median'] / at[0]:.2f} |")
    return lines + ["", "Each GEMM against the theoretical figure at its own thread count:", "",
                    *verdict_lines(theory_verdicts(r))]


def _quick_lines(r: dict) -> list[str]:
    """What --quick measured less than the full run, from the recorded config."""
    cfg, full = r["config"], RooflineConfig(threads=r["config"]["threads"])
    if not cfg["quick"]:
        return []
    return [f"**Quick run**: GEMM at n = {', '.join(map(str, cfg['gemm_sizes']))} only (full run: "
            f"{', '.join(map(str, full.gemm_sizes))}); the sweep takes {cfg['sweep_points_per_octave']} point(s) per "
            f"octave, {cfg['sweep_samples']} samples each (full run: {full.sweep_points_per_octave} per octave, "
            f"{full.sweep_samples} samples), so its knees are located to within an octave. The trials columns "
            "below give each ceiling's count.", ""]


def _trials_sentence(r: dict) -> str:
    """How many trials the ceilings used, read from the recorded counts, not the config."""
    counts = [e["trials"] for per_t in r["bandwidth_GBps"].values() for e in per_t.values()]
    counts += [e["time"]["n"] for per_t in r["peak_GFLOPS"].values() for e in per_t.values()]
    span = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
    return (f"STREAM and GEMM ceilings: {span} trials each after a discarded warm-up; each cache roof: a sweep "
            f"point of {r['config']['sweep_samples']} samples.")


def readme(results: dict, manifest: dict, folder: Path) -> str:
    r, ridge = results, results["ridge"]
    lines = [f"# {EXPERIMENT}: the roofline of this machine", "",
             f"Measured {manifest['date']} with `inferlab roofline --threads {r['config']['threads']}"
             + (" --quick" if r["config"]["quick"] else "")
             + "`. Every number says the thread count it used. GB = 1e9 bytes. **Statistic**: every "
             "ceiling is the **median** of its trials, with p10-p90 beside it (a lone fast or slow "
             "trial moves neither); the best trial is listed for reference only. " + _trials_sentence(r), "",
             *_quick_lines(r), "## Machine", "", *machine_lines(manifest), "",
             "## Ridge point", "",
             f"**{'>= ' if ridge['bound'] == 'lower' else ''}{r['ridge_point_flop_per_byte']:.2f} FLOP/byte** "
             f"(p10-p90 {ridge['p10']:.2f}-{ridge['p90']:.2f}) = "
             f"float32 GEMM median {ridge['peak_GFLOPS']:.1f} GFLOP/s / triad median "
             f"{ridge['bandwidth_GBps']:.1f} GB/s, both with {ridge['threads']} thread(s) "
             f"(`{ridge['peak_from']}` / `{ridge['bandwidth_from']}`). The interval pairs the GEMM's p10 "
             "with the triad's p90 and vice versa: the spread of this run's trials, not a bound on a "
             "rerun's ridge, which moves with the machine's load. "
             f"A float32 GEMV (2 FLOP per 4-byte weight, 0.5 FLOP/B) is bounded by "
             f"{min(ridge['peak_GFLOPS'], 0.5 * ridge['bandwidth_GBps']):.1f} GFLOP/s here. "
             + _float64_ridge_sentence(r), "", _ridge_bound_sentence(r),
             "", "Verdicts of this run. " + rule_paragraph(), "",
             *verdict_lines([v for v in r["verdicts"] if not v["id"].startswith("theoretical_")]), "",
             *_ceiling_notes(r),
             "![roofline](roofline.png)", "",
             "## DRAM bandwidth (STREAM)", "",
             _arrays_sentence(r) + " "
             f"The thread counts {', '.join(map(str, r['thread_counts']))} are measured interleaved, "
             f"{r['config']['trials']} rounds after a discarded warm-up, more (within a "
             f"{r['config'].get('budget_s', 0):g} s budget) while the thread ratio is undecided; each trial "
             f"aggregates >= {r['config']['min_sample_s'] * 1e3:.0f} ms.", "",
             "| kernel | B/elem | threads | median GB/s | p10-p90 | best (ref.) | trials | noisy |",
             "|---|---|---|---|---|---|---|---|"]
    for kernel in STREAM_KERNELS:
        for tk, e in r["bandwidth_GBps"][kernel].items():
            lines.append(f"| {kernel} | {e['bytes_per_elem']} | {tk} | {e['median']:.1f} | "
                         f"{e['p10']:.1f}-{e['p90']:.1f} | {e['best']:.1f} | {e['trials']} | "
                         f"{'yes' if e['noisy'] else 'no'} |")
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
              "hide the L1 plateau. Each level's roof is read off the sweep points between 2x the "
              "previous level's size and half its own (the last level: half the size the sweep shows; DRAM: "
              "its plateau in the sweep), as the Empirical Roofline "
              "Toolkit reads plateaus: the **second-highest median** among them, so that one fast point "
              "cannot lift a roof; a level with one point in its band takes that point, which the table "
              "marks.", "", "| level | size | roof GB/s | points in band | samples per point |", "|---|---|---|---|---|"]
    for level in r["sweep"]["levels"]:
        size = fmt_size(level["size_bytes"]) if level["size_bytes"] else "-"
        n = len(in_band(r["sweep"]["points"], level["band_bytes"]))
        lines.append(f"| {level['name']} | {size} | {_fmt(r['cache_roofs_GBps'][level['name']])} | "
                     f"{n}{' (one point: the roof rests on it alone)' if n == 1 else ''} | "
                     f"{r['config']['sweep_samples']} |")
    lines += ["", *_levels_lines(r), "![sweep](sweep.png)", "", "## Peak compute (GEMM, 2n^3 FLOP)", "",
              "The peak of a dtype is the GEMM size with the highest median; thread counts interleaved.", "",
              "| dtype | threads | n | median GFLOP/s | p10-p90 | best (ref.) | trials | median by n |",
              "|---|---|---|---|---|---|---|---|"]
    for dtype, per_t in r["peak_GFLOPS"].items():
        for tk, e in per_t.items():
            by_n = ", ".join(f"{n}: {g:.1f}" for n, g in e["by_n"].items())
            lines.append(f"| {dtype} | {tk} | {e['n']} | {e['median']:.1f} | {e['p10']:.1f}-{e['p90']:.1f} | "
                         f"{e['best']:.1f} | {e['time']['n']} | {by_n} |")
    lines += ["", *_theory_lines(r), "", "## Independent check: likwid-bench", "", *_likwid_lines(folder), "",
              "## Caveats", "",
              "- Results marked noisy have (p90-p10)/median above 10%: on a shared machine, rerun "
              "when nothing else is running.",
              "- Multi-threaded STREAM runs one Python thread per chunk (numpy releases the GIL in ufunc "
              "loops); multi-threaded GEMM uses the BLAS's own threads, set with threadpoolctl.", ""]
    return "\n".join(lines)


def render(results: dict, manifest: dict, folder: Path) -> dict[str, object]:
    return {"bench.py": bench_script(results["config"]), "roofline.png": roofline_figure(results),
            "sweep.png": sweep_figure(results), "README.md": readme(results, manifest, Path(folder))}
