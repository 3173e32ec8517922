"""Build hook, beside pyproject.toml (which holds everything else): a plain `pip install .` copies
the package out of the checkout, so at run time git can no longer say which commit the code is.
The build writes that commit (and whether the checkout was dirty) into the installed package as
inferlab/_build.json, which measure.machine.provenance reads where no checkout holds the code."""

import json
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


class BuildPyWithCommit(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install runs from the checkout: git sees it
            return
        commit = _git("rev-parse", "HEAD")
        dirty = None if commit is None else bool(_git("status", "--porcelain", "--untracked-files=no"))
        target = Path(self.build_lib) / "inferlab" / "_build.json"
        target.write_text(json.dumps({"git_commit": commit, "git_dirty": dirty}) + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildPyWithCommit})
