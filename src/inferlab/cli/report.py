"""`inferlab report DIR`: re-render an experiment folder's README, figures and script from its
results.json (and manifest.json) alone. results.json and manifest.json are never rewritten."""

from __future__ import annotations

import os
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.labs import all_labs, lab_named
from inferlab.measure.artifacts import atomic_write_bytes, figure_png_bytes

NAME = "report"
HELP = "re-render an experiment folder (README, figures, script) from its results.json"
EXAMPLES = (
    "inferlab report experiments/30-mask-overhead",
    "inferlab report experiments/runs/20261202T190000Z/15-attention-perf",
)


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, metavar="DIR", help="an experiment folder written by a lab")


def rerender(folder: Path) -> list[str]:
    """Write the report files of `folder` again; returns their names."""
    if not folder.is_dir():
        raise InferlabError(f"{folder}: not a folder")
    missing = "not an experiment folder (no results.json)"
    results = read_json_object(folder / "results.json", missing=missing)
    manifest = read_json_object(folder / "manifest.json", missing="not an experiment folder (no manifest.json)")
    lab = lab_named(results.get("experiment"))
    if lab is None or lab.report is None:
        known = ", ".join(lab.name for lab in all_labs() if lab.report)
        raise InferlabError(f"{folder}/results.json: /experiment is {results.get('experiment')!r}, "
                            f"not a lab with a report ({known})")
    try:
        files = lab.report(results, manifest, folder)
        # every file rendered before any is written: a value that breaks one leaves the folder as it was
        data = {name: item.encode("utf-8") if isinstance(item, str) else figure_png_bytes(item)
                for name, item in files.items()}
    except (KeyError, TypeError, ValueError, IndexError, ArithmeticError) as exc:
        raise InferlabError(f"{folder}/results.json: cannot render the {lab.name} report "
                            f"({type(exc).__name__}: {exc}); written by another inferlab version?") from None
    # what would fail a write is found before any: a target that is not a regular file, a folder
    # that cannot be written in (else the files before it would already be rewritten)
    for name in data:
        if (folder / name).exists() and not (folder / name).is_file():
            raise InferlabError(f"{folder / name}: not a regular file, so it cannot be rewritten; nothing was rewritten")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InferlabError(f"{folder}: cannot write in it (permissions); nothing was rewritten")
    done: list[str] = []
    for name, payload in data.items():
        try:
            atomic_write_bytes(folder / name, payload)
        except OSError as exc:
            raise InferlabError(f"{folder / name}: cannot write it ({exc.strerror or exc}); "
                                + (f"rewritten before it: {', '.join(done)}" if done else "nothing was rewritten")) from None
        done.append(name)
    return list(files)


def run(args) -> int:
    names = rerender(args.dir)
    print(f"re-rendered {args.dir}/: {', '.join(names)}")
    return 0
