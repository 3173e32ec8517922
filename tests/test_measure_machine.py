"""Machine description: BLAS threads set and restored, sysfs parsing on a fake tree."""

import os

import pytest
from threadpoolctl import threadpool_info

from inferlab.measure import machine
from inferlab.measure.machine import blas_threads, machine_info, versions


def _blas_threads_now():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_blas_threads_sets_and_restores():
    before = _blas_threads_now()
    with blas_threads(1):
        assert all(n == 1 for n in _blas_threads_now())
        assert machine_info(1)["threads_used"] == 1
    assert _blas_threads_now() == before
    with blas_threads(None):
        assert _blas_threads_now() == before


def _fake_sysfs(root, governor=None):
    cache = root / "cpu0" / "cache"
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "36M")]):
        d = cache / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "shared_cpu_list").write_text("0\n")
    if governor:
        (root / "cpu0" / "cpufreq").mkdir(parents=True)
        (root / "cpu0" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
        (root / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text("3500000\n")


def test_caches_and_governor_from_sysfs(tmp_path, monkeypatch):
    _fake_sysfs(tmp_path, governor="performance")
    monkeypatch.setattr(machine, "_CPU_SYSFS", tmp_path)
    assert [c["size_bytes"] for c in machine.data_caches()] == [48 * 1024, 2048 * 1024, 36 * 1024**2]
    assert machine.last_level_cache_bytes() == 36 * 1024**2
    assert machine.cpu_governor() == ("performance", None)
    assert machine.cpu_mhz()["max_mhz"] == 3500.0  # sysfs kHz -> MHz
    info = machine_info(2)
    assert info["cpu_governor_at_run"] == "performance" and "governor_note" not in info


def test_unreadable_governor_is_unknown_with_note(tmp_path, monkeypatch):
    _fake_sysfs(tmp_path)
    monkeypatch.setattr(machine, "_CPU_SYSFS", tmp_path)
    gov, note = machine.cpu_governor()
    assert gov == "unknown" and "scaling_governor" in note
    info = machine_info(None)
    assert info["cpu_governor_at_run"] == "unknown" and info["governor_note"] == note


def test_env_recorded_not_changed(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    info = machine_info(1)
    assert info["env"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell"


def test_versions_name_the_blas():
    v = versions()
    import numpy
    assert v["numpy"] == numpy.__version__
    assert v["blas"], "numpy always loads a BLAS; threadpoolctl should see it"
    assert v["blas"][0]["internal_api"] in ("openblas", "mkl", "blis", "accelerate")


def test_blas_threads_rejects_zero():
    with pytest.raises(ValueError):
        with blas_threads(0):
            pass


def test_manifest_reads_blas_threads_inside_the_limit_and_records_provenance():
    from inferlab.measure.machine import machine_info, provenance

    info = machine_info(1)
    assert all(lib["num_threads"] == 1 for lib in info["blas"] if lib["user_api"] == "blas")
    p = provenance()
    assert p["inferlab"] and p["command"]
    if p["git_commit"] is not None:            # running from a checkout
        assert len(p["git_commit"]) == 40 and isinstance(p["git_dirty"], bool)


def _status_bytes(field: str) -> int:
    """A VmRSS/VmHWM line of /proc/self/status, in bytes (read here, apart from the code under test)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def test_run_cost_counts_the_memory_touched_after_it_started_and_its_wall_time():
    import time

    import numpy as np

    from inferlab.measure.machine import RunCost

    earlier = np.ones(96 * 2**20 // 8)         # a peak before the run, freed (mmap'd: back to the OS)
    del earlier
    cost = RunCost()
    resident = _status_bytes("VmRSS")
    if cost.scope.startswith("since"):         # VmHWM was reset: the earlier block is not this run's peak
        assert cost.to_json()["peak_rss_bytes"] < resident + 48 * 2**20
    block = np.ones(64 * 2**20 // 8)           # 64 MiB, every page written
    time.sleep(0.05)
    out = cost.to_json()
    assert out["peak_rss_bytes"] >= resident + 0.9 * block.nbytes, (out, resident)
    assert out["wall_s"] >= 0.05


def test_provenance_of_an_installed_copy_is_the_commit_its_build_recorded(monkeypatch, tmp_path):
    """Outside a checkout (a plain `pip install .`), git cannot see the package: the commit and
    dirty flag come from the _build.json that setup.py's build step wrote, and are null without it."""
    from inferlab.measure import machine

    monkeypatch.setattr(machine, "_PACKAGE", tmp_path)          # no git repository here
    assert machine._git("rev-parse", "HEAD") is None
    p = machine.provenance()
    assert p["git_commit"] is None and p["git_dirty"] is None
    (tmp_path / "_build.json").write_text('{"git_commit": "' + "ab" * 20 + '", "git_dirty": false}\n')
    p = machine.provenance()
    assert p["git_commit"] == "ab" * 20 and p["git_dirty"] is False


def test_train_records_the_build_commit_outside_a_checkout(monkeypatch, tmp_path):
    """`inferlab train` stamps its weights with a commit: outside git (a plain install), the one
    the build recorded, "+dirty" where the build's checkout was."""
    from inferlab.cli import train
    from inferlab.measure import machine

    def no_git(*args, **kwargs):
        raise OSError("no git here")

    monkeypatch.setattr(train.subprocess, "run", no_git)
    monkeypatch.setattr(machine, "_PACKAGE", tmp_path)
    assert train._git_commit() == "unknown"
    (tmp_path / "_build.json").write_text('{"git_commit": "' + "cd" * 20 + '", "git_dirty": true}\n')
    assert train._git_commit() == "cd" * 20 + "+dirty"


def test_a_runs_own_outputs_do_not_make_it_dirty(monkeypatch, tmp_path):
    """git_dirty says whether the code differs from the commit: an edit to a tracked results file
    (what `run all` rewrites before its later labs) leaves it false; one to the package sets it."""
    import subprocess

    from inferlab.measure import machine

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "code.py").write_text("x = 1\n")
    (tmp_path / "results.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(machine, "_PACKAGE", package)
    monkeypatch.setattr(machine.sys, "argv", ["inferlab", "run", "all"])
    (tmp_path / "results.json").write_text('{"new": 1}\n')
    assert machine.provenance()["git_dirty"] is False
    (package / "code.py").write_text("x = 2\n")
    assert machine.provenance()["git_dirty"] is True
