"""Runs of one lab, measurement by measurement: is B faster or slower than A, or the same?

Every timing a lab keeps in its results.json is a Stats.to_json() entry with its raw per-call
samples ("samples_ms" / "samples_us"). Runs of the same lab (two machines, two commits, two
thread counts) share most of them; for each shared one, the ratio B/A is taken unpaired (the two
sides share no rounds), as the Hodges-Lehmann estimate on log times with its Mann-Whitney 95% CI
(verdicts.unpaired), and decided at an equivalence margin by the labs' own rule (verdicts.outcome):
"equivalent" when the CI lies inside 1 +- margin, else "above" (B slower) / "below" (B faster)
when it lies wholly on one side of 1, else "undecided". This is what asv's and pyperf's compare
answer, with criterion's noise threshold as the margin.

What the interval covers depends on how many runs each side holds:
- one run a side: the per-call samples of the two runs. Those share their run's machine state
  (clock, neighbours, memory placement), so the CI is of the samples, not of the drift from one
  run to the next, which on a shared VM can pass the margin;
- several runs on either side (pyperf's answer: spread the samples over processes): one value per
  run, its median, and the Hodges-Lehmann ratio of those run medians. The CI then covers the drift
  between runs. A 95% Mann-Whitney interval needs at least 4 runs a side (3 against 4 covers
  94.3%), fewer decide nothing;
- paired runs (`paired=True`): run i of A and run i of B were taken back to back, the sides
  interleaved (A1 B1 A2 B2 ...). Each pair gives one ratio of run medians, B_i/A_i, so drift
  slower than a pair (the neighbours' load, the clock over minutes) reaches both of its runs and
  cancels in it; the statistic is the median of those ratios with its order-statistic 95% CI
  (verdicts.median_estimate), which needs at least 6 pairs. Drift from one run to the very next
  still widens it. Pairing that was not run so is not a pairing: say so only of interleaved runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.measure.plots import new_figure
from inferlab.measure.verdicts import Estimate, median_estimate, outcome, unpaired

DEFAULT_MARGIN = 0.05
# A list item is named by the first of these keys it has (table[vocab=512]), not by its position:
# two runs of one lab may hold different vocabularies or T, in another order.
ITEM_KEYS = ("vocab", "T", "name", "kernel", "n", "working_set_bytes")
# One run per side: two back-to-back attention runs of one commit on a shared VM differed by
# 0.50-1.18, far past a 5% margin that their within-run CIs could not see.
SCOPE_SAMPLES = ("the CI covers the samples within each run, not the drift between runs: a difference "
                 "between two runs of one commit is the machine's; give each side several runs "
                 "(--also-a, --also-b) for a CI over runs")
SCOPE_RUNS = ("the CI covers the drift between runs: one value per run (its median), {a} run(s) of A "
              "against {b} of B")
SCOPE_PAIRS = ("the CI covers the drift between pairs of runs: {n} pairs, run i of A and of B back to back, "
               "one ratio of run medians per pair; drift slower than a pair cancels in its ratio")
READING = {"above": "B slower", "below": "B faster", "equivalent": "same within the margin", "undecided": "cannot tell"}


def _label(item, index: int) -> str:
    if isinstance(item, dict):
        key = next((k for k in ITEM_KEYS if k in item and isinstance(item[k], (str, int, float))), None)
        if key is not None:
            return f"[{key}={item[key]}]"
    return f"[{index}]"


def measurements(results: dict) -> dict[str, tuple[str, np.ndarray]]:
    """{name: (unit, per-call samples)} for every timing results.json keeps: a dict with one
    samples_<unit> list of numbers. The name is the path to it (keys by /, list items by _label)."""
    found: dict[str, tuple[str, np.ndarray]] = {}

    def walk(node, path: str) -> None:
        if isinstance(node, dict):
            keys = [k for k in node if k.startswith("samples_") and isinstance(node[k], list)]
            if len(keys) == 1 and node[keys[0]] and all(isinstance(x, (int, float)) for x in node[keys[0]]):
                found[path or "/"] = (keys[0].removeprefix("samples_"), np.asarray(node[keys[0]], dtype=float))
            for k, v in node.items():
                walk(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}{_label(v, i)}")

    walk(results, "")
    return found


def _read(folder: Path) -> dict:
    if not folder.is_dir():
        raise InferlabError(f"{folder}: not a folder")
    return read_json_object(folder / "results.json", missing="not an experiment folder (no results.json)")


def _side(dirs: list[Path]) -> tuple[str, list[dict[str, tuple[str, np.ndarray]]]]:
    """(experiment, [measurements of each run]) for one side's folders, all of one lab."""
    runs = [_read(d) for d in dirs]
    labs = {r.get("experiment") for r in runs}
    if len(labs) > 1:
        raise InferlabError(f"{', '.join(map(str, dirs))} hold {sorted(map(str, labs))}: one side's runs "
                            "must be of the same lab")
    return runs[0].get("experiment"), [measurements(r) for r in runs]


def _common(runs: list[dict[str, tuple[str, np.ndarray]]]) -> dict[str, str]:
    """{name: unit} of the measurements every run holds, in the first run's order."""
    return {n: u for n, (u, _) in runs[0].items() if all(n in r and r[n][0] == u for r in runs[1:])}


def _values(runs: list[dict[str, tuple[str, np.ndarray]]], name: str, per_run: bool) -> np.ndarray:
    """A side's values of one measurement: per run, one value each, its median (runs,) (both
    sides alike, even a side of one run); else the one run's per-call samples."""
    if per_run:
        return np.array([np.median(r[name][1]) for r in runs])
    return runs[0][name][1]


