"""Property: no argument vector makes the CLI print a traceback.

Argument vectors are drawn from each (sub-)subcommand's own argparse parser: its flags, their
choices and arity, its positionals, with values that new users type by mistake (negative, zero,
huge, non-numeric, empty) and paths that are missing, folders, unreadable, unwritable, or
malformed JSON. Each vector runs in-process (inferlab.cli.main), which must end in one of:

- exit 2 with exactly one stderr line and nothing written under the sandbox;
- exit 0 (a cheap command such as `kv size` that accepted the vector);
- a _Reached exception from a stub standing for a measurement (see below).

Why the stubs: a vector that passes validation would start a real measurement (minutes of
roofline, training or a schema benchmark). The functions that start the work are replaced by stubs
that first run the same fail-fast check the real function runs before its work (the
ExperimentWriter on its output folder) and then raise _Reached; so a vector either fails
validation the way a user sees it, or has passed every check that precedes the work.

The default run draws >= 500 vectors (a few seconds); `-m slow` runs a longer profile.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferlab.cli as cli
from inferlab.labs import Lab, all_labs
from inferlab.measure.artifacts import ExperimentWriter

DEFAULT_EXAMPLES = 36          # per command: 17 commands, fewer where the space is small (kv list)
SLOW_EXAMPLES = 400


class _Reached(Exception):
    """A vector passed validation and reached the start of the work."""


def _stub_writer_then_reached(out_index: int | None = None, out_kw: str = "out"):
    def stub(*args, **kwargs):
        out = kwargs.get(out_kw, args[out_index] if out_index is not None and len(args) > out_index else None)
        if out is not None:
            ExperimentWriter(out, force=kwargs.get("force", False))    # the real function's first check
        raise _Reached
    return stub


def _reached(*args, **kwargs):
    raise _Reached


def _stub_lab(lab: Lab) -> Lab:
    def run(opts):
        ExperimentWriter(opts.out, force=opts.force)
        raise _Reached
    return Lab(order=lab.order, name=lab.name, title=lab.title, run=run)


@pytest.fixture
def stubbed(monkeypatch):
    monkeypatch.setattr("inferlab.cli.roofline.write_roofline", _stub_writer_then_reached(1))
    monkeypatch.setattr("inferlab.cli.attention.run_attention", _stub_writer_then_reached(1))
    monkeypatch.setattr("inferlab.cli.mask_overhead.run_mask_overhead", _stub_writer_then_reached(1))
    monkeypatch.setattr("inferlab.cli.generate.generate", _reached)
    monkeypatch.setattr("inferlab.cli.train._git_commit", _reached)     # the first thing after its --out check
    monkeypatch.setattr("inferlab.cli.schema_bench.run_bench", _reached)
    labs = [_stub_lab(lab) for lab in all_labs()]
    monkeypatch.setattr("inferlab.cli.run_all.all_labs", lambda: labs)
    kv_lab = next(lab for lab in labs if lab.name == "22-cache-sizing")
    monkeypatch.setattr("inferlab.labs.kv_sizing.LAB", kv_lab)


# --- the sandbox of paths -----------------------------------------------------------------------

def make_sandbox(root: Path) -> dict[str, str]:
    """Paths a user may give by mistake, by kind. Unreadable files stay readable under root."""
    (root / "folder").mkdir()
    (root / "folder" / "inner.json").write_text("{}")
    (root / "malformed.json").write_text('{"type": "object", ')
    (root / "array.json").write_text("[1, 2, 3]")
    (root / "object.json").write_text('{"a": 1}')
    (root / "empty.json").write_text("")
    (root / "binary.bin").write_bytes(bytes(range(256)))
    (root / "unreadable.json").write_text("{}")
    os.chmod(root / "unreadable.json", 0)
    (root / "bench").mkdir()
    (root / "bench" / "x.json").write_text('{"schema": {"type": "integer"}, "tests": "no"}')
    (root / "readonly").mkdir()
    os.chmod(root / "readonly", 0o555)
    return {
        "missing": str(root / "missing" / "x"), "missing_file": str(root / "nope.json"),
        "folder": str(root / "folder"), "malformed": str(root / "malformed.json"),
        "array": str(root / "array.json"), "object": str(root / "object.json"),
        "empty_file": str(root / "empty.json"), "binary": str(root / "binary.bin"),
        "unreadable": str(root / "unreadable.json"), "bench": str(root / "bench"),
        "unwritable": "/proc/inferlab-fuzz/x", "readonly": str(root / "readonly" / "x"),
        "under_a_file": str(root / "object.json" / "x"),
    }


def snapshot(root: Path) -> set[tuple[str, int]]:
    return {(str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1) for p in root.rglob("*")}


# --- drawing argument vectors from a parser -----------------------------------------------------

NUMERIC = ["-3", "-1", "-0.5", "-40GB", "-inf", "0", "0.0", "-0", "0GB", "9" * 30, "1e308", "1e999", "inf",
           "nan", "99999999999999999999GiB", "7", "2", "1", "64", "4096", "40GB", "14GiB", "0.5"]
WORDS = ["two", "4x", "GB", "abc def", "🙂", "0x10", "", " ", "fp16", "int4", "llama-2-7b", "gpt2", "all",
         "none", "512", "H100-80GB", "cl100k", "--", "-"]


def leaf_parsers(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, path + (name,))


LEAVES = list(leaf_parsers(cli.build_parser()))


def values(paths: dict[str, str], action: argparse.Action):
    pool = NUMERIC + WORDS + list(paths.values())
    if action.choices:
        return st.one_of(st.sampled_from([str(c) for c in action.choices]), st.sampled_from(pool))
    return st.sampled_from(pool)


def draw_values(draw, paths, action) -> list[str]:
    nargs = action.nargs
    if nargs in ("+", "*"):
        return draw(st.lists(values(paths, action), min_size=0 if nargs == "*" else 1, max_size=3))
    if nargs == "?":
        return draw(st.lists(values(paths, action), max_size=1))
    return [draw(values(paths, action)) for _ in range(nargs if isinstance(nargs, int) else 1)]


@st.composite
def argv_for(draw, path, parser, paths):
    argv = list(path)
    options = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    positionals = [a for a in parser._actions if not a.option_strings]
    for action in positionals:
        argv += draw_values(draw, paths, action)
    for action in draw(st.lists(st.sampled_from(options), max_size=4)) if options else []:
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(flag)
            continue
        vals = draw_values(draw, paths, action)
        if len(vals) == 1 and draw(st.booleans()):
            argv.append(f"{flag}={vals[0]}")          # --memory=-40GB
        else:
            argv += [flag, *vals]
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(len(path), len(argv))), draw(st.sampled_from(["--bogus", "-x", "extra"])))
    return argv


# --- the property -------------------------------------------------------------------------------

def check_vector(argv, root: Path, capsys, outcomes: dict) -> None:
    before = snapshot(root)
    try:
        code = cli.main(argv)
    except SystemExit as exc:              # argparse
        code = exc.code
    except _Reached:
        code = "reached"
    err = capsys.readouterr().err
    outcomes[code] = outcomes.get(code, 0) + 1
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2, "reached"), (argv, code, err)
    if code == 2:
        assert err.endswith("\n") and err.count("\n") == 1 and ": error: " in err, (argv, err)
        assert snapshot(root) == before, (argv, "wrote files on exit 2")


def _run_profile(examples, tmp_path_factory, capsys, monkeypatch, path, parser):
    root = tmp_path_factory.mktemp("fuzz")
    paths = make_sandbox(root)
    monkeypatch.chdir(root)         # default --out folders land in the sandbox
    outcomes: dict = {}

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(argv=argv_for(path, parser, paths))
    def prop(argv):
        check_vector(argv, root, capsys, outcomes)

    prop()
    return outcomes


def test_no_traceback_on_any_vector(stubbed, tmp_path_factory, capsys, monkeypatch):
    """The default profile of every command in one test, so its counts depend on no other test
    having run before it (in this process or another xdist worker). The counts are counted, not
    assumed: hypothesis stops early on a small space (`kv list` has few vectors)."""
    ran = {path: _run_profile(DEFAULT_EXAMPLES, tmp_path_factory, capsys, monkeypatch, path, parser)
           for path, parser in LEAVES}
    total = sum(sum(o.values()) for o in ran.values())
    outcomes = {k: sum(o.get(k, 0) for o in ran.values()) for k in (0, 2, "reached")}
    print(f"{total} argument vectors: {outcomes}")       # shown with -s
    assert total >= 500, total
    assert outcomes[2] > total / 4          # the values do reach the checks
    assert outcomes["reached"] > 0          # and some vectors pass them all


@pytest.mark.slow
@pytest.mark.parametrize("path,parser", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_no_traceback_long_profile(path, parser, stubbed, tmp_path_factory, capsys, monkeypatch):
    _run_profile(SLOW_EXAMPLES, tmp_path_factory, capsys, monkeypatch, path, parser)
