"""Machine ceilings: STREAM bandwidth, a working-set sweep, GEMM peak, and the ridge point.

The roofline model (Williams, Waterman, Patterson 2009) bounds a kernel of arithmetic intensity
I (FLOP/byte) at min(peak GFLOP/s, bandwidth GB/s x I). This module measures both ceilings on
the machine it runs on:

- bandwidth: STREAM's copy, scale, add and triad (McCalpin), as numpy ufuncs into preallocated
  arrays, each array >= 4x the last-level cache so the data comes from DRAM; bytes counted as
  STREAM counts them (float64: 16 B/elem for copy and scale, 24 for add and triad);
- cache roofs: a working-set sweep from L1 to DRAM size, reading each level's plateau as the
  Empirical Roofline Toolkit does;
- compute: float32/float64 matmul GFLOP/s (2 n^3 FLOP) through numpy's BLAS, 1 thread and all;
  plus the theoretical peak from the CPU flags (SIMD width x FMA x pipes x cores x clock);
- ridge point = peak GFLOP/s / DRAM GB/s: below it a kernel is memory-bound.

GB = 1e9 bytes, GFLOP = 1e9 FLOP throughout.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from inferlab.errors import InferlabError
from inferlab.measure.machine import (blas_threads, cpu_flags, cpu_identity, cpu_mhz, data_caches,
                                      last_level_cache_bytes, physical_cores)
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import Stats, measure

EXPERIMENT = "01-roofline"
SCHEMA_VERSION = 1
STREAM_KERNELS = ("copy", "scale", "add", "triad")
# STREAM's byte counts, in arrays touched per element: copy c=a and scale b=s*c read one array
# and write one; add c=a+b and triad a=b+s*c read two and write one. Write-allocate traffic
# (the cache line read before it is written) is not counted, as in STREAM.
STREAM_ARRAYS_TOUCHED = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
STREAM_SCALAR = 3.0
# float64 elements per triad block: 3 x 1 MiB stay in cache between the two passes, and 128 blocks
# per 128 MiB array keep numpy's call overhead small (measured here: 1<<13: 18, 1<<17: 27 GB/s).
TRIAD_BLOCK = 1 << 17
# Used only when sysfs has no cache information: a generous LLC keeps the arrays DRAM-sized.
FALLBACK_LLC_BYTES = 64 * 1024**2
# Elements streamed per sweep call: enough that numpy's ~1 us call overhead is < 1% even in L1.
SWEEP_STREAM_ELEMS = 4_000_000
SWEEP_MIN_WS_BYTES = 4 * 1024


@dataclass(frozen=True)
class RooflineConfig:
    threads: int                      # the "all threads" count; 1 thread is always measured too
    quick: bool = False               # the reduced run (CI): same rules, fewer points
    seed: int = 0                     # GEMM operands
    trials: int = 10                  # STREAM trials kept; one more is run first and discarded
    llc_multiple: int = 4             # each STREAM array >= this x the last-level cache
    sweep_points_per_octave: int = 4
    sweep_max_llc_multiple: int = 8   # sweep up to this x LLC (the DRAM plateau needs >= 4x)
    sweep_samples: int = 7
    gemm_sizes: tuple[int, ...] = (512, 1024, 2048)  # the peak is the best of these
    gemm_samples: int = 10
    min_sample_s: float = 0.05        # the harness rule: >= 50 ms of work per sample

    @classmethod
    def for_run(cls, *, quick: bool, threads: int | None, seed: int = 0) -> "RooflineConfig":
        threads = threads or os.cpu_count() or 1
        if threads < 1:
            raise InferlabError(f"--threads must be >= 1, got {threads}")
        if quick:
            # Still >= 10 STREAM trials and a DRAM-sized sweep end: only the resolution drops.
            return cls(threads=threads, quick=True, seed=seed, sweep_points_per_octave=1, sweep_max_llc_multiple=4,
                       sweep_samples=3, gemm_sizes=(1024,), gemm_samples=5)
        return cls(threads=threads, seed=seed)

    @property
    def thread_counts(self) -> tuple[int, ...]:
        return tuple(sorted({1, self.threads}))


# --- STREAM ----------------------------------------------------------------------------------

def _stream_call(kernel: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Callable[[], None]:
    """One STREAM kernel on (n,) float64 slices, with no temporaries (every ufunc has out=)."""
    s = STREAM_SCALAR
    if kernel == "copy":
        return lambda: np.copyto(c, a)                  # c = a
    if kernel == "scale":
        return lambda: np.multiply(c, s, out=b)         # b = s * c
    if kernel == "add":
        return lambda: np.add(a, b, out=c)              # c = a + b
    if kernel == "triad":
        # a = b + s * c. numpy has no fused triad: it is two ufunc passes over a. Done block by
        # block, the second pass finds a's block still in cache, so DRAM sees STREAM's one pass
        # (read b and c, write a) instead of 40 B/element; the block keeps call overhead small.
        blocks = [(a[i:i + TRIAD_BLOCK], b[i:i + TRIAD_BLOCK], c[i:i + TRIAD_BLOCK])
                  for i in range(0, a.size, TRIAD_BLOCK)]

        def triad():
            for ab, bb, cb in blocks:
                np.multiply(cb, s, out=ab)
                np.add(ab, bb, out=ab)
        return triad
    raise ValueError(f"unknown STREAM kernel {kernel!r}")


def _chunks(n: int, parts: int) -> list[slice]:
    edges = np.linspace(0, n, parts + 1).astype(int)
    return [slice(int(lo), int(hi)) for lo, hi in zip(edges[:-1], edges[1:])]


def _parallel(calls: list[Callable[[], None]], pool: ThreadPoolExecutor | None) -> Callable[[], None]:
    """One callable running each chunk's kernel on its own thread (numpy releases the GIL)."""
    if pool is None:
        (call,) = calls
        return call
    return lambda: list(pool.map(lambda f: f(), calls))


