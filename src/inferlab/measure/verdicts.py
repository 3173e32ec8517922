"""Verdicts: every comparison or threshold claim a lab makes, decided by a 95% confidence interval.

A lab never writes "A is faster than B" from two medians. It measures the quantity the claim is
about and hands its `Estimate` to `decide`:

- paired (`paired`): the per-round ratios num_i / den_i of one interleaved run; the statistic is
  their median and its CI the distribution-free order-statistic interval of a median
  [x(k), x(n+1-k)], k the largest rank with 1 - 2 P(Bin(n, 1/2) <= k-1) >= 95% (the sign test's
  interval: it assumes only independent rounds, and narrows as rounds are added). A 95% one needs
  n >= MIN_ROUNDS = 6 rounds; fewer give a lower coverage, which `confidence` says, and decide
  nothing.
- unpaired (`unpaired`), only where no pairing exists (two separate runs): the Hodges-Lehmann
  estimate of the ratio, exp(median of log a_i - log b_j over all pairs), and its distribution-free
  interval from the Mann-Whitney U distribution (exact up to MAX_EXACT_PAIRS pairs, else normal).
- bounds (`bounds`): a quantity built from summaries with no samples behind them (a ridge point
  from two ceilings' p10-p90, an exact modelled intensity over it): decided on those conservative
  ends, confidence None, and the statement says so.

`outcome` is the one rule: "equivalent" when the CI lies inside threshold x (1 +- margin) (a TOST;
it takes precedence: a difference under the margin is no difference that matters), else "above" /
"below" when the CI lies wholly on one side of the threshold, else "undecided". The p10-p90 of the
per-round values stays as the description of spread. `Looks` is the adaptive stopping rule that
measure_interleaved asks after each look. READMEs quote `Verdict.statement` verbatim, so the prose
is a function of the numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Iterable

import numpy as np

from inferlab.measure.timing import Stats

CONFIDENCE = 0.95
MIN_ROUNDS = 6            # the fewest rounds whose order-statistic interval of a median reaches 95%
# m x n above this: the U distribution's normal approximation (the float64 Gaussian binomial loses
# its tails to rounding past ~15,000 pairs; at 100 x 100 exact and normal ranks differ by one)
MAX_EXACT_PAIRS = 10_000
OUTCOMES = ("above", "below", "equivalent", "undecided")


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


def quotient(num: Interval, den: Interval) -> Interval:
    """num / den for two independently measured positive quantities, conservatively: the low end
    pairs num's p10 with den's p90 (no pairing exists to cancel their noise)."""
    return Interval(num.value / den.value, num.p10 / den.p90, num.p90 / den.p10)


# --- the confidence intervals -------------------------------------------------------------------

@lru_cache(maxsize=4096)
def median_ci_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, coverage): [x(k), x(n+1-k)] (1-based order statistics of n independent values) covers
    their population median with probability coverage = 1 - 2 P(Bin(n, 1/2) <= k-1), k the largest
    rank reaching `confidence`. Below MIN_ROUNDS no rank does: (1, the range's coverage)."""
    if n < 1:
        raise ValueError("a median's interval needs at least one value")
    tail, k = 0.0, 0    # tail = P(B <= k-1)
    while k + 1 <= (n + 1) // 2:
        nxt = tail + math.comb(n, k) / 2**n
        if 1 - 2 * nxt < confidence:
            break
        tail, k = nxt, k + 1
    return (k, 1 - 2 * tail) if k else (1, 1 - 2 / 2**n)


