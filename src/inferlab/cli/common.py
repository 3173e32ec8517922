"""Flags shared by the measuring commands, parsed strictly (bad values exit 2 with one line)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.roofline import EXPERIMENT as ROOFLINE_EXPERIMENT


def _number(kind: type, ok, wanted: str):
    """An argparse type: text -> kind, refused with "expected <wanted>" unless ok(value)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text}")
        return value
    parse.__name__ = wanted          # argparse names the type in its messages
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive whole number")
non_negative_int = _number(int, lambda v: v >= 0, "a whole number >= 0")
positive_float = _number(float, lambda v: 0 < v < math.inf, "a positive number")
non_negative_float = _number(float, lambda v: 0 <= v < math.inf, "a number >= 0")
# logits / T in float32: a T under 1e-4 or over 1e4 overflows or flattens it, and adds nothing
# (greedy is 0; at 1e-4 the softmax is greedy already, at 1e4 uniform)
temperature = _number(float, lambda v: v == 0 or 1e-4 <= v <= 1e4, "0 (greedy) or a number in 1e-4..1e4")
probability = _number(float, lambda v: 0 < v <= 1, "a number in (0, 1]")


def physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):    # not POSIX, or not reported
        return None


def check_fits_in_memory(need_bytes: int, what: str) -> None:
    """Refuse before the work a request whose arrays alone would take over half of this machine's
    memory: numpy would fail mid-run with a MemoryError, or the machine would swap."""
    memory = physical_memory_bytes()
    if memory is not None and need_bytes > memory // 2:
        raise InferlabError(f"{what} needs about {need_bytes / 2**30:,.1f} GiB of arrays, more than half of "
                            f"this machine's {memory / 2**30:,.1f} GiB")


def thread_count(text: str) -> int:
    value = positive_int(text)
    available = os.cpu_count() or 1
    if value > available:
        raise argparse.ArgumentTypeError(f"{value} threads asked for, but this machine has {available} CPUs")
    return value


def add_out_arguments(p: argparse.ArgumentParser, *, default_out: str, what: str = "experiment folder") -> None:
    """--out and --force with the one --out policy of every command (resolve_out)."""
    p.add_argument("--out", type=Path, default=None,
                   help=f"{what} (default {default_out}; when that exists, a new "
                        f"{Path(default_out).parent / 'runs' / '<UTC time>' / Path(default_out).name})")
    p.add_argument("--force", action="store_true", help=f"replace an existing {what}")
    p.set_defaults(_default_out=Path(default_out))


def timestamped_runs_folder(root: Path) -> Path:
    """root/runs/<UTC time>/ (-2, -3, ... when a run started in the same second): where a run goes
    when the default folder already holds results."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")  # (ISO 8601 basic: the Z says UTC)
    folder, n = root / "runs" / stamp, 1
    while folder.exists():
        n += 1
        folder = root / "runs" / f"{stamp}-{n}"
    return folder


def resolve_out(args) -> None:
    """The one --out policy. An explicit --out is used as given: if it exists, the writer refuses
    it unless --force. The default folder is never overwritten silently: when it exists (the
    repository ships the reference run there), the run goes to a timestamped sibling, which
    redirect_note() names once the run succeeded (so that bad input still gets one line);
    --force replaces the default folder in place."""
    default = args._default_out
    args._redirected_from = None
    if args.out is not None:
        return
    args.out = default
    if default.exists() and not args.force:
        args.out = timestamped_runs_folder(default.parent) / default.name
        args._redirected_from = default


def parse_out_args(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """p.parse_args(argv), then the one --out policy (resolve_out): for the scripts outside the CLI
    (benchmarks/*.py) whose parsers take add_lab_arguments."""
    args = p.parse_args(argv)
    resolve_out(args)
    return args


def redirect_note(args) -> str | None:
    default = getattr(args, "_redirected_from", None)
    if default is None:
        return None
    return (f"{args._prog}: {default}/ already holds results: this run wrote {args.out}/ "
            f"(pass --force to replace {default}/)")


def add_lab_arguments(p: argparse.ArgumentParser, *, default_out: str, default_threads: int | None = 1) -> None:
    """--out/--force/--quick/--json/--threads, the same on every lab command."""
    add_out_arguments(p, default_out=default_out)
    p.add_argument("--quick", action="store_true", help="reduced run (CI); numbers are noisier")
    p.add_argument("--json", action="store_true", help="print results.json to stdout")
    p.add_argument("--threads", type=thread_count, default=default_threads,
                   help="BLAS threads, set with threadpoolctl and recorded"
                   + (f" (default {default_threads})" if default_threads else " (default: all)"))


def examples_epilog(*commands: str) -> str:
    """The epilog of a --help: its example commands, one a line."""
    return "examples:\n" + "\n".join(f"  {c}" for c in commands)


def skip_notes(results: dict) -> list[str]:
    """What a lab's results say it skipped or could not run ("skipped" notes; peers that are not
    installed or failed), so the console says it too, not only the lab's README."""
    notes = list(results.get("skipped", []))
    for vocab_size, peers in results.get("peers", {}).items():
        for name, peer in peers.items():
            if not peer.get("available", True) or peer.get("compiled") is False:
                notes.append(f"peer {name} at V={vocab_size} skipped: {peer.get('note', 'not run')}")
    return notes


def print_skip_notes(results: dict, prog: str) -> None:
    for note in skip_notes(results):
        print(f"{prog}: note: {note}", file=sys.stderr)


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def add_roofline_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--roofline", type=Path, default=None, metavar="DIR",
                   help=f"an `inferlab roofline` folder (default: {ROOFLINE_EXPERIMENT} next to --out when "
                        "present, else the roofline is measured now)")


def roofline_dir(args) -> Path | None:
    """--roofline checked, or the sibling 01-roofline folder of --out when it holds a run (of the
    default --out when this run was sent to a timestamped folder), or None."""
    if args.roofline is None:
        redirected = getattr(args, "_redirected_from", None)
        beside = [args.out.parent] + ([redirected.parent] if redirected else [])
        return next((d / ROOFLINE_EXPERIMENT for d in beside
                     if (d / ROOFLINE_EXPERIMENT / "results.json").is_file()), None)
    if not (args.roofline / "results.json").is_file():
        raise InferlabError(f"--roofline {args.roofline}: no results.json there (run `inferlab roofline` first)")
    return args.roofline


non_negative_float = _number(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def add_budget_argument(p: argparse.ArgumentParser, *, default: float | str, quick: float) -> None:
    """--budget-s: extra seconds of interleaved rounds a lab may spend deciding its comparisons
    (a round starts only while the seconds left pay for it: timing.Budget.afford). `default` is
    the lab's seconds, or a phrase where several labs each keep their own."""
    shown = f"{default:g}" if isinstance(default, (int, float)) else default
    p.add_argument("--budget-s", type=non_negative_float, default=None, metavar="SECONDS",
                   help=f"extra seconds of interleaved rounds while a comparison's 95%% CI is undecided "
                        f"(default {shown}; --quick {quick:g}; 0 = none)")
