"""What machine a number was measured on: CPU, caches, governor, BLAS library and its threads.

Everything here reads; nothing changes the machine. In particular OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are recorded as found (they change which BLAS kernel runs, and can slow a
current numpy) and never set.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import inferlab
from inferlab import engine

_CPU_SYSFS = Path("/sys/devices/system/cpu")
_PACKAGE = Path(inferlab.__file__).resolve().parent  # where the running code lives (provenance)
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
            "inferlab": inferlab.__version__, "blas": blas, "mask_engine": engine.record()}


def machine_info(threads: int | None) -> dict:
    """The hardware block of a manifest. threads: the BLAS thread count the run used (None: as found).
    The BLAS libraries are read inside that thread limit, so their num_threads is the one the run had."""
    governor, note = cpu_governor()
    with blas_threads(threads):
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


# --- what a run cost, and how to reproduce it ---------------------------------------------------

_STATUS = Path("/proc/self/status")


def reset_peak_rss() -> bool:
    """Restart the kernel's peak-RSS counter (VmHWM) of this process, so a lab's own peak can be
    read after it; False where /proc/self/clear_refs is unavailable (then the peak is the process's)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """VmHWM of this process (bytes), else getrusage's ru_maxrss; None where neither exists."""
    for line in (_read(_STATUS) or "").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # KiB on Linux


class RunCost:
    """Wall time and peak RSS since creation (a lab's run: ExperimentWriter starts one)."""

    def __init__(self):
        self.scope = "since the lab started" if reset_peak_rss() else "whole process (clear_refs unavailable)"
        self._t0 = time.perf_counter()

    def to_json(self) -> dict:
        return {"wall_s": time.perf_counter() - self._t0, "peak_rss_bytes": peak_rss_bytes(),
                "peak_rss_scope": self.scope}


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(_PACKAGE), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def built_from() -> tuple[str | None, bool | None]:
    """(commit, dirty) that the build wrote into an installed copy (setup.py), or (None, None)."""
    try:
        info = json.loads((_PACKAGE / "_build.json").read_text(encoding="utf-8"))
        return info.get("git_commit"), info.get("git_dirty")
    except (OSError, ValueError, AttributeError):
        return None, None


def _code() -> list[str]:
    """The paths whose edits make a run's code differ from its commit: the package, and the script
    run where it is a file (a benchmark). Not the whole checkout: a run of `run all` rewrites the
    tracked experiments/ folders, which would mark every later lab of the same run dirty."""
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    return [str(_PACKAGE)] + ([str(script)] if script is not None and script.suffix == ".py" and script.is_file() else [])


def provenance() -> dict:
    """How to reproduce a run: the exact command line, the package version, and the git commit of
    the code that runs, with a dirty flag (an edit to the package or the script run: _code): its
    checkout's where inferlab runs from one (an editable install), else the one `pip install .`
    built it from (null fields where neither is known: a wheel built outside a checkout). Never
    the working directory's: it may hold other code."""
    commit = _git("rev-parse", "HEAD")
    dirty = None if commit is None else bool(_git("status", "--porcelain", "--untracked-files=no", "--", *_code()))
    if commit is None:
        commit, dirty = built_from()
    return {"command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else None,
            "inferlab": inferlab.__version__, "git_commit": commit, "git_dirty": dirty}
