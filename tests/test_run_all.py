"""`inferlab run`: lab registry order, and earlier results never overwritten without --force."""

from __future__ import annotations

import pytest

from inferlab.cli import main
from inferlab.cli.run_all import DEFAULT_ROOT, run_root
from inferlab.errors import InferlabError
from inferlab.labs import all_labs


def test_registry_has_the_four_labs_in_order():
    assert [lab.name for lab in all_labs()] == ["01-roofline", "15-attention-perf", "22-cache-sizing",
                                                "30-mask-overhead"]


def test_existing_results_send_the_default_run_to_a_new_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = ["01-roofline", "22-cache-sizing"]
    assert run_root(None, names, force=False) == DEFAULT_ROOT          # nothing there yet
    (tmp_path / DEFAULT_ROOT / "22-cache-sizing").mkdir(parents=True)
    fresh = run_root(None, names, force=False)
    assert fresh.parent == DEFAULT_ROOT / "runs" and not fresh.exists()
    assert run_root(None, names, force=True) == DEFAULT_ROOT           # --force: in place
    with pytest.raises(InferlabError, match="--force"):                # an explicit --out is never redirected
        run_root(DEFAULT_ROOT, names, force=False)


def test_run_one_lab_twice_keeps_the_first(tmp_path, capsys, monkeypatch, plain_kv_figure):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "22-cache-sizing"]) == 0
    first = (tmp_path / "experiments" / "22-cache-sizing" / "results.json").read_bytes()
    assert main(["run", "22-cache-sizing"]) == 0
    assert (tmp_path / "experiments" / "22-cache-sizing" / "results.json").read_bytes() == first
    (second,) = (tmp_path / "experiments" / "runs").iterdir()
    assert (second / "22-cache-sizing" / "results.json").is_file()
    err = "".join(capsys.readouterr().err.split())   # rich wraps lines (anywhere, paths included)
    assert "alreadyholdsresults" in err and "--forcetoreplaceexperiments/22-cache-sizing/inplace;" in err


def test_unknown_lab_is_one_line_exit_2(tmp_path, capsys):
    assert main(["run", "99-nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown lab" in err[0] and "01-roofline" in err[0]


@pytest.mark.parametrize("argv, budget", [([], None), (["--budget-s", "7.5"], 7.5), (["--budget-s", "0"], 0.0)])
def test_run_all_passes_the_budget_to_every_lab(tmp_path, monkeypatch, argv, budget):
    """--budget-s reaches each lab's LabOptions; without it each lab keeps its own default (None)."""
    from inferlab.cli import run_all
    from inferlab.labs import Lab

    seen = []
    fake = [Lab(order=i, name=f"0{i}-fake", title="fake", run=lambda o: seen.append(o.budget_s) or {})
            for i in (1, 2)]
    monkeypatch.setattr(run_all, "all_labs", lambda: fake)
    assert main(["run", "all", "--out", str(tmp_path / "exp"), *argv]) == 0
    assert seen == [budget, budget]


def test_run_all_refuses_a_negative_budget(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["run", "all", "--budget-s", "-1", "--out", str(tmp_path / "exp")])
    assert exc.value.code == 2 and not (tmp_path / "exp").exists()
