"""The cache levels a working-set sweep shows: its plateaus, the knees between them, and DRAM.

sysfs says what caches a CPU has, not what this process reaches: a 2-vCPU slice of a server can
report the package's 480 MiB L3 while its sweep falls to DRAM speed past about 32 MiB. So the
levels are read off the sweep itself (bandwidth against working set, medians, ascending):

1. runs: walking up the working sets, a point joins the current run while it lies within
   PLATEAU_TOLERANCE of the run's median; else it starts a new run. Adjacent runs whose medians
   lie within that factor are then merged (noise split them, not a cache).
2. plateaus and transitions: a run of one point, or a run spanning under TRANSITION_OCTAVES
   whose nearest runs of two or more points lie above and below it by more than that factor, is
   part of a transition (a gradual fall from one level to the next is a staircase of short
   runs); every other run is a plateau, and two plateaus of one level with only transition
   points between them are one (a lone dip).
3. knees: each fall from one plateau to the next slower one. A knee spans [the last working set
   of the faster plateau, the first of the slower]: the cache it ends holds less than that first
   working set, where it stops helping at all (the sizing rule's conservative reading).
   Between two adjacent plateaus (no transition points) the boundary is the least-squares split
   of the two levels (log bandwidth), so the greedy walk's bias toward the slower side goes.
4. DRAM: after the last knee that falls by >= DRAM_DROP past twice every private level sysfs
   lists (a slice may share less of the last level than sysfs says, but its L1 and L2 are its
   own), every working set from the slower plateau's first on, when they span >=
   DRAM_MIN_OCTAVES and their second-highest median stays DRAM_DROP below the level before the
   fall. Not a plateau within PLATEAU_TOLERANCE: a loaded machine's DRAM figures scatter by 2x
   (other processes share the memory bus), but never climb back to a cache's. Otherwise the
   sweep did not reach DRAM within its working sets (the memory budget, usually), and says so.

Known limit: a machine whose LLC ends past the budget and whose L2 -> L3 fall is >= DRAM_DROP
has its L3 plateau read as DRAM; the README's sysfs comparison then shows the disagreement, and a
larger --max-memory settles it.
"""

from __future__ import annotations

import math
from statistics import median

PLATEAU_TOLERANCE = 1.3     # a point within this factor of a run's median belongs to it
TRANSITION_OCTAVES = 1.0    # a run shorter than this between a faster and a slower run: transition
DRAM_MIN_OCTAVES = 1.0      # DRAM's plateau spans at least this (one octave: 2 points at 1 per octave)
DRAM_DROP = 2.0             # the fall into DRAM's plateau, from the plateau before it


def _runs(points: list[dict]) -> list[list[int]]:
    """Indices of points grouped greedily into runs (step 1), then runs of one level merged:
    adjacent ones, and two plateaus with only transition points between them (a lone dip)."""
    runs: list[list[int]] = []
    for i, p in enumerate(points):
        if runs and _within(p["GBps_median"], _level(points, runs[-1])):
            runs[-1].append(i)
        else:
            runs.append([i])
    while (pair := _same_level(points, runs)) is not None:
        a, b = pair
        runs[a:b + 1] = [[i for run in runs[a:b + 1] for i in run]]
    return runs


def _same_level(points: list[dict], runs: list[list[int]]) -> tuple[int, int] | None:
    """The first two runs to merge: adjacent runs, or consecutive plateaus with only transition
    points between them, whose medians lie within PLATEAU_TOLERANCE; None when none."""
    for k in range(len(runs) - 1):
        if _within(_level(points, runs[k]), _level(points, runs[k + 1])):
            return k, k + 1
    kept = [k for k in range(len(runs)) if not _is_transition(points, runs, k)]
    for a, b in zip(kept, kept[1:]):
        if _within(_level(points, runs[a]), _level(points, runs[b])):
            return a, b
    return None


def _within(a: float, b: float) -> bool:
    return max(a, b) <= PLATEAU_TOLERANCE * min(a, b)


def _level(points: list[dict], run: list[int]) -> float:
    return median(points[i]["GBps_median"] for i in run)


def _octaves(points: list[dict], run: list[int]) -> float:
    return math.log2(points[run[-1]]["working_set_bytes"] / points[run[0]]["working_set_bytes"])


def _is_transition(points: list[dict], runs: list[list[int]], k: int) -> bool:
    """Step 2: a lone point; or a short run whose nearest runs of two or more points, before and
    after it, lie above and below it by more than PLATEAU_TOLERANCE (a step of a gradual fall)."""
    if len(runs[k]) == 1:
        return True
    before = next((runs[j] for j in range(k - 1, -1, -1) if len(runs[j]) > 1), None)
    after = next((runs[j] for j in range(k + 1, len(runs)) if len(runs[j]) > 1), None)
    if before is None or after is None or _octaves(points, runs[k]) >= TRANSITION_OCTAVES:
        return False
    above, level, below = (_level(points, run) for run in (before, runs[k], after))
    return above > PLATEAU_TOLERANCE * level and level > PLATEAU_TOLERANCE * below


