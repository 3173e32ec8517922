"""The first run as a new user (issue 14): every case found on a fresh clone, as a regression test.

Bad input: one stderr line naming the flag/unit/path, exit 2, nothing written. Files: the umask's
modes. Interrupted runs say what they kept. One --out policy. Constrained output: exit status and
`valid` tell the truth.
"""

from __future__ import annotations

import re

import argparse
import json
import os
import stat
from pathlib import Path

import pytest

from inferlab.cli import build_parser, main
from inferlab.cli.generate import is_valid_json
from inferlab.labs import Lab
from inferlab.measure.artifacts import ExperimentWriter, atomic_write_text
from inferlab.model.trace import Tracer

SCHEMA = "src/inferlab/data/conjugation.schema.json"
PROMPT = "conjuga adorar, futuro, nosotros:"      # a held-out verb in the corpus's prompt format


def run_cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code, out, err, *needles):
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)     # no blank lines, no header
    assert "Traceback" not in err and ": error: " in err
    for needle in needles:
        assert needle in err, err


# --- the tracebacks and mis-messages of the issue ------------------------------------------------

@pytest.mark.parametrize("argv", [["generate", "hi", "--seed=-3"], ["generate", "hi", "--seed", "-3"]])
def test_generate_negative_seed(capsys, argv):
    one_line_error(*run_cli(capsys, *argv), "--seed", ">= 0")


def test_train_negative_seed_writes_nothing(tmp_path, capsys):
    one_line_error(*run_cli(capsys, "train", "--seed=-1", "--out", str(tmp_path / "m")), "--seed")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_generate_trace_into_a_folder(tmp_path, capsys, force):
    (tmp_path / "d").mkdir()
    one_line_error(*run_cli(capsys, "generate", "hi", "--trace", str(tmp_path / "d"), *force),
                   "--trace", "is a folder")
    assert os.listdir(tmp_path / "d") == []


def test_generate_trace_that_exists_needs_force(tmp_path, capsys):
    (tmp_path / "t.json").write_text("old")
    one_line_error(*run_cli(capsys, "generate", "hi", "--trace", str(tmp_path / "t.json")), "--force")
    assert (tmp_path / "t.json").read_text() == "old"


@pytest.mark.parametrize("doc,needle", [({"a": 1}, 'no "schema" key'), ({"schema": 3}, "/schema"),
                                        ({"schema": {}, "tests": [{"data": 1}]}, "/tests/0"),
                                        ({"schema": {}, "tests": {}}, "/tests")])
def test_schema_bench_on_files_not_in_bench_format(tmp_path, capsys, doc, needle):
    (tmp_path / "x.json").write_text(json.dumps(doc))
    one_line_error(*run_cli(capsys, "schema-bench", str(tmp_path), "--vocab", "none"), "x.json", needle)


def test_schema_bench_missing_folder_says_where_to_get_the_bench(tmp_path, capsys):
    code, out, err = run_cli(capsys, "schema-bench", str(tmp_path / "nope"))
    one_line_error(code, out, err, "jsonschemabench")
    assert "schema-bench: error: schema-bench:" not in err         # the prefix once


@pytest.mark.parametrize("argv", [["--memory", "-40GB"], ["--memory=-40GB"]])
def test_kv_negative_memory_reaches_its_check(capsys, argv):
    one_line_error(*run_cli(capsys, "kv", "max-context", "llama-2-7b", *argv, "--weights", "14GiB"),
                   "kv max-context", "--memory", "positive")


def test_mask_overhead_bogus_vocab_no_blank_lines(tmp_path, capsys):
    one_line_error(*run_cli(capsys, "mask-overhead", "--vocab", "bogus", "--out", str(tmp_path / "m")),
                   "--vocab 'bogus'")
    assert os.listdir(tmp_path) == []


def test_run_all_unwritable_out_before_any_header(capsys):
    one_line_error(*run_cli(capsys, "run", "all", "--out", "/proc/inferlab-test"), "--out /proc/inferlab-test:",
                   "cannot write")


# --- help that teaches ----------------------------------------------------------------------------

