"""measure.bounded: a forked call's value, or a refusal naming the bound it exceeded or how it died;
and the in-process wall-time bound. Limits are set from this process's own RSS, so the tests do
not depend on the machine."""

import os
import signal
import time

import pytest

from inferlab.measure.bounded import (TimeBoundExceeded, peak_rss_mb, reset_peak_rss, run_forked,
                                      time_bound)

MiB = 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _touch(n_bytes: int) -> int:
    buf = bytearray(n_bytes)
    buf[::4096] = b"\1" * len(buf[::4096])  # every page written: resident, not only reserved
    return len(buf)


def test_value_comes_back_with_the_childs_peak():
    out = run_forked(lambda: {"squares": [k * k for k in range(5)]}, memory_bytes=_rss() + 512 * MiB, timeout_s=30)
    assert out.refusal is None and out.value == {"squares": [0, 1, 4, 9, 16]}
    assert 0 < out.peak_rss_mb


def _warn() -> int:
    for stamp in ("06:47:22", "06:47:23"):  # one warning twice, as a native library writes it on fd 2
        os.write(2, f"[{stamp}] conv.cc:870: Warning: falling back to anyOf\n".encode())
    os.write(2, b"another line\n")
    return 7


def test_the_childs_stderr_comes_back_as_distinct_lines_not_on_ours(capfd):
    out = run_forked(_warn, memory_bytes=_rss() + 512 * MiB, timeout_s=30)
    assert out.value == 7
    assert out.stderr_lines == ("conv.cc:870: Warning: falling back to anyOf", "another line")
    assert capfd.readouterr().err == ""


def test_a_child_past_the_memory_bound_is_refused_and_killed():
    limit_mib = _rss() // MiB + 64  # a whole number of MiB, under 1 GiB for this test process
    assert limit_mib < 1024
    limit = limit_mib * MiB
    out = run_forked(lambda: _touch(1024 * MiB), memory_bytes=limit, timeout_s=60)
    assert out.value is None and out.refusal == f"exceeded {limit_mib} MiB"
    assert out.peak_rss_mb * MiB > limit  # it was killed past the bound, before its 1 GiB


def test_a_child_past_the_time_bound_is_refused():
    t0 = time.monotonic()
    out = run_forked(lambda: time.sleep(30), memory_bytes=_rss() + 512 * MiB, timeout_s=0.3)
    assert out.refusal == "exceeded 0.3 s" and out.value is None
    assert time.monotonic() - t0 < 10


def test_a_crash_and_an_exception_are_refusals_naming_them():
    def segfault():
        os.kill(os.getpid(), signal.SIGSEGV)
    assert run_forked(segfault, memory_bytes=_rss() + 512 * MiB, timeout_s=30).refusal == \
        f"crashed (signal {int(signal.SIGSEGV)})"

    def boom():
        raise ValueError("no such grammar\nsecond line")
    assert run_forked(boom, memory_bytes=_rss() + 512 * MiB, timeout_s=30).refusal == \
        "crashed: ValueError: no such grammar"


def test_a_result_larger_than_the_pipe_buffer_arrives_whole():
    big = list(range(200_000))  # ~1 MB pickled, > the 64 KiB pipe buffer
    assert run_forked(lambda: big, memory_bytes=_rss() + 512 * MiB, timeout_s=30).value == big


def test_time_bound_interrupts_work_in_process_and_restores_the_handler():
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(TimeBoundExceeded, match=r"^exceeded 0.2 s$"):
        with time_bound(0.2):
            while True:
                try:
                    sum(range(1000))
                except Exception:  # broad handlers in the bounded code do not swallow it
                    pass
    assert signal.getsignal(signal.SIGALRM) is before
    with time_bound(5):
        assert sum(range(10)) == 45
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_peak_rss_resets_between_calls():
    if not reset_peak_rss():
        pytest.skip("/proc/self/clear_refs is not writable here")
    _touch(200 * MiB)
    assert peak_rss_mb() * MiB >= _rss() + 150 * MiB  # the buffer is gone, its peak stays
    reset_peak_rss()
    assert peak_rss_mb() * MiB < _rss() + 50 * MiB


def test_the_child_dies_with_its_parent(tmp_path):
    """A parent killed mid-call (OOM killer, kill -9) leaves no unbounded orphan behind."""
    pid_file = tmp_path / "grandchild"
    middle = os.fork()
    if middle == 0:  # the parent under test: forks a bounded child that records its pid and sleeps
        try:
            def sleeper():
                pid_file.write_text(str(os.getpid()))
                time.sleep(60)
            run_forked(sleeper, memory_bytes=_rss() + 512 * MiB, timeout_s=60)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    child = int(pid_file.read_text())
    os.kill(middle, signal.SIGKILL)
    os.waitpid(middle, 0)
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{child}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":  # killed, not yet reaped by init
                return
        time.sleep(0.01)
    raise AssertionError("the bounded child outlived its parent")
