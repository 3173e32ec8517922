"""Verdicts: every comparison or threshold claim a lab makes, decided by its measured interval.

A lab never writes "A is faster than B" from two medians. It measures an interval for the
quantity the claim is about (a paired ratio from one interleaved run, a share of a roof, an
intensity over the ridge point) and hands it to `decide`, which resolves the claim only when the
whole p10-p90 interval lies on one side of the threshold. Otherwise the statement says the run
cannot tell, and why (the interval straddles the threshold), and asserts no direction. READMEs
quote `Verdict.statement` verbatim, so the prose is a function of the numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

import numpy as np

from inferlab.measure.timing import Stats


@dataclass(frozen=True)
class Interval:
    """A measured quantity: its median and the p10-p90 band around it."""

    value: float
    p10: float
    p90: float

    def __post_init__(self):
        if not self.p10 <= self.value <= self.p90:
            raise ValueError(f"interval must satisfy p10 <= value <= p90, got {self.p10}, {self.value}, {self.p90}")

    @classmethod
    def from_samples(cls, values: Iterable[float]) -> "Interval":
        arr = np.asarray(list(values), dtype=float)  # (n,)
        if arr.size == 0:
            raise ValueError("an interval needs at least one sample")
        p10, median, p90 = (float(v) for v in np.percentile(arr, [10, 50, 90]))
        return cls(median, p10, p90)

    @classmethod
    def exact(cls, value: float) -> "Interval":
        """A quantity with no measurement spread (e.g. a modelled intensity)."""
        return cls(value, value, value)

    @property
    def spread(self) -> float:
        """(p90 - p10) / value: the relative width, the figure a noisy run reports."""
        return (self.p90 - self.p10) / self.value if self.value else float("inf")

    def scaled(self, k: float) -> "Interval":
        lo, hi = sorted((self.p10 * k, self.p90 * k))
        return Interval(self.value * k, lo, hi)

    def inverse(self) -> "Interval":
        """1 / x: the ends swap (the inverse of a positive interval)."""
        return Interval(1 / self.value, 1 / self.p90, 1 / self.p10)

    def to_json(self) -> dict:
        return {"value": self.value, "p10": self.p10, "p90": self.p90}


def paired_ratio(num: Stats, den: Stats, scale: float = 1.0) -> Interval:
    """Per-round ratios num_i / den_i (x scale) of one interleaved run, as an Interval.

    Sample i of both comes from the same round (measure_interleaved), taken back to back, so the
    load drift between rounds cancels in each ratio.
    """
    if num.n != den.n:
        raise ValueError(f"paired samples differ in count: {num.n} vs {den.n}")
    ratios = np.asarray(num.samples) / np.asarray(den.samples) * scale  # (n,)
    return Interval.from_samples(ratios)


def quotient(num: Interval, den: Interval) -> Interval:
    """num / den for two independently measured positive quantities, conservatively: the low end
    pairs num's p10 with den's p90 (no pairing exists to cancel their noise)."""
    return Interval(num.value / den.value, num.p10 / den.p90, num.p90 / den.p10)


# Below this many rounds the p10 and p90 of the per-round ratios lie between the two most extreme
# rounds, so one outlier round moves them: the pairing is not trusted (comparison_interval).
MIN_PAIRED_ROUNDS = 10


def comparison_interval(num: dict, den: dict, paired: dict) -> tuple[Interval, str]:
    """The interval that decides time(num) / time(den), and what it is ("paired" or why not).

    num, den: the two sides' timings as results.json stores them (Stats.to_json("ms")); paired:
    their per-round ratio. The pairing cancels load that drifts between rounds, not load that
    changes within one: when either side is flagged noisy, or there are fewer than
    MIN_PAIRED_ROUNDS rounds, the ratio is taken unpaired instead, each side's p10 against the
    other's p90 (verdicts.quotient), widened to hold the paired interval. It lies on one side of 1
    only when the two sides' p10-p90 time ranges do not overlap.
    """
    ratio = Interval(paired["value"], paired["p10"], paired["p90"])
    why = []
    if num["noisy"] or den["noisy"]:
        why.append("the samples are noisy")
    if num["n"] < MIN_PAIRED_ROUNDS:
        why.append(f"{num['n']} rounds, under {MIN_PAIRED_ROUNDS}")
    if not why:
        return ratio, "paired"
    side = lambda t: Interval(t["median_ms"], t["p10_ms"], t["p90_ms"])  # noqa: E731
    wide = quotient(side(num), side(den))
    return (Interval(ratio.value, min(ratio.p10, wide.p10), max(ratio.p90, wide.p90)),
            "unpaired, " + " and ".join(why))


def stats_interval(num: Stats, den: Stats, scale: float = 1.0) -> tuple[Interval, str]:
    """comparison_interval of time(num) / time(den) x scale from two Stats of one interleaved run
    (scale turns per-call times into per-step ones, as paired_ratio's): the interval and its basis."""
    def side(stats: Stats, k: float) -> dict:
        return {"median_ms": stats.median * 1e3 * k, "p10_ms": stats.p10 * 1e3 * k, "p90_ms": stats.p90 * 1e3 * k,
                "noisy": stats.noisy, "n": stats.n}
    return comparison_interval(side(num, scale), side(den, 1.0), paired_ratio(num, den, scale).to_json())


def straddles_one(num: Stats, den: Stats, scale: float = 1.0) -> bool:
    """Does the interval that decides time(num) / time(den) x scale (stats_interval) straddle 1?
    The labs' more() for extra rounds."""
    r, _ = stats_interval(num, den, scale)
    return r.p10 <= 1 <= r.p90


@dataclass(frozen=True)
class Verdict:
    id: str
    statement: str
    value: float
    p10: float
    p90: float
    threshold: float
    resolved: bool

    def to_json(self) -> dict:
        return asdict(self)


def _num(x: float, fmt: str) -> str:
    return format(x, fmt)


def decide(id: str, interval: Interval, threshold: float, *, quantity: str, above: str, below: str,
           question: str, fmt: str = ".3g") -> Verdict:
    """The claim about `quantity` that its interval supports.

    above / below: the claim when the whole p10-p90 interval is above / below the threshold
    ("with the naive mask a decode step is slower than without"); question: what an unresolved
    run cannot tell ("whether the naive mask changes the step time"). Both sides are strict: an
    interval touching the threshold is unresolved.
    """
    v, lo, hi = interval.value, interval.p10, interval.p90
    numbers = f"{quantity} is {_num(v, fmt)} (p10-p90 {_num(lo, fmt)}-{_num(hi, fmt)})"
    if lo > threshold:
        statement = f"{above}: {numbers}, above {threshold:g} across the whole interval."
    elif hi < threshold:
        statement = f"{below}: {numbers}, below {threshold:g} across the whole interval."
    else:
        statement = (f"This run cannot tell {question}: {numbers}, an interval that straddles {threshold:g} "
                     f"(spread {interval.spread:.0%} of the median); more samples or a quieter machine would decide it.")
    return Verdict(id=id, statement=statement, value=v, p10=lo, p90=hi, threshold=threshold,
                   resolved=bool(lo > threshold or hi < threshold))


def unresolved_ids(verdicts: Iterable[Verdict]) -> list[str]:
    return [v.id for v in verdicts if not v.resolved]


def verdict_lines(verdicts: list[dict]) -> list[str]:
    """README bullets quoting each verdict statement verbatim (results.json's `verdicts`)."""
    return [f"- {v['statement']}" for v in verdicts]
