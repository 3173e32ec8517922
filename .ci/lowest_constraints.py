"""Print pip constraints pinning every core dependency of pyproject.toml to its lowest declared
version ("numpy>=2.0" -> "numpy==2.0"), for CI's lowest-versions step."""

import re
import tomllib
from pathlib import Path

deps = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
for dep in deps:
    m = re.fullmatch(r"([A-Za-z0-9_.\[\]-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", dep.split(";")[0].strip())
    if not m:
        raise SystemExit(f"cannot pin {dep!r}: declare core dependencies as NAME>=VERSION")
    name = m[1].split("[")[0]        # an extra's packages are pinned by their own lines
    print(f"{name}=={m[2]}")
