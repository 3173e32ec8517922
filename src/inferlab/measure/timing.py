"""Timing harness: warm-up discarded, >= 50 ms of work per sample, gc off while timing, medians.

Every lab times through `measure()`. The discipline follows asv and pyperf: one call is too short
for the clock and too exposed to a single interrupt, so each sample repeats the call enough times
to take at least `min_sample_s`, and the per-call time is the sample's time divided by that count.
The report is the median with p10/p90 (robust to the occasional descheduled sample), and the raw
per-call samples are kept next to the statistics.
"""

from __future__ import annotations

import math
import random
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from inferlab.gcpause import gc_disabled  # (also importable from here: constrain.stack and the benchmarks use this name)

# (p90 - p10) / median above this marks a result noisy; 10% is where the seeds' ratios
# (e.g. "softmax < 10% of the roof") stop being decidable.
DEFAULT_NOISE_THRESHOLD = 0.10

_UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


@dataclass(frozen=True)
class Stats:
    """Summary of per-call times, all in seconds per call."""

    median: float
    p10: float
    p90: float
    min: float
    mean: float
    n: int                       # number of samples
    iters_per_sample: int        # calls aggregated in each sample
    samples: tuple[float, ...]   # raw per-call seconds, one per sample
    spread: float                # (p90 - p10) / median
    noisy: bool                  # spread > the noise threshold used

    def to_json(self, unit: str = "ms") -> dict:
        if unit not in _UNIT_SCALE:
            raise ValueError(f"unit must be one of {sorted(_UNIT_SCALE)}, got {unit!r}")
        k = _UNIT_SCALE[unit]
        return {
            f"median_{unit}": self.median * k,
            f"p10_{unit}": self.p10 * k,
            f"p90_{unit}": self.p90 * k,
            f"min_{unit}": self.min * k,
            "n": self.n,
            "iters_per_sample": self.iters_per_sample,
            "noisy": self.noisy,
            "spread": self.spread,
            f"samples_{unit}": [s * k for s in self.samples],
        }


def summarize(per_call_seconds: Iterable[float], *, iters_per_sample: int = 1,
              noise_threshold: float = DEFAULT_NOISE_THRESHOLD) -> Stats:
    """Statistics of per-call times (seconds). Percentiles interpolate linearly (numpy default)."""
    samples = tuple(float(s) for s in per_call_seconds)
    if not samples:
        raise ValueError("summarize() needs at least one sample")
    arr = np.asarray(samples)  # (n,)
    p10, median, p90 = (float(v) for v in np.percentile(arr, [10, 50, 90]))
    spread = (p90 - p10) / median if median > 0 else math.inf
    return Stats(median=median, p10=p10, p90=p90, min=float(arr.min()), mean=float(arr.mean()),
                 n=len(samples), iters_per_sample=int(iters_per_sample), samples=samples,
                 spread=spread, noisy=spread > noise_threshold)


def _time_calls(fn: Callable[[], object], iters: int) -> int:
    """Nanoseconds for `iters` back-to-back calls of fn."""
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    return time.perf_counter_ns() - t0


def _calibrate(fn: Callable[[], object], min_sample_s: float) -> int:
    """A call count whose run takes at least min_sample_s at the fastest per-call time seen.

    The count doubles (jumping near the target once an estimate is usable) until a run reaches
    the target, then one more run at that count confirms it: the count is sized on the fastest
    per-call time of all these runs, with a 10% margin. A run slowed by a descheduling or a
    slow spell only ever looks slower, and sizing on it alone left later samples short (a
    mask-overhead baseline was calibrated at 4 calls and then sampled at a 37.5 ms median)."""
    target_ns = min_sample_s * 1e9
    iters, fastest = 1, math.inf
    while True:
        elapsed = _time_calls(fn, iters)
        fastest = min(fastest, max(elapsed / iters, 1.0))
        if elapsed >= target_ns:
            break
        # Jump close to the target when the estimate is usable, then keep doubling as a guard.
        iters = max(iters * 2, math.ceil(1.2 * target_ns / fastest))
    fastest = min(fastest, max(_time_calls(fn, iters) / iters, 1.0))
    return max(iters, math.ceil(1.1 * target_ns / fastest))


