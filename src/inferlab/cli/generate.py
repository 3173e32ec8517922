"""`inferlab generate`: continue a prompt with MiniGPT or a model folder, optionally under a JSON schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from inferlab.cli.common import non_negative_int, positive_int, print_json, probability, temperature
from inferlab.constrain import MASK_KINDS
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_schema
from inferlab.measure.artifacts import check_output_file
from inferlab.model.checkpoints import load_default_model, load_model
from inferlab.model.generate import generate
from inferlab.model.trace import Tracer

NAME = "generate"
HELP = ("generate text with MiniGPT or a model folder (ours, or Hugging Face GPT-2, Llama, Qwen2, Mistral), "
        "optionally JSON-schema constrained")
EXAMPLES = (
    'inferlab generate "conjuga hablar, presente, yo:" --temperature 0',
    'inferlab generate "conjuga adorar, futuro, nosotros:" --schema src/inferlab/data/conjugation.schema.json --json',
    'inferlab generate "conjuga vivir, pretérito, ellos:" --trace trace.json  # open in ui.perfetto.dev',
)


def add_arguments(p):
    p.add_argument("prompt", nargs="?", default="",
                   help="text to continue (default: empty, start from BOS, or EOS without one)")
    p.add_argument("--model", type=Path, help="model folder: ours, or a Hugging Face GPT2LMHeadModel, "
                   "LlamaForCausalLM, Qwen2ForCausalLM or MistralForCausalLM one (default: the shipped MiniGPT)")
    p.add_argument("--max-new-tokens", type=non_negative_int, default=64, help="at most this many tokens (default 64)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed, a whole number >= 0 (default 0)")
    p.add_argument("--temperature", type=temperature, default=1.0, help="0 = greedy (default 1.0)")
    p.add_argument("--top-k", type=positive_int, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=probability, help="sample among the smallest set of tokens of probability >= p")
    p.add_argument("--trace", type=Path, metavar="FILE", help="write per-step spans as Chrome trace-event JSON")
    p.add_argument("--force", action="store_true", help="replace an existing --trace FILE")
    p.add_argument("--schema", type=Path, metavar="FILE",
                   help="constrain the output to this JSON schema; the exit status is then 0 only for a complete, "
                        "valid instance and 1 when the output is incomplete (out of tokens) or invalid")
    p.add_argument("--mask", choices=MASK_KINDS,
                   help="mask implementation with --schema: stack (default: the matcher on the stack grammar, "
                        "recursion exact), or the flat regex DFA's naive scan or token index (recursion unrolled)")
    p.add_argument("--jump-forward", action="store_true",
                   help="with --schema: append text the schema forces without sampling it (saves forward passes)")
    p.add_argument("--json", action="store_true",
                   help='print {"text", "tokens", "n_tokens", "stop_reason", "ms_per_token", ...} to stdout')


def _read_schema(path: Path) -> dict | bool:
    return read_json_schema(path, label=f"--schema {path}")


def _check_trace_path(args) -> None:
    """Refuse before any work: an existing trace is earlier results, kept unless --force."""
    if args.trace is not None:
        check_output_file(args.trace, flag="--trace", force=args.force)


class _RepeatedKey(ValueError):
    pass


def _no_repeated_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _RepeatedKey
    return dict(pairs)


def is_valid_json(text: str) -> bool:
    """Whether text is one JSON document whose objects never repeat a key: json.loads keeps the
    last of repeated keys, and what a consumer keeps differs (RFC 8259 4: names SHOULD be unique)."""
    try:
        json.loads(text, object_pairs_hook=_no_repeated_keys)
    except ValueError:          # JSONDecodeError and _RepeatedKey
        return False
    return True


def run(args) -> int:
    if args.mask is not None and args.schema is None:
        raise InferlabError("--mask selects the mask of --schema; pass --schema FILE too")
    if args.jump_forward and args.schema is None:
        raise InferlabError("--jump-forward needs --schema FILE")
    if args.jump_forward and args.mask not in (None, "stack"):
        raise InferlabError(f"--jump-forward needs the matcher's mask (--mask stack, the default), not --mask {args.mask}")
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

        mask = build_mask(schema, ckpt.tokenizer, kind=args.mask or "stack")
    tracer = Tracer() if args.trace is not None else None
    g = generate(ckpt.model, ckpt.tokenizer, args.prompt, mask=mask, max_new_tokens=args.max_new_tokens,
                 seed=args.seed, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, tracer=tracer,
                 jump_forward=args.jump_forward)
    if tracer is not None:
        tracer.save(args.trace)
    # per decode step, the prompt's prefill included, as seed 000 divides a run's time by its steps
    ms_per_token = g.elapsed_s * 1e3 / g.n_steps if g.n_steps else None
    result = {"text": g.text, "tokens": g.tokens, "n_tokens": g.n_tokens, "stop_reason": g.stop_reason,
              "ms_per_token": ms_per_token, "trained": ckpt.trained, "model": ckpt.source}
    if mask is not None:
        result["complete"] = g.complete
        result["valid"] = bool(g.complete) and is_valid_json(g.text)
    if args.jump_forward:
        result["tokens_forced"] = g.tokens_forced
        result["forward_passes_saved"] = g.forward_passes_saved
    if args.json:
        print_json(result)
    else:
        print(g.text)
        speed = f"{ms_per_token:.2f} ms/token" if ms_per_token is not None else "no steps"
        extra = f", complete {g.complete}, valid {result['valid']}" if mask is not None else ""
        if args.jump_forward:
            extra += f", {g.tokens_forced} tokens forced, {g.forward_passes_saved} forward passes saved"
        print(f"[{g.n_tokens} tokens, stop: {g.stop_reason}, {speed}{extra}]", file=sys.stderr)
    # With --schema, exit 0 says "a complete, valid instance": scripts can trust the output.
    return 0 if mask is None or result["valid"] else 1
