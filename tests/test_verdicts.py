"""Verdicts: resolved exactly when p10-p90 lies on one side; unresolved statements assert no side;
paired ratios from one interleaved run; adaptive sampling stops when resolved or out of budget."""

from __future__ import annotations

import time

import pytest

from inferlab.measure.timing import Budget, measure_interleaved, summarize
from inferlab.measure.verdicts import Interval, decide, paired_ratio, quotient
from verdict_checks import check_verdict

CLAIM = dict(quantity="masked over unmasked step time", above="masking makes a step slower",
             below="masking makes a step faster", question="whether masking changes the step time")


@pytest.mark.parametrize("lo,v,hi,resolved,side", [
    (1.2, 1.5, 1.9, True, "slower"),       # wholly above 1
    (0.5, 0.7, 0.9, True, "faster"),       # wholly below 1
    (0.8, 1.1, 1.4, False, None),          # straddles: no direction
    (1.0, 1.2, 1.3, False, None),          # touching the threshold is not "wholly above"
])
def test_decide_resolves_exactly_when_the_interval_is_on_one_side(lo, v, hi, resolved, side):
    verdict = decide("mask", Interval(v, lo, hi), 1.0, **CLAIM)
    assert verdict.resolved is resolved
    check_verdict(verdict.to_json())
    s = verdict.statement
    if side:
        assert side in s and ({"slower", "faster"} - {side}).pop() not in s
    else:
        assert "cannot tell" in s and "slower" not in s and "faster" not in s
        assert f"spread {(hi - lo) / v:.0%}" in s


def test_paired_ratio_cancels_drift_between_rounds():
    # the load doubles every round; B is always 2x A within a round
    a = summarize([0.01 * 2**i for i in range(10)])
    b = summarize([0.02 * 2**i for i in range(10)])
    r = paired_ratio(b, a)
    assert (r.value, r.p10, r.p90) == pytest.approx((2.0, 2.0, 2.0))
    # the ratio of medians across the same run is 2.0 too, but its naive interval is huge
    assert quotient(Interval(b.median, b.p10, b.p90), Interval(a.median, a.p10, a.p90)).p90 > 10


def test_interval_rules():
    with pytest.raises(ValueError):
        Interval(1.0, 2.0, 3.0)
    assert Interval(2.0, 1.0, 4.0).inverse() == Interval(0.5, 0.25, 1.0)
    assert Interval.from_samples([1, 2, 3, 4, 5]).value == 3


def test_interleaved_measures_more_until_resolved_or_out_of_budget():
    calls = {"a": 0, "b": 0}

    def fa():
        calls["a"] += 1
        time.sleep(0.001)

    def fb():
        calls["b"] += 1
        time.sleep(0.001)

    # never resolves (identical functions): stops when the budget runs out
    budget = Budget(0.3)
    stats = measure_interleaved({"a": fa, "b": fb}, samples=4, min_sample_s=0.005, more=lambda s: True,
                                budget=budget)
    assert stats["a"].n == stats["b"].n > 4 and budget.left() == 0 and budget.spent >= 0.3
    # the base rounds are not charged: a budget made long before still buys extra rounds
    budget = Budget(0.05)
    time.sleep(0.06)
    stats = measure_interleaved({"a": fa, "b": fb}, samples=4, min_sample_s=0.005, more=lambda s: True,
                                budget=budget)
    assert stats["a"].n > 4 and 0.05 <= budget.spent
    # resolved at once: exactly the first rounds
    stats = measure_interleaved({"a": fa, "b": fb}, samples=4, min_sample_s=0.005, more=lambda s: False,
                                budget=Budget(5))
    assert stats["a"].n == 4
    # no budget: no extra rounds
    stats = measure_interleaved({"a": fa, "b": fb}, samples=3, min_sample_s=0.005, more=lambda s: True,
                                budget=Budget(0))
    assert stats["a"].n == 3


def test_around_contexts_wrap_each_sample():
    from contextlib import contextmanager

    entered = []

    @contextmanager
    def ctx():
        entered.append(1)
        yield

    measure_interleaved({"a": lambda: None}, samples=3, min_sample_s=0.001, around={"a": ctx})
    assert len(entered) == 1 + 3   # calibration + one per sample
