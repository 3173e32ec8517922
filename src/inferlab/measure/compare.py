"""Two runs of one lab, measurement by measurement: is B faster or slower than A, or the same?

Every timing a lab keeps in its results.json is a Stats.to_json() entry with its raw per-call
samples ("samples_ms" / "samples_us"). Two runs of the same lab (two machines, two commits, two
thread counts) share most of them; for each shared one, the ratio B/A is taken unpaired (the two
runs share no rounds), as the Hodges-Lehmann estimate on log times with its Mann-Whitney 95% CI
(verdicts.unpaired), and decided at an equivalence margin by the labs' own rule (verdicts.outcome):
"equivalent" when the CI lies inside 1 +- margin, else "above" (B slower) / "below" (B faster)
when it lies wholly on one side of 1, else "undecided". This is what asv's and pyperf's compare
answer, with criterion's noise threshold as the margin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.measure.plots import new_figure
from inferlab.measure.verdicts import outcome, unpaired

DEFAULT_MARGIN = 0.05
# A list item is named by the first of these keys it has (table[vocab=512]), not by its position:
# two runs of one lab may hold different vocabularies or T, in another order.
ITEM_KEYS = ("vocab", "T", "name", "kernel", "n", "working_set_bytes")
# One run per side: the samples within a run share its machine state (frequency, neighbours,
# memory placement), so the interval is of the samples, not of the drift between runs, which on a
# shared VM can pass the margin (two back-to-back attention runs of one commit: 0.50-1.18).
SCOPE = ("the CI covers the samples within each run, not the drift between runs: a difference "
         "between two runs of one commit is the machine's; repeat runs to see how far it drifts")
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


def compare_runs(dir_a: Path, dir_b: Path, *, margin: float = DEFAULT_MARGIN) -> dict:
    """The comparison of two experiment folders of one lab, as a JSON-able dict:
    {"experiment", "a", "b", "margin", "confidence", "rows": [{name, unit, a_median, b_median,
    a_samples, b_samples, ratio, ci_low, ci_high, confidence, outcome, reading}], "only_in_a",
    "only_in_b"}. Refused (InferlabError) for two labs, or no measurement in common."""
    if not 0 < margin < 1:
        raise InferlabError(f"--margin {margin:g}: expected a fraction between 0 and 1 (0.05 is 5%)")
    a, b = _read(dir_a), _read(dir_b)
    if a.get("experiment") != b.get("experiment"):
        raise InferlabError(f"{dir_a} holds {a.get('experiment')!r} and {dir_b} holds {b.get('experiment')!r}: "
                            "compare needs two runs of the same lab")
    ma, mb = measurements(a), measurements(b)
    shared = [n for n in ma if n in mb and ma[n][0] == mb[n][0]]
    if not shared:
        raise InferlabError(f"{dir_a} and {dir_b} ({a.get('experiment')}) share no timed measurement "
                            "(no samples_<unit> list under one name in both results.json)")
    rows = []
    for name in shared:
        (unit, xa), (_, xb) = ma[name], mb[name]
        est = unpaired(xb, xa)
        result = outcome(est, 1.0, margin)
        rows.append({"name": name, "unit": unit, "a_median": float(np.median(xa)), "b_median": float(np.median(xb)),
                     "a_samples": int(xa.size), "b_samples": int(xb.size), "ratio": est.value,
                     "ci_low": est.ci_low, "ci_high": est.ci_high, "confidence": est.confidence,
                     "outcome": result, "reading": READING[result]})
    return {"experiment": a["experiment"], "a": str(dir_a), "b": str(dir_b), "margin": margin,
            "statistic": "B/A: Hodges-Lehmann ratio of the per-call samples (unpaired), Mann-Whitney 95% CI",
            "scope": SCOPE,
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
    ax.set_title(f"{report['experiment']}: B = {report['b']} over A = {report['a']}", fontsize=8)
    ax.legend(fontsize=6, loc="best")
    return fig