def _parsers(parser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_command_has_a_description_an_example_and_help_on_every_option():
    for path, parser in _parsers(build_parser()):
        if not path:
            continue
        assert parser.description, path
        has_sub = any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
        assert parser.epilog and "examples:" in parser.epilog and "inferlab " in parser.epilog, path
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, (path, action.dest)
        assert has_sub or all(f"inferlab {' '.join(path)}" in line for line in parser.epilog.splitlines()[1:]), path


def test_kv_list_has_column_headers(capsys):
    assert main(["kv", "list"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header[:2] == ["model", "attention"] and "source" in header


# --- constrained output reported truthfully -------------------------------------------------------

def test_repeated_key_is_not_valid_json():
    assert is_valid_json('{"x":"yo","y":1}')
    assert not is_valid_json('{"x":"yo","x":"yo"}')
    assert not is_valid_json('{"a":{"x":1,"x":2}}')
    assert not is_valid_json('{"x":')


def test_generate_schema_exit_status(capsys):
    """The shipped model completes a held-out prompt greedily (exit 0); 3 tokens cannot (exit 1)."""
    code, out, err = run_cli(capsys, "generate", PROMPT, "--schema", SCHEMA, "--temperature", "0", "--json")
    result = json.loads(out)
    assert (code, result["complete"], result["valid"]) == (0, True, True)
    code, out, err = run_cli(capsys, "generate", PROMPT, "--schema", SCHEMA, "--max-new-tokens", "3", "--json")
    result = json.loads(out)
    assert (code, result["complete"], result["valid"]) == (1, False, False)


# --- files as the user expects --------------------------------------------------------------------

@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask,file_mode,dir_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700),
                                                     (0o002, 0o664, 0o775)])
def test_written_files_and_folders_respect_the_umask(tmp_path, umask, mask, file_mode, dir_mode):
    umask(mask)
    w = ExperimentWriter(tmp_path / "exp", force=False)
    w.add_text("README.md", "x")
    out = w.commit()
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode
    assert stat.S_IMODE((out / "README.md").stat().st_mode) == file_mode
    atomic_write_text(tmp_path / "one.txt", "x")
    assert stat.S_IMODE((tmp_path / "one.txt").stat().st_mode) == file_mode
    Tracer().save(tmp_path / "trace.json")
    assert stat.S_IMODE((tmp_path / "trace.json").stat().st_mode) == file_mode


def _writing_lab(order, name):
    def run(opts):
        w = ExperimentWriter(opts.out, force=opts.force)
        w.add_text("README.md", name)
        w.commit()
        return {"skipped": [f"{name}: block B skipped: a test says so"]}
    return Lab(order=order, name=name, title=name, run=run)


def _interrupted_lab(opts):
    raise KeyboardInterrupt


def test_interrupted_run_all_keeps_completed_labs_and_says_so(tmp_path, capsys, monkeypatch):
    labs = [_writing_lab(1, "01-a"), Lab(order=2, name="02-b", title="b", run=_interrupted_lab)]
    monkeypatch.setattr("inferlab.cli.run_all.all_labs", lambda: labs)
    code, out, err = run_cli(capsys, "run", "all", "--out", str(tmp_path / "exp"))
    assert code == 130
    flat = " ".join(err.split())                  # rich wraps long lines
    assert f"{tmp_path / 'exp'}/ keeps the completed lab(s) 01-a" in flat and "02-b" in flat
    assert "block B skipped" in flat              # a lab's skip is said on the console
    assert os.listdir(tmp_path / "exp") == ["01-a"]


def test_default_out_that_exists_goes_to_a_timestamped_sibling(tmp_path, capsys, monkeypatch, plain_kv_figure):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments" / "22-cache-sizing").mkdir(parents=True)
    code, out, err = run_cli(capsys, "kv", "derivations")
    assert code == 0
    (stamp,) = (tmp_path / "experiments" / "runs").iterdir()
    assert re.fullmatch(r"\d{8}T\d{6}Z", stamp.name)  # UTC, and says so (as report --help shows it)
    assert (stamp / "22-cache-sizing" / "derivations.md").is_file()
    assert str((stamp / "22-cache-sizing").relative_to(tmp_path)) in " ".join(err.split())
    assert os.listdir(tmp_path / "experiments" / "22-cache-sizing") == []       # untouched


