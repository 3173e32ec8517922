"""Independent check of `inferlab roofline` against likwid-bench's hand-written assembly kernels.

In one go on this machine, for 1 thread and for --threads threads: likwid-bench's STREAM triad,
copy and peakflops (float64 and float32) kernels for the CPU's ISA, and inferlab's STREAM and
GEMM ceilings (inferlab.roofline.measure_ceilings, the same code `inferlab roofline` runs).
Writes an experiment folder (default experiments/01-roofline-likwid/): results.json with the
ratios inferlab / likwid, manifest.json and README.md. The 01-roofline README quotes it.

    python benchmarks/likwid_compare.py [--out DIR] [--threads N] [--quick] [--force] [--json]

Needs likwid-bench (Debian/Ubuntu: `apt-get install likwid`). likwid-bench itself needs no
performance counters: it times its kernels with the TSC and pins its threads.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from inferlab.cli.common import add_lab_arguments, parse_out_args, print_json
from inferlab.errors import InferlabError
from inferlab.measure import ExperimentWriter, build_manifest
from inferlab.measure.machine import cpu_flags, last_level_cache_bytes
from inferlab.measure.progress import progress_bar
from inferlab.roofline import (FALLBACK_LLC_BYTES, RooflineConfig, ceiling_steps,
                               measure_ceilings, stream_sizing)

EXPERIMENT = "01-roofline-likwid"
TARGET = 0.20      # the target: triad and copy within 20% of likwid
# Which inferlab figure each likwid kernel is compared with. copy_nt is likwid's copy with
# non-temporal stores: glibc's memcpy (behind np.copyto) uses them for large copies, so it is
# the like-for-like partner of our copy; likwid's plain copy pays write-allocate traffic.
OURS = {"triad": ("bandwidth", "triad"), "copy": ("bandwidth", "copy"), "copy_nt": ("bandwidth", "copy"),
        "float64": ("peak", "float64"), "float32": ("peak", "float32")}
L1_WS_KB = 16      # peakflops working set per thread: in L1, so the loop is compute-bound


def likwid_kernels(flags: set[str]) -> dict[str, str]:
    """likwid-bench kernel names for the widest ISA the CPU has."""
    if "avx512f" in flags:
        return {"triad": "stream_avx512", "copy": "copy_avx512", "copy_nt": "copy_mem_avx512",
                "float64": "peakflops_avx512_fma", "float32": "peakflops_sp_avx512_fma"}
    if "avx2" in flags and "fma" in flags:
        return {"triad": "stream_avx_fma", "copy": "copy_avx", "copy_nt": "copy_mem_avx",
                "float64": "peakflops_avx_fma", "float32": "peakflops_sp_avx_fma"}
    if "avx" in flags:
        return {"triad": "stream_avx", "copy": "copy_avx", "copy_nt": "copy_mem_avx",
                "float64": "peakflops_avx", "float32": "peakflops_sp_avx"}
    return {"triad": "stream", "copy": "copy", "copy_nt": "copy_mem", "float64": "peakflops",
            "float32": "peakflops_sp"}


def run_likwid(kernel: str, total_kb: int, threads: int) -> dict:
    """One likwid-bench run; MB/s and MFLOP/s as it reports them (M = 1e6)."""
    cmd = ["likwid-bench", "-t", kernel, "-W", f"N:{total_kb}kB:{threads}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    found = {key: re.findall(rf"^{key}:\s+([0-9.eE+-]+)", text, re.M)
             for key in ("MByte/s", "MFlops/s", "Time", "Iterations")}
    if proc.returncode != 0 or not found["MByte/s"]:
        why = next((ln for ln in text.splitlines() if "error" in ln.lower()), text.strip()[-200:])
        raise InferlabError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {why}")
    return {"command": " ".join(cmd), "MByte_per_s": float(found["MByte/s"][-1]),
            "MFlops_per_s": float(found["MFlops/s"][-1]), "time_s": float(found["Time"][-1]),
            "iterations": int(float(found["Iterations"][-1]))}


def likwid_side(kernels: dict[str, str], thread_counts, repeats: int, llc: int, step) -> dict:
    """Best of `repeats` likwid runs per kernel and thread count (ours is best of trials too)."""
    # Each array >= 4x LLC as in ours; likwid's -W size is the total over the kernel's arrays.
    array_kb = -(-4 * llc // 1024)
    sizes = {"triad": 3 * array_kb, "copy": 2 * array_kb, "copy_nt": 2 * array_kb}
    out = {}
    for quantity, kernel in kernels.items():
        out[quantity] = {}
        for t in thread_counts:
            step(f"likwid {kernel}, {t} thread(s)")
            total = sizes.get(quantity, L1_WS_KB * t)
            runs = [run_likwid(kernel, total, t) for _ in range(repeats)]
            rate = "MFlops_per_s" if quantity.startswith("float") else "MByte_per_s"
            out[quantity][str(t)] = {"best": max(r[rate] for r in runs) / 1e3, "runs": runs,
                                     "unit": "GFLOP/s" if rate == "MFlops_per_s" else "GB/s"}
    return out


def merge_runs(first: dict, second: dict) -> dict:
    """likwid runs taken before and after ours, pooled: best of all, so drift favours no side."""
    out = {}
    for quantity, per_t in first.items():
        out[quantity] = {}
        for t, entry in per_t.items():
            runs = entry["runs"] + second[quantity][t]["runs"]
            out[quantity][t] = {**entry, "runs": runs, "best": max(entry["best"], second[quantity][t]["best"])}
    return out


def ratios(ours: dict, likwid: dict) -> dict:
    rows = {}
    for quantity in likwid:
        side, key = OURS[quantity]
        for t, lk in likwid[quantity].items():
            mine = ours[side][key][t]["best"]
            name = {"peak": f"{quantity} peak GFLOP/s (GEMM vs {likwid_kernel_label(quantity)})",
                    "bandwidth": f"{key} GB/s vs likwid {likwid_kernel_label(quantity)}"}[side]
            row = {"quantity": quantity, "threads": int(t), "inferlab": mine, "likwid": lk["best"],
                   "ratio": mine / lk["best"]}
            if side == "bandwidth":
                row["within_target"] = abs(row["ratio"] - 1) <= TARGET
            rows[f"{name}, {t} thread(s)"] = row
    return rows


def likwid_kernel_label(quantity: str) -> str:
    return {"triad": "stream", "copy": "copy", "copy_nt": "copy with NT stores",
            "float64": "peakflops", "float32": "peakflops_sp"}[quantity]


def readme(results: dict) -> str:
    lines = [f"# {EXPERIMENT}: inferlab's roofline against likwid-bench", "",
             f"Run {results['date']} by `python benchmarks/likwid_compare.py --threads {results['config']['threads']}"
             + (" --quick" if results["config"]["quick"] else "") + "`, likwid-bench "
             + results["likwid_version"] + ". Best of the runs on each side (inferlab: best of >= 10 trials; "
             f"likwid: best of {results['likwid_repeats']} runs, half before inferlab's and half after). GB = 1e9 bytes; both sides count STREAM's bytes "
             "(triad 24 B/element, copy 16).", "",
             "| quantity | inferlab | likwid-bench | inferlab / likwid | within 20% |", "|---|---|---|---|---|"]
    for name, row in results["ratios"].items():
        verdict = {True: "yes", False: "no"}.get(row.get("within_target"), "-")
        lines.append(f"| {name} | {row['inferlab']:.1f} | {row['likwid']:.1f} | {row['ratio']:.2f} | {verdict} |")
    lines += ["", "likwid kernels: " + ", ".join(f"{q} = `{k}`" for q, k in results["likwid_kernels"].items()) + ".",
              "", "How to read it:",
              "- likwid's stream kernel is one fused pass (A = B*c + C); numpy's triad is two ufunc passes "
              "(multiply into a, then add into a), run block by block so the second pass stays in cache; what "
              "remains is numpy's per-block call overhead and the extra cache traffic.",
              "- likwid's plain copy uses ordinary stores, which first read each destination line "
              "(write-allocate: 24 B/element moved for 16 counted); glibc's memcpy behind np.copyto uses "
              "non-temporal stores for large copies, so the like-for-like partner of our copy is likwid's "
              "copy with NT stores (`copy_mem_*`); both rows are given, and on a quiet machine our copy "
              "should land between the two.",
              "- peakflops is a register-resident FMA loop on an L1-sized array: the practical compute "
              "ceiling. The GEMM ratio is the fraction of it a tuned BLAS reaches on real matrices.",
              "- likwid pins its threads to hardware threads 0..N-1; inferlab's STREAM threads are not pinned.",
              "- On a shared or busy machine both sides are noisy; the raw runs are in results.json.", ""]
    return "\n".join(lines)


def compare(config: RooflineConfig, repeats: int) -> dict:
    if shutil.which("likwid-bench") is None:
        raise InferlabError("likwid-bench not found on PATH; install it (Debian/Ubuntu: apt-get install likwid)")
    kernels = likwid_kernels(cpu_flags())
    llc = last_level_cache_bytes() or FALLBACK_LLC_BYTES
    steps = ceiling_steps(config) + 2 * len(kernels) * len(config.thread_counts)
    with progress_bar(steps, "likwid vs inferlab") as step:
        before = likwid_side(kernels, config.thread_counts, -(-repeats // 2), llc, step)
        bandwidth, peak, _ = measure_ceilings(config, stream_sizing(llc, config, dram_shown=False)["array_elems"], step)
        after = likwid_side(kernels, config.thread_counts, repeats // 2, llc, step)
    likwid = merge_runs(before, after)
    version = subprocess.run(["likwid-bench", "-h"], capture_output=True, text=True).stdout
    match = re.search(r"Version\s+([0-9.]+)", version)
    return {"schema_version": 1, "experiment": EXPERIMENT,
            "config": {"threads": config.threads, "quick": config.quick, "thread_counts": list(config.thread_counts)},
            "threads": list(config.thread_counts), "likwid_version": match.group(1) if match else "unknown",
            "likwid_kernels": kernels, "likwid_repeats": repeats, "target_within": TARGET,
            "likwid": likwid, "inferlab": {"bandwidth_GBps": {k: bandwidth[k] for k in ("triad", "copy")},
                                           "peak_GFLOPS": peak},
            "ratios": ratios({"bandwidth": bandwidth, "peak": peak}, likwid)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=None)
    args = parse_out_args(p, argv)
    try:
        writer = ExperimentWriter(args.out, force=args.force)  # fail fast, before measuring
        config = RooflineConfig.for_run(quick=args.quick, threads=args.threads)
        results = compare(config, repeats=2 if args.quick else 4)
        manifest = build_manifest(experiment=EXPERIMENT, seed=config.seed, config=results["config"],
                                  depends_on=None, threads=config.threads,
                                  results_summary={k: v["ratio"] for k, v in results["ratios"].items()})
        results["date"] = manifest["date"]
        writer.add_json("results.json", results)
        writer.add_json("manifest.json", manifest)
        writer.add_text("README.md", readme(results))
        writer.commit()
    except InferlabError as exc:
        print(f"likwid_compare: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        for name, row in results["ratios"].items():
            print(f"{name:55s} inferlab {row['inferlab']:8.1f}  likwid {row['likwid']:8.1f}  ratio {row['ratio']:.2f}")
        print(f"wrote {Path(args.out) / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
