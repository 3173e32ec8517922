"""Flags shared by the measuring commands, parsed strictly (bad values exit 2 with one line)."""

from __future__ import annotations

import argparse
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
temperature = _number(float, lambda v: 0 <= v < math.inf, "a finite number >= 0 (0 = greedy)")
probability = _number(float, lambda v: 0 < v <= 1, "a number in (0, 1]")


def thread_count(text: str) -> int:
    value = positive_int(text)
    available = os.cpu_count() or 1
    if value > available:
        raise argparse.ArgumentTypeError(f"{value} threads asked for, but this machine has {available} CPUs")
    return value


def add_lab_arguments(p: argparse.ArgumentParser, *, default_out: str, default_threads: int | None = 1) -> None:
    """--out/--force/--quick/--json/--threads, the same on every lab command."""
    p.add_argument("--out", type=Path, default=Path(default_out), help=f"experiment folder (default {default_out})")
    p.add_argument("--force", action="store_true", help="replace an existing experiment folder")
    p.add_argument("--quick", action="store_true", help="reduced run (CI); numbers are noisier")
    p.add_argument("--json", action="store_true", help="print results.json to stdout")
    p.add_argument("--threads", type=thread_count, default=default_threads,
                   help="BLAS threads, set with threadpoolctl and recorded"
                   + (f" (default {default_threads})" if default_threads else " (default: all)"))


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")



def add_roofline_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--roofline", type=Path, default=None, metavar="DIR",
                   help=f"an `inferlab roofline` folder (default: {ROOFLINE_EXPERIMENT} next to --out when "
                        "present, else the roofline is measured now)")


def roofline_dir(args) -> Path | None:
    """--roofline checked, or the sibling 01-roofline folder of --out when it holds a run, or None."""
    if args.roofline is None:
        default = args.out.parent / ROOFLINE_EXPERIMENT
        return default if (default / "results.json").is_file() else None
    if not (args.roofline / "results.json").is_file():
        raise InferlabError(f"--roofline {args.roofline}: no results.json there (run `inferlab roofline` first)")
    return args.roofline


non_negative_float = _number(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def add_budget_argument(p: argparse.ArgumentParser, *, default: float, quick: float) -> None:
    """--budget-s: extra seconds of interleaved rounds a lab may spend on unresolved comparisons."""
    p.add_argument("--budget-s", type=non_negative_float, default=None, metavar="SECONDS",
                   help=f"extra seconds of interleaved rounds while a comparison is unresolved "
                        f"(default {default:g}; --quick {quick:g}; 0 = none)")
