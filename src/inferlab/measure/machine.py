"""What machine a number was measured on: CPU, caches, governor, BLAS library and its threads.

Everything here reads; nothing changes the machine. In particular OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are recorded as found (they change which BLAS kernel runs, and can slow a
current numpy) and never set.
"""

from __future__ import annotations

import os
import platform
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import inferlab

_CPU_SYSFS = Path("/sys/devices/system/cpu")
_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS")
# The flags that decide SIMD width and FMA throughput (the theoretical peak), not the whole list.
_SIMD_FLAGS = ("sse2", "avx", "fma", "avx2", "avx512f", "avx512_bf16", "avx512_vnni",
               "amx_tile", "amx_bf16", "asimd", "sve")


@contextmanager
def blas_threads(n: int | None):
    """Limit BLAS/OpenMP pools to n threads inside the block; None leaves them as they are."""
    if n is None:
        yield
        return
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    with threadpool_limits(limits=n):
        yield


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpuinfo() -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU (empty off Linux)."""
    text = _read(Path("/proc/cpuinfo")) or ""
    cpus = []
    for block in text.split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            cpus.append(entry)
    return cpus


def cpu_flags() -> set[str]:
    cpus = _cpuinfo()
    return set((cpus[0].get("flags") or cpus[0].get("Features") or "").split()) if cpus else set()


def physical_cores() -> int:
    """Physical cores (SMT siblings counted once); falls back to logical CPUs."""
    pairs = {(c.get("physical id"), c.get("core id")) for c in _cpuinfo() if "core id" in c}
    return len(pairs) or os.cpu_count() or 1


def cpu_identity() -> dict:
    """vendor, family, model as /proc/cpuinfo numbers them (None when absent)."""
    c = (_cpuinfo() or [{}])[0]
    as_int = lambda v: int(v) if v and v.isdigit() else None  # noqa: E731
    return {"vendor": c.get("vendor_id"), "family": as_int(c.get("cpu family")),
            "model": as_int(c.get("model"))}


def cpu_model() -> str:
    for c in _cpuinfo():
        for key in ("model name", "Model", "Processor"):
            if c.get(key):
                return c[key]
    return platform.processor() or "unknown"


def cpu_mhz() -> dict:
    """Clock frequencies in MHz as far as readable: cpufreq max/base, else /proc/cpuinfo now."""
    freq = {}
    for name, key in (("cpuinfo_max_freq", "max_mhz"), ("base_frequency", "base_mhz")):
        raw = _read(_CPU_SYSFS / "cpu0" / "cpufreq" / name)
        if raw and raw.isdigit():
            freq[key] = int(raw) / 1000  # sysfs gives kHz
    mhz = [float(c["cpu MHz"]) for c in _cpuinfo() if c.get("cpu MHz")]
    if mhz:
        freq["current_mhz"] = max(mhz)
    return freq


def cpu_governor() -> tuple[str, str | None]:
    """(governor, note): the cpufreq governor of cpu0, or ("unknown", why) when unreadable."""
    path = _CPU_SYSFS / "cpu0" / "cpufreq" / "scaling_governor"
    gov = _read(path)
    if gov:
        return gov, None
    return "unknown", f"{path} is not readable (no cpufreq driver exposed, e.g. inside a VM)"


def _size_bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def caches() -> list[dict]:
    """cpu0's caches from sysfs: level, type, size_bytes, shared_cpus (empty when unreadable)."""
    out = []
    for d in sorted((_CPU_SYSFS / "cpu0" / "cache").glob("index*")):
        level, kind, size = (_read(d / f) for f in ("level", "type", "size"))
        if not (level and kind and size):
            continue
        shared = _read(d / "shared_cpu_list") or ""
        out.append({"level": int(level), "type": kind, "size_bytes": _size_bytes(size),
                    "shared_cpu_list": shared})
    return out


def data_caches() -> list[dict]:
    """Data/unified caches only, ordered by level: the ones a streaming kernel goes through."""
    return sorted((c for c in caches() if c["type"] in ("Data", "Unified")), key=lambda c: c["level"])


def last_level_cache_bytes() -> int | None:
    dc = data_caches()
    return dc[-1]["size_bytes"] if dc else None


def blas_info() -> list[dict]:
    """One entry per BLAS/OpenMP library loaded, as threadpoolctl reports it."""
    return [{"user_api": lib.get("user_api"), "internal_api": lib.get("internal_api"),
             "version": lib.get("version"), "kernel": lib.get("architecture"),
             "threading_layer": lib.get("threading_layer"), "num_threads": lib.get("num_threads"),
             "filepath": lib.get("filepath")}
            for lib in threadpool_info()]


def versions() -> dict:
    blas = [{k: lib[k] for k in ("internal_api", "version", "kernel", "threading_layer")}
            for lib in blas_info() if lib["user_api"] == "blas"]
    return {"python": platform.python_version(), "numpy": np.__version__,
            "inferlab": inferlab.__version__, "blas": blas}


def machine_info(threads: int | None) -> dict:
    """The hardware block of a manifest. threads: the BLAS thread count the run used (None: as found)."""
    governor, note = cpu_governor()
    blas = blas_info()
    if threads is None:
        found = [lib["num_threads"] for lib in blas if lib["user_api"] == "blas"]
        threads_used = found[0] if found else 1
    else:
        threads_used = threads
    info = {
        "cpu_model": cpu_model(),
        "cores": physical_cores(),
        "logical_cpus": os.cpu_count() or 1,
        "threads_used": threads_used,
        "cpu_governor_at_run": governor,
        "cpu_mhz": cpu_mhz(),
        "caches": caches(),
        "cpu_flags": sorted(cpu_flags() & set(_SIMD_FLAGS)),
        "blas": blas,
        "env": {k: os.environ.get(k) for k in _BLAS_ENV},
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python_implementation": sys.implementation.name,
    }
    if note:
        info["governor_note"] = note
    return info
