"""The attention lab's results.json, as its measuring (labs/attention.py) writes it and its report
(labs/attention_report.py) reads it: the experiment's name, its profile points by T, and the
seed's summary figures. Apart from both, so that measuring imports nothing of the report's.
"""

from __future__ import annotations

from inferlab.attention_perf import T2_OPS

EXPERIMENT = "15-attention-perf"
SUMMARY_T = 512   # the seed's results_summary keys are all at T = 512
# summary figure -> its results.json key at T = 512: the seed's names (phase_27_motivation_* carry no
# T but are at T = 512 too); at the largest T measured each figure's key is `<figure>_at_largest_T`
SEED_SUMMARY_KEYS = {"softmax_GFLOPS": "softmax_GFLOPS_at_T_512",
                     "softmax_pct_of_total": "softmax_pct_of_total_at_T_512",
                     "scores_GFLOPS": "scores_GFLOPS_at_T_512",
                     "phase_27_motivation_pct_memory": "phase_27_motivation_pct_memory",
                     "phase_27_motivation_ops": "phase_27_motivation_ops",
                     "t2_ops_pct_of_total": "t2_ops_pct_of_total_at_T_512",
                     "softmax_pct_of_memory_roof": "softmax_pct_of_memory_roof_at_T_512"}


def point_at(results: dict, T: int) -> dict | None:
    return next((p for p in results["profile"]["points"] if p["T"] == T), None)


def largest_point(results: dict) -> dict:
    """The profile point of the largest T measured (--T may list lengths in any order)."""
    return max(results["profile"]["points"], key=lambda p: p["T"])


def _summary_figures(p: dict | None) -> dict:
    """The summary figures of one profile point (all None where the point was not measured).

    phase_27_motivation_pct_memory: the share (%) of the forward's median time spent in the T^2
    ops that flash attention fuses (scores, softmax, av) AND that sit left of the ridge point
    (medians) on this machine: the time whose cost is bytes that flash removes.
    """
    if p is None:
        return dict.fromkeys(SEED_SUMMARY_KEYS)
    ops_ = p["ops"]
    memory_t2 = [name for name in T2_OPS if ops_[name]["bound"] == "memory"]
    return {"softmax_GFLOPS": ops_["softmax"]["gflops"], "softmax_pct_of_total": ops_["softmax"]["pct_of_total"],
            "scores_GFLOPS": ops_["scores"]["gflops"],
            "phase_27_motivation_pct_memory": sum(ops_[name]["pct_of_total"] for name in memory_t2),
            "phase_27_motivation_ops": memory_t2,
            "t2_ops_pct_of_total": sum(ops_[name]["pct_of_total"] for name in T2_OPS),
            "softmax_pct_of_memory_roof": ops_["softmax"]["pct_of_attainable"]}


def summary_json(results: dict) -> dict:
    """The seed's results_summary at T=512 under its own key names (null where T=512 was not
    measured), and the same figures at the largest T measured, with that T as `largest_T`."""
    at_512 = _summary_figures(point_at(results, SUMMARY_T))
    largest = largest_point(results)
    return {**{SEED_SUMMARY_KEYS[name]: v for name, v in at_512.items()}, "largest_T": largest["T"],
            **{f"{name}_at_largest_T": v for name, v in _summary_figures(largest).items()}}
