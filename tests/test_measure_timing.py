"""The timing harness: warm-up discarded, gc restored, >= 50 ms per sample, statistics.

A fake clock (time.perf_counter_ns patched in inferlab.measure.timing) makes the call counts
and the statistics exact, so the expected values below are derived by hand.
"""

import gc
import itertools

import pytest

from inferlab.gcpause import gc_disabled
from inferlab.measure import timing
from inferlab.measure.timing import measure, summarize


class FakeClock:
    """perf_counter_ns that only moves when the measured function "works" for cost_ns."""

    def __init__(self, monkeypatch):
        self.now = 0
        self.reads = 0
        monkeypatch.setattr(timing.time, "perf_counter_ns", self.read)

    def read(self):
        self.reads += 1
        return self.now

    def work(self, ns):
        self.now += ns


def test_each_sample_aggregates_at_least_min_sample_s(monkeypatch):
    clock = FakeClock(monkeypatch)
    stats = measure(lambda: clock.work(1_000_000), samples=7, min_sample_s=0.05, warmup=1)
    # 1 ms per call: calibration tries 1 call (1 ms < 50 ms), then max(2, ceil(1.2 * 50 / 1)) = 60.
    assert stats.iters_per_sample == 60
    assert stats.iters_per_sample * stats.min >= 0.05
    assert stats.n == 7
    assert stats.samples == (1e-3,) * 7
    assert stats.median == stats.p10 == stats.p90 == stats.min == pytest.approx(1e-3)
    assert stats.spread == 0 and not stats.noisy


def test_warmup_calls_are_discarded(monkeypatch):
    clock = FakeClock(monkeypatch)
    calls = []

    def fn():
        # The first call is 1 s (cold start: page faults, lazy init); later ones 1 ms.
        clock.work(1_000_000_000 if not calls else 1_000_000)
        calls.append(1)

    stats = measure(fn, samples=5, min_sample_s=0.05, warmup=1)
    assert max(stats.samples) == pytest.approx(1e-3)  # the 1 s call is in no sample
    assert stats.iters_per_sample == 60                # nor did it fool the calibration
    assert len(calls) == 1 + (1 + 60 + 60) + 5 * 60    # warm-up + calibration (and its confirming run) + samples

    calls.clear()
    cold = measure(fn, samples=5, min_sample_s=0.05, warmup=0)
    # Without warm-up the slow call lands in calibration (1 call reaches 50 ms), but the confirming
    # run at that count takes 1 ms: the count is sized on it, so every sample still holds >= 50 ms
    # (it used to settle on 1 call a sample: 1 ms samples)
    assert cold.iters_per_sample * 1e-3 >= 0.05


def test_every_warmup_call_is_discarded(monkeypatch):
    """warmup=2: two slow calls (300 ms, then 200 ms) land in no sample and not in the calibration."""
    clock = FakeClock(monkeypatch)
    costs = iter([300_000_000, 200_000_000])

    def fn():
        clock.work(next(costs, 1_000_000))

    stats = measure(fn, samples=3, min_sample_s=0.01, warmup=2)
    # calibration: 1 call of 1 ms < 10 ms, then max(2, ceil(1.2 * 10 / 1)) = 12 calls per sample
    assert stats.iters_per_sample == 12
    assert stats.samples == (1e-3,) * 3


def test_gc_disabled_while_timing_and_restored_after_exception(monkeypatch):
    seen = []

    def fn():
        seen.append(gc.isenabled())
        if len(seen) == 5:
            raise RuntimeError("boom")

    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        measure(fn, samples=3, min_sample_s=0.0, warmup=2)
    assert gc.isenabled()
    assert seen == [False] * 5


def test_gc_disabled_keeps_a_disabled_gc_disabled():
    gc.disable()
    try:
        with pytest.raises(ValueError):
            with gc_disabled():
                raise ValueError
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_summarize_hand_computed():
    s = summarize([float(x) for x in range(1, 11)])
    # Linear interpolation: p10 at rank 0.9 -> 1.9; median 5.5; p90 at rank 8.1 -> 9.1.
    assert (s.p10, s.median, s.p90) == pytest.approx((1.9, 5.5, 9.1))
    assert s.min == 1.0 and s.mean == pytest.approx(5.5) and s.n == 10
    assert s.spread == pytest.approx((9.1 - 1.9) / 5.5)
    assert s.noisy


def test_summarize_quiet_samples_not_noisy():
    s = summarize([1.0] * 9 + [1.05], noise_threshold=0.10)
    # p90 at rank 8.1: 1.0 + 0.1 * 0.05 = 1.005; spread 0.005.
    assert s.p90 == pytest.approx(1.005)
    assert s.spread == pytest.approx(0.005)
    assert not s.noisy
    assert summarize([1.0] * 9 + [1.05], noise_threshold=0.001).noisy


def test_to_json_units():
    s = summarize([0.002, 0.004], iters_per_sample=3)
    j = s.to_json("ms")
    assert j["median_ms"] == pytest.approx(3.0)
    assert j["min_ms"] == pytest.approx(2.0)
    assert j["samples_ms"] == pytest.approx([2.0, 4.0])
    assert j["iters_per_sample"] == 3 and j["n"] == 2
    assert s.to_json("us")["median_us"] == pytest.approx(3000.0)
    with pytest.raises(ValueError):
        s.to_json("hours")


