"""Bounded work, MaskBench's method: a call that exceeds its memory or wall-time bound is a refusal
shown as such ("exceeded 4 GiB", "exceeded 120 s", "crashed (signal 11)"), never the end of a run.

run_forked(fn) calls fn() in a forked child: the child inherits what the parent built (a peer's
vocabulary preprocessing) copy-on-write, and its result comes back pickled over a pipe. The parent
reads the child's resident set (/proc/PID/statm) every POLL_S and kills it past the memory bound.
Why not RLIMIT_AS: it bounds address space, which native libraries reserve far beyond what they
touch (xgrammar's first compile in a child maps ~150-350 MB it barely uses), and a Rust allocator
that hits it aborts without saying why. The bound is on the child's RSS as the kernel counts it,
pages shared with the parent included. The child's peak is the larger of wait4's ru_maxrss, the
same quantity, and the largest RSS the watch read: the kernel's high-water mark is synced from
counters that can run a few pages ahead of it, so a child killed past the bound may show a
ru_maxrss just under it.
What the child writes on stderr (a native library's warnings) goes to a file, not over the
parent's progress bar, and comes back as Outcome.stderr_lines.

time_bound(s) bounds a call in this process (SIGALRM, main thread): for pure-Python work, such as
inferlab's own compiler, whose caches across calls are worth keeping in the parent.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import pickle
import re
import select
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace

from inferlab.units import fmt_binary

POLL_S = 0.02             # between two reads of the child's RSS: ~100 MB of growth at most
STDERR_LINES = 10         # distinct stderr lines kept per child (the first ones)
STDERR_BYTES = 1 << 16    # of its stderr read back
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Outcome:
    value: object = None             # fn()'s return value, when refusal is None
    refusal: str | None = None       # why there is no value (a bound, a crash, an exception)
    peak_rss_mb: float | None = None  # the child's peak resident set (MiB)
    stderr_lines: tuple[str, ...] = ()  # the child's distinct stderr lines (STDERR_LINES at most)


class TimeBoundExceeded(BaseException):
    """Raised by time_bound's alarm. A BaseException, so `except Exception` in the bounded code
    does not swallow it."""


def run_forked(fn, *, memory_bytes: int, timeout_s: float) -> Outcome:
    """fn() in a forked child, within `memory_bytes` of RSS and `timeout_s` of wall time."""
    with tempfile.TemporaryFile() as err:
        out = _run_forked(fn, memory_bytes, timeout_s, err.fileno())
        err.seek(0)
        return replace(out, stderr_lines=_distinct_lines(err.read(STDERR_BYTES)))


def _distinct_lines(data: bytes) -> tuple[str, ...]:
    """The first distinct lines, a leading clock time ("[06:47:22] ", xgrammar's) left out so
    that repeats of one warning count once."""
    lines = []
    for line in data.decode("utf-8", "replace").splitlines():
        line = re.sub(r"^\[\d\d:\d\d:\d\d\]\s*", "", line.strip())[:300]
        if line and line not in lines:
            lines.append(line)
    return tuple(lines[:STDERR_LINES])


def _run_forked(fn, memory_bytes: int, timeout_s: float, err_fd: int) -> Outcome:
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    gc.freeze()  # the child's collections then leave the parent's objects (and their pages) alone
    try:
        pid = os.fork()
    except BaseException:
        gc.unfreeze()
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:
        os.close(read_fd)
        os.dup2(err_fd, 2)
        _die_with(parent)
        _child(fn, write_fd)  # never returns
    gc.unfreeze()
    os.close(write_fd)
    reaped = False
    try:
        data, refusal, seen = _watch(pid, read_fd, memory_bytes, timeout_s)
        _, status, usage = os.wait4(pid, 0)
        reaped = True
    finally:
        os.close(read_fd)
        if not reaped:  # interrupted (Ctrl-C): no child outlives the run
            _kill(pid)
            os.wait4(pid, 0)
    peak_mb = max(usage.ru_maxrss / 1024, seen / 2**20)  # (ru_maxrss: KiB on Linux)
    if refusal is None:
        refusal = _crash(status, data)
    if refusal is not None:
        return Outcome(refusal=refusal, peak_rss_mb=peak_mb)
    kind, value = pickle.loads(data)
    if kind != "ok":
        return Outcome(refusal=f"crashed: {value}", peak_rss_mb=peak_mb)
    return Outcome(value=value, peak_rss_mb=peak_mb)


def _die_with(parent: int) -> None:
    """The child is killed when the parent dies (Linux PR_SET_PDEATHSIG): the parent's watch is
    its only bound, so an orphan would run unbounded."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's kill on its way out must do
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _child(fn, write_fd: int) -> None:
    """Run fn, send ("ok", value) or ("error", "Type: message"), and exit without the parent's
    atexit handlers or buffered output. A native crash is the parent's to report (its signal),
    not a traceback over the parent's progress bar."""
    faulthandler.disable()
    try:
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as exc:  # the child's failure is the parent's to report
            lines = str(exc).splitlines()
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"))
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)


def _watch(pid: int, read_fd: int, memory_bytes: int, timeout_s: float) -> tuple[bytes, str | None, int]:
    """Read the child's result until it closes the pipe, or kill it past a bound: (bytes, refusal,
    the largest resident set read, bytes)."""
    chunks = []
    seen = 0
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _kill(pid)
            return b"", f"exceeded {timeout_s:g} s", seen
        ready, _, _ = select.select([read_fd], [], [], min(POLL_S, left))
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                return b"".join(chunks), None, seen
            chunks.append(chunk)
        seen = max(seen, _rss_bytes(pid))
        if seen > memory_bytes:
            _kill(pid)
            return b"", f"exceeded {fmt_binary(memory_bytes)}", seen


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):  # exited (a zombie reads empty): nothing resident
        return 0


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _crash(status: int, data: bytes) -> str | None:
    if os.WIFSIGNALED(status):
        return f"crashed (signal {os.WTERMSIG(status)})"
    if os.WEXITSTATUS(status) != 0 or not data:
        return f"crashed (exit status {os.WEXITSTATUS(status)})"
    return None


@contextmanager
def time_bound(seconds: float):
    """Raise TimeBoundExceeded("exceeded N s") in this (main) thread after `seconds` of wall time."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("time_bound needs the main thread (SIGALRM)")

    def alarm(signum, frame):
        raise TimeBoundExceeded(f"exceeded {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def reset_peak_rss() -> bool:
    """Start a new peak: Linux resets VmHWM on writing 5 to clear_refs. False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float | None:
    """This process's peak resident set since reset_peak_rss (or since it started), MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None