def _split(points: list[dict], first: list[int], second: list[int]) -> int:
    """The index where the second of two adjacent plateaus begins: the least-squares split of
    their points between the two levels (log bandwidth)."""
    idx = first + second
    hi, lo = math.log(_level(points, first)), math.log(_level(points, second))
    logs = [math.log(points[i]["GBps_median"]) for i in idx]

    def cost(s: int) -> float:
        return sum((x - hi) ** 2 for x in logs[:s]) + sum((x - lo) ** 2 for x in logs[s:])
    return idx[min(range(1, len(idx)), key=cost)]


def _plateau(points: list[dict], run: list[int]) -> dict:
    """A plateau's extent and level: its median, and its roof (second-highest median, as the
    cache roofs are read: one fast point cannot lift it)."""
    values = sorted(points[i]["GBps_median"] for i in run)
    return {"first_bytes": points[run[0]]["working_set_bytes"], "last_bytes": points[run[-1]]["working_set_bytes"],
            "points": len(run), "median_GBps": median(values),
            "roof_GBps": values[-2] if len(values) >= 2 else values[0]}


def plateaus(points: list[dict]) -> list[dict]:
    """Steps 1-3: the plateaus of a sweep (ascending working sets), adjacent ones re-split by
    least squares; each with its extent, median and roof."""
    runs = _runs(points)
    kept = [run for k, run in enumerate(runs) if not _is_transition(points, runs, k)]
    for k in range(len(kept) - 1):
        if kept[k][-1] + 1 == kept[k + 1][0]:       # adjacent: no transition points between them
            start = _split(points, kept[k], kept[k + 1])
            both = kept[k] + kept[k + 1]
            kept[k], kept[k + 1] = [i for i in both if i < start], [i for i in both if i >= start]
    return [_plateau(points, run) for run in kept]


def knees(points: list[dict], found: list[dict] | None = None) -> list[dict]:
    """Each fall from a plateau to the next slower one: its span (from_bytes, the faster
    plateau's last working set; to_bytes, the slower one's first) and the two levels."""
    found = plateaus(points) if found is None else found
    out = []
    for hi, lo in zip(found, found[1:]):
        if lo["median_GBps"] >= hi["median_GBps"]:
            continue                                  # a rise (call overhead at tiny sizes), no cache
        out.append({"from_bytes": hi["last_bytes"], "to_bytes": lo["first_bytes"],
                    "from_GBps": hi["median_GBps"], "to_GBps": lo["median_GBps"],
                    "drop": hi["median_GBps"] / lo["median_GBps"]})
    return out


def matches(size_bytes: int, knee: dict) -> bool:
    """A cache size (sysfs) explains a knee when it lies within a factor 2 of the knee's span
    (the same reading as the cache bands: a level's plateau ends between half and all of it)."""
    return knee["from_bytes"] / 2 <= size_bytes <= 2 * knee["to_bytes"]


def find_dram(points: list[dict], private_bytes: int) -> dict:
    """Step 4: {"reached": True, "plateau", "knee", "llc_bytes"} where the sweep shows DRAM
    (llc_bytes: the first working set of its plateau, which the last level this process reaches
    does not hold), else {"reached": False, "why": one sentence}. private_bytes: the largest sysfs
    level below the last (L2), 0 when none."""
    top = points[-1]["working_set_bytes"] if points else 0
    falls = [k for k in knees(points) if k["drop"] >= DRAM_DROP and k["to_bytes"] > 2 * private_bytes]
    why = None
    if not falls:
        why = (f"no fall of {DRAM_DROP:g}x or more between two plateaus past twice the private cache "
               f"({fmt_size(private_bytes)})")
    else:
        knee = falls[-1]
        plateau = _plateau(points, [i for i, p in enumerate(points) if p["working_set_bytes"] >= knee["to_bytes"]])
        if math.log2(plateau["last_bytes"] / plateau["first_bytes"]) < DRAM_MIN_OCTAVES:
            why = (f"after the {knee['drop']:.1f}x fall at {fmt_size(knee['from_bytes'])}-{fmt_size(knee['to_bytes'])} "
                   f"the sweep spans under {DRAM_MIN_OCTAVES:g} octave")
        elif plateau["roof_GBps"] * DRAM_DROP > knee["from_GBps"]:
            why = (f"after the fall at {fmt_size(knee['from_bytes'])}-{fmt_size(knee['to_bytes'])} the sweep climbs "
                   f"back to {plateau['roof_GBps']:.1f} GB/s, within {DRAM_DROP:g}x of {knee['from_GBps']:.1f}")
    if why:
        return {"reached": False, "why": f"{why}: the sweep up to {fmt_size(top)} shows no DRAM plateau"}
    return {"reached": True, "plateau": plateau, "knee": knee, "llc_bytes": knee["to_bytes"]}


def fmt_size(n: int) -> str:
    """A working set in KiB or MiB, three digits."""
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n / 1024:.3g} KiB"