def _bandwidth_entry(stats: Stats, nbytes: int) -> dict:
    # Fastest time -> best bandwidth; p90 time -> p10 bandwidth.
    return {"best": nbytes / stats.min / 1e9, "median": nbytes / stats.median / 1e9,
            "p10": nbytes / stats.p90 / 1e9, "p90": nbytes / stats.p10 / 1e9,
            "trials": stats.n, "noisy": stats.noisy, "time": stats.to_json("ms")}


def stream_array_elems(config: RooflineConfig) -> tuple[int, int, bool]:
    """(elements per array, LLC bytes used, LLC read from sysfs?)."""
    llc = last_level_cache_bytes()
    known = llc is not None
    llc = llc if known else FALLBACK_LLC_BYTES
    return math.ceil(config.llc_multiple * llc / 8), llc, known


def stream_bandwidth(config: RooflineConfig, threads: int, step: Callable[[str], None]) -> dict:
    """{kernel: {best, median, p10, p90 GB/s, trials, ...}} with `threads` Python threads."""
    n, _, _ = stream_array_elems(config)
    a = np.full(n, 1.0)  # (n,) float64, each >= 4x LLC
    b = np.full(n, 2.0)
    c = np.zeros(n)
    parts = _chunks(n, threads)
    out = {}
    with ThreadPoolExecutor(threads) if threads > 1 else nullcontext() as pool:
        for kernel in STREAM_KERNELS:
            step(f"STREAM {kernel}, {threads} thread(s)")
            call = _parallel([_stream_call(kernel, a[p], b[p], c[p]) for p in parts], pool)
            stats = measure(call, samples=config.trials, warmup=1, min_sample_s=config.min_sample_s)
            nbytes = STREAM_ARRAYS_TOUCHED[kernel] * n * a.itemsize
            out[kernel] = {**_bandwidth_entry(stats, nbytes),
                           "bytes_per_elem": STREAM_ARRAYS_TOUCHED[kernel] * a.itemsize}
    return out


# --- working-set sweep -----------------------------------------------------------------------

