"""`inferlab` command line: argument parsing only, one module per subcommand.

Each module in this package that defines NAME, HELP, add_arguments(parser) and run(args) -> int
is a subcommand; modules are discovered, so a capability adds its command without touching here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

import inferlab
from inferlab import __version__
from inferlab.errors import InferlabError


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus an error; users and scripts want one line and exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def _commands():
    import inferlab.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "common":
            continue
        mod = importlib.import_module(f"inferlab.cli.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            yield mod


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="inferlab", description=inferlab.__doc__.strip())
    parser.add_argument("--version", action="version", version=f"inferlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for mod in _commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except InferlabError as exc:
        print(f"inferlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # stdout closed early (`inferlab ... --json | head`): not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"inferlab {args.command}: interrupted", file=sys.stderr)
        return 130