def test_benchmark_script_without_out_takes_its_default_folder_then_a_sibling(tmp_path, capsys, monkeypatch):
    # benchmarks/*.py parse with parse_out_args; without --out they once died with a TypeError traceback
    from inferlab.cli.common import add_lab_arguments, parse_out_args
    from inferlab.cli.publish import benchmark_main
    monkeypatch.chdir(tmp_path)
    p = argparse.ArgumentParser()
    add_lab_arguments(p, default_out="results/toy")
    p.add_argument("--seed", type=int, default=0)
    results = {"schema_version": 1, "experiment": "toy", "config": {}, "summary": {"x": 1}}
    for _ in range(2):
        assert benchmark_main("toy", parse_out_args(p, []), "toy", lambda: results, lambda r: None) == 0
    assert json.loads((tmp_path / "results" / "toy" / "results.json").read_text()) == results
    (stamp,) = (tmp_path / "results" / "runs").iterdir()
    assert (stamp / "toy" / "results.json").is_file()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "toy: results/toy/ already holds results" in err


def test_every_benchmark_script_resolves_its_default_out():
    """Each benchmarks/*.py that takes add_lab_arguments (whose --out defaults to None) resolves
    it before use, by parse_out_args: eleven of them ended in a TypeError traceback when run
    without --out."""
    scripts = sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py"))
    lab_scripts = [p for p in scripts if "add_lab_arguments(" in p.read_text(encoding="utf-8")]
    assert len(lab_scripts) >= 10
    for path in lab_scripts:
        text = path.read_text(encoding="utf-8")
        assert "parse_out_args(p, argv)" in text or "benchmark_main(" in text, path.name


def test_parse_out_args_takes_the_default_folder_then_a_sibling(tmp_path, monkeypatch):
    from inferlab.cli.common import add_lab_arguments, parse_out_args
    monkeypatch.chdir(tmp_path)
    p = argparse.ArgumentParser()
    add_lab_arguments(p, default_out="results/toy")
    assert parse_out_args(p, []).out == Path("results/toy")
    (tmp_path / "results" / "toy").mkdir(parents=True)
    out = parse_out_args(p, []).out
    assert out.parent.parent == Path("results/runs") and out.name == "toy"
    assert parse_out_args(p, ["--force"]).out == Path("results/toy")
    assert parse_out_args(p, ["--out", "mine"]).out == Path("mine")


def test_explicit_out_that_exists_needs_force(tmp_path, capsys):
    (tmp_path / "22-cache-sizing").mkdir()
    one_line_error(*run_cli(capsys, "kv", "derivations", "--out", str(tmp_path / "22-cache-sizing")), "--force")
    one_line_error(*run_cli(capsys, "run", "22-cache-sizing", "--out", str(tmp_path)), "--force")


# --- found by the property test (tests/test_cli_fuzz.py) ------------------------------------------

def test_attention_sweep_that_cannot_fit_in_memory(tmp_path, capsys):
    one_line_error(*run_cli(capsys, "attention", "--T", "999999999", "--out", str(tmp_path / "a")), "--T", "GiB")


def test_train_batch_larger_than_the_corpus(tmp_path, capsys):
    one_line_error(*run_cli(capsys, "train", "--batch-size", "99999999999", "--out", str(tmp_path / "m")),
                   "--batch-size")
    assert os.listdir(tmp_path) == []


def test_flag_given_a_double_dash(capsys):
    one_line_error(*run_cli(capsys, "kv", "derivations", "--out=--"), "--out")


def test_mask_overhead_says_on_the_console_what_it_skipped(tmp_path, capsys, monkeypatch):
    """`--peers` without the peers installed: the lab records it (labs/peers.py) and the console says it."""
    results = {"table": [], "skipped": ["vocabulary cl100k skipped: not installed"],
               "peers": {"512": {"llguidance": {"available": False, "note": "not installed (llguidance)"},
                                 "inferlab-indexed": {"available": True}}}}
    monkeypatch.setattr("inferlab.cli.mask_overhead.run_mask_overhead", lambda *a, **k: results)
    code, out, err = run_cli(capsys, "mask-overhead", "--peers", "--vocab", "512", "--out", str(tmp_path / "m"))
    assert code == 0
    assert "peer llguidance at V=512 skipped: not installed (llguidance)" in err
    assert "vocabulary cl100k skipped" in err and "inferlab-indexed" not in err


def test_vocab_file_that_is_a_json_array(tmp_path, capsys):
    (tmp_path / "array.json").write_text("[1, 2]")
    one_line_error(*run_cli(capsys, "mask-overhead", "--vocab", str(tmp_path / "array.json"),
                            "--out", str(tmp_path / "m")), "array.json", "JSON object")
