"""Statistical oracle tests of the decision rule: simulated rounds with a known true ratio.

Each round gives both sides a sample: side A = drift_i x exp(s Z), side B = true x drift_i x
exp(s Z'), s = sigma / sqrt(2), so the per-round ratio B/A has lognormal noise of sigma (the
"per-round noise" below); each sample is a 3x outlier with probability OUTLIER_P, and drift_i is a
slow load swing (up to 2x) shared by the round. The rounds go through the labs' own code path:
timing.adaptive_rounds asking verdicts.Looks after each look, Stats from timing.summarize, the
outcome from verdicts.outcome. Seeded; the truth is known, so the checks are exact counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab.measure.timing import Budget, adaptive_rounds, summarize
from inferlab.measure.verdicts import Claim, Looks, median_estimate, outcome, paired, unpaired

OUTLIER_P = 0.03


def _rounds(rng, true: float, sigma: float, n: int, period: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) per-round times of n rounds, the drift swinging over `period` rounds (module docstring)."""
    s = sigma / math.sqrt(2)
    drift = 1.5 + 0.5 * np.sin(2 * np.pi * (np.arange(n) / period + rng.random()))      # (n,) between 1x and 2x
    out = lambda: np.where(rng.random(n) < OUTLIER_P, 3.0, 1.0)  # noqa: E731
    a = 0.01 * drift * np.exp(s * rng.standard_normal(n)) * out()                        # (n,) seconds
    b = 0.01 * true * drift * np.exp(s * rng.standard_normal(n)) * out()                 # (n,)
    return a, b


def _run(rng, true: float, sigma: float, *, margin: float | None, max_rounds: int, base: int = 6) -> tuple[str, int]:
    """One lab run of the comparison B/A: base rounds, then the adaptive looks up to max_rounds.
    Returns (the last look's outcome, rounds taken)."""
    a, b = _rounds(rng, true, sigma, max_rounds)
    taken = [base]

    def take_round():
        taken[0] += 1

    def current():
        n = taken[0]
        return {"a": summarize(a[:n]), "b": summarize(b[:n])}

    claim = Claim("b", "a", margin=margin)
    stats = adaptive_rounds(take_round, current, Looks([claim]), Budget(math.inf), round_s=0.0, max_rounds=max_rounds)
    return outcome(paired(stats["b"], stats["a"]), 1.0, margin), stats["a"].n


def test_the_95_ci_covers_the_true_ratio_in_92_to_98_percent():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(2000):
        n = int(rng.integers(6, 61))
        a, b = _rounds(rng, 1.3, 0.1, n)
        e = median_estimate(b / a)
        covered += e.ci_low <= 1.3 <= e.ci_high
    assert 0.92 <= covered / 2000 <= 0.98, covered


@pytest.mark.parametrize("sigma, within", [(0.1, 40), (0.2, 120)])
def test_a_true_10_percent_is_decided_above_in_time(sigma, within):
    rng = np.random.default_rng(1)
    runs = [_run(rng, 1.10, sigma, margin=None, max_rounds=within) for _ in range(400)]
    above = sum(o == "above" for o, n in runs)
    assert above / len(runs) >= 0.95, above
    assert all(n <= within for _, n in runs) and not any(o == "below" for o, _ in runs)


def test_a_true_1_is_equivalent_at_3_percent_and_seldom_a_direction():
    rng = np.random.default_rng(2)
    runs = [_run(rng, 1.00, 0.1, margin=0.03, max_rounds=5000) for _ in range(400)]
    counts = {o: sum(r == o for r, _ in runs) for o in ("above", "below", "equivalent", "undecided")}
    assert counts["undecided"] == 0                           # enough rounds: every run ends decided
    assert (counts["above"] + counts["below"]) / len(runs) <= 0.05, counts
    assert counts["equivalent"] / len(runs) >= 0.95, counts


def test_drift_cancels_in_the_paired_ratio():
    """The load doubles and halves over the run; B is 1.2x A within every round. Paired, the CI
    is a few percent wide around 1.2; the same samples unpaired spread over the drift."""
    rng = np.random.default_rng(3)
    a, b = _rounds(rng, 1.2, 0.01, 60, period=60)
    p = paired(summarize(b), summarize(a))
    assert p.ci_low <= 1.2 <= p.ci_high and p.ci_high / p.ci_low < 1.02
    u = unpaired(summarize(b), summarize(a))
    assert u.ci_high / u.ci_low > 1.1