def measure(fn: Callable[[], object], *, samples: int = 30, min_sample_s: float = 0.05,
            warmup: int = 1, noise_threshold: float = DEFAULT_NOISE_THRESHOLD,
            max_samples: int | None = None) -> Stats:
    """Time fn() and return per-call Stats.

    fn is called `warmup` times (discarded: page faults, lazy init, cold caches), then the call
    count per sample is calibrated so one sample takes >= min_sample_s, then `samples` samples
    are taken with gc disabled (restored even if fn raises). When the result is noisy and
    max_samples > samples, more samples are taken (in rounds of `samples`) up to max_samples:
    this is how a caller asks for more trials on a borderline ratio.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    limit = max(samples, max_samples or samples)
    with gc_disabled():
        for _ in range(warmup):
            fn()
        iters = _calibrate(fn, min_sample_s)
        per_call: list[float] = []
        while True:
            for _ in range(min(samples, limit - len(per_call))):
                per_call.append(_time_calls(fn, iters) / iters / 1e9)
            stats = summarize(per_call, iters_per_sample=iters, noise_threshold=noise_threshold)
            if not stats.noisy or len(per_call) >= limit:
                return stats


# --budget-s defaults of the labs: extra seconds of interleaved rounds while a comparison's 95%
# CI is undecided or its decision unconfirmed (measure.verdicts.Looks).
DEFAULT_BUDGET_S = 30.0
QUICK_BUDGET_S = 5.0


class Budget:
    """Seconds a lab may spend on extra rounds to decide its comparisons, shared by its calls.

    Only extra rounds are charged (measure_interleaved times each): a clock running from the
    lab's start was spent by the base rounds before any comparison could ask for more. A round is
    started only while the budget left pays for it at the last round's duration (afford), so the
    spending stays within the seconds given up to one round slower than the one before."""

    def __init__(self, seconds: float, parent: "Budget | None" = None):
        if not seconds >= 0:
            raise ValueError(f"budget must be >= 0 seconds, got {seconds}")
        self.seconds = float(seconds)
        self.spent = 0.0
        self.parent = parent

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def afford(self, round_s: float) -> bool:
        return self.left() > 0 and round_s <= self.left()

    def charge(self, seconds: float) -> None:
        self.spent += seconds
        if self.parent is not None:
            self.parent.charge(seconds)

    def shares(self, parts: int, weights: Sequence[float] | None = None) -> Iterator["Budget"]:
        """`parts` budgets, one per call still to come, each a share of what the calls before it
        left (charged here too), even or in proportion to `weights` among the calls still to
        come: a comparison that never decides cannot spend the rounds of the ones after it."""
        w = list(weights) if weights is not None else [1.0] * parts
        if len(w) != parts or not all(x > 0 for x in w):
            raise ValueError(f"shares needs {parts} positive weights, got {weights}")
        for i in range(parts):
            yield Budget(self.left() * w[i] / sum(w[i:]), parent=self)


def adaptive_rounds(take_round: Callable[[], None], current: Callable[[], dict[str, Stats]],
                    more: Callable[[dict[str, Stats]], int], budget: Budget, *, round_s: float,
                    max_rounds: int | None = None) -> dict[str, Stats]:
    """Looks at the rounds until more(stats) (the total rounds the next look needs) asks for no
    more, or the budget (or max_rounds) cannot pay for the next round: that look is the last.
    take_round() takes one round; round_s is what the rounds so far took each (the first guess
    of what the next one costs). Returns the last look's stats."""
    stats = current()
    while True:
        n = next(iter(stats.values())).n
        want = more(stats) if max_rounds is None else min(more(stats), max_rounds)
        if want <= n:
            return stats
        while n < want and budget.afford(round_s):
            t0 = time.perf_counter()
            take_round()
            round_s = time.perf_counter() - t0
            budget.charge(round_s)
            n += 1
        stats = current()
        if n < want:   # out of budget: this look is the last
            return stats


# A round's sample of each function is cut into chunks of about this many seconds, and the chunks
# of all the functions are shuffled together: a slow spell (a neighbour's burst on a shared host
# lasts tens of ms, as long as a whole 50 ms sample) then slows every function of the round about
# alike, and drops out of their ratio, where whole samples back to back left it in one of them.
# At 5 ms, the timer's two reads per chunk cost well under 0.01% of it.
CHUNK_S = 0.005


def _chunks(iters: int, min_sample_s: float) -> list[int]:
    """A sample's `iters` calls as chunks of about CHUNK_S (iters was sized to take min_sample_s):
    call counts that add up to iters, at most one chunk per call."""
    n = max(1, min(iters, round(min_sample_s / CHUNK_S)))
    base, extra = divmod(iters, n)
    return [base + (i < extra) for i in range(n)]