@lru_cache(maxsize=512)
def _u_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u), u = 0..mn, for the Mann-Whitney U of samples of m and n with no difference: the
    counts are the coefficients of the Gaussian binomial [m+n, m]_q, built factor by factor as
    prod_i (1 - q^(n+i)) / (1 - q^i) (each division by 1 - q^i is a cumulative sum of stride i)."""
    poly = np.ones(1)                                                  # (i*n + 1,) after step i
    for i in range(1, m + 1):
        c = np.concatenate([poly, np.zeros(n + i)])
        c[n + i:] -= poly                                              # x (1 - q^(n+i))
        pad = -len(c) % i
        c = np.concatenate([c, np.zeros(pad)]).reshape(-1, i).cumsum(axis=0).ravel()  # / (1 - q^i)
        poly = np.clip(c[:len(poly) + n], 0, None)
        poly /= poly.max()                                             # ratios are what count
    cdf = np.cumsum(poly)
    return cdf / cdf[-1]


def hodges_lehmann_rank(m: int, n: int) -> tuple[int, float]:
    """(k, coverage): the k-th smallest and k-th largest of the m x n pairwise differences bound the
    Hodges-Lehmann shift with probability coverage = 1 - 2 P(U <= k-1) >= 95% (exact U up to
    MAX_EXACT_PAIRS pairs; beyond, its normal approximation, z = 1.96). Where even the extremes
    cover under 95% (3 x 4 samples): (1, their coverage)."""
    alpha = 1 - CONFIDENCE
    if m * n <= MAX_EXACT_PAIRS:
        cdf = _u_cdf(min(m, n), max(m, n))                            # symmetric in m, n
        k = int(np.searchsorted(cdf, alpha / 2, side="right"))        # P(U <= k-1) <= alpha/2
        return (k, 1 - 2 * float(cdf[k - 1])) if k else (1, 1 - 2 * float(cdf[0]))
    k = int(math.floor(m * n / 2 - 1.959963984540054 * math.sqrt(m * n * (m + n + 1) / 12)))
    return max(k, 1), CONFIDENCE


@dataclass(frozen=True)
class Estimate:
    """A statistic, the spread of what it summarizes (p10-p90) and its confidence interval."""

    value: float
    p10: float
    p90: float
    ci_low: float
    ci_high: float
    confidence: float | None   # the CI's coverage (>= CONFIDENCE: a 95% CI); None: conservative bounds
    rounds: int | None         # rounds (paired) or the smaller side's samples (unpaired); None: bounds
    basis: str                 # "paired" | "unpaired, Hodges-Lehmann" | "bounds"

    @property
    def decidable(self) -> bool:
        """A 95% CI, or bounds: an interval of lower coverage (too few rounds) decides nothing."""
        return self.confidence is None or self.confidence >= CONFIDENCE

    def to_json(self) -> dict:
        return asdict(self)


def median_estimate(values: Iterable[float], basis: str = "paired") -> Estimate:
    """The median of independent per-round values and its order-statistic 95% CI."""
    x = np.sort(np.asarray(list(values), dtype=float))                 # (n,)
    if x.size == 0:
        raise ValueError("an estimate needs at least one value")
    k, coverage = median_ci_rank(x.size)
    p10, med, p90 = (float(v) for v in np.percentile(x, [10, 50, 90]))
    return Estimate(med, p10, p90, float(x[k - 1]), float(x[x.size - k]), coverage, int(x.size), basis)


def samples(side: Stats | dict) -> np.ndarray:
    """A side's raw samples: Stats.samples, or the samples_<unit> list of Stats.to_json()."""
    if isinstance(side, Stats):
        return np.asarray(side.samples, dtype=float)
    (key,) = [k for k in side if k.startswith("samples_")]
    return np.asarray(side[key], dtype=float)


def paired(num: Stats | dict, den: Stats | dict, scale: float = 1.0) -> Estimate:
    """time(num) / time(den) x scale, round by round, from one interleaved run: sample i of both
    comes from the same round, so load that drifts between rounds cancels in each ratio; noise
    within a round widens the CI instead. scale turns per-call times into per-step ones."""
    a, b = samples(num), samples(den)                                  # (n,), (n,)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in count: {a.size} vs {b.size}")
    return median_estimate(a / b * scale)


def paired_ratio(num: Stats, den: Stats, scale: float = 1.0) -> Interval:
    """The per-round ratios' median and p10-p90 (the spread a table shows; paired() decides)."""
    e = paired(num, den, scale)
    return Interval(e.value, e.p10, e.p90)


def unpaired(num: Stats | dict | np.ndarray, den: Stats | dict | np.ndarray, scale: float = 1.0) -> Estimate:
    """num / den x scale for two independent samples (no pairing exists): the Hodges-Lehmann
    estimate on logs, exp(median of log a_i - log b_j), with its Mann-Whitney 95% CI; p10-p90 of
    the pairwise ratios describe the spread of one value of num over one of den."""
    a = np.log(num if isinstance(num, np.ndarray) else samples(num))  # (m,)
    b = np.log(den if isinstance(den, np.ndarray) else samples(den))  # (n,)
    d = np.sort((a[:, None] - b[None, :]).ravel()) + math.log(scale)   # (m*n,)
    k, coverage = hodges_lehmann_rank(a.size, b.size)
    p10, med, p90 = (math.exp(float(v)) for v in np.percentile(d, [10, 50, 90]))
    return Estimate(med, p10, p90, math.exp(float(d[k - 1])), math.exp(float(d[d.size - k])), coverage,
                    int(min(a.size, b.size)), "unpaired, Hodges-Lehmann")


