"""`inferlab generate`: continue a prompt with MiniGPT or a model folder, optionally under a JSON schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from inferlab.cli.common import non_negative_int, positive_int, print_json, probability, temperature
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.model.checkpoints import load_default_model, load_model
from inferlab.model.generate import generate
from inferlab.model.trace import Tracer

NAME = "generate"
HELP = ("generate text with MiniGPT or a model folder (ours, or Hugging Face GPT-2, Llama, Qwen2, Mistral), "
        "optionally JSON-schema constrained")


def add_arguments(p):
    p.add_argument("prompt", nargs="?", default="",
                   help="text to continue (default: empty, start from BOS, or EOS without one)")
    p.add_argument("--model", type=Path, help="model folder: ours, or a Hugging Face GPT2LMHeadModel, "
                   "LlamaForCausalLM, Qwen2ForCausalLM or MistralForCausalLM one (default: the shipped MiniGPT)")
    p.add_argument("--max-new-tokens", type=non_negative_int, default=64, help="at most this many tokens (default 64)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--temperature", type=temperature, default=1.0, help="0 = greedy (default 1.0)")
    p.add_argument("--top-k", type=positive_int, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=probability, help="sample among the smallest set of tokens of probability >= p")
    p.add_argument("--trace", type=Path, metavar="FILE", help="write per-step spans as Chrome trace-event JSON")
    p.add_argument("--force", action="store_true", help="replace an existing --trace FILE")
    p.add_argument("--schema", type=Path, metavar="FILE", help="constrain the output to this JSON schema")
    p.add_argument("--mask", choices=("naive", "indexed"), help="mask implementation with --schema (default indexed)")
    p.add_argument("--json", action="store_true",
                   help='print {"text", "tokens", "n_tokens", "stop_reason", "ms_per_token", ...} to stdout')


def _read_schema(path: Path) -> dict:
    return read_json_object(path, label=f"--schema {path}")


def _check_trace_path(args) -> None:
    """Refuse before any work: an existing trace is earlier results, kept unless --force."""
    if args.trace is None:
        return
    if args.trace.exists() and not args.force:
        raise InferlabError(f"--trace {args.trace} already exists; pass --force to replace it")
    if not args.trace.absolute().parent.is_dir():
        raise InferlabError(f"--trace {args.trace}: folder {args.trace.absolute().parent} does not exist")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def run(args) -> int:
    if args.mask is not None and args.schema is None:
        raise InferlabError("--mask selects the mask of --schema; pass --schema FILE too")
    _check_trace_path(args)
    schema = _read_schema(args.schema) if args.schema is not None else None
    ckpt = load_model(args.model) if args.model is not None else load_default_model()
    if ckpt.tokenizer is None:
        raise InferlabError(f"--model {args.model}: the folder has no tokenizer.json to encode the prompt with")
    if not ckpt.trained:
        print(f"inferlab generate: note: untrained model: {ckpt.source}", file=sys.stderr)
    mask = None
    if schema is not None:
        from inferlab.constrain import build_mask

        mask = build_mask(schema, ckpt.tokenizer, kind=args.mask or "indexed")
    tracer = Tracer() if args.trace is not None else None
    g = generate(ckpt.model, ckpt.tokenizer, args.prompt, mask=mask, max_new_tokens=args.max_new_tokens,
                 seed=args.seed, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, tracer=tracer)
    if tracer is not None:
        tracer.save(args.trace)
    # per decode step, the prompt's prefill included, as seed 000 divides a run's time by its steps
    ms_per_token = g.elapsed_s * 1e3 / g.n_steps if g.n_steps else None
    result = {"text": g.text, "tokens": g.tokens, "n_tokens": g.n_tokens, "stop_reason": g.stop_reason,
              "ms_per_token": ms_per_token, "trained": ckpt.trained, "model": ckpt.source}
    if mask is not None:
        result["complete"] = g.complete
        result["valid"] = bool(g.complete) and _is_json(g.text)
    if args.json:
        print_json(result)
    else:
        print(g.text)
        speed = f"{ms_per_token:.2f} ms/token" if ms_per_token is not None else "no steps"
        extra = f", complete {g.complete}, valid {result['valid']}" if mask is not None else ""
        print(f"[{g.n_tokens} tokens, stop: {g.stop_reason}, {speed}{extra}]", file=sys.stderr)
    return 0
