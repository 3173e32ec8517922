"""CLI errors: a bad --threads or an unwritable/existing --out gives one line, exit 2, no files.

The roofline command is the subject; these all fail before any measuring starts, so they are fast.
"""

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
