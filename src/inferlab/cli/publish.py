"""The tail every benchmark command shares: refuse before work, run, publish atomically, report.

    return benchmark_main("jump_forward", args, EXPERIMENT, lambda: run(args), report)

The results dict carries "config" and "summary" (they go into manifest.json); args carries out,
force, seed, threads and json (cli.common.add_lab_arguments plus --seed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from inferlab.cli.common import print_json, redirect_note
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest


def publish_experiment(args, experiment: str, produce: Callable[[], dict],
                       figures: Callable[[dict], dict] | None = None) -> dict:
    """ExperimentWriter first (an existing --out refuses before any work), then produce() and
    results.json, manifest.json and figures {name: fig} published in one rename."""
    writer = ExperimentWriter(args.out, force=args.force)
    results = produce()
    writer.add_json("results.json", results)
    writer.add_json("manifest.json", build_manifest(experiment=experiment, seed=args.seed, config=results["config"],
                                                    depends_on=None, results_summary=results["summary"],
                                                    threads=args.threads))
    for name, fig in (figures(results) if figures else {}).items():
        writer.add_figure(name, fig)
    writer.commit()
    return results


def benchmark_main(prog: str, args, experiment: str, produce: Callable[[], dict],
                   report: Callable[[dict], None], figures: Callable[[dict], dict] | None = None) -> int:
    """publish_experiment, then results.json on stdout (--json) or report(results); bad input is
    one stderr line and exit 2. args come from cli.common.parse_out_args (--out resolved by the
    one policy); where the run went to a timestamped sibling of the default, stderr says so."""
    args._prog = prog
    try:
        results = publish_experiment(args, experiment, produce, figures)
    except InferlabError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_json(results)
    else:
        report(results)
    if note := redirect_note(args):
        print(note, file=sys.stderr)
    return 0
