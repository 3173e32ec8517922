"""Independent checks that a lab's sentences follow from its numbers (used by the lab tests).

The statement of a verdict is parsed back: its quoted value and p10-p90 must be the verdict's
numbers (at the 3 significant digits printed), a resolved statement must name the side of the
threshold the interval really lies on, and an unresolved one must say the run cannot tell and
name no side. A README must quote every statement verbatim, and outside those quotes no sentence
may make a comparison (direction words) that no verdict backs.
"""

from __future__ import annotations

import re

NUMBERS = re.compile(r" is (?P<v>[-0-9.e+]+) \(p10-p90 (?P<lo>[-0-9.e+]+)-(?P<hi>[0-9.e+]+)\)")
COMPARISON_WORDS = re.compile(
    r"\b(faster|slower|beats?|dominat\w*|confirmed|holds|reliably|outweigh\w*|cheaper|costlier|"
    r"more expensive|wins?|loses|memory-bound|compute-bound|below 10%|above the roof)\b", re.I)


def _close(text: str, x: float) -> bool:
    return float(text) == float(format(x, ".3g"))


def check_verdict(v: dict) -> None:
    assert set(v) == {"id", "statement", "value", "p10", "p90", "threshold", "resolved"}, v
    assert v["p10"] <= v["value"] <= v["p90"], v
    above, below = v["p10"] > v["threshold"], v["p90"] < v["threshold"]
    assert v["resolved"] == (above or below), v
    m = NUMBERS.search(v["statement"])
    assert m, v["statement"]
    assert _close(m["v"], v["value"]) and _close(m["lo"], v["p10"]) and _close(m["hi"], v["p90"]), v
    s = v["statement"]
    t = f"{v['threshold']:g}"
    if above:
        assert f"above {t} across the whole interval" in s and "cannot tell" not in s, s
    elif below:
        assert f"below {t} across the whole interval" in s and "cannot tell" not in s, s
    else:
        assert s.startswith("This run cannot tell") and "straddles" in s, s
        assert "across the whole interval" not in s, s


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
