"""Independent checks that a lab's sentences follow from its numbers (used by the lab tests).

The statement of a verdict is parsed back: its quoted value and CI must be the verdict's numbers
(at the 3 significant digits printed), with its confidence, rounds and margin; the outcome must be
the one the rule gives for that CI (written out again here: expected_outcome), a decided
statement must name that side (or the margin it lies inside), and an undecided one must say the
run cannot tell and name no side. A README must quote every statement verbatim, and outside those quotes no sentence
may make a comparison (direction words) that no verdict backs.
"""

from __future__ import annotations

import re

NUM = r"[0-9.]+(?:e[-+][0-9]+)?"
NUMBERS = re.compile(rf" is (?P<v>{NUM}) \((?:(?P<conf>[0-9.]+)% CI|bounds) (?P<lo>{NUM})-(?P<hi>{NUM})"
                     rf"(?:, (?P<n>[0-9]+) rounds)?")
KEYS = {"id", "statement", "value", "p10", "p90", "threshold", "resolved", "ci_low", "ci_high", "confidence",
        "margin", "rounds", "outcome"}
COMPARISON_WORDS = re.compile(
    r"\b(faster|slower|beats?|dominat\w*|confirmed|holds|reliably|outweigh\w*|cheaper|costlier|"
    r"more expensive|wins?|loses|memory-bound|compute-bound|below 10%|above the roof)\b", re.I)


def _close(text: str, x: float) -> bool:
    return float(text) == float(format(x, ".3g"))


def expected_outcome(v: dict) -> str:
    """The rule, written out again: equivalence (the CI inside threshold x (1 +- margin)) first,
    then the CI wholly above or below the threshold; an interval under 95% decides nothing."""
    t, m, lo, hi = v["threshold"], v["margin"], v["ci_low"], v["ci_high"]
    if v["confidence"] is not None and v["confidence"] < 0.95:
        return "undecided"
    if m and t * (1 - m) < lo and hi < t * (1 + m):
        return "equivalent"
    return "above" if lo > t else "below" if hi < t else "undecided"


def check_verdict(v: dict) -> None:
    assert set(v) == KEYS, v
    assert v["p10"] <= v["value"] <= v["p90"] and v["ci_low"] <= v["value"] <= v["ci_high"], v
    assert v["outcome"] == expected_outcome(v), v
    assert v["resolved"] == (v["outcome"] != "undecided"), v
    # a 95% CI of a median needs >= 6 rounds; bounds (no samples) carry neither confidence nor rounds
    assert (v["confidence"] is None) == (v["rounds"] is None), v
    if v["confidence"] is not None and v["confidence"] >= 0.95:
        assert v["rounds"] >= 6, v
    s = v["statement"]
    m = NUMBERS.search(s)
    assert m, s
    assert _close(m["v"], v["value"]) and _close(m["lo"], v["ci_low"]) and _close(m["hi"], v["ci_high"]), v
    if v["confidence"] is None:
        assert m["conf"] is None and "bounds" in s, s
    else:
        assert float(m["conf"]) == round(100 * v["confidence"], 1) and int(m["n"]) == v["rounds"], v
    if v["margin"]:
        assert f"margin +-{v['margin']:.0%}" in s, s        # the margin is named in every statement
    t = f"{v['threshold']:g}"
    side = {"above": f"above {t} across the whole interval", "below": f"below {t} across the whole interval",
            "equivalent": f"inside {t} +-{(v['margin'] or 0):.0%} across the whole interval"}
    for outcome, words in side.items():
        assert (words in s) == (v["outcome"] == outcome), s
    if v["outcome"] == "undecided":
        assert s.startswith("This run cannot tell") and "cannot tell" in s, s
    else:
        assert "cannot tell" not in s, s


def check_verdicts(verdicts: list[dict]) -> None:
    ids = [v["id"] for v in verdicts]
    assert len(ids) == len(set(ids)), ids
    for v in verdicts:
        check_verdict(v)


def unbacked_comparisons(readme: str, verdicts: list[dict]) -> list[str]:
    """Sentences of the README, verdict quotes removed, that use a comparison word."""
    text = readme
    for v in verdicts:
        assert v["statement"] in readme, f"README does not quote verdict {v['id']}: {v['statement']}"
        text = text.replace(v["statement"], "")
    # a question (a heading such as "Which ops are memory-bound?") asserts nothing
    return [line for line in text.splitlines() if COMPARISON_WORDS.search(line) and not line.rstrip().endswith("?")]


def check_readme(readme: str, verdicts: list[dict]) -> None:
    check_verdicts(verdicts)
    bad = unbacked_comparisons(readme, verdicts)
    assert not bad, "comparison without a verdict:\n" + "\n".join(bad)
