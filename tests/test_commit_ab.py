"""benchmarks/commit_ab.py refuses bad input before any work (a run takes minutes): one stderr
line, exit 2, no git worktree made, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent


@pytest.fixture()
def commit_ab(load_benchmark):
    return load_benchmark("commit_ab")


def _worktrees() -> str:
    return subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("argv, needle", [
    (["{dir}", "--out", "{existing}"], "exists (use --force"),
    (["{dir}", "--base", "no-such-commit"], "--base no-such-commit: not a commit"),
    (["{missing}"], "is not a folder of JSONSchemaBench files"),
    (["{dir}", "--rounds", "0"], "--rounds must be >= 1"),
])
def test_bad_input_is_one_line_exit_2_before_any_work(commit_ab, tmp_path, capsys, argv, needle):
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    before = _worktrees()
    values = {"dir": str(tmp_path), "existing": str(existing), "missing": str(tmp_path / "nope")}
    assert commit_ab.main([a.format(**values) for a in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert existing.read_text() == "{}" and _worktrees() == before