def test_noisy_result_takes_more_samples_when_asked(monkeypatch):
    clock = FakeClock(monkeypatch)
    # Two clock reads per sample; alternate the per-call cost between samples: 1 ms, 3 ms, ...
    stats = measure(lambda: clock.work(1_000_000 if (clock.reads // 2) % 2 else 3_000_000),
                    samples=10, min_sample_s=0.01, warmup=0, max_samples=40)
    assert stats.noisy and stats.n == 40

    quiet = FakeClock(monkeypatch)
    stats = measure(lambda: quiet.work(1_000_000), samples=10, min_sample_s=0.01, max_samples=40)
    assert not stats.noisy and stats.n == 10


def test_bad_arguments():
    with pytest.raises(ValueError):
        measure(lambda: None, samples=0)
    with pytest.raises(ValueError):
        summarize([])


def test_interleaved_takes_one_sample_of_each_in_turn(monkeypatch):
    clock = FakeClock(monkeypatch)
    order = []

    def make(name, ns):
        def fn():
            order.append(name)
            clock.work(ns)
        return fn

    stats = timing.measure_interleaved({"a": make("a", 1_000_000), "b": make("b", 2_000_000)},
                                       samples=3, min_sample_s=0.05, warmup=1)
    # a: 1 ms -> calibration 1 call, then ceil(1.2 * 50 / 1) = 60 calls; b: 2 ms -> 1, then 30.
    assert stats["a"].iters_per_sample == 60 and stats["b"].iters_per_sample == 30
    assert stats["a"].median == pytest.approx(1e-3) and stats["b"].median == pytest.approx(2e-3)
    assert stats["a"].n == stats["b"].n == 3
    # After warm-up (a, b) and calibration (a x (1 + 60 + 60), b x (1 + 30 + 30): each count's
    # confirming run), each round is one sample of each (60 a calls, 30 b), each cut into
    # 0.05 / 0.005 = 10 chunks (6 a calls, 3 b calls) and the 20 chunks shuffled together
    timed = order[2 + 121 + 61:]
    assert len(timed) == 3 * 90
    for k in range(3):
        r = timed[90 * k:90 * (k + 1)]
        assert r.count("a") == 60 and r.count("b") == 30
        runs = [(name, len(list(group))) for name, group in itertools.groupby(r)]
        assert all(n % {"a": 6, "b": 3}[name] == 0 for name, n in runs)   # whole chunks
        assert len(runs) > 2                                                # not two whole samples


def test_interleaved_restores_gc_after_an_error(monkeypatch):
    assert gc.isenabled()

    def boom():
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        timing.measure_interleaved({"ok": lambda: None, "boom": boom}, samples=2, min_sample_s=0.0)
    assert gc.isenabled()


def test_token_walk_us_repeats_whole_walks_and_refuses_a_rejected_token():
    from inferlab.measure.timing import token_walk_us

    walks, consumed = [], []

    def new_walk():
        walks.append(1)
        return (lambda: None), consumed.append        # consume returns None: not a refusal
    us = token_walk_us(new_walk, [5, 6, 7], min_total_s=0.0)
    assert len(us) == 3 and len(walks) == 1 and consumed == [5, 6, 7] and (us >= 0).all()
    with pytest.raises(ValueError, match="token 6 rejected"):
        token_walk_us(lambda: ((lambda: None), lambda t: t != 6), [5, 6], min_total_s=0.0)


def test_walks_us_walks_each_list_once_in_turn_and_leaves_a_refused_one_out():
    from inferlab.measure.timing import walks_us

    consumed = []

    def new_walk():
        consumed.append("start")
        return (lambda: None), (lambda t: consumed.append(t) or t != 9)  # 9 is refused
    us = walks_us(new_walk, [[1, 2], [3, 9, 4], [5]])
    assert consumed == ["start", 1, 2, "start", 3, 9, "start", 5]
    assert len(us) == 3 and (us >= 0).all()  # [1, 2] and [5]; the refused walk left out whole
    assert len(walks_us(new_walk, [])) == 0


def test_calibration_sizes_the_count_on_the_fastest_run_not_a_slow_spell(monkeypatch):
    """The mask-overhead baseline's case: calibrated during a slow spell (12.5 ms a call), then
    sampled at 9.4 ms a call, 4 calls made 37.5 ms samples. The count must give >= 50 ms at the
    fastest per-call time calibration saw."""
    from inferlab.measure import timing

    per_call_ns = iter([12.5e6, 12.5e6, 9.4e6])  # one per calibration run
    monkeypatch.setattr(timing, "_time_calls", lambda fn, iters: int(next(per_call_ns) * iters))
    iters = timing._calibrate(lambda: None, 0.05)
    # runs: 1 call (12.5 ms), then jump to ceil(1.2 x 50 / 12.5) = 5 calls (62.5 ms: the target),
    # then the confirming run at 5 calls, 9.4 ms each: ceil(1.1 x 50 / 9.4) = 6 calls, 56.4 ms
    assert iters == 6 and iters * 9.4 >= 50