def bounds(interval: Interval) -> Estimate:
    """A quantity with no samples behind it, decided on its conservative p10-p90 ends."""
    return Estimate(interval.value, interval.p10, interval.p90, interval.p10, interval.p90, None, None, "bounds")


# --- the rule ------------------------------------------------------------------------------------

def outcome(e: Estimate, threshold: float, margin: float | None = None) -> str:
    """"equivalent" (the CI inside threshold x (1 +- margin); first), "above", "below" (the CI
    wholly on that side; strict), else "undecided"; an interval under 95% decides nothing."""
    if not e.decidable:
        return "undecided"
    if margin and threshold * (1 - margin) < e.ci_low and e.ci_high < threshold * (1 + margin):
        return "equivalent"
    if e.ci_low > threshold:
        return "above"
    if e.ci_high < threshold:
        return "below"
    return "undecided"


def rounds_to_decide(e: Estimate, threshold: float, margin: float | None = None) -> int | None:
    """An estimate of the rounds that would decide an undecided CI: its half-width shrinks as
    1/sqrt(rounds) (log scale), so it needs rounds x (half-width / room)^2, room the distance from
    the median to the threshold, or to the nearer margin edge. None: no room (the median on the
    threshold, outside every margin) or no rounds to scale (bounds)."""
    if e.rounds is None or min(e.value, e.ci_low, threshold) <= 0:
        return None
    half = (math.log(e.ci_high) - math.log(e.ci_low)) / 2
    v, t = math.log(e.value), math.log(threshold)
    rooms = [abs(v - t)]
    if margin:
        rooms.append(min(math.log(1 + margin) - (v - t), (v - t) - math.log(1 - margin)))
    room = max(rooms)
    if room <= 0 or half <= 0:
        return None
    return max(MIN_ROUNDS, e.rounds + 1, math.ceil(e.rounds * (half / room) ** 2))


@dataclass(frozen=True)
class Verdict:
    id: str
    statement: str
    value: float
    p10: float
    p90: float
    threshold: float
    resolved: bool
    ci_low: float
    ci_high: float
    confidence: float | None
    margin: float | None
    rounds: int | None
    outcome: str

    def to_json(self) -> dict:
        return asdict(self)


def _numbers(e: Estimate, quantity: str, fmt: str, margin: float | None) -> str:
    f = lambda x: format(x, fmt)  # noqa: E731
    if e.confidence is None:
        ci = f"bounds {f(e.ci_low)}-{f(e.ci_high)} from p10-p90 ends, no rounds behind them"
    else:
        few = "" if e.decidable else f", too few for a 95% CI (at least {MIN_ROUNDS})"
        ci = f"{e.confidence * 100:.1f}% CI {f(e.ci_low)}-{f(e.ci_high)}, {e.rounds} rounds{few}"
    spread = f"; p10-p90 {f(e.p10)}-{f(e.p90)}" if e.confidence is not None else ""
    m = f"; equivalence margin +-{margin:.0%}, fixed before the run" if margin else ""
    return f"{quantity} is {f(e.value)} ({ci}{spread}{m})"


def decide(id: str, estimate: Estimate | Interval, threshold: float, *, quantity: str, above: str, below: str,
           question: str, margin: float | None = None, equivalent: str | None = None,
           fmt: str = ".3g") -> Verdict:
    """The claim about `quantity` that its CI supports (outcome).

    above / below: the claim when the whole CI is above / below the threshold ("with the naive
    mask a decode step is slower than without"); equivalent (with a margin): the claim when the
    CI lies inside threshold x (1 +- margin); question: what an undecided run cannot tell. An
    Interval is taken as bounds. An undecided statement gives the rounds its CI's width suggests
    would decide it, labelled an estimate.
    """
    if margin and not equivalent:
        raise ValueError("a verdict with a margin needs its equivalent statement")
    e = estimate if isinstance(estimate, Estimate) else bounds(estimate)
    result = outcome(e, threshold, margin)
    numbers = _numbers(e, quantity, fmt, margin)
    t = f"{threshold:g}"
    if result == "above":
        statement = f"{above}: {numbers}, above {t} across the whole interval."
    elif result == "below":
        statement = f"{below}: {numbers}, below {t} across the whole interval."
    elif result == "equivalent":
        statement = f"{equivalent}: {numbers}, inside {t} +-{margin:.0%} across the whole interval."
    else:
        statement = f"This run cannot tell {question}: {numbers}, " + _why_undecided(e, threshold, margin)
    return Verdict(id=id, statement=statement, value=e.value, p10=e.p10, p90=e.p90, threshold=threshold,
                   resolved=result != "undecided", ci_low=e.ci_low, ci_high=e.ci_high, confidence=e.confidence,
                   margin=margin or None, rounds=e.rounds, outcome=result)