def sweep_sizes(config: RooflineConfig) -> list[int]:
    llc = stream_array_elems(config)[1]
    top = config.sweep_max_llc_multiple * llc
    octaves = math.log2(top / SWEEP_MIN_WS_BYTES)
    count = int(round(octaves * config.sweep_points_per_octave)) + 1
    sizes = np.geomspace(SWEEP_MIN_WS_BYTES, top, count)
    return sorted({int(s) // 128 * 128 for s in sizes})


def sweep_point(ws_bytes: int, config: RooflineConfig) -> dict:
    """Bandwidth of acc = x + x + ... over a working set of two (n,) float64 arrays.

    A zero-stride (R, n) view of x lets one np.add.reduce call stream the same n elements R
    times, so numpy's per-call overhead does not hide the L1 bandwidth of small working sets.
    Bytes are counted as STREAM's add: the first row reads x and writes acc (16 B/elem), each
    further row reads x and acc and writes acc (24 B/elem).
    """
    n = max(16, ws_bytes // 16)
    x = np.full(n, 1.0)                                        # (n,)
    acc = np.zeros(n)                                          # (n,)
    reps = max(1, SWEEP_STREAM_ELEMS // n)
    xr = as_strided(x, shape=(reps, n), strides=(0, x.itemsize))  # (R, n), no copy
    stats = measure(lambda: np.add.reduce(xr, axis=0, out=acc), samples=config.sweep_samples,
                    warmup=1, min_sample_s=config.min_sample_s)
    if acc[0] != reps:  # the view really was summed R times
        raise RuntimeError(f"sweep kernel summed {acc[0]} rows, expected {reps}")
    nbytes = (16 + 24 * (reps - 1)) * n
    return {"working_set_bytes": 16 * n, "GBps_best": nbytes / stats.min / 1e9,
            "GBps_median": nbytes / stats.median / 1e9, "noisy": stats.noisy, "reps": reps}


def cache_levels(llc_multiple: int) -> list[dict]:
    """Each data cache level's band of working sets, and DRAM's (>= llc_multiple x LLC).

    A level's plateau is read between 2x the previous level's size and half its own, away from
    the transitions, where the sweep is flat (the ERT reads plateaus the same way).
    """
    levels, prev = [], 0
    for cache in data_caches():
        lo, hi = 2 * prev, cache["size_bytes"] // 2
        levels.append({"name": f"L{cache['level']}", "size_bytes": cache["size_bytes"],
                       "band_bytes": [lo, hi]})
        prev = cache["size_bytes"]
    llc = prev or FALLBACK_LLC_BYTES
    levels.append({"name": "DRAM", "size_bytes": None, "band_bytes": [llc_multiple * llc, None]})
    return levels


def plateau_roofs(points: list[dict], levels: list[dict]) -> dict[str, float | None]:
    """Best bandwidth of the sweep points inside each level's band (None if no point falls in)."""
    roofs = {}
    for level in levels:
        lo, hi = level["band_bytes"]
        inside = [p["GBps_best"] for p in points
                  if p["working_set_bytes"] >= lo and (hi is None or p["working_set_bytes"] <= hi)]
        roofs[level["name"]] = max(inside) if inside else None
    return roofs


# --- compute peak ----------------------------------------------------------------------------

def gemm_gflops(dtype: str, n: int, threads: int, config: RooflineConfig) -> dict:
    rng = np.random.default_rng(config.seed)
    a = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    b = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    c = np.empty((n, n), dtype=dtype)              # (n, n)
    with blas_threads(threads):
        stats = measure(lambda: np.matmul(a, b, out=c), samples=config.gemm_samples, warmup=1,
                        min_sample_s=config.min_sample_s)
    flop = 2 * n**3
    return {"n": n, "best": flop / stats.min / 1e9, "median": flop / stats.median / 1e9,
            "p10": flop / stats.p90 / 1e9, "p90": flop / stats.p10 / 1e9, "noisy": stats.noisy,
            "time": stats.to_json("ms")}


def theoretical_peak(threads: int) -> dict:
    """FLOP/cycle/core from the CPU flags x cores x clock, per dtype; "unknown" where unreadable.

    Assumes two vector FMA (or add + mul) pipes per core, as on x86 cores since Haswell/Zen.
    AMD Zen 3/4 (family 25) run 512-bit instructions on 256-bit datapaths, so their effective
    width is 256 bits even with avx512f.
    """
    flags, ident = cpu_flags(), cpu_identity()
    if "avx512f" in flags and not (ident["vendor"] == "AuthenticAMD" and ident["family"] == 25):
        bits, isa = 512, "AVX-512"
    elif "avx512f" in flags:
        bits, isa = 256, "AVX-512 on 256-bit datapaths (Zen 4)"
    elif "avx2" in flags or "avx" in flags:
        bits, isa = 256, "AVX2" if "avx2" in flags else "AVX"
    elif "sse2" in flags:
        bits, isa = 128, "SSE2"
    else:
        bits, isa = None, "unknown"
    fma = "fma" in flags
    mhz = cpu_mhz()
    ghz_source = next(((mhz[k] / 1000, k) for k in ("max_mhz", "base_mhz", "current_mhz") if k in mhz),
                      (None, None))
    cores = min(threads, physical_cores())
    out = {"isa": isa, "vector_bits": bits, "fma": fma, "pipes_assumed": 2, "cores": cores,
           "ghz": ghz_source[0], "ghz_source": ghz_source[1]}
    for dtype, width in (("float32", 32), ("float64", 64)):
        if bits is None or ghz_source[0] is None:
            out[dtype] = "unknown"
            continue
        # fma: one fused multiply-add per lane per pipe (2 FLOP); else one add pipe + one mul pipe.
        per_cycle = (2 * 2 * bits // width) if fma else (2 * bits // width)
        out[dtype] = {"flop_per_cycle_per_core": per_cycle,
                      "GFLOPS": per_cycle * cores * ghz_source[0]}
    return out


# --- the whole run ---------------------------------------------------------------------------

def ceiling_steps(config: RooflineConfig) -> int:
    return (len(STREAM_KERNELS) + 2 * len(config.gemm_sizes)) * len(config.thread_counts)


def measure_ceilings(config: RooflineConfig, step: Callable[[str], None]) -> tuple[dict, dict]:
    """(bandwidth_GBps[kernel][threads], peak_GFLOPS[dtype][threads]) for 1 and config.threads."""
    bandwidth = {k: {} for k in STREAM_KERNELS}
    peak = {"float32": {}, "float64": {}}
    for t in config.thread_counts:
        for kernel, entry in stream_bandwidth(config, t, step).items():
            bandwidth[kernel][str(t)] = entry
        for dtype in peak:
            runs = []
            for size in config.gemm_sizes:
                step(f"GEMM {dtype} n={size}, {t} thread(s)")
                runs.append(gemm_gflops(dtype, size, t, config))
            best = max(runs, key=lambda r: r["best"])
            peak[dtype][str(t)] = {**best, "by_n": {str(r["n"]): r["best"] for r in runs}}
    return bandwidth, peak


def run_roofline(config: RooflineConfig) -> dict:
    """Measure everything; returns the results.json dict (see the module docstring)."""
    n, llc, llc_known = stream_array_elems(config)
    tkeys = [str(t) for t in config.thread_counts]
    sizes = sweep_sizes(config)
    with progress_bar(ceiling_steps(config) + len(sizes), "roofline") as step:
        bandwidth, peak = measure_ceilings(config, step)
        points = []
        for ws in sizes:
            step(f"sweep {ws / 1024:.0f} KiB")
            points.append(sweep_point(ws, config))
    levels = cache_levels(config.llc_multiple)
    top = tkeys[-1]
    # The ridge uses float32 (the engine's dtype) GEMM with all threads over the DRAM triad.
    ridge_peak = peak["float32"][top]["best"]
    ridge_bw = bandwidth["triad"][top]["best"]
    theory = theoretical_peak(config.threads)
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": EXPERIMENT,
        "config": asdict(config),
        "thread_counts": list(config.thread_counts),
        "stream": {"array_elems": n, "array_bytes": 8 * n, "dtype": "float64", "llc_bytes": llc,
                   "llc_from_sysfs": llc_known, "scalar": STREAM_SCALAR},
        "bandwidth_GBps": bandwidth,
        "peak_GFLOPS": peak,
        "theoretical_peak_GFLOPS": theory,
        "measured_over_theoretical": {
            d: (peak[d][top]["best"] / theory[d]["GFLOPS"]) if isinstance(theory[d], dict) else "unknown"
            for d in peak},
        "ridge_point_flop_per_byte": ridge_peak / ridge_bw,
        "ridge": {"peak_GFLOPS": ridge_peak, "bandwidth_GBps": ridge_bw, "threads": int(top),
                  "peak_from": f"peak_GFLOPS.float32.{top}.best",
                  "bandwidth_from": f"bandwidth_GBps.triad.{top}.best"},
        "ridge_points_flop_per_byte": {d: peak[d][top]["best"] / ridge_bw for d in peak},
        "sweep": {"kernel": "acc = x + x + ... (np.add.reduce over a zero-stride view), float64",
                  "bytes_per_elem": 24, "threads": 1, "points": points, "levels": levels},
        "cache_roofs_GBps": plateau_roofs(points, levels),
    }


# --- the roofline as other labs use it -------------------------------------------------------

@dataclass(frozen=True)
class Roofline:
    peak_GFLOPS: float                   # compute roof defining the ridge (dtype, threads below)
    bandwidth_GBps: float                # DRAM roof: STREAM triad, best of the trials
    ridge_point_flop_per_byte: float     # peak_GFLOPS / bandwidth_GBps
    cache_roofs_GBps: dict[str, float | None] = field(default_factory=dict)  # "L1".. "DRAM", 1 thread
    peaks_GFLOPS: dict[str, float] = field(default_factory=dict)             # per dtype, same threads
    dtype: str = "float32"
    threads: int = 1

    @classmethod
    def from_results(cls, results: dict) -> "Roofline":
        ridge = results["ridge"]
        t = str(ridge["threads"])
        return cls(peak_GFLOPS=ridge["peak_GFLOPS"], bandwidth_GBps=ridge["bandwidth_GBps"],
                   ridge_point_flop_per_byte=results["ridge_point_flop_per_byte"],
                   cache_roofs_GBps=dict(results["cache_roofs_GBps"]),
                   peaks_GFLOPS={d: v[t]["best"] for d, v in results["peak_GFLOPS"].items()},
                   dtype="float32", threads=ridge["threads"])

    def attainable_GFLOPS(self, intensity: float, *, memory: str = "DRAM") -> float:
        """min(peak, roof x intensity): the roofline's bound for a kernel of this intensity."""
        bw = self.bandwidth_GBps if memory == "DRAM" else self.cache_roofs_GBps[memory]
        return min(self.peak_GFLOPS, bw * intensity)


def load_roofline(directory) -> Roofline:
    """The Roofline of an earlier `inferlab roofline` run (its results.json)."""
    path = Path(directory) / "results.json"
    try:
        results = json.loads(path.read_text())
    except FileNotFoundError:
        raise InferlabError(f"{path} not found; run `inferlab roofline` first") from None
    except json.JSONDecodeError as exc:
        raise InferlabError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if results.get("experiment") != EXPERIMENT:
        raise InferlabError(f"{path}: /experiment is {results.get('experiment')!r}, expected {EXPERIMENT!r}")
    try:
        return Roofline.from_results(results)
    except (KeyError, TypeError) as exc:
        raise InferlabError(f"{path}: missing roofline key {exc}") from None


def measure_roofline(quick: bool, threads: int | None) -> Roofline:
    """Measure the roofline now (for labs that need it on the fly), without writing files."""
    return Roofline.from_results(run_roofline(RooflineConfig.for_run(quick=quick, threads=threads)))


def draw_roofline(ax, results: dict) -> None:
    """Log-log roofline on ax: DRAM roof, cache roofs, compute roofs, the ridge labelled.

    Other labs overlay their kernels as (intensity, GFLOP/s) points on the same axes.
    """
    roof = Roofline.from_results(results)
    intensity = np.geomspace(1 / 64, 256, 400)  # (P,) FLOP/byte
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    for name, bw in roof.cache_roofs_GBps.items():
        if bw is None or name == "DRAM":
            continue
        ax.plot(intensity, np.minimum(bw * intensity, roof.peak_GFLOPS), "--", lw=1,
                label=f"{name} roof {bw:.0f} GB/s (1 thread)")
    ax.plot(intensity, np.minimum(roof.bandwidth_GBps * intensity, roof.peak_GFLOPS), "k-", lw=2.5,
            label=f"DRAM roof {roof.bandwidth_GBps:.1f} GB/s (triad, {roof.threads} thr)")
    for dtype, gflops in roof.peaks_GFLOPS.items():
        ax.axhline(gflops, color="C3" if dtype == "float32" else "C4", lw=1.5,
                   label=f"{dtype} GEMM {gflops:.0f} GFLOP/s ({roof.threads} thr)")
    theory = results["theoretical_peak_GFLOPS"]
    for dtype in ("float32", "float64"):
        if isinstance(theory.get(dtype), dict):
            ax.axhline(theory[dtype]["GFLOPS"], color="C3" if dtype == "float32" else "C4", lw=1,
                       ls=":", label=f"{dtype} theoretical {theory[dtype]['GFLOPS']:.0f} GFLOP/s")
    ridge = roof.ridge_point_flop_per_byte
    ax.plot([ridge], [roof.peak_GFLOPS], "ko")
    ax.annotate(f"ridge {ridge:.2f} FLOP/B", (ridge, roof.peak_GFLOPS), xytext=(8, -18),
                textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
