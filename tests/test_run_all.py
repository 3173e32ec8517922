"""`inferlab run`: lab registry order, and earlier results never overwritten without --force."""

from __future__ import annotations

from inferlab.cli import main
from inferlab.cli.run_all import run_root
from inferlab.labs import all_labs


def test_registry_has_the_four_labs_in_order():
    assert [lab.name for lab in all_labs()] == ["01-roofline", "15-attention-perf", "22-cache-sizing",
                                                "30-mask-overhead"]


def test_existing_results_send_the_run_to_a_new_folder(tmp_path):
    names = ["01-roofline", "22-cache-sizing"]
    assert run_root(tmp_path, names, force=False) == tmp_path          # nothing there yet
    (tmp_path / "22-cache-sizing").mkdir()
    fresh = run_root(tmp_path, names, force=False)
    assert fresh.parent == tmp_path / "runs" and not fresh.exists()
    assert run_root(tmp_path, names, force=True) == tmp_path           # --force: in place


def test_run_one_lab_twice_keeps_the_first(tmp_path, capsys):
    assert main(["run", "22-cache-sizing", "--out", str(tmp_path)]) == 0
    first = (tmp_path / "22-cache-sizing" / "results.json").read_bytes()
    assert main(["run", "22-cache-sizing", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "22-cache-sizing" / "results.json").read_bytes() == first
    (second,) = (tmp_path / "runs").iterdir()
    assert (second / "22-cache-sizing" / "results.json").is_file()
    assert "already holds results" in " ".join(capsys.readouterr().err.split())   # rich wraps lines


def test_unknown_lab_is_one_line_exit_2(tmp_path, capsys):
    assert main(["run", "99-nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown lab" in err[0] and "01-roofline" in err[0]
