"""Verdicts: the 95% CI rule (order-statistic CI of a median, Hodges-Lehmann where unpaired), the
equivalence margin's precedence, statements that assert no side when undecided, paired ratios from
one interleaved run whose order is shuffled per round, and adaptive rounds within the budget.
Ranks and coverages are worked by hand or enumerated here, not read from the code under test."""

from __future__ import annotations

import itertools
import math
import time
from contextlib import contextmanager

import numpy as np
import pytest

from inferlab.measure.timing import Budget, _chunks, measure_interleaved, summarize
from inferlab.measure.verdicts import (Estimate, Interval, _u_cdf, decide, hodges_lehmann_rank, median_ci_rank,
                                       paired, paired_ratio, quotient, rounds_to_decide, unpaired)
from verdict_checks import check_verdict

CLAIM = dict(quantity="masked over unmasked step time", above="masking makes a step slower",
             below="masking makes a step faster", question="whether masking changes the step time")
SAME = "masking costs no step time that matters"


def _est(lo, v, hi, rounds=20, confidence=0.9586):
    return Estimate(v, lo * 0.9, hi * 1.1, lo, hi, confidence, rounds, "paired")


@pytest.mark.parametrize("lo,v,hi,margin,expect", [
    (1.2, 1.5, 1.9, None, "above"),
    (0.5, 0.7, 0.9, None, "below"),
    (0.8, 1.1, 1.4, None, "undecided"),        # straddles: no direction
    (1.0, 1.2, 1.3, None, "undecided"),        # touching the threshold is not "wholly above"
    (1.01, 1.02, 1.04, 0.05, "equivalent"),    # above 1, but inside 1 +- 5%: equivalence first
    (1.01, 1.04, 1.06, 0.05, "above"),         # leaves the margin: the direction stands
    (0.97, 1.0, 1.08, 0.05, "undecided"),      # neither inside the margin nor on one side
])
def test_decide_follows_the_ci_and_the_margin(lo, v, hi, margin, expect):
    verdict = decide("mask", _est(lo, v, hi), 1.0, margin=margin, equivalent=SAME if margin else None, **CLAIM)
    j = verdict.to_json()
    assert j["outcome"] == expect and j["resolved"] is (expect != "undecided")
    assert (j["ci_low"], j["ci_high"], j["rounds"], j["margin"]) == (lo, hi, 20, margin)
    check_verdict(j)
    s = verdict.statement
    assert "95.9% CI" in s and "20 rounds" in s and (margin is None) == ("margin" not in s)
    if expect == "undecided":
        assert s.startswith("This run cannot tell") and "slower" not in s and "faster" not in s
        assert "rounds would decide it (an estimate)" in s
    elif expect == "equivalent":
        assert s.startswith(SAME) and "+-5%" in s


def test_too_few_rounds_decide_nothing():
    e = paired(summarize([1.0] * 5), summarize([2.0] * 5))            # 5 rounds, each ratio 0.5
    assert e.confidence == pytest.approx(1 - 2 / 32) and not e.decidable
    v = decide("x", e, 1.0, **CLAIM).to_json()
    assert v["outcome"] == "undecided" and "too few for a 95% CI (at least 6)" in v["statement"]
    check_verdict(v)


@pytest.mark.parametrize("n,k,coverage", [
    (5, 1, 1 - 2 / 32),                        # under 95%: the range is all there is
    (6, 1, 1 - 2 / 64),
    (10, 2, 1 - 2 * 11 / 1024),                # P(B <= 1) = (1 + 10) / 2^10; P(B <= 2) = 56 / 1024 is too much
    (20, 6, 1 - 2 * 21700 / 2**20),            # 1 + 20 + 190 + 1140 + 4845 + 15504 = 21700
])
def test_median_ci_ranks_by_hand(n, k, coverage):
    assert median_ci_rank(n) == (k, pytest.approx(coverage))


def _u_counts(m, n):
    """The U statistic (pairs with the first sample above the second) over every arrangement."""
    counts = np.zeros(m * n + 1)
    for pos in itertools.combinations(range(m + n), m):      # positions of the first sample in rank order
        counts[sum(p - i for i, p in enumerate(pos))] += 1    # each is above the second's below it
    return counts


