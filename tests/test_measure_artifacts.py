"""Atomic writes, the experiment folder, the manifest, and schema validation.

Every written manifest/results file is validated with the real `jsonschema` library as the
oracle for the built-in checker used at run time.
"""

import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from inferlab.errors import InferlabError
from inferlab.measure import artifacts
from inferlab.measure.artifacts import (ExperimentWriter, SchemaMismatch, atomic_write_bytes,
                                        atomic_write_json, build_manifest, load_schema, validate)
from inferlab.measure.plots import new_figure


def jsonschema_check(obj, name):
    jsonschema.validate(obj, load_schema(name), cls=jsonschema.Draft202012Validator, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def a_manifest():
    return build_manifest(experiment="99-test", seed=3, config={"n": 1},
                          depends_on="experiments/01-roofline/manifest.json",
                          results_summary={"x": 1.5}, threads=1)


def test_schemas_are_valid_json_schema():
    for name in artifacts.SCHEMA_NAMES:
        jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_manifest_shape_block_f():
    m = a_manifest()
    for key in ("experiment", "date", "seed", "versions", "depends_on", "config", "hardware",
                "results_summary", "schema_version"):
        assert key in m
    hw = m["hardware"]
    for key in ("cpu_model", "cores", "threads_used", "cpu_governor_at_run"):
        assert key in hw
    assert hw["threads_used"] == 1
    if hw["cpu_governor_at_run"] == "unknown":
        assert hw["governor_note"]
    assert {"python", "numpy", "inferlab", "blas"} <= set(m["versions"])
    for lib in m["versions"]["blas"]:
        assert set(lib) == {"internal_api", "version", "kernel", "threading_layer"}
    validate(m, "manifest")
    jsonschema_check(m, "manifest")


def _mutations(m):
    """(description, broken manifest) pairs, each breaking one rule of the schema."""
    for key in ("experiment", "date", "seed", "versions", "hardware", "results_summary", "schema_version"):
        bad = copy.deepcopy(m)
        del bad[key]
        yield f"missing {key}", bad
    for pointer, value in ((("seed",), "zero"), (("date",), "2 Dec 2026"), (("schema_version",), 0),
                           (("hardware", "cores"), 0), (("hardware", "threads_used"), 1.5),
                           (("versions", "blas"), {"a": 1}), (("depends_on",), 7),
                           (("depends_on",), ["ok", 3]), (("experiment",), ""),
                           (("config",), [])):
        bad = copy.deepcopy(m)
        target = bad
        for k in pointer[:-1]:
            target = target[k]
        target[pointer[-1]] = value
        yield f"{'/'.join(pointer)}={value!r}", bad
    bad = copy.deepcopy(m)
    bad["hardware"]["cpu_governor_at_run"] = "unknown"
    bad["hardware"].pop("governor_note", None)
    yield "unknown governor without a note", bad
    bad = copy.deepcopy(m)
    bad["extra"] = 1
    yield "extra top-level key", bad
    bad = copy.deepcopy(m)
    bad["seed"] = True
    yield "boolean seed", bad


def test_builtin_checker_agrees_with_jsonschema():
    m = a_manifest()
    for what, bad in _mutations(m):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema_check(bad, "manifest")
        with pytest.raises(SchemaMismatch):
            validate(bad, "manifest")
    ok = copy.deepcopy(m)
    ok["hardware"]["cpu_governor_at_run"] = "performance"
    ok["hardware"].pop("governor_note", None)
    ok["depends_on"] = ["a", "b"]
    jsonschema_check(ok, "manifest")
    validate(ok, "manifest")


def test_results_schema():
    good = {"schema_version": 1, "experiment": "01-roofline", "anything": [1, 2]}
    validate(good, "results")
    jsonschema_check(good, "results")
    for bad in ({"experiment": "x"}, {"schema_version": 1}, {"schema_version": "1", "experiment": "x"}):
        with pytest.raises(SchemaMismatch):
            validate(bad, "results")
        with pytest.raises(jsonschema.ValidationError):
            jsonschema_check(bad, "results")


def test_schema_mismatch_names_the_pointer():
    bad = a_manifest()
    bad["hardware"]["cores"] = "two"
    with pytest.raises(SchemaMismatch, match="/hardware/cores"):
        validate(bad, "manifest")


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "f.json"
    atomic_write_json(p, {"a": 1})
    atomic_write_json(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert os.listdir(tmp_path) == ["f.json"]
    with pytest.raises(ValueError):
        atomic_write_json(p, {"a": float("nan")})  # NaN is not JSON
    assert json.loads(p.read_text()) == {"a": 2}


def test_failed_write_keeps_previous_file(tmp_path, monkeypatch):
    p = tmp_path / "results.json"
    p.write_text("previous")

    def fail(fd):
        raise KeyboardInterrupt  # interrupted after the data went to the temp file

    monkeypatch.setattr(artifacts.os, "fsync", fail)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(p, b"new" * 1000)
    assert p.read_text() == "previous"
    assert os.listdir(tmp_path) == ["results.json"]


def test_write_killed_midway_keeps_previous_file(tmp_path):
    """SIGKILL a writer after it has written part of the data: the target is untouched."""
    p = tmp_path / "results.json"
    p.write_text("previous")
    code = f"""
import os, sys, time
from inferlab.measure import artifacts
def stall(fd):
    print("written", flush=True)
    time.sleep(60)
artifacts.os.fsync = stall
artifacts.atomic_write_bytes({str(p)!r}, b"x" * 10_000_000)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert p.read_text() == "previous"


def _writer_with_files(out, force=False):
    w = ExperimentWriter(out, force=force)
    w.add_json("results.json", {"schema_version": 1, "experiment": "99-test", "v": 1})
    w.add_json("manifest.json", a_manifest())
    w.add_text("README.md", "# hi\n")
    fig, ax = new_figure()
    ax.plot([1, 2], [3, 4])
    w.add_figure("plot.png", fig)
    return w


def test_experiment_writer_publishes_whole_folder(tmp_path):
    out = tmp_path / "experiments" / "99-test"
    assert _writer_with_files(out).commit() == out
    assert sorted(os.listdir(out)) == ["README.md", "manifest.json", "plot.png", "results.json"]
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("results", "manifest"):
        jsonschema_check(json.loads((out / f"{name}.json").read_text()), name)
    assert os.listdir(out.parent) == ["99-test"]  # no temp siblings left


def test_existing_folder_needs_force(tmp_path):
    out = tmp_path / "99-test"
    _writer_with_files(out).commit()
    with pytest.raises(InferlabError, match="--force"):
        ExperimentWriter(out, force=False)
    w = _writer_with_files(out, force=True)
    w.add_text("README.md", "# second\n")
    w.commit()
    assert (out / "README.md").read_text() == "# second\n"
    assert os.listdir(tmp_path) == ["99-test"]


def test_invalid_results_publish_nothing_and_keep_old(tmp_path):
    out = tmp_path / "99-test"
    _writer_with_files(out).commit()
    w = _writer_with_files(out, force=True)
    w.add_json("results.json", {"experiment": "99-test"})  # no schema_version
    with pytest.raises(SchemaMismatch):
        w.commit()
    assert json.loads((out / "results.json").read_text())["v"] == 1
    assert os.listdir(tmp_path) == ["99-test"]


def test_failed_swap_restores_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "99-test"
    _writer_with_files(out).commit()
    w = _writer_with_files(out, force=True)
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.startswith(".99-test.tmp-"):
            raise OSError("disk gone")
        return real_rename(src, dst)

    monkeypatch.setattr(artifacts.os, "rename", rename)
    with pytest.raises(OSError, match="disk gone"):
        w.commit()
    assert json.loads((out / "results.json").read_text())["v"] == 1
    assert os.listdir(tmp_path) == ["99-test"]


@pytest.mark.parametrize("make_out", [
    lambda tmp: (tmp / "file.txt").write_text("x") and tmp / "file.txt" / "sub" / "out",
    lambda tmp: Path("/proc/inferlab-test/out"),
])
def test_unwritable_out_fails_fast(tmp_path, make_out):
    out = make_out(tmp_path)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(InferlabError, match="--out"):
        ExperimentWriter(out, force=False)
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_parent_fails_fast(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InferlabError, match="cannot write"):
            ExperimentWriter(ro / "out", force=False)
    finally:
        ro.chmod(0o700)


def test_artifact_names_are_plain(tmp_path):
    w = ExperimentWriter(tmp_path / "x", force=False)
    for name in ("../evil", "a/b", ".hidden", ""):
        with pytest.raises(ValueError):
            w.add_text(name, "x")


def test_the_manifest_names_the_commit_the_run_started_from(tmp_path, monkeypatch):
    """A commit made while a long run goes on is not the run's code: provenance is read when the
    writer is made (before the work), not when the manifest is built (after it)."""
    start = {"command": "inferlab x", "inferlab": "0.1.0", "git_commit": "a" * 40, "git_dirty": False}
    later = dict(start, git_commit="b" * 40)
    monkeypatch.setattr(artifacts, "provenance", lambda: start)
    writer = ExperimentWriter(tmp_path / "out", force=False)
    monkeypatch.setattr(artifacts, "provenance", lambda: later)   # HEAD moved during the run
    writer.add_json("manifest.json", a_manifest())
    writer.commit()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["provenance"] == start


def test_force_refuses_up_front_what_it_could_only_fail_to_rename(tmp_path, monkeypatch):
    """--force replaces a folder by renaming it aside: the working folder (or a mount point, a
    container's volume) cannot be, and an empty --out is the working folder. One line before the
    run, not a traceback after it."""
    from inferlab.errors import InferlabError
    from inferlab.measure.artifacts import ExperimentWriter

    monkeypatch.chdir(tmp_path)
    for out in ("", ".", str(tmp_path)):
        with pytest.raises(InferlabError, match="^--out"):
            ExperimentWriter(out, force=True)


def test_a_folder_that_cannot_be_moved_aside_is_one_line_and_kept(tmp_path, monkeypatch):
    from inferlab.errors import InferlabError
    from inferlab.measure import artifacts

    out = tmp_path / "exp"
    out.mkdir()
    (out / "manifest.json").write_text("kept")
    writer = artifacts.ExperimentWriter(out, force=True)
    writer.add_text("new.txt", "x")
    real_rename = os.rename

    def refuse(src, dst):
        if Path(src) == out:
            raise OSError(16, "Device or resource busy")
        return real_rename(src, dst)
    monkeypatch.setattr(artifacts.os, "rename", refuse)
    with pytest.raises(InferlabError, match="cannot be replaced .Device or resource busy.; the old folder is left"):
        writer.commit()
    assert [p.name for p in out.iterdir()] == ["manifest.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["exp"]          # no temp folder left


def test_force_never_deletes_a_folder_inferlab_did_not_write(tmp_path):
    from inferlab.errors import InferlabError
    from inferlab.measure.artifacts import ExperimentWriter

    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    with pytest.raises(InferlabError, match="not a folder inferlab wrote, so --force will not delete it"):
        ExperimentWriter(home, force=True)
    assert (home / "thesis.tex").read_text() == "years of work"
    (tmp_path / "empty").mkdir()
    ExperimentWriter(tmp_path / "empty", force=True)                     # an empty folder: nothing to lose
    (home / "manifest.json").write_text("{}")
    ExperimentWriter(home, force=True)                                    # an inferlab folder: replaced on commit
