"""The JSON-Schema-Test-Suite, run as schema-bench runs a suite folder (issue 46): per draft,
core groups and optional/ apart, how many groups compile, how many invalid tests are rejected and
valid ones accepted, and which keywords the refusals name.

Each group is one schema with its tests (bench.schema_bench.suite_cases); each group's format
policy is the one the suite assumes (assert under optional/format/, annotate elsewhere) unless
--format names one; remotes/ is the registry of remote references (--ref-dir; --no-ref-dir
runs without one, as a user without a registry would).

    python benchmarks/conformance.py --out benchmarks/results/conformance [--force] [--json]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from inferlab.cli.common import add_lab_arguments, parse_out_args
from inferlab.bench.schema_bench import BenchConfig, run_bench
from inferlab.errors import InferlabError
from inferlab.cli.publish import benchmark_main

EXPERIMENT = "conformance"
DEFAULT_SUITE = Path("../shared/json-schema-test-suite")  # (as schema-bench's DEFAULT_DIR: from the repository root)
DRAFTS = ("draft2020-12", "draft2019-09", "draft7")


def refusal_keyword(reason: str) -> str:
    """The keyword a refusal names ("minContains at #/...: ..." -> "minContains"); a size
    limit, an automaton's or an unsatisfiable schema by that name."""
    m = re.match(r"(\S+) at #", reason)
    if m and "(the schema is unsatisfiable)" not in reason:
        return m.group(1)
    if "unsatisfiable" in reason:
        return "(unsatisfiable schema)"
    return "(size limit)"


def tally(rows: list[dict]) -> dict:
    """groups, compiled, invalid rejected / total, valid accepted / total, refusals by keyword."""
    compiled = [r for r in rows if r["compiled"]]
    refusals = Counter(refusal_keyword(r["reason"]) for r in rows if not r["compiled"])
    return {"groups": len(rows), "compiled": len(compiled),
            "compiled_share": len(compiled) / len(rows) if rows else None,
            "invalid": sum(r["invalid_total"] for r in compiled),
            "invalid_rejected": sum(r["invalid_rejected"] for r in compiled),
            "valid": sum(r["valid_total"] for r in compiled),
            "valid_accepted": sum(r["valid_accepted"] for r in compiled),
            "refusals_by_keyword": dict(refusals.most_common())}


def run(args) -> dict:
    suite = Path(args.suite)
    remotes = None if args.no_ref_dir else suite / "remotes"
    drafts, groups = {}, {}
    for draft in args.drafts:
        folder = suite / "tests" / draft
        if not folder.is_dir():
            raise InferlabError(f"--suite {suite}: no tests/{draft} folder")
        results = run_bench(BenchConfig(directory=folder, format=args.format_policy, ref_dir=remotes))
        rows = [{k: r[k] for k in ("name", "category", "compiled", "reason", "valid_total", "valid_accepted",
                                   "invalid_total", "invalid_rejected", "unsound")} for r in results["schemas"]]
        core = [r for r in rows if not r["category"].startswith("optional/")]
        drafts[draft] = {"core": tally(core), "optional": tally([r for r in rows if r not in core])}
        groups[draft] = rows
    config = {"suite": str(suite), "drafts": list(args.drafts), "format": args.format_policy or "per group",
              "ref_dir": None if remotes is None else str(remotes)}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "summary": drafts, "groups": groups}


def report(results: dict) -> None:
    print("| suite | part | groups | compile | invalid rejected | valid accepted |")
    print("|---|---|---|---|---|---|")
    for draft, parts in results["summary"].items():
        for part, t in parts.items():
            print(f"| {draft} | {part} | {t['groups']} | {t['compiled']} ({100 * (t['compiled_share'] or 0):.1f}%) | "
                  f"{t['invalid_rejected']}/{t['invalid']} | {t['valid_accepted']}/{t['valid']} |")
    for draft, parts in results["summary"].items():
        print(f"{draft} core refusals: " + ", ".join(f"{k} {n}" for k, n in parts["core"]["refusals_by_keyword"].items()))
    for draft, rows in results["groups"].items():
        for r in rows:
            if r["unsound"]:
                print(f"UNSOUND {draft} {r['name']}: accepted invalid {r['unsound'][0]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/conformance")
    p.add_argument("--suite", type=Path, default=DEFAULT_SUITE, help="the JSON-Schema-Test-Suite folder")
    p.add_argument("--drafts", nargs="+", choices=DRAFTS, default=list(DRAFTS))
    p.add_argument("--format", dest="format_policy", choices=("assert", "annotate"), default=None,
                   help="one format policy for every group (default: the one each group assumes)")
    p.add_argument("--no-ref-dir", action="store_true", help="no registry for remote references")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    return benchmark_main("conformance", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
