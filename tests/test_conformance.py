"""The official JSON-Schema-Test-Suite as the oracle: for every group that compiles, the grammar
accepts exactly the tests the suite marks valid. Run as schema-bench runs a suite folder
(bench.schema_bench.suite_cases): each group's format policy is the one the suite assumes (assert
under optional/format/, annotate elsewhere), a schema without $schema is read in its folder's
draft, and remotes/ is the registry of other documents (ref_dir).

Every known disagreement is listed below with its reason, and the test fails when a listed one
no longer disagrees, so the list stays true. A group that does not compile is a refusal (its
reason names keyword and pointer), not a disagreement; benchmarks/conformance.py counts them.

The suite is ../shared/json-schema-test-suite beside the repository (or $INFERLAB_JSON_SCHEMA_SUITE);
the tests skip without it."""

import os
from pathlib import Path

import pytest

from inferlab.bench.schema_bench import BenchConfig, run_bench, suite_cases

SUITE = Path(os.environ.get("INFERLAB_JSON_SCHEMA_SUITE",
                            Path(__file__).resolve().parents[1] / ".." / "shared" / "json-schema-test-suite"))
needs_suite = pytest.mark.skipif(not (SUITE / "tests").is_dir(), reason=f"no JSON-Schema-Test-Suite at {SUITE}")

# Valid tests rejected (completeness; an invalid test accepted is never listed here), by group.
INCOMPLETE = {
    # formats.NARROWINGS, each recorded where a schema uses it
    "optional/format/date-time/": "no leap second, upper-case T and Z only",
    "optional/format/time/": "no leap second, upper-case T and Z only",
    "optional/format/email/": "no quoted local part, comment or domain literal",
    "optional/format/hostname/": "at most 62 characters a label; no A-label (xn--)",
    "optional/format/uri/": "no IP-literal host",
    "optional/format/iri/": "no IP-literal host; no code point beyond the BMP (jsonschema's checker rejects them)",
    "optional/format/ecmascript-regex/": "format regex: a regular subset of the regexes",
    "optional/format/uri-template/": "no apostrophe (RFC 6570's literals), no {%41} (jsonschema's checker)",
    "optional/format/relative-json-pointer/": "no 0 before another digit, 100 (jsonschema's checker)",
}
# Invalid tests accepted, only in optional/ groups whose behaviour the specification leaves open.
LOOSER = {
    "optional/dependencies-compatibility/": "`dependencies` is not a 2019-09/2020-12 keyword: ignored there, as "
                                            "jsonschema and the specification do (listed in CompiledGrammar.ignored)",
    "optional/content/": "draft-07's contentMediaType/contentEncoding are annotations (jsonschema reads them so)",
}
DRAFTS = ("draft2020-12", "draft2019-09", "draft7")
# The fast subset: the references, combinators, arrays and formats this issue touched.
FAST = ("draft2020-12/ref.json", "draft2020-12/refRemote.json", "draft2020-12/anchor.json",
        "draft2020-12/dynamicRef.json", "draft2019-09/recursiveRef.json", "draft2020-12/minContains.json",
        "draft2020-12/maxContains.json", "draft2020-12/format.json", "draft2020-12/unevaluatedItems.json",
        "draft2020-12/patternProperties.json", "draft2020-12/multipleOf.json", "draft7/refRemote.json",
        "draft2020-12/optional/format/hostname.json", "draft2020-12/optional/format/uri-template.json")


def _listed(name: str, table: dict) -> str | None:
    return next((prefix for prefix in table if name.startswith(prefix)), None)


def check(path: Path) -> tuple[set, set]:
    """Run `path` (a suite folder or file); assert every compiled group agrees with the suite but
    the listed ones; return the listed prefixes that did disagree (incomplete, looser)."""
    results = run_bench(BenchConfig(directory=path, ref_dir=SUITE / "remotes"))
    cases = {c.name: c for c in suite_cases(path)}
    wrong, incomplete, looser = [], set(), set()
    for r in results["schemas"]:
        if not r["compiled"]:
            # a refusal as unsatisfiable is a claim too: no test of the group may be valid
            if "(the schema is unsatisfiable)" in r["reason"] and any(t["valid"] for t in cases[r["name"]].load()[1]):
                wrong.append(f"{r['name']}: refused as unsatisfiable, yet the suite has a valid test")
            continue
        if r["invalid_rejected"] < r["invalid_total"]:
            prefix = _listed(r["name"], LOOSER)
            if prefix is None or not r["name"].startswith("optional/"):
                wrong.append(f"{r['name']}: accepted invalid {r['unsound'][:3]}")
            looser.add(prefix)
        if r["valid_accepted"] < r["valid_total"]:
            prefix = _listed(r["name"], INCOMPLETE)
            if prefix is None:
                wrong.append(f"{r['name']}: rejected {r['valid_total'] - r['valid_accepted']} valid test(s)")
            incomplete.add(prefix)
    assert not wrong, "\n".join(wrong)
    return incomplete, looser


@needs_suite
def test_fast_subset_agrees_with_the_suite():
    for rel in FAST:
        check(SUITE / "tests" / rel)


@needs_suite
@pytest.mark.slow
def test_every_compiled_group_of_three_drafts_agrees_with_the_suite():
    seen = set()
    for draft in DRAFTS:
        incomplete, looser = check(SUITE / "tests" / draft)
        seen |= incomplete | looser
    assert seen == set(INCOMPLETE) | set(LOOSER)  # each listed disagreement still happens