@pytest.mark.parametrize("m,n", [(3, 4), (5, 5), (6, 6), (4, 7)])
def test_the_u_distribution_matches_an_enumeration(m, n):
    counts = _u_counts(m, n)
    assert _u_cdf(m, n) == pytest.approx(np.cumsum(counts) / counts.sum())
    k, coverage = hodges_lehmann_rank(m, n)
    cdf = np.cumsum(counts) / counts.sum()
    assert coverage == pytest.approx(1 - 2 * cdf[k - 1])
    if cdf[0] > 0.025:             # 3 x 4: even the extremes cover under 95% (1 - 2/35)
        assert k == 1 and coverage < 0.95
    else:
        assert cdf[k - 1] <= 0.025 < cdf[k]


def test_exact_and_normal_u_ranks_meet_at_the_switch():
    # 100 x 100 pairs (the last exact one) and 101 x 100 (normal): floor(mn/2 - 1.96 sqrt(mn(m+n+1)/12))
    assert abs(hodges_lehmann_rank(100, 100)[0] - math.floor(5000 - 1.959964 * math.sqrt(10_000 * 201 / 12))) <= 1
    assert hodges_lehmann_rank(101, 100)[0] == math.floor(5050 - 1.959963984540054 * math.sqrt(10_100 * 202 / 12))


def test_hodges_lehmann_of_a_pure_shift():
    # b is a x 2 shuffled: every log difference pairs up, the estimate is 2 and the CI holds it
    a = np.array([1.0, 1.1, 1.3, 1.6, 2.0, 2.2, 2.9, 3.1])
    e = unpaired(2 * a[::-1].copy(), a)
    assert e.value == pytest.approx(2.0) and e.ci_low < 2 < e.ci_high
    # m = n = 8: the 5% critical U is 13, so the CI is the 14th smallest and largest of 64 ratios
    assert hodges_lehmann_rank(8, 8)[0] == 14


def test_paired_ratio_cancels_drift_between_rounds():
    # the load doubles every round; B is always 2x A within a round
    a = summarize([0.01 * 2**i for i in range(10)])
    b = summarize([0.02 * 2**i for i in range(10)])
    e = paired(b, a)
    assert (e.value, e.ci_low, e.ci_high) == pytest.approx((2.0, 2.0, 2.0))
    assert paired_ratio(b, a) == Interval(2.0, 2.0, 2.0)
    assert quotient(Interval(b.median, b.p10, b.p90), Interval(a.median, a.p10, a.p90)).p90 > 10


def test_rounds_to_decide_scales_with_the_square_of_the_width():
    # CI half-width 0.1 (log) at 20 rounds, median 0.05 above the threshold (log): 20 x (0.1/0.05)^2
    e = Estimate(math.exp(0.05), 0.9, 1.3, math.exp(-0.05), math.exp(0.15), 0.96, 20, "paired")
    assert rounds_to_decide(e, 1.0) == 80
    # with a 15% margin (the CI's top 1.16 is outside it) the nearer margin edge is log(1.15) - 0.05
    # = 0.0898 away: 20 x (0.1 / 0.0898)^2 = 24.8, sooner than the 80 a direction needs
    assert rounds_to_decide(e, 1.0, 0.15) == 25


def test_interval_rules():
    with pytest.raises(ValueError):
        Interval(1.0, 2.0, 3.0)
    assert Interval(2.0, 1.0, 4.0).inverse() == Interval(0.5, 0.25, 1.0)
    assert Interval.from_samples([1, 2, 3, 4, 5]).value == 3


def _sleepers(calls):
    def make(name):
        def f():
            calls.append(name)
            time.sleep(0.001)
        return f
    return {"a": make("a"), "b": make("b")}


