"""A folder of JSONSchemaBench files whose schema uses given constructs, for `inferlab schema-bench`.

The combinator forms of issue #15 (not, if/then/else, enum/const beside other keywords) are rare
in a stratified sample, so their before/after coverage is measured on the schemas that use them:

    python benchmarks/schema_subset.py ../shared/jsonschemabench /tmp/jsb-combinators
    PYTHONPATH=$PWD/src python -m inferlab schema-bench /tmp/jsb-combinators --vocab none

The folder holds symbolic links to the original files; the per-category counts are printed.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

# keywords beside enum/const that make it more than a list of values of one type
_CONSTRAINING = {"not", "if", "oneOf", "anyOf", "allOf", "$ref", "minimum", "maximum", "pattern", "minLength",
                 "maxLength", "format"}


def uses_combinators(node) -> bool:
    """not, if, or enum/const beside a constraining keyword, anywhere in the schema."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if "not" in n or "if" in n or (("enum" in n or "const" in n) and _CONSTRAINING & set(n)):
                return True
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return False


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python benchmarks/schema_subset.py JSONSCHEMABENCH_DIR OUT_DIR", file=sys.stderr)
        return 2
    src, out = Path(argv[0]), Path(argv[1])
    if out.exists():
        print(f"schema_subset: error: {out} exists", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    counts: Counter = Counter()
    for f in sorted(src.glob("*---*.json")):
        if uses_combinators(json.loads(f.read_text(encoding="utf-8"))["schema"]):
            counts[f.name.split("---")[0]] += 1
            os.symlink(f.resolve(), out / f.name)
    for category, n in sorted(counts.items()):
        print(f"{category:16s} {n:5d}")
    print(f"{'all':16s} {sum(counts.values()):5d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
