"""Jump-forward vs plain masked decoding on the conjugation schema with the shipped MiniGPT (issue 11).

Reports forward passes saved, tokens/s of both in one interleaved run (paired per-round speed-up,
median with p10-p90), validity of every output (jsonschema with its format checker where installed,
else complete + json.loads), how often the text equals plain masked decoding's and why not
(inferlab.bench.jump_forward explains the reasons).

    python benchmarks/jump_forward.py --out benchmarks/results/jump_forward [--force] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int
from inferlab.bench.jump_forward import compare_jump_forward
from inferlab.constrain.matcher import compile_json_schema
from inferlab.measure.machine import blas_threads, machine_info
from inferlab.measure.progress import progress_bar
from inferlab.cli.publish import benchmark_main
from inferlab.model.checkpoints import load_default_model

EXPERIMENT = "jump-forward"
PROMPTS = ["conjuga hablar, presente, yo:", "conjuga comer, pretérito, nosotros:", "conjuga vivir, futuro, ellos:",
           "conjuga tener, presente, tú:", "conjuga ser, pretérito, él:", "conjuga ir, futuro, vosotros:"]


def schema_valid(runs: list[dict], schema: dict) -> int | None:
    """Jump-forward outputs jsonschema validates (with formats); None without jsonschema."""
    try:
        import jsonschema
    except ImportError:
        return None
    ok = 0
    for r in runs:
        try:
            jsonschema.validate(json.loads(r["jump_text"]), schema, format_checker=jsonschema.FormatChecker())
            ok += 1
        except (ValueError, jsonschema.ValidationError):
            pass
    return ok


def run(args) -> dict:
    schema = json.loads((resources.files("inferlab") / "data" / "conjugation.schema.json").read_text(encoding="utf-8"))
    ckpt = load_default_model()
    grammar = compile_json_schema(schema, ckpt.tokenizer)
    seeds = range(2 if args.quick else args.seeds)
    temperatures = (0.0, 1.0)
    with blas_threads(args.threads), progress_bar(len(seeds) * len(temperatures) * len(PROMPTS), EXPERIMENT) as step:
        out = compare_jump_forward(ckpt.model, ckpt.tokenizer, grammar, PROMPTS, seeds=seeds, temperatures=temperatures,
                                   samples=3 if args.quick else args.samples, step=step)
    out["summary"]["jump_schema_valid"] = schema_valid(out["runs"], schema)
    config = {"model": ckpt.source, "trained": ckpt.trained, "prompts": PROMPTS, "seeds": list(seeds),
              "temperatures": list(temperatures), "threads": args.threads, "quick": args.quick}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "machine": machine_info(args.threads), **out}


def report(results: dict) -> None:
    s = results["summary"]
    tps = s["tokens_per_s"]
    print(f"{s['runs']} runs: jump-forward valid {s['jump_valid']}/{s['runs']} (jsonschema {s['jump_schema_valid']}), "
          f"plain valid {s['plain_valid']}/{s['runs']}; forward passes {s['plain_forward_passes']} -> "
          f"{s['jump_forward_passes']} (saved {s['forward_passes_saved']}, tokens forced {s['tokens_forced']}); "
          f"same text {s['same_text']}/{s['runs']} (greedy {s['same_text_greedy']}/{s['greedy_runs']}), "
          f"differ: {s['differ_reasons']}; tokens/s plain {tps['plain']:.0f}, jump-forward "
          f"{tps['jump_forward']:.0f}; paired speed-up {s['speedup_median']:.2f}x "
          f"(p10 {s['speedup_p10']:.2f}, p90 {s['speedup_p90']:.2f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/jump_forward")
    p.add_argument("--seeds", type=positive_int, default=5, help="seeds per prompt and temperature (default 5)")
    p.add_argument("--samples", type=positive_int, default=15, help="interleaved timing rounds (default 15)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    return benchmark_main("jump_forward", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
