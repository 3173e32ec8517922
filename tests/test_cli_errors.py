"""CLI errors: a bad --threads or an unwritable/existing --out gives one line, exit 2, no files.

The roofline command is the subject; these all fail before any measuring starts, so they are fast.
"""

import json
import os
import subprocess
import sys

import pytest

from inferlab.cli import main


def run_cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors exit through SystemExit
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, out, err, *needles):
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error" in lines[0]
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("value,needle", [("0", "positive"), ("-3", "positive"), ("two", "'two'"),
                                          ("1.5", "'1.5'"), ("100000", "CPUs")])
def test_bad_threads(tmp_path, capsys, value, needle):
    out = tmp_path / "r"
    code, stdout, err = run_cli(capsys, "roofline", "--threads", value, "--out", str(out))
    assert_one_line_error(code, stdout, err, "--threads", needle)
    assert not out.exists()


def test_out_under_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "r"
    code, stdout, err = run_cli(capsys, "roofline", "--quick", "--out", str(out))
    assert_one_line_error(code, stdout, err, "--out", "not a folder")
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_out_where_nothing_can_be_written(capsys):
    code, stdout, err = run_cli(capsys, "roofline", "--quick", "--out", "/proc/inferlab-test/r")
    assert_one_line_error(code, stdout, err, "--out", "cannot write")


def test_existing_out_needs_force(tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    (out / "results.json").write_text("old")
    code, stdout, err = run_cli(capsys, "roofline", "--quick", "--out", str(out))
    assert_one_line_error(code, stdout, err, "--force", "--out")
    assert os.listdir(out) == ["results.json"] and (out / "results.json").read_text() == "old"


def test_real_entry_point_exit_code(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.run([sys.executable, "-m", "inferlab", "roofline", "--threads", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--threads" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("argv, prog", [(["generate", "hi", "--bogus"], "inferlab generate"),
                                        (["kv", "size", "--bogus"], "inferlab kv size"),
                                        (["schema", "compile", "x.json", "extra"], "inferlab schema compile")])
def test_an_unknown_argument_names_the_subcommand_it_was_given_to(argv, prog, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err == f"{prog}: error: unrecognized arguments: {argv[-1]}\n"


@pytest.mark.parametrize("argv", [["schema", "compile", "{long}.json"], ["kv", "derivations", "--out", "{long}"],
                                  ["report", "{long}"], ["roofline", "--quick", "--out", "{long}/r"]])
def test_a_file_name_past_the_file_systems_limit_is_one_line(tmp_path, capsys, argv):
    long = str(tmp_path / ("x" * 300))   # one component over NAME_MAX (255) on Linux file systems
    code, stdout, err = run_cli(capsys, *[a.format(long=long) for a in argv])
    assert_one_line_error(code, stdout, err, "file name too long", "(3")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv,needles", [
    (["kv", "size", "llama-3-8b", "--ctx", "9" * 320], ["--ctx", "over 1e+15"]),
    (["kv", "size", "llama-3-8b", "--batch", "9" * 20], ["--batch", "over 1e+15"]),
    (["kv", "max-context", "llama-3-8b", "--memory", "9" * 320 + "TB"], ["--memory", "16 EiB"]),
    (["kv", "size", "llama-3-8b", "--dtype", ""], ["--dtype", "unknown dtype"]),
])
def test_kv_values_past_any_machine_or_empty_are_refused(capsys, argv, needles):
    code, stdout, err = run_cli(capsys, *argv)
    assert_one_line_error(code, stdout, err, *needles)


@pytest.mark.parametrize("field,value,needle", [("use_sliding_window", "no", "expected true or false"),
                                                ("model_type", ["gemma2"], "expected a string")])
def test_kv_config_field_of_the_wrong_type_is_refused(tmp_path, capsys, field, value, needle):
    config = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
              "max_position_embeddings": 8192,
              "sliding_window": 1024, field: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, stdout, err = run_cli(capsys, "kv", "size", "--config", str(path), "--ctx", "8192")
    assert_one_line_error(code, stdout, err, f"/{field}", needle)


def test_run_refuses_an_empty_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # Path("") is "."; the lab's folder went into the working folder
    code, stdout, err = run_cli(capsys, "run", "22-cache-sizing", "--out", "")
    assert_one_line_error(code, stdout, err, "--out", "empty path")
    assert os.listdir(tmp_path) == []


def test_mask_overhead_checks_the_model_folder_before_measuring(tmp_path, capsys):
    # the tokenizer was read only after the roofline's seconds of measuring: a traceback then
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 8, "n_embd": 8, "n_head": 2,
                                                    "n_layer": 1, "n_positions": 16}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [5]}}))
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "mask-overhead", "--quick", "--model", str(folder), "--out", str(out))
    assert_one_line_error(code, stdout, err, "/model/merges/0")   # one line: no roofline progress before it
    assert not out.exists()


@pytest.mark.parametrize("flag,value,needle", [
    ("--max-memory", "-1GiB", "positive"), ("--max-memory", "512", "has no unit"),
    ("--max-memory", "1G", "ambiguous unit"), ("--max-memory", "16MiB", "below 32 MiB"),
    ("--max-memory", "100000TiB", "more than half"),
    ("--llc", "-480MiB", "positive"), ("--llc", "480", "has no unit"), ("--llc", "100KiB", "below the 256 KiB"),
])
@pytest.mark.parametrize("command", [("roofline", "--quick"), ("run", "all", "--quick")])
def test_bad_memory_flags(tmp_path, capsys, command, flag, value, needle):
    out = tmp_path / "r"
    code, stdout, err = run_cli(capsys, *command, flag, value, "--out", str(out))
    assert_one_line_error(code, stdout, err, flag, needle)
    assert not out.exists()