def test_interleaved_rounds_follow_more_within_the_budget():
    calls = []
    # never decided: extra rounds until the budget cannot pay for one more, never past it by a round
    budget = Budget(0.3)
    stats = measure_interleaved(_sleepers(calls), samples=4, min_sample_s=0.005, more=lambda s: 10**9, budget=budget)
    round_s = budget.spent / (stats["a"].n - 4)
    assert stats["a"].n == stats["b"].n > 4 and 0.3 - 2 * round_s <= budget.spent <= 0.3 + round_s
    # the base rounds are not charged: a budget made long before still buys extra rounds
    budget = Budget(0.05)
    time.sleep(0.06)
    stats = measure_interleaved(_sleepers(calls), samples=4, min_sample_s=0.005, more=lambda s: 10**9, budget=budget)
    assert stats["a"].n > 4
    # more() asks for 7 rounds in all: exactly 7; for none: exactly the base rounds
    stats = measure_interleaved(_sleepers(calls), samples=4, min_sample_s=0.005,
                                more=lambda s: 7 if s["a"].n < 7 else 0, budget=Budget(5))
    assert stats["a"].n == 7
    stats = measure_interleaved(_sleepers(calls), samples=4, min_sample_s=0.005, more=lambda s: 0, budget=Budget(5))
    assert stats["a"].n == 4
    stats = measure_interleaved(_sleepers(calls), samples=3, min_sample_s=0.005, more=lambda s: 10**9,
                                budget=Budget(0))
    assert stats["a"].n == 3


def test_the_order_within_a_round_is_shuffled_and_seeded():
    def firsts(seed):
        order = []

        def ctx(name):
            @contextmanager
            def c():
                order.append(name)
                yield
            return c

        measure_interleaved({"a": lambda: None, "b": lambda: None}, samples=40, min_sample_s=0.0001,
                            around={"a": ctx("a"), "b": ctx("b")}, seed=seed)
        rounds = order[2:]                       # after each function's calibration
        return [rounds[i] for i in range(0, len(rounds), 2)]

    first = firsts(0)
    assert 8 <= first.count("a") <= 32            # not always A first (binomial(40, 1/2): 8..32 at 1 - 1e-4)
    assert firsts(0) == first


def test_a_rounds_samples_are_cut_into_chunks_shuffled_together():
    # 1 ms calls at min_sample_s 0.05: about 55 calls a sample, in 10 chunks of about 5 ms; the two
    # functions' chunks alternate within a round (runs of one name), where whole samples back to
    # back would give exactly 2 runs a round
    calls = []
    stats = measure_interleaved(_sleepers(calls), samples=2, min_sample_s=0.05, warmup=0)
    per_round = {name: s.iters_per_sample for name, s in stats.items()}
    size = sum(per_round.values())
    for r in (calls[-2 * size:-size], calls[-size:]):       # the two rounds, after the calibrations
        assert r.count("a") == per_round["a"] and r.count("b") == per_round["b"]
        assert sum(1 for x, y in zip(r, r[1:]) if x != y) >= 4


@pytest.mark.parametrize("iters, min_sample_s, n", [(1, 0.05, 1), (7, 0.05, 7), (55, 0.05, 10), (1000, 0.05, 10),
                                                    (30, 0.001, 1), (12, 0.02, 4)])
def test_chunks_add_up_to_the_sample(iters, min_sample_s, n):
    chunks = _chunks(iters, min_sample_s)
    assert sum(chunks) == iters and len(chunks) == n and max(chunks) - min(chunks) <= 1


def test_around_contexts_wrap_each_sample():
    entered = []

    @contextmanager
    def ctx():
        entered.append(1)
        yield

    measure_interleaved({"a": lambda: None}, samples=3, min_sample_s=0.001, around={"a": ctx})
    assert len(entered) == 1 + 3   # calibration + one per sample


def test_budget_shares_follow_their_weights_among_the_calls_still_to_come():
    budget = Budget(8.0)
    got = []
    for share in budget.shares(3, [2, 1, 1]):
        got.append(share.seconds)
        share.charge(1.0)                        # each call spends 1 s of its share
    assert got == [4.0, 3.5, 6.0]                # 8*2/4, (8-1)*1/2, (8-2)*1/1
    with pytest.raises(ValueError):
        list(Budget(1.0).shares(2, [1, 0]))
    with pytest.raises(ValueError):
        list(Budget(1.0).shares(2, [1]))