def _why_undecided(e: Estimate, threshold: float, margin: float | None) -> str:
    t = f"{threshold:g}"
    if not e.decidable:
        return f"an interval of {e.rounds} rounds that decides nothing; at least {MIN_ROUNDS} rounds would."
    what = "bounds that straddle" if e.confidence is None else "an interval that straddles"
    what += f" {t}" + (f" and does not lie inside {t} +-{margin:.0%}" if margin else "")
    need = rounds_to_decide(e, threshold, margin)
    if e.confidence is None:
        return what + " (more rounds do not narrow bounds of this kind)."
    if need is None:
        return what + "; its median sits on the threshold, so no count of rounds can be estimated."
    return what + f"; by its width, about {need:,} rounds would decide it (an estimate)."


def unresolved_ids(verdicts: Iterable[Verdict]) -> list[str]:
    return [v.id for v in verdicts if not v.resolved]


def rule_paragraph(margins: dict[str, float] | None = None) -> str:
    """The decision rule in a README's words, with the lab's equivalence margins (what: margin)."""
    text = ("Each comparison is decided on the 95% confidence interval of its statistic. For a ratio of two "
            "things timed in one interleaved run (their order shuffled in each round), the statistic is the median "
            "of the per-round ratios and its interval the distribution-free order-statistic one (it needs at least "
            f"{MIN_ROUNDS} rounds, and narrows as rounds are added); where no pairing exists (two separate runs), "
            "the Hodges-Lehmann ratio and its Mann-Whitney interval; a quantity built from ceilings with no "
            "samples behind it is decided on its p10-p90 bounds, and says so. A verdict is above or below its "
            "threshold when the whole interval is, equivalent when the interval lies inside the threshold +- "
            "its margin (that comes first), and otherwise the run cannot tell, with the rounds its interval's "
            "width suggests would decide it (an estimate). Rounds go on, within the budget, until every "
            "comparison has given the same outcome at two looks running (the second on twice the rounds). "
            "Each verdict gives the rounds it took. A p10-p90 in the tables is the spread of single rounds, "
            "not the uncertainty of the statistic.")
    if margins:
        text += (" Equivalence margins, fixed before the run: "
                 + "; ".join(f"{what} +-{m:.0%}" for what, m in margins.items()) + ".")
    return text


def verdict_lines(verdicts: list[dict]) -> list[str]:
    """README bullets quoting each verdict statement verbatim (results.json's `verdicts`)."""
    return [f"- {v['statement']}" for v in verdicts]


# --- adaptive rounds -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One comparison inside an interleaved run: time(num) / time(den) x scale against threshold."""

    num: str
    den: str
    scale: float = 1.0
    threshold: float = 1.0
    margin: float | None = None


class Looks:
    """The stopping rule: more() for measure_interleaved, asked after each look at the rounds.

    It answers the total rounds the next look needs (0: stop). A claim is done once two successive
    looks give it the same decided outcome; a first decision is confirmed on CONFIRM x the rounds
    (a run that stopped on its first decided look would, over its many looks, claim a direction
    for a true ratio of 1 in about 15% of runs, not 5%: tests/test_verdict_oracle.py). An undecided
    claim asks for the rounds its width suggests (rounds_to_decide, x SAFETY), at most GROW x the
    rounds so far. The run ends when every claim is done or the budget is spent; the verdict is the
    last look's outcome either way.
    """

    GROW, CONFIRM, SAFETY = 3, 2, 1.2

    def __init__(self, claims: Iterable[Claim]):
        self.claims = tuple(claims)
        self.last: dict[Claim, str] = {}

    def __call__(self, stats: dict[str, Stats]) -> int:
        wants = [self.want(c, paired(stats[c.num], stats[c.den], c.scale)) for c in self.claims]
        return max(wants, default=0)

    def want(self, c: Claim, e: Estimate) -> int:
        n = e.rounds
        now, before = outcome(e, c.threshold, c.margin), self.last.get(c)
        self.last[c] = now
        if now != "undecided":
            return 0 if now == before else math.ceil(self.CONFIRM * n)
        need = rounds_to_decide(e, c.threshold, c.margin) if e.decidable else MIN_ROUNDS
        grow = self.GROW * n
        return max(n + 1, min(grow, math.ceil(self.SAFETY * need)) if need is not None else grow)
