"""For CI's lowest-versions step, from pyproject.toml:

  python .ci/lowest_constraints.py          pip constraints pinning every core dependency to its
                                            lowest declared version ("numpy>=2.0" -> "numpy==2.0")
  python .ci/lowest_constraints.py --tools  the test extra without torch and transformers, whose
                                            own floors (e.g. transformers' safetensors>=0.4.3) would
                                            overrule ours; the tests that need them skip there
"""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]

if sys.argv[1:] == ["--tools"]:
    for dep in project["optional-dependencies"]["test"]:
        if not re.match(r"(torch|transformers)\b", dep):
            print(dep)
    raise SystemExit(0)

for dep in project["dependencies"]:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", dep.strip())
    if not m:
        raise SystemExit(f"cannot pin {dep!r}: declare core dependencies as NAME>=VERSION")
    print(f"{m[1]}=={m[2]}")
