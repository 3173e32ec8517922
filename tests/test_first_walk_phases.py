"""benchmarks/first_walk_phases.py's Timers: own and outermost times, checked on a fake clock
whose readings the functions below advance by hand-picked amounts."""

from __future__ import annotations


import pytest


@pytest.fixture()
def phases(monkeypatch, load_benchmark):
    module = load_benchmark("first_walk_phases")
    clock = [0]
    monkeypatch.setattr(module.time, "perf_counter_ns", lambda: clock[0])
    return module, clock


def test_own_time_excludes_wrapped_calls_and_outermost_total_counts_recursion_once(phases):
    module, clock = phases

    class Owner:
        @staticmethod
        def inner():
            clock[0] += 5

        @staticmethod
        def outer(depth):
            clock[0] += 3
            Owner.inner()
            if depth:
                Owner.outer(depth - 1)  # recursion: its own time is added, its total is not
            clock[0] += 2

    timers = module.Timers()
    timers.wrap(Owner, "inner")
    timers.wrap(Owner, "outer")
    Owner.outer(1)
    timers.restore()
    # outer: 2 calls x (3 + 2) own; inner: 2 calls x 5; the outermost outer spans all 20
    assert timers.own == {"Owner.outer": 10, "Owner.inner": 10}
    assert timers.total == {"outer": 20, "inner": 10}
    assert timers.calls == 4
    Owner.outer(0)  # restored: nothing more is counted
    assert timers.calls == 4


def test_a_generator_is_timed_by_its_iterations_not_its_callers_work(phases):
    module, clock = phases

    class Owner:
        @staticmethod
        def levels():
            for _ in range(3):
                clock[0] += 4
                yield clock[0]
            clock[0] += 1  # after the last level, before StopIteration

    timers = module.Timers()
    timers.wrap(Owner, "levels")
    got = []
    for v in Owner.levels():
        got.append(v)
        clock[0] += 100  # the caller's work between levels
    timers.restore()
    assert got == [4, 108, 212]
    assert timers.own == {"Owner.levels": 13} and timers.total == {"levels": 13}
    assert timers.calls == 4  # three levels and the last, empty next()