def _estimate(xa: np.ndarray, xb: np.ndarray, paired: bool) -> Estimate:
    """B/A: the median of the per-pair ratios (paired runs), else Hodges-Lehmann (unpaired)."""
    return median_estimate(xb / xa, basis="paired runs") if paired else unpaired(xb, xa)


def compare_runs(dir_a: Path | list[Path], dir_b: Path | list[Path], *, margin: float = DEFAULT_MARGIN,
                 paired: bool = False) -> dict:
    """The comparison of runs of one lab, side A (the baseline) against side B, each one folder or
    several, as a JSON-able dict: {"experiment", "a", "b", "a_runs", "b_runs", "margin",
    "statistic", "scope", "rows": [{name, unit, a_median, b_median, a_samples, b_samples, ratio,
    ci_low, ci_high, confidence, outcome, reading}], "only_in_a", "only_in_b", "paired"}. With
    several runs on a side, a_samples / b_samples count runs (one median each). paired: the runs
    were taken in pairs, run i of each side back to back (as many runs a side, at least 2).
    Refused (InferlabError) for two labs, no measurement in common, or unpairable sides."""
    if not 0 < margin < 1:
        raise InferlabError(f"--margin {margin:g}: expected a fraction between 0 and 1 (0.05 is 5%)")
    dirs_a = [dir_a] if isinstance(dir_a, Path) else list(dir_a)
    dirs_b = [dir_b] if isinstance(dir_b, Path) else list(dir_b)
    if paired and (len(dirs_a) != len(dirs_b) or len(dirs_a) < 2):
        raise InferlabError(f"--paired: {len(dirs_a)} run(s) of A and {len(dirs_b)} of B; pairs need as many runs a "
                            "side, at least 2 (give the others with --also-a / --also-b, in the order they ran)")
    (lab_a, runs_a), (lab_b, runs_b) = _side(dirs_a), _side(dirs_b)
    if lab_a != lab_b:
        raise InferlabError(f"{dirs_a[0]} holds {lab_a!r} and {dirs_b[0]} holds {lab_b!r}: "
                            "compare needs runs of the same lab")
    ma, mb = _common(runs_a), _common(runs_b)
    shared = [n for n in ma if mb.get(n) == ma[n]]
    if not shared:
        raise InferlabError(f"{dirs_a[0]} and {dirs_b[0]} ({lab_a}) share no timed measurement "
                            "(no samples_<unit> list under one name in every results.json)")
    per_run = len(dirs_a) > 1 or len(dirs_b) > 1
    rows = []
    for name in shared:
        xa, xb = _values(runs_a, name, per_run), _values(runs_b, name, per_run)
        est = _estimate(xa, xb, paired)
        result = outcome(est, 1.0, margin)
        rows.append({"name": name, "unit": ma[name], "a_median": float(np.median(xa)), "b_median": float(np.median(xb)),
                     "a_samples": int(xa.size), "b_samples": int(xb.size), "ratio": est.value,
                     "ci_low": est.ci_low, "ci_high": est.ci_high, "confidence": est.confidence,
                     "outcome": result, "reading": READING[result]})
    if paired:
        statistic = "B/A: median of the per-pair ratios of run medians (paired runs), order-statistic 95% CI"
        scope = SCOPE_PAIRS.format(n=len(dirs_a))
    else:
        what = "the runs' medians, one per run" if per_run else "the per-call samples"
        statistic = f"B/A: Hodges-Lehmann ratio of {what} (unpaired), Mann-Whitney 95% CI"
        scope = SCOPE_RUNS.format(a=len(dirs_a), b=len(dirs_b)) if per_run else SCOPE_SAMPLES
    return {"experiment": lab_a, "a": str(dirs_a[0]), "b": str(dirs_b[0]),
            "a_runs": [str(d) for d in dirs_a], "b_runs": [str(d) for d in dirs_b], "margin": margin,
            "paired": paired, "statistic": statistic, "scope": scope,
            "rows": rows, "only_in_a": sorted(set(ma) - set(shared)), "only_in_b": sorted(set(mb) - set(shared))}


def compare_figure(report: dict):
    """Each shared measurement's B/A with its 95% CI on a log axis, the margin shaded around 1."""
    rows = report["rows"]
    fig, ax = new_figure(figsize=(8, max(2.5, 0.28 * len(rows) + 1.2)))
    y = np.arange(len(rows))                                                           # (rows,)
    ratio = np.array([r["ratio"] for r in rows])                                       # (rows,)
    err = np.array([[r["ratio"] - r["ci_low"] for r in rows], [r["ci_high"] - r["ratio"] for r in rows]])  # (2, rows)
    colors = {"above": "tab:red", "below": "tab:green", "equivalent": "tab:blue", "undecided": "tab:gray"}
    m = report["margin"]
    ax.axvspan(1 - m, 1 + m, color="tab:blue", alpha=0.12, label=f"1 +- {m:.0%} (margin)")
    ax.axvline(1.0, color="black", lw=0.8)
    for o in colors:
        sel = [i for i, r in enumerate(rows) if r["outcome"] == o]
        if sel:
            ax.errorbar(ratio[sel], y[sel], xerr=err[:, sel], fmt="o", color=colors[o], capsize=2,
                        label=f"{o} ({READING[o]})")
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter   # (matplotlib is imported where a figure is drawn)

    plain = FuncFormatter(lambda x, _: f"{x:g}")                # 0.9, 1, 2 rather than 10^0, 2x10^0
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=6)
    ax.set_xlabel("B / A (Hodges-Lehmann, 95% CI)")
    side = lambda key: report[key] + (f" (+{len(report[key + '_runs']) - 1} runs)" if len(report[key + "_runs"]) > 1 else "")  # noqa: E731
    ax.set_title(f"{report['experiment']}: B = {side('b')} over A = {side('a')}", fontsize=8)
    ax.legend(fontsize=6, loc="best")
    return fig
