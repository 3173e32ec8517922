"""`inferlab` command line: argument parsing only, one module per subcommand.

Each module in this package that defines NAME, HELP, EXAMPLES, add_arguments(parser) and
run(args) -> int is a subcommand; modules are discovered, so a capability adds its command without
touching here. EXAMPLES (one command a line) becomes the epilog of `inferlab NAME --help`.
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import os
import pkgutil
import re
import sys

import inferlab
from inferlab import __version__, engine
from inferlab.cli.common import examples_epilog, redirect_note, resolve_out
from inferlab.errors import InferlabError


# "-40GB", "-3", "-.5": a value a user typed (to be refused by the flag's own check), not a flag.
_NEGATIVE_VALUE = re.compile(r"^-\.?[0-9]")


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus an error; users and scripts want one line and exit code 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action, arg_strings):
        # argparse drops "--" from a flag's values and hands `--out=--` an empty list.
        if action.option_strings and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, got '--'")
        return super()._get_values(action, arg_strings)

    def _parse_optional(self, arg_string):
        # argparse takes "-40GB" for an unknown flag ("--memory: expected one argument"); no
        # inferlab flag starts with a digit, so such a string is always a value for the flag's
        # own check, which names the flag and the unit.
        if _NEGATIVE_VALUE.match(arg_string):
            return None
        return super()._parse_optional(arg_string)


EXIT_STATUS = """exit status:
  0    done
  1    generate --schema: the output is incomplete (out of tokens) or not a valid instance
  2    bad input: one line on stderr names the flag, unit, path or JSON pointer; nothing written
  130  interrupted (Ctrl-C); run all says which labs it kept"""


def _commands():
    import inferlab.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "common":
            continue
        mod = importlib.import_module(f"inferlab.cli.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            yield mod


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="inferlab", description=inferlab.__doc__.strip(), epilog=EXIT_STATUS)
    masks = engine.record()["engine"] or "INFERLAB_ENGINE invalid"
    parser.add_argument("--version", action="version", version=f"inferlab {__version__} (mask engine: {masks})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for mod in _commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, epilog=examples_epilog(*mod.EXAMPLES))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _prog=p.prog)   # a sub-subcommand sets its own _prog
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()     # parse_args leaves a parser as it was: one per process


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # (parse_args would name the top parser: the flags are the subcommand's)
        parser.exit(2, f"{args._prog}: error: unrecognized arguments: {' '.join(extra)}\n")
    try:
        if hasattr(args, "_default_out"):
            resolve_out(args)
        code = int(args._run(args) or 0)
        if note := redirect_note(args):
            print(note, file=sys.stderr)
        return code
    except InferlabError as exc:
        prefix = f"{args._prog}: error: "
        # one line, and the command named once even when the message names it too
        message = " ".join(str(exc).split()).removeprefix(f"{args.command}: ")
        print(prefix + message, file=sys.stderr)
        return 2
    except BrokenPipeError:
        # stdout closed early (`inferlab ... --json | head`): not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{args._prog}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # a path the user gave with a name past the file system's limit fails in the first
        # exists()/is_dir() of whichever check meets it: bad input, caught once here
        if exc.errno != errno.ENAMETOOLONG:
            raise
        name = str(exc.filename or "")
        shown = name if len(name) <= 80 else f"{name[:40]}…{name[-30:]} ({len(name):,} characters)"
        print(f"{args._prog}: error: {shown}: file name too long for this file system", file=sys.stderr)
        return 2
