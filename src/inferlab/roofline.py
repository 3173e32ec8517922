"""Machine ceilings: STREAM bandwidth, a working-set sweep, GEMM peak, and the ridge point.

The roofline model (Williams, Waterman, Patterson 2009) bounds a kernel of arithmetic intensity
I (FLOP/byte) at min(peak GFLOP/s, bandwidth GB/s x I). This module measures both ceilings on
the machine it runs on:

- cache levels: a working-set sweep from L1 up to DRAM (inferlab.cache_sweep reads its plateaus
  and knees: the last level this process really reaches, which sysfs may overstate on a VM
  slice), each level's roof read off its plateau as the Empirical Roofline Toolkit does; the
  sweep stops once its DRAM plateau spans sweep_dram_octaves, or at the memory budget;
- bandwidth: STREAM's copy, scale, add and triad (McCalpin), as numpy ufuncs into preallocated
  arrays, each array >= 4x the last level the sweep shows, so the data comes from DRAM; bytes
  counted as STREAM counts them (float64: 16 B/elem for copy and scale, 24 for add and triad).
  Where the memory budget (max_memory_bytes: the three arrays, and the sweep's largest working
  set) cannot hold that, or the sweep shows no DRAM, the bandwidth is an upper bound of DRAM's
  and the ridge a lower bound, and results.json and the README say so;
- compute: float32/float64 matmul GFLOP/s (2 n^3 FLOP) through numpy's BLAS, 1 thread and all;
  plus the theoretical peak from the CPU flags (SIMD width x FMA x pipes x cores x clock);
- ridge point = peak GFLOP/s / DRAM GB/s (the triad on arrays the sweep shows as DRAM-sized):
  below it a kernel is memory-bound.

Every ceiling is the MEDIAN of its trials with p10-p90 beside it, never the single best trial: a
lone outlier moves neither. The 1-thread and N-thread runs of a kernel are interleaved, so their
ratio is paired (the `verdicts` of results.json). `Roofline` is the one type every lab uses: the
ceilings at one thread count, with their intervals.

GB = 1e9 bytes, GFLOP = 1e9 FLOP throughout.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from inferlab import cache_sweep
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json
from inferlab.measure.machine import blas_threads, cpu_flags, cpu_identity, cpu_mhz, data_caches, physical_cores
from inferlab.measure.progress import progress_bar
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S, Budget, Stats, measure, measure_interleaved
from inferlab.measure.verdicts import Claim, Interval, Looks, bounds, decide, paired, paired_ratio, quotient

EXPERIMENT = "01-roofline"
SCHEMA_VERSION = 1
STREAM_KERNELS = ("copy", "scale", "add", "triad")
# The thread comparisons the verdicts state (roofline_verdicts): only these take extra rounds.
VERDICT_KERNEL, VERDICT_DTYPE = "triad", "float32"
# STREAM's byte counts, in arrays touched per element: copy c=a and scale b=s*c read one array
# and write one; add c=a+b and triad a=b+s*c read two and write one. Write-allocate traffic
# (the cache line read before it is written) is not counted, as in STREAM.
STREAM_ARRAYS_TOUCHED = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
STREAM_SCALAR = 3.0
# float64 elements per triad block: 3 x 1 MiB stay in cache between the two passes, and 128 blocks
# per 128 MiB array keep numpy's call overhead small (measured here: 1<<13: 18, 1<<17: 27 GB/s).
TRIAD_BLOCK = 1 << 17
# Used only when sysfs has no cache information and no --llc is given.
FALLBACK_LLC_BYTES = 64 * 1024**2
# Elements streamed per sweep call: enough that numpy's ~1 us call overhead is < 1% even in L1.
SWEEP_STREAM_ELEMS = 4_000_000
SWEEP_MIN_WS_BYTES = 4 * 1024
STREAM_ARRAYS = 3        # a, b, c: what the memory budget holds at once
# The memory budget (--max-memory): the three STREAM arrays together, and the sweep's largest
# working set (its two arrays), at most this. 768 MiB keeps `inferlab run all` under 1 GiB of
# peak RSS (the interpreter, numpy and matplotlib add ~120 MiB) even where the sweep shows no
# DRAM and both run to the budget; where it does (this host: DRAM from ~38 MiB), the arrays are
# 4x that and the budget is not reached. The GEMM's operands are not in it (at most 3 x 2048^2
# float64 = 96 MiB).
DEFAULT_MAX_MEMORY_BYTES = 768 * 2**20
# Below this the sweep cannot pass an L2 of a few MiB by the octaves that show a level, and the
# STREAM arrays would sit in cache.
MIN_MAX_MEMORY_BYTES = 32 * 2**20
MIN_LLC_BYTES = 256 * 1024   # --llc below this is no last-level cache of a machine that runs LLMs
# A ceiling whose (p90 - p10) / median exceeds this is flagged, and labs that use it say so.
WIDE_SPREAD = 0.25
GEMV_INTENSITY = 0.5   # float32 GEMV: 2 FLOP per 4-byte weight read


@dataclass(frozen=True)
class RooflineConfig:
    threads: int                      # the "all threads" count; 1 thread is always measured too
    quick: bool = False               # the reduced run (CI): same rules, fewer points
    seed: int = 0                     # GEMM operands
    trials: int = 10                  # STREAM trials kept; one more is run first and discarded
    llc_multiple: int = 4             # each STREAM array >= this x the last level the sweep shows
    sweep_points_per_octave: int = 4
    sweep_dram_octaves: float = 2.0   # the sweep stops once its DRAM plateau spans this many octaves
    sweep_samples: int = 7
    gemm_sizes: tuple[int, ...] = (512, 1024, 2048)  # the peak is the size with the highest median
    gemm_samples: int = 10
    min_sample_s: float = 0.05        # the harness rule: >= 50 ms of work per sample
    budget_s: float = DEFAULT_BUDGET_S  # extra interleaved rounds while a thread comparison is unresolved
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES  # the STREAM arrays together; the sweep's largest set
    llc_bytes: int | None = None      # pretend sysfs's last level is this size (--llc); None: sysfs's

    @classmethod
    def for_run(cls, *, quick: bool, threads: int | None, seed: int = 0, llc_bytes: int | None = None,
                max_memory_bytes: int | None = None) -> "RooflineConfig":
        threads = threads or os.cpu_count() or 1
        if threads < 1:
            raise InferlabError(f"--threads must be >= 1, got {threads}")
        check_memory_flags(llc_bytes, max_memory_bytes)
        memory = {"llc_bytes": llc_bytes, "max_memory_bytes": max_memory_bytes or DEFAULT_MAX_MEMORY_BYTES}
        if quick:
            # Still >= 10 STREAM and GEMM trials (one GEMM size keeps them cheap) and a sweep that
            # reaches DRAM: the resolution drops, and the sweep's samples per point (the README says so).
            return cls(threads=threads, quick=True, seed=seed, sweep_points_per_octave=1, sweep_samples=3,
                       gemm_sizes=(1024,), budget_s=QUICK_BUDGET_S, **memory)
        return cls(threads=threads, seed=seed, **memory)

    @property
    def thread_counts(self) -> tuple[int, ...]:
        return tuple(sorted({1, self.threads}))


def check_memory_flags(llc_bytes: int | None, max_memory_bytes: int | None) -> None:
    """--llc and --max-memory below the sizes that leave the sweep meaningful: one line naming the flag."""
    if llc_bytes is not None and llc_bytes < MIN_LLC_BYTES:
        raise InferlabError(f"--llc {llc_bytes:,} bytes is below the {MIN_LLC_BYTES // 1024} KiB a last-level "
                            "cache has at least")
    if max_memory_bytes is not None and max_memory_bytes < MIN_MAX_MEMORY_BYTES:
        raise InferlabError(f"--max-memory {max_memory_bytes:,} bytes is below {MIN_MAX_MEMORY_BYTES // 2**20} MiB: "
                            "the sweep could not pass an L2 by the octaves that show a level")


def sysfs_levels(config: RooflineConfig) -> list[dict]:
    """The data caches as sysfs gives them (cpu0, per instance: not lscpu's package total), each
    {"name", "size_bytes", "from"}; with config.llc_bytes (--llc), the last level pretends that
    size (a level "LLC" where sysfs lists none)."""
    levels = [{"name": f"L{c['level']}", "size_bytes": c["size_bytes"], "from": "sysfs"} for c in data_caches()]
    if config.llc_bytes is None:
        return levels
    last = {"name": levels[-1]["name"] if levels else "LLC", "size_bytes": config.llc_bytes, "from": "--llc"}
    return levels[:-1] + [last]


def assumed_llc(levels: list[dict]) -> tuple[int, str]:
    """(bytes, where from) of the last level before the sweep: sysfs's or --llc's, else the fallback."""
    return (levels[-1]["size_bytes"], levels[-1]["from"]) if levels else (FALLBACK_LLC_BYTES, "fallback (sysfs unreadable)")


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
    # The ceiling is the median trial (robust to a lone fast or slow outlier); p90 time -> p10
    # bandwidth. The single best trial is kept for reference only.
    return {"median": nbytes / stats.median / 1e9, "p10": nbytes / stats.p90 / 1e9,
            "p90": nbytes / stats.p10 / 1e9, "best": nbytes / stats.min / 1e9, "spread": stats.spread,
            "trials": stats.n, "noisy": stats.noisy, "time": stats.to_json("ms")}


def stream_sizing(llc_bytes: int, config: RooflineConfig, *, dram_shown: bool) -> dict:
    """Each STREAM array: llc_multiple x the last level (float64 elements, rounded up), unless the
    three arrays would exceed config.max_memory_bytes: then the budget's third (rounded down).

    The bandwidth is DRAM's ("bound": "none") only where the sweep showed DRAM (dram_shown; the
    level is then the sweep's) and the arrays are the full multiple; otherwise part of the
    arrays may sit in cache, which only speeds them: the figure is an upper bound ("upper").
    """
    want = math.ceil(config.llc_multiple * llc_bytes / 8)
    cap = config.max_memory_bytes // (STREAM_ARRAYS * 8)
    n = min(want, cap)
    return {"array_elems": n, "array_bytes": 8 * n, "want_array_bytes": 8 * want, "array_capped": want > cap,
            "bound": "none" if dram_shown and n == want else "upper"}


def bound_reason(sizing: dict, llc: dict, config: RooflineConfig) -> str:
    """Why the STREAM figures are or are not DRAM's, one sentence."""
    arrays = f"each array {cache_sweep.fmt_size(sizing['array_bytes'])}"
    multiple = f"{config.llc_multiple}x the {cache_sweep.fmt_size(llc['used_bytes'])}"
    if sizing["bound"] == "none":
        return f"{arrays}, {multiple} from which the sweep runs at DRAM speed"
    if sizing["array_capped"]:
        return (f"{arrays}: {STREAM_ARRAYS} arrays of {multiple} ({llc['used_from']}) would exceed the "
                f"{cache_sweep.fmt_size(config.max_memory_bytes)} memory budget (--max-memory), so part may sit in cache")
    return f"{arrays}, {multiple} ({llc['used_from']}), but the sweep showed no DRAM, so part may sit in cache"


def _share(budget: Budget | None, claimants: int) -> Budget | None:
    """An equal part of what is left of the budget, for the first of `claimants` measurements that
    still want rounds: one slow, undecided comparison cannot spend what the later ones need, and
    what a decided one leaves goes to those after it (it is charged to the parent)."""
    return None if budget is None else Budget(budget.left() / claimants, parent=budget)


def _unresolved(pair: tuple[str, str]) -> Looks:
    """more() for measure_interleaved: rounds until the two thread counts' paired time ratio is
    decided (verdicts.Looks)."""
    return Looks([Claim(*pair)])


def stream_bandwidth(config: RooflineConfig, n: int, step: Callable[[str], None],
                     budget: Budget | None = None) -> tuple[dict, dict]:
    """({kernel: {str(threads): entry}}, {kernel: paired N/1-thread bandwidth ratio}), on arrays
    of n float64 elements.

    The thread counts of one kernel are measured interleaved (1 thread, N threads, 1, N, ...) on
    the same arrays, so their ratio is paired round by round. Only the triad's ratio is a verdict,
    so only the triad takes extra rounds from the budget.
    """
    a = np.full(n, 1.0)  # (n,) float64, each >= 4x the last level (or the budget's third)
    b = np.full(n, 2.0)
    c = np.zeros(n)
    out, ratios = {}, {}
    top = config.thread_counts[-1]
    with ThreadPoolExecutor(top) if top > 1 else nullcontext() as pool:
        for kernel in STREAM_KERNELS:
            step(f"STREAM {kernel}, {' and '.join(map(str, config.thread_counts))} thread(s)")
            calls = {str(t): _parallel([_stream_call(kernel, a[p], b[p], c[p]) for p in _chunks(n, t)],
                                       pool if t > 1 else None)
                     for t in config.thread_counts}
            claim = top > 1 and kernel == VERDICT_KERNEL
            stats = measure_interleaved(calls, samples=config.trials, warmup=1, min_sample_s=config.min_sample_s,
                                        more=_unresolved(("1", str(top))) if claim else None,
                                        budget=budget if claim else None)
            nbytes = STREAM_ARRAYS_TOUCHED[kernel] * n * a.itemsize
            out[kernel] = {t: {**_bandwidth_entry(s, nbytes), "bytes_per_elem": STREAM_ARRAYS_TOUCHED[kernel] * a.itemsize}
                           for t, s in stats.items()}
            if top > 1:   # time(1) / time(N) = bandwidth(N) / bandwidth(1)
                ratios[kernel] = paired_ratio(stats["1"], stats[str(top)]).to_json()
    return out, ratios


# --- working-set sweep -----------------------------------------------------------------------

def sweep_sizes(config: RooflineConfig) -> list[int]:
    """The working sets the sweep may visit: 4 KiB x 2^(k / points_per_octave), up to the memory
    budget (the grid holds every power of two, whatever the budget)."""
    ppo = config.sweep_points_per_octave
    count = math.floor(math.log2(config.max_memory_bytes / SWEEP_MIN_WS_BYTES) * ppo + 1e-9) + 1
    sizes = SWEEP_MIN_WS_BYTES * 2.0 ** (np.arange(count) / ppo)   # (count,)
    # to the nearest 128 bytes, not down: a power of two computed a hair low (2 MiB as
    # 2097151.99...) and rounded down put it 128 bytes below a band's edge, out of the band
    return sorted({int(round(s / 128)) * 128 for s in sizes})


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


def run_sweep(config: RooflineConfig, step: Callable[[str], None], private_bytes: int) -> tuple[list[dict], str]:
    """(points, why it stopped): the sweep up the working sets of sweep_sizes, stopping once
    cache_sweep shows a DRAM plateau spanning config.sweep_dram_octaves ("dram"), else at the
    memory budget ("budget"). private_bytes: sysfs's largest level below the last (find_dram)."""
    sizes, points = sweep_sizes(config), []
    for k, ws in enumerate(sizes):
        step(f"sweep {ws / 1024:.0f} KiB")
        points.append(sweep_point(ws, config))
        dram = cache_sweep.find_dram(points, private_bytes)
        if dram["reached"] and math.log2(ws / dram["plateau"]["first_bytes"]) >= config.sweep_dram_octaves:
            for _ in sizes[k + 1:]:   # the sizes not needed: the bar completes
                step("sweep: DRAM plateau reached")
            return points, "dram"
    return points, "budget"


def cache_levels(levels: list[dict], llc_band_bytes: int, dram: dict) -> list[dict]:
    """Each data cache level's band of working sets, and DRAM's (its plateau in the sweep; None
    where the sweep shows none). A level's plateau is read between 2x the previous level's size
    and half its own, away from the transitions, where the sweep is flat (the ERT reads plateaus
    the same way); the last level's own size is llc_band_bytes, the one the sweep shows."""
    out, prev = [], 0
    for k, level in enumerate(levels):
        size = llc_band_bytes if k == len(levels) - 1 else level["size_bytes"]
        out.append({"name": level["name"], "size_bytes": level["size_bytes"], "from": level["from"],
                    "band_bytes": [2 * prev, size // 2]})
        prev = level["size_bytes"]
    out.append({"name": "DRAM", "size_bytes": None,
                "band_bytes": [dram["plateau"]["first_bytes"], None] if dram["reached"] else None})
    return out


def llc_reading(levels: list[dict], points: list[dict], dram: dict) -> dict:
    """The last level used to size STREAM: the sweep's (the first working set of its DRAM
    plateau) where it shows DRAM, else the larger of sysfs's (or --llc's) and the sweep's largest
    working set (no DRAM up to there). assumed_agrees: the assumed size explains the knee into
    DRAM (cache_sweep.matches); None where the sweep shows no DRAM."""
    assumed, assumed_from = assumed_llc(levels)
    out = {"assumed_bytes": assumed, "assumed_from": assumed_from,
           "sweep_bytes": dram["llc_bytes"] if dram["reached"] else None}
    if dram["reached"]:
        return {**out, "used_bytes": dram["llc_bytes"], "used_from": "the sweep's DRAM plateau start",
                "assumed_agrees": cache_sweep.matches(assumed, dram["knee"])}
    top = points[-1]["working_set_bytes"]
    used, used_from = (assumed, assumed_from) if assumed >= top else (top, "the sweep's largest working set")
    return {**out, "used_bytes": used, "used_from": used_from, "assumed_agrees": None}


def sweep_reading(points: list[dict], levels: list[dict], dram: dict) -> dict:
    """The sweep's plateaus and knees, each knee with the sysfs level its span explains (or
    None), and each sysfs level with the knee that explains it (or None)."""
    found = cache_sweep.plateaus(points)
    knees = cache_sweep.knees(points, found)
    for knee in knees:
        knee["sysfs"] = next((lv["name"] for lv in levels if cache_sweep.matches(lv["size_bytes"], knee)), None)
        knee["dram"] = dram["reached"] and knee["to_bytes"] == dram["plateau"]["first_bytes"]
        # a fall inside DRAM's range: load from other processes, or TLB reach; no cache level
        knee["past_dram"] = dram["reached"] and knee["from_bytes"] >= dram["plateau"]["first_bytes"]
    sysfs = [{**lv, "knee": next((k for k, knee in enumerate(knees) if cache_sweep.matches(lv["size_bytes"], knee)),
                                 None)} for lv in levels]
    return {"plateaus": found, "knees": knees, "dram": dram, "sysfs_levels": sysfs}


def plateau_roofs(points: list[dict], levels: list[dict]) -> dict[str, float | None]:
    """Per level, the highest median bandwidth that two sweep points inside its band reach (the
    second highest; a band of one point: that point; None if no point falls in). Medians, not
    best samples, and two points, not one: a lone fast sample cannot lift a roof, nor can a lone
    fast point (a committed L2 roof of 151 GB/s stood on one point, its neighbours 130-140)."""
    roofs = {}
    for level in levels:
        inside = sorted(p["GBps_median"] for p in in_band(points, level["band_bytes"]))
        roofs[level["name"]] = inside[-2] if len(inside) >= 2 else (inside[0] if inside else None)
    return roofs


def in_band(points: list[dict], band) -> list[dict]:
    """The sweep points whose working set lies in a level's band [lo, hi] (hi None: no upper end;
    band None: none, DRAM where the sweep shows no DRAM)."""
    if band is None:
        return []
    lo, hi = band
    return [p for p in points if p["working_set_bytes"] >= lo and (hi is None or p["working_set_bytes"] <= hi)]


def unordered_roofs(roofs: dict[str, float | None]) -> list[str]:
    """Cache levels whose roof is above the level before it ("L2 above L1"): the sweep could not
    separate them on this run, and the README says so."""
    known = [(name, bw) for name, bw in roofs.items() if bw is not None]
    return [f"{b} ({bw_b:.0f} GB/s) above {a} ({bw_a:.0f} GB/s)"
            for (a, bw_a), (b, bw_b) in zip(known, known[1:]) if bw_b > bw_a]


# --- compute peak ----------------------------------------------------------------------------

def gemm_gflops(dtype: str, n: int, config: RooflineConfig, budget: Budget | None = None) -> tuple[dict, dict | None]:
    """({str(threads): entry}, paired N/1-thread GFLOP/s ratio or None), thread counts interleaved."""
    rng = np.random.default_rng(config.seed)
    a = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    b = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    c = np.empty((n, n), dtype=dtype)              # (n, n)
    counts = [str(t) for t in config.thread_counts]
    stats = measure_interleaved({t: (lambda: np.matmul(a, b, out=c)) for t in counts},
                                around={t: partial(blas_threads, int(t)) for t in counts},
                                samples=config.gemm_samples, warmup=1, min_sample_s=config.min_sample_s,
                                more=_unresolved((counts[0], counts[-1])) if len(counts) > 1 and budget is not None else None,
                                budget=budget)
    flop = 2 * n**3
    entries = {t: {"n": n, "median": flop / s.median / 1e9, "p10": flop / s.p90 / 1e9, "p90": flop / s.p10 / 1e9,
                   "best": flop / s.min / 1e9, "spread": s.spread, "noisy": s.noisy, "time": s.to_json("ms")}
               for t, s in stats.items()}
    ratio = paired_ratio(stats["1"], stats[counts[-1]]).to_json() if len(counts) > 1 else None
    return entries, ratio


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


def theoretical_at(theory: dict, dtype: str, threads: int) -> tuple[float, int] | None:
    """(GFLOP/s, cores) of the theoretical peak at `threads` threads (one core each, up to the
    cores it was computed for); None where the peak is unknown."""
    th = theory.get(dtype)
    if not isinstance(th, dict):
        return None
    cores = min(threads, theory["cores"])
    return th["flop_per_cycle_per_core"] * theory["ghz"] * cores, cores


def _theory_assumptions(theory: dict, dtype: str) -> str:
    """What the theoretical figure assumes, named so a reader can see which one a measurement broke."""
    clock = f"{theory['ghz']:.2f} GHz from {theory['ghz_source']}"
    if theory["ghz_source"] == "current_mhz":
        # without cpufreq (a VM) the only clock readable is the one /proc/cpuinfo reports now,
        # usually the nominal clock: a core running at turbo exceeds it
        clock += " (the clock /proc/cpuinfo reports now; turbo unknown)"
    return (f"{theory[dtype]['flop_per_cycle_per_core']} FLOP/cycle/core ({theory['pipes_assumed']} x "
            f"{theory['vector_bits']}-bit {'FMA' if theory['fma'] else 'add + mul'} pipes assumed) at {clock}")


def theoretical_verdicts(results: dict) -> list[dict]:
    """Each measured GEMM against the theoretical peak at its own thread count. A GEMM whose
    whole p10-p90 lies above it shows the figure is no peak but an underestimate; the statement
    names the assumptions and the clock the measured median implies at the assumed FLOP/cycle."""
    theory, out = results["theoretical_peak_GFLOPS"], []
    for dtype, per_t in results["peak_GFLOPS"].items():
        for t, e in per_t.items():
            at = theoretical_at(theory, dtype, int(t))
            if at is None:
                continue
            gflops, cores = at
            share = Interval(e["median"], e["p10"], e["p90"]).scaled(1 / gflops)
            implied_ghz = e["median"] / (theory[dtype]["flop_per_cycle_per_core"] * cores)
            what = f"{dtype} GEMM with {t} thread(s)"
            out.append(decide(
                f"theoretical_{dtype}_{t}", share, 1.0,
                quantity=f"the measured {what} over the theoretical {gflops:.1f} GFLOP/s of {cores} core(s)",
                above=(f"The {what} beats the theoretical figure, so that figure is an underestimate, not a peak: "
                       f"it assumes {_theory_assumptions(theory, dtype)}; at that FLOP/cycle the measured median "
                       f"needs {implied_ghz:.2f} GHz"),
                below=f"The {what} stays under the theoretical peak",
                question=f"whether the {what} reaches the theoretical peak", fmt=".3g").to_json())
    return out


# --- the whole run ---------------------------------------------------------------------------

def ceiling_steps(config: RooflineConfig) -> int:
    return len(STREAM_KERNELS) + 2 * len(config.gemm_sizes)


def measure_ceilings(config: RooflineConfig, array_elems: int, step: Callable[[str], None],
                     budget: Budget | None = None) -> tuple[dict, dict, dict]:
    """(bandwidth_GBps[kernel][threads], peak_GFLOPS[dtype][threads], paired thread ratios) for 1
    and config.threads, STREAM on arrays of array_elems float64 (stream_sizing). A dtype's peak is
    the GEMM size with the highest median. With a budget, an unresolved thread comparison that a
    verdict states (the triad's, the float32 GEMM's at each size: the peak's size is known only
    after all) takes more interleaved rounds, each from an equal share of what is left."""
    claimants = 1 + len(config.gemm_sizes)
    bandwidth, ratios = stream_bandwidth(config, array_elems, step, _share(budget, claimants))
    peak = {}
    gemm_ratios = {}
    for dtype in ("float32", "float64"):
        runs = []
        for i, size in enumerate(config.gemm_sizes):
            step(f"GEMM {dtype} n={size}, {' and '.join(map(str, config.thread_counts))} thread(s)")
            share = _share(budget, claimants - 1 - i) if dtype == VERDICT_DTYPE else None
            runs.append(gemm_gflops(dtype, size, config, share))
        peak[dtype] = {}
        for t in (str(t) for t in config.thread_counts):
            best_n = max(range(len(runs)), key=lambda i: runs[i][0][t]["median"])
            peak[dtype][t] = {**runs[best_n][0][t], "by_n": {str(r[t]["n"]): r[t]["median"] for r, _ in runs}}
            if t == str(config.thread_counts[-1]) and runs[best_n][1] is not None:
                # both thread counts' times at the ratio's n: the verdict's unpaired interval sets
                # them against each other (each count's peak may be another n)
                gemm_ratios[dtype] = {**runs[best_n][1], "n": runs[best_n][0][t]["n"],
                                      "time": {c: runs[best_n][0][c]["time"] for c in peak[dtype]}}
    return bandwidth, peak, {"stream": ratios, "gemm": gemm_ratios}


def _interval(entry: dict) -> Interval:
    return Interval(entry["median"], entry["p10"], entry["p90"])


def wide_ceilings(bandwidth: dict, peak: dict) -> list[str]:
    """The ceilings whose own p10-p90 spread exceeds WIDE_SPREAD of the median: labs that use
    them say so."""
    flags = []
    for what, table, unit in (("triad", bandwidth["triad"], "GB/s"), ("float32 GEMM", peak["float32"], "GFLOP/s")):
        for t, e in table.items():
            if e["spread"] > WIDE_SPREAD:
                flags.append(f"{what}, {t} thread(s): median {e['median']:.3g} {unit}, p10-p90 "
                             f"{e['p10']:.3g}-{e['p90']:.3g} (spread {e['spread']:.0%})")
    return flags


def _gemm_estimate(ratio: dict, peak: dict, top: int):
    """The 1-thread over top-thread GEMM time at the paired ratio's n, round by round
    (verdicts.paired). Runs from before those were stored beside the ratio hold each count's peak
    alone, which may be at another n: there the ratio's p10-p90 are all there is (bounds)."""
    if "time" in ratio:
        return paired(ratio["time"]["1"], ratio["time"][str(top)])
    one, many = peak["1"], peak[str(top)]
    if one["n"] == many["n"] == ratio["n"]:
        return paired(one["time"], many["time"])
    return bounds(Interval(ratio["value"], ratio["p10"], ratio["p90"]))


def roofline_verdicts(results: dict) -> list[dict]:
    """The roofline's claims: N threads beat 1 (triad, float32 GEMM), a float32 GEMV is memory-bound,
    each GEMM against the theoretical peak."""
    out = []
    top = results["thread_counts"][-1]
    if top > 1:
        tr = results["thread_ratios"]
        times = results["bandwidth_GBps"]["triad"]
        ratio = paired(times["1"]["time"], times[str(top)]["time"])
        out.append(decide("triad_threads", ratio, 1.0,
                          quantity=f"triad bandwidth with {top} threads over 1 thread ({ratio.basis})",
                          above=f"STREAM triad moves more bytes per second with {top} threads than with 1",
                          below=f"STREAM triad moves fewer bytes per second with {top} threads than with 1",
                          question=f"whether {top} threads change STREAM triad bandwidth").to_json())
        g = tr["gemm"]["float32"]
        ratio = _gemm_estimate(g, results["peak_GFLOPS"]["float32"], top)
        out.append(decide("gemm_float32_threads", ratio, 1.0,
                          quantity=f"float32 GEMM (n={g['n']}) GFLOP/s with {top} threads over 1 thread ({ratio.basis})",
                          above=f"float32 GEMM runs faster with {top} threads than with 1",
                          below=f"float32 GEMM runs slower with {top} threads than with 1",
                          question=f"whether {top} threads change float32 GEMM speed").to_json())
    ridge = results["ridge"]
    out.append(decide("gemv_memory_bound", Interval(ridge["value"], ridge["p10"], ridge["p90"]), GEMV_INTENSITY,
                      quantity=f"the ridge point ({ridge['threads']} threads, FLOP/byte)",
                      above=f"A float32 GEMV ({GEMV_INTENSITY} FLOP/byte) is memory-bound on this machine",
                      below=f"A float32 GEMV ({GEMV_INTENSITY} FLOP/byte) is compute-bound on this machine",
                      question="whether a float32 GEMV is memory- or compute-bound here").to_json())
    return out + theoretical_verdicts(results)


def run_roofline(config: RooflineConfig) -> dict:
    """Measure everything; returns the results.json dict (see the module docstring). The sweep
    runs first: the STREAM arrays are sized from the last level it shows."""
    levels = sysfs_levels(config)
    private = levels[-2]["size_bytes"] if len(levels) >= 2 else 0
    budget = Budget(config.budget_s)
    with progress_bar(ceiling_steps(config) + len(sweep_sizes(config)), "roofline") as step:
        points, stopped = run_sweep(config, step, private)
        dram = cache_sweep.find_dram(points, private)
        llc = llc_reading(levels, points, dram)
        sizing = stream_sizing(llc["used_bytes"], config, dram_shown=dram["reached"])
        bandwidth, peak, ratios = measure_ceilings(config, sizing["array_elems"], step, budget)
    cache = cache_levels(levels, llc["used_bytes"], dram)
    top = str(config.thread_counts[-1])
    # The ridge uses float32 (the engine's dtype) GEMM with all threads over the triad on arrays
    # sized from the sweep's DRAM (a lower bound where they could not be: stream.bound), both
    # medians; its interval pairs the low peak with the high bandwidth and vice versa.
    ridge = quotient(_interval(peak["float32"][top]), _interval(bandwidth["triad"][top]))
    theory = theoretical_peak(config.threads)
    roofs = plateau_roofs(points, cache)
    bound = {"bound": sizing["bound"], "bound_reason": bound_reason(sizing, llc, config)}
    results = {
        "schema_version": SCHEMA_VERSION,
        "experiment": EXPERIMENT,
        "config": asdict(config),
        "statistic": "median of trials (p10-p90 beside it); best trial kept for reference",
        "thread_counts": list(config.thread_counts),
        "llc": llc,
        "stream": {**sizing, "dtype": "float64", "llc_bytes": llc["used_bytes"], "llc_multiple": config.llc_multiple,
                   "max_memory_bytes": config.max_memory_bytes, "scalar": STREAM_SCALAR, **bound},
        "bandwidth_GBps": bandwidth,
        "peak_GFLOPS": peak,
        "thread_ratios": ratios,
        "theoretical_peak_GFLOPS": theory,
        "measured_over_theoretical": {
            d: (peak[d][top]["median"] / theory[d]["GFLOPS"]) if isinstance(theory[d], dict) else "unknown"
            for d in peak},
        "ridge_point_flop_per_byte": ridge.value,
        "ridge": {"peak_GFLOPS": peak["float32"][top]["median"], "bandwidth_GBps": bandwidth["triad"][top]["median"],
                  "threads": int(top), **ridge.to_json(), "spread": ridge.spread,
                  "peak_from": f"peak_GFLOPS.float32.{top}.median",
                  "bandwidth_from": f"bandwidth_GBps.triad.{top}.median",
                  "bound": "lower" if sizing["bound"] == "upper" else "none", "bound_reason": bound["bound_reason"],
                  "sweep_dram_GBps": roofs["DRAM"]},
        "ridge_points_flop_per_byte": {d: peak[d][top]["median"] / bandwidth["triad"][top]["median"] for d in peak},
        "wide_ceilings": wide_ceilings(bandwidth, peak),
        "budget": {"seconds": config.budget_s, "left_s": budget.left()},
        "sweep": {"kernel": "acc = x + x + ... (np.add.reduce over a zero-stride view), float64",
                  "bytes_per_elem": 24, "threads": 1, "points": points, "levels": cache, "stopped": stopped,
                  "max_bytes": config.max_memory_bytes, **sweep_reading(points, levels, dram)},
        "cache_roofs_GBps": roofs,
        "unordered_cache_roofs": unordered_roofs(roofs),
    }
    results["verdicts"] = roofline_verdicts(results)
    return results


# --- the roofline as other labs use it -------------------------------------------------------

@dataclass(frozen=True)
class Roofline:
    """The ceilings at ONE thread count: every lab places its kernels under this type."""

    threads: int
    peak: Interval                       # float32 GEMM GFLOP/s, median (p10-p90) at `threads`
    bandwidth: Interval                  # DRAM roof: STREAM triad GB/s, median (p10-p90)
    cache_roofs_GBps: dict[str, float | None] = field(default_factory=dict)  # "L1".. only when threads == 1
    peaks_GFLOPS: dict[str, float] = field(default_factory=dict)             # per dtype, same threads
    wide: tuple[str, ...] = ()           # ceilings flagged for a wide spread (wide_ceilings)
    source: str | None = None            # the manifest it came from; None: measured now
    bound: str = "none"                  # "upper": the bandwidth may be partly cache (stream.bound),
                                         # so the ridge is a lower bound

    @property
    def peak_GFLOPS(self) -> float:
        return self.peak.value

    @property
    def bandwidth_GBps(self) -> float:
        return self.bandwidth.value

    @property
    def ridge(self) -> Interval:
        """peak / bandwidth in FLOP/byte, with its conservative p10-p90."""
        return quotient(self.peak, self.bandwidth)

    @property
    def ridge_point_flop_per_byte(self) -> float:
        return self.ridge.value

    @classmethod
    def from_results(cls, results: dict, threads: int | None = None, *, source: str | None = None) -> "Roofline":
        """The ceilings of a roofline results dict at `threads` (None or not measured: the ridge's)."""
        t = str(threads if threads is not None else results["ridge"]["threads"])
        if t not in results["peak_GFLOPS"]["float32"] or t not in results["bandwidth_GBps"]["triad"]:
            t = str(results["ridge"]["threads"])
        wide = tuple(w for w in results.get("wide_ceilings", []) if f", {t} thread(s)" in w)
        return cls(threads=int(t), peak=_interval(results["peak_GFLOPS"]["float32"][t]),
                   bandwidth=_interval(results["bandwidth_GBps"]["triad"][t]),
                   cache_roofs_GBps=dict(results["cache_roofs_GBps"]) if t == "1" else {},
                   peaks_GFLOPS={d: v[t]["median"] for d, v in results["peak_GFLOPS"].items()},
                   wide=wide, source=source, bound=results.get("stream", {}).get("bound", "none"))

    def attainable_GFLOPS(self, intensity: float, *, memory: str = "DRAM") -> float:
        """min(peak, roof x intensity): the roofline's bound for a kernel of this intensity."""
        bw = self.bandwidth_GBps if memory == "DRAM" else self.cache_roofs_GBps[memory]
        return min(self.peak_GFLOPS, bw * intensity)

    def attainable_interval(self, intensity: float) -> Interval:
        """The DRAM-roofline bound at this intensity with the ceilings' own p10-p90."""
        return Interval(*(min(pk, bw * intensity) for pk, bw in
                          ((self.peak.value, self.bandwidth.value), (self.peak.p10, self.bandwidth.p10),
                           (self.peak.p90, self.bandwidth.p90))))

    def bound_by(self, intensity: float) -> str:
        """'memory' left of the ridge point (medians), 'compute' at or right of it."""
        return "memory" if intensity < self.ridge_point_flop_per_byte else "compute"

    def to_json(self) -> dict:
        return {"source": self.source or "measured now (no roofline experiment given or found)",
                "threads": self.threads, "peak_GFLOPS": self.peak.to_json(), "bandwidth_GBps": self.bandwidth.to_json(),
                "ridge_flop_per_byte": self.ridge.to_json(), "cache_roofs_GBps": self.cache_roofs_GBps,
                "peaks_GFLOPS": self.peaks_GFLOPS, "wide_ceilings": list(self.wide), "bandwidth_bound": self.bound}

    @classmethod
    def from_json(cls, d: dict) -> "Roofline":
        """The inverse of to_json (what a lab stored in its own results.json)."""
        measured_now = d["source"].startswith("measured now")
        return cls(threads=d["threads"], peak=Interval(**d["peak_GFLOPS"]), bandwidth=Interval(**d["bandwidth_GBps"]),
                   cache_roofs_GBps=dict(d["cache_roofs_GBps"]), peaks_GFLOPS=dict(d["peaks_GFLOPS"]),
                   wide=tuple(d["wide_ceilings"]), source=None if measured_now else d["source"],
                   bound=d.get("bandwidth_bound", "none"))


def read_roofline_results(directory) -> dict:
    """results.json of an earlier `inferlab roofline` run; InferlabError (one line) otherwise."""
    path = Path(directory) / "results.json"
    # (read_json: one line for bad UTF-8, NaN, deep nesting or huge numbers, as for every file read)
    results = read_json(path, missing="not found; run `inferlab roofline` first")
    if not isinstance(results, dict) or results.get("experiment") != EXPERIMENT:
        got = results.get("experiment") if isinstance(results, dict) else None
        raise InferlabError(f"{path}: /experiment is {got!r}, expected {EXPERIMENT!r}")
    return results


def load_roofline(directory, threads: int | None = None) -> Roofline:
    """The Roofline of an earlier `inferlab roofline` run, at `threads` (None: the ridge's)."""
    results = read_roofline_results(directory)
    try:
        return Roofline.from_results(results, threads, source=str(Path(directory) / "manifest.json"))
    except (KeyError, TypeError) as exc:
        raise InferlabError(f"{Path(directory) / 'results.json'}: missing roofline key {exc} "
                            "(written by an older inferlab? rerun `inferlab roofline`)") from None


def resolve_roofline(directory, *, threads: int) -> Roofline:
    """The roofline a lab places its kernels under: the one in `directory` (a run of the same
    `run all`, or --roofline DIR); measured now with the quick configuration only when none exists."""
    if directory is not None:
        return load_roofline(directory, threads)
    results = run_roofline(RooflineConfig.for_run(quick=True, threads=max(threads, 1)))
    return Roofline.from_results(results, threads)


ROOF_STYLES = {"L1": ("tab:cyan", (0, (1, 1))), "L2": ("tab:olive", (0, (5, 2))),
               "L3": ("tab:brown", (0, (6, 2, 1, 2)))}


def draw_roofline(ax, roof: Roofline, *, theory: dict | None = None, beaten: frozenset[str] = frozenset(),
                  span=(1 / 64, 256)) -> None:
    """Log-log roofline of ONE thread count on ax: DRAM roof (p10-p90 band shaded), cache roofs
    (1 thread only), compute roofs. `beaten`: the dtypes whose theoretical line this panel's GEMM
    beats (theoretical_verdicts), labelled as underestimates. Labs overlay their kernels as
    (intensity, GFLOP/s) points."""
    intensity = np.geomspace(span[0], span[1], 400)  # (P,) FLOP/byte
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    t = roof.threads
    for name, bw in roof.cache_roofs_GBps.items():
        if bw is None or name == "DRAM":
            continue
        color, dash = ROOF_STYLES.get(name, ("grey", "--"))
        ax.plot(intensity, np.minimum(bw * intensity, roof.peak_GFLOPS), color=color, ls=dash, lw=1.6,
                label=f"{name} roof {bw:.0f} GB/s (sweep median, {t} thread)")
    bw = roof.bandwidth
    ax.fill_between(intensity, np.minimum(bw.p10 * intensity, roof.peak.p10),
                    np.minimum(bw.p90 * intensity, roof.peak.p90), color="k", alpha=0.12, lw=0,
                    label="p10-p90 of the DRAM and float32 roofs")
    upper = ", an upper bound: arrays partly cached" if roof.bound == "upper" else ""
    ax.plot(intensity, np.minimum(bw.value * intensity, roof.peak_GFLOPS), "k-", lw=2.5,
            label=f"DRAM roof {bw.value:.1f} GB/s (triad median, {t} thr{upper})")
    for dtype, gflops in roof.peaks_GFLOPS.items():
        ax.axhline(gflops, color="C3" if dtype == "float32" else "C4", lw=1.5,
                   label=f"{dtype} GEMM {gflops:.3g} GFLOP/s (median, {t} thr)")
    for dtype in ("float32", "float64"):
        at = theoretical_at(theory or {}, dtype, t)   # the theoretical roof at this panel's thread count
        if at is not None:
            gflops, cores = at
            beats = ": the GEMM beats it, an underestimate" if dtype in beaten else ""
            ax.axhline(gflops, color="C3" if dtype == "float32" else "C4", lw=1, ls=":",
                       label=f"{dtype} theoretical {gflops:.0f} GFLOP/s ({cores} core(s) at {theory['ghz']:.2f} "
                             f"GHz){beats}")
    ridge = roof.ridge_point_flop_per_byte
    # named in the legend: a label beside the point was crossed by the op lines or the markers near it
    ax.plot([ridge], [roof.peak_GFLOPS], "ko",
            label=f"ridge point {'>= ' if roof.bound == 'upper' else ''}{ridge:.2f} FLOP/B")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    # below the axes: at the lower right the DRAM roof ran under it
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13))