def measure_interleaved(fns: dict[str, Callable[[], object]], *, samples: int = 30, min_sample_s: float = 0.05,
                        warmup: int = 1, noise_threshold: float = DEFAULT_NOISE_THRESHOLD,
                        around: dict[str, Callable[[], AbstractContextManager]] | None = None,
                        more: Callable[[dict[str, Stats]], int] | None = None,
                        budget: Budget | None = None, seed: int = 0) -> dict[str, Stats]:
    """Time several functions whose ratio is the result, one sample of each per round.

    On a shared machine the load drifts during a run; measuring A's samples and then B's puts
    the drift into the ratio. Interleaving spreads it over both, and sample i of every function
    comes from the same round, so per-round ratios (verdicts.paired) are paired. Within a round,
    each function's sample is cut into chunks of about CHUNK_S and all the chunks are shuffled
    together (random.Random(seed)): a fixed A B order would put a first-in-round effect (a cache
    the previous function left warm or cold) into every ratio, and whole samples back to back
    would leave a slow spell in one of them.
    Each function gets its own warm-up and calibration, as in measure(); gc is off throughout
    and restored after. around[name]() is a context entered outside the timer for each of that
    function's chunks (e.g. a BLAS thread limit), so one run can compare thread counts.

    Adaptive: after `samples` rounds, more(stats) (verdicts.Looks) says how many rounds in all the
    next look needs; rounds are taken while the budget pays for them (adaptive_rounds), and
    Stats.n says how many rounds were taken in all.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    around = around or {}
    enter = lambda name: around[name]() if name in around else nullcontext()  # noqa: E731
    per_call: dict[str, list[float]] = {name: [] for name in fns}
    iters: dict[str, int] = {}
    order = random.Random(seed)
    with gc_disabled():
        for name, fn in fns.items():
            with enter(name):
                for _ in range(warmup):
                    fn()
                iters[name] = _calibrate(fn, min_sample_s)

        chunks = {name: _chunks(iters[name], min_sample_s) for name in fns}

        def one_round() -> None:
            schedule = [(name, calls) for name in fns for calls in chunks[name]]
            order.shuffle(schedule)
            elapsed = dict.fromkeys(fns, 0)
            for name, calls in schedule:
                with enter(name):
                    elapsed[name] += _time_calls(fns[name], calls)
            for name in fns:
                per_call[name].append(elapsed[name] / iters[name] / 1e9)

        def stats() -> dict[str, Stats]:
            return {name: summarize(per_call[name], iters_per_sample=iters[name], noise_threshold=noise_threshold)
                    for name in fns}

        t0 = time.perf_counter()
        for _ in range(samples):
            one_round()
        if more is None or budget is None:
            return stats()
        return adaptive_rounds(one_round, stats, more, budget, round_s=(time.perf_counter() - t0) / samples)


def token_walk_us(new_walk: Callable[[], tuple[Callable[[], object], Callable[[int], object]]],
                  tokens: list[int], min_total_s: float) -> np.ndarray:
    """Per-token mask times (us) along `tokens`, walked again until `min_total_s` of mask work.

    new_walk() returns (fill, consume) of a fresh matcher; only fill is timed, one perf_counter_ns
    reading per token. A step is microseconds, below what one timer read resolves well, so the
    walk repeats until the readings add up to min_total_s (the >= 50 ms aggregation rule).
    consume(token) returning False means the matcher refused a token of its own path: an error.
    """
    readings: list[int] = []
    total_ns = 0
    with gc_disabled():
        while total_ns < min_total_s * 1e9 or not readings:
            fill, consume = new_walk()
            for tok in tokens:
                t0 = time.perf_counter_ns()
                fill()
                dt = time.perf_counter_ns() - t0
                readings.append(dt)
                total_ns += dt
                if consume(tok) is False:
                    raise ValueError(f"token {tok} rejected on the timing walk")
    return np.asarray(readings, dtype=np.float64) / 1e3                    # (walks * len(tokens),) us


def walks_us(new_walk: Callable[[], tuple[Callable[[], object], Callable[[int], object]]],
             token_lists: list[list[int]]) -> np.ndarray:
    """One walk of each token list in turn, each from new_walk() (a matcher at its start on the
    same compiled grammar, which keeps what the walks before built, as a server keeps a schema's
    grammar across requests): their single per-token fill readings (us), concatenated. A list
    the matcher refuses is left out whole (token_walk_us's ValueError)."""
    out = [np.zeros(0)]
    for tokens in token_lists:
        try:
            out.append(token_walk_us(new_walk, tokens, 0.0))  # (len(tokens),): one walk
        except ValueError:
            continue
    return np.concatenate(out)
