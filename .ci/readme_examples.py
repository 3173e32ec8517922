"""CI: run every ```python block of the README, each in a fresh interpreter from the repository root,
so the examples a reader copies keep working.

    python .ci/readme_examples.py [README.md]

A block fails CI on a non-zero exit; the message names the block's first line in the README.
"""

import re
import subprocess
import sys
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the block's first code line, code) for each ```python block."""
    return [(text.count("\n", 0, m.start(1)) + 1, m[1]) for m in BLOCK.finditer(text)]


def main() -> int:
    readme = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent / "README.md")
    found = blocks(readme.read_text(encoding="utf-8"))
    if not found:
        print(f"ci: no python block in {readme}")
        return 1
    for line, code in found:
        print(f"ci: {readme.name} line {line}: running", flush=True)
        rc = subprocess.run([sys.executable, "-c", code], cwd=readme.parent).returncode
        if rc:
            print(f"ci: the python block at {readme.name} line {line} failed (exit {rc})")
            return rc
    print(f"ci: {len(found)} python blocks of {readme.name} ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
