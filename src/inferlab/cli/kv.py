"""`inferlab kv`: KV-cache sizing for a registry model or a Hugging Face config.json.

  size MODEL [--ctx N ...] [--batch B] [--dtype D] [--tp N]   per-token bytes and totals
  max-context MODEL --memory 40GB --weights 14GiB [--batch B]  S_max in what the weights leave
  gpus MODEL --gpu H100-80GB [--dtype fp16 int8 int4]          GPUs for the weights (+ a KV load)
  compare MODEL_A MODEL_B [--ctx N] [--claim 4x]               cache ratio and a claim's verdict
  waste MODEL --max-len 32768 --mean-len 1024 --batch 32       preallocation vs paged waste
  derivations [--out DIR]                                      seed 002's answer sheet (the lab)
  list                                                         the registry
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from inferlab.cli.common import add_out_arguments, examples_epilog, print_json
from inferlab.errors import InferlabError
from inferlab.kv import calculator
from inferlab.kv.formulas import QUANTIZED, SCALE_KINDS, KVFormat, default_format
from inferlab.kv.hf_config import load_config
from inferlab.kv.registry import ModelSpec, get_gpu, get_model, gpu_names, model_names
from inferlab.units import DTYPE_BITS, fmt_binary, fmt_decimal, parse_bytes, parse_dtype

NAME = "kv"
HELP = "KV-cache sizing: per-token bytes, max context, GPUs needed, GQA/MLA comparisons, waste"
EXAMPLES = (
    'inferlab kv size llama-3-8b --ctx 8192 32768',
    'inferlab kv max-context llama-2-7b --memory 40GB --weights 14GiB --batch 8',
    'inferlab kv list',
)


# ---------------------------------------------------------------- argument parsing

def _count(text, flag: str) -> int:
    """A positive whole number; '4096' or '4_096'. One-line error naming the flag otherwise."""
    try:
        value = int(str(text).replace("_", ""))
    except ValueError:
        raise InferlabError(f"{flag} {text!r}: expected a positive whole number") from None
    if value <= 0:
        raise InferlabError(f"{flag} {value}: must be positive")
    if value > MAX_COUNT:
        raise InferlabError(f"{flag} {text!r}: over {MAX_COUNT:.0e}, past any context, batch or device count")
    return value


MAX_COUNT = 10 ** 15           # tokens, sequences, devices: past any real one, and within float's exact integers
MAX_PARAMS = Decimal("1e15")  # a quadrillion parameters: past any model, and past float's exact integers
MAX_CLAIM = 10 ** 6           # a KV-cache reduction claimed above a million-fold


def _params(text) -> int:
    """--params 7.24e9 or 7241732096."""
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        raise InferlabError(f"--params {text!r}: expected a parameter count such as 7.24e9") from None
    if not value.is_finite() or value <= 0 or value != value.to_integral_value():
        raise InferlabError(f"--params {text!r}: expected a positive whole parameter count")
    if value > MAX_PARAMS:
        raise InferlabError(f"--params {text!r}: more than {MAX_PARAMS:.0e} parameters")
    return int(value)


def _model(args, positional: str | None) -> ModelSpec:
    config = getattr(args, "config", None)
    if positional and config:
        raise InferlabError(f"give a model name or --config FILE, not both ({positional!r} and {config})")
    if not positional and not config:
        raise InferlabError("no model: give a registry name (see `inferlab kv list`) or --config FILE")
    spec = load_config(config) if config else get_model(positional)
    if getattr(args, "params", None) is not None:
        spec = replace(spec, params=_params(args.params))
    return spec


def _format(args, spec: ModelSpec) -> KVFormat:
    """The cache format: --dtype (default: the model's dtype), scales per --scales/--group or the dtype's usual."""
    dtype = parse_dtype(args.dtype) if args.dtype is not None else spec.dtype   # ("" is refused, not "not given")
    fmt = default_format(dtype)
    if args.scales is None and args.group is None:
        return fmt
    if dtype not in QUANTIZED and args.scales not in (None, "none"):
        raise InferlabError(f"--scales {args.scales} applies to a quantized cache ({', '.join(QUANTIZED)}), "
                            f"not {dtype}")
    scales = args.scales if args.scales is not None else fmt.scales
    if args.group is not None and scales != "block":
        raise InferlabError(f"--group sets the elements per scale of --scales block, not of {scales}")
    group = _count(args.group, "--group") if args.group is not None else fmt.group
    return KVFormat(dtype, scales=scales, group=group, zero_point=fmt.zero_point)


def _add_model(p, *, config=True) -> None:
    p.add_argument("model", nargs="?", help="registry name (inferlab kv list)")
    if config:
        p.add_argument("--config", type=Path, metavar="FILE", help="a Hugging Face config.json instead of a name")


def _add_format(p) -> None:
    p.add_argument("--dtype", help=f"cache dtype: {', '.join(DTYPE_BITS)} (default: the model's)")
    p.add_argument("--scales", choices=SCALE_KINDS,
                   help="quantization scales: tensor, token (per token per KV head) or block (per --group "
                        "elements); default: fp8 tensor, int8 token, int4 block of 64")
    p.add_argument("--group", help="elements per scale with --scales block (default 64)")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="kv_command", required=True)

    s = sub.add_parser("size", help="per-token bytes (arithmetic shown) and totals per context",
                       description="per-token bytes (arithmetic shown) and totals per context", epilog=examples_epilog('inferlab kv size llama-3-8b --ctx 8192 32768', 'inferlab kv size mistral-7b --dtype int8 --scales token --batch 4', 'inferlab kv size --config path/to/config.json --tp 2'))
    _add_model(s)
    s.add_argument("--ctx", nargs="+", default=["4096", "32768"], help="context lengths (default 4096 32768)")
    s.add_argument("--batch", default="1", help="sequences (default 1)")
    s.add_argument("--tp", default="1", help="tensor-parallel ranks; figures are per rank (default 1)")
    _add_format(s)

    m = sub.add_parser("max-context", help="S_max (floor) that fits in --memory after --weights",
                       description="S_max (floor) that fits in --memory after --weights", epilog=examples_epilog('inferlab kv max-context llama-2-7b --memory 40GB --weights 14GiB', 'inferlab kv max-context llama-3-8b --memory 80GB --batch 8 --dtype fp8'))
    _add_model(m)
    m.add_argument("--memory", required=True, help="device memory with its unit: 40GB (1e9) or 40GiB (2^30)")
    m.add_argument("--weights", help="the model's weights with a unit, e.g. 14GiB (default: params x the model's "
                                     "dtype); with --tp each rank holds 1/TP of them")
    m.add_argument("--params", help="parameter count, for a --config model without --weights")
    m.add_argument("--batch", default="1", help="sequences sharing the memory (default 1)")
    m.add_argument("--tp", default="1", help="tensor-parallel ranks; --memory is per rank (default 1)")
    _add_format(m)

    g = sub.add_parser("gpus", help="GPUs needed for the weights alone, and with a KV load",
                       description="GPUs needed for the weights alone, and with a KV load", epilog=examples_epilog('inferlab kv gpus gpt-3 --gpu H100-80GB', 'inferlab kv gpus llama-2-70b --gpu A100-40GB --ctx 4096 --batch 16'))
    _add_model(g)
    g.add_argument("--gpu", required=True, help=f"one of {', '.join(gpu_names())}")
    g.add_argument("--dtype", nargs="+", default=["fp16", "int8", "int4"], help="weight dtypes (default fp16 int8 int4)")
    g.add_argument("--ctx", help="with --batch: add the KV cache of this context to the weights")
    g.add_argument("--batch", default="1", help="sequences of the KV load (default 1)")
    g.add_argument("--kv-dtype", default=None, help="cache dtype of the KV load (default: the model's)")
    g.add_argument("--params", help="parameter count (needed with --config)")

    c = sub.add_parser("compare", help="cache of MODEL_A over MODEL_B, and whether a claim like '4x' holds",
                       description="cache of MODEL_A over MODEL_B, and whether a claim like '4x' holds", epilog=examples_epilog('inferlab kv compare llama-2-7b mistral-7b --claim 4x', 'inferlab kv compare deepseek-v2 llama-2-70b --ctx 32768'))
    c.add_argument("models", nargs="*", metavar="MODEL", help="two registry names (or fewer, with --config)")
    c.add_argument("--config", type=Path, action="append", default=[], metavar="FILE",
                   help="a config.json standing for one of the two models (repeatable)")
    c.add_argument("--ctx", help="compare whole caches at this context (sliding windows apply)")
    c.add_argument("--batch", default="1", help="sequences (default 1)")
    c.add_argument("--claim", help="a claimed saving factor, e.g. 4x")
    _add_format(c)

    w = sub.add_parser("waste", help="contiguous preallocation vs paged blocks",
                       description="contiguous preallocation vs paged blocks", epilog=examples_epilog('inferlab kv waste llama-2-7b --max-len 32768 --mean-len 1024 --batch 32'))
    _add_model(w)
    w.add_argument("--max-len", required=True, help="positions preallocated per sequence")
    w.add_argument("--mean-len", required=True, help="positions actually used, on average")
    w.add_argument("--batch", required=True, help="sequences")
    w.add_argument("--block-size", default="16", help="positions per paged block (default 16, vLLM's)")
    _add_format(w)

    d = sub.add_parser("derivations", help="write seed 002's answer sheet: derivations.md, results, kv_sizes.png",
                       description="write seed 002's answer sheet: derivations.md, results, kv_sizes.png", epilog=examples_epilog('inferlab kv derivations --out /tmp/22-cache-sizing', 'inferlab kv derivations --force  # replace experiments/22-cache-sizing'))
    add_out_arguments(d, default_out="experiments/22-cache-sizing")

    li = sub.add_parser("list", help="the registry: models with attention kind and source",
                       description="the registry: models with attention kind and source", epilog=examples_epilog('inferlab kv list'))

    for sp in (s, m, g, c, w, d):
        sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    for sp in (s, m, g, c, w, d, li):
        sp.set_defaults(_prog=sp.prog)     # errors name the sub-subcommand


# ---------------------------------------------------------------- commands

def _size(args) -> dict:
    spec = _model(args, args.model)
    fmt = _format(args, spec)
    ctxs = [_count(c, "--ctx") for c in args.ctx]
    return calculator.size(spec, ctxs=ctxs, batch=_count(args.batch, "--batch"), fmt=fmt,
                           tp=_count(args.tp, "--tp"))


def _print_size(r: dict) -> None:
    print(f"{r['model']} ({r['attention']}), cache {r['kv_format']}, per token:")
    print(f"  {r['formula']}")
    for t in r["totals"]:
        print(f"  ctx {t['ctx']:>7} x batch {t['batch']}: {fmt_binary(t['bytes'])} ({fmt_decimal(t['bytes'])})")
    for n in r["notes"]:
        print(f"  note: {n}")


def _max_context(args) -> dict:
    spec = _model(args, args.model)
    fmt = _format(args, spec)
    memory = parse_bytes(args.memory, flag="--memory")
    if args.weights is not None:
        weights = parse_bytes(args.weights, flag="--weights")
    else:
        weights = calculator.weights_bytes(spec, spec.dtype)
    tp = _count(args.tp, "--tp")
    return calculator.max_ctx(spec, memory_bytes=memory, weights_bytes=-(-weights // tp),
                              batch=_count(args.batch, "--batch"), fmt=fmt, tp=tp)


def _print_max_context(r: dict) -> None:
    s = "unbounded" if r["s_max"] is None else f"{r['s_max']} positions per sequence"
    print(f"{r['model']}: free {fmt_binary(r['free_bytes'])} ({fmt_decimal(r['free_bytes'])}) / "
          f"({r['per_token_bytes']} bytes per token x batch {r['batch']}) -> S_max = {s}")
    for wmsg in r["warnings"]:
        print(f"  warning: {wmsg}")


def _gpus(args) -> dict:
    spec = _model(args, args.model)
    dtypes = [parse_dtype(d) for d in args.dtype]
    kv_load, fmt = None, default_format(spec.dtype)
    if args.ctx is not None:
        kv_load = (_count(args.ctx, "--ctx"), _count(args.batch, "--batch"))
        if args.kv_dtype is not None:
            fmt = default_format(parse_dtype(args.kv_dtype, flag="--kv-dtype"))
    elif args.kv_dtype is not None:
        raise InferlabError("--kv-dtype needs --ctx (the KV load to add)")
    return calculator.gpus(spec, gpu=get_gpu(args.gpu), dtypes=dtypes, kv_load=kv_load, fmt=fmt)


def _print_gpus(r: dict) -> None:
    print(f"{r['model']} ({r['params']} parameters) on {r['gpu']} ({fmt_decimal(r['gpu_memory_bytes'])} each):")
    kv = r.get("kv_load")
    for row in r["gpus"]:
        line = (f"  {row['dtype']:>5}: weights {fmt_decimal(row['weights_bytes'])} "
                f"({fmt_binary(row['weights_bytes'])}) -> {row['gpus_needed']} GPU(s)")
        if kv:
            line += f"; with the KV load: {row['gpus_needed_with_kv']}"
        print(line)
    if kv:
        print(f"  KV load: ctx {kv['ctx']} x batch {kv['batch']} in {kv['kv_format']} = {fmt_binary(kv['bytes'])}")
    print("  (memory only: activations, framework reserve and KV-head replication not counted)")


def _parse_claim(text: str) -> Fraction:
    t = text.strip().lower().removesuffix("x").removesuffix("×").strip()
    try:
        value = Fraction(Decimal(t))
    except (InvalidOperation, ValueError, OverflowError):  # (nan, inf: no fraction)
        raise InferlabError(f"--claim {text!r}: expected a factor such as 4x") from None
    if value <= 0:
        raise InferlabError(f"--claim {text!r}: a factor must be positive")
    if value > MAX_CLAIM:
        raise InferlabError(f"--claim {text!r}: a factor above {MAX_CLAIM:,}x is no cache's")
    return value


def _compare(args) -> dict:
    names, configs = list(args.models), list(args.config)
    if len(names) + len(configs) != 2:
        raise InferlabError(f"compare needs exactly two models, got {len(names) + len(configs)} "
                            f"(names and --config files together)")
    specs = [get_model(n) for n in names] + [load_config(c) for c in configs]
    fmts = [_format(args, s) for s in specs]
    ctx = _count(args.ctx, "--ctx") if args.ctx is not None else None
    claim = _parse_claim(args.claim) if args.claim is not None else None
    return calculator.compare(specs[0], specs[1], ctx=ctx, batch=_count(args.batch, "--batch"),
                              fmt_a=fmts[0], fmt_b=fmts[1], claim=claim)


def _print_compare(r: dict) -> None:
    a, b = r["models"]
    print(f"per token: {a}: {r['formulas'][0]}")
    print(f"           {b}: {r['formulas'][1]}")
    print(f"ratio {a} / {b} = {r['ratio_exact']} = {r['ratio']:.6g}")
    if "at_ctx" in r:
        x = r["at_ctx"]
        print(f"at ctx {x['ctx']} x batch {x['batch']}: {fmt_binary(x['bytes'][0])} vs {fmt_binary(x['bytes'][1])}, "
              f"ratio {x['ratio']:.6g}")
    for n in r["window_notes"]:
        print(f"sliding window: {n}")
    if "claim" in r:
        c = r["claim"]
        print(f"claim {c['factor']:g}x: the factor is {c['actual_factor']:.6g}x -> {c['verdict']}")


def _waste(args) -> dict:
    spec = _model(args, args.model)
    return calculator.waste(spec, max_len=_count(args.max_len, "--max-len"),
                            mean_len=_count(args.mean_len, "--mean-len"), batch=_count(args.batch, "--batch"),
                            block_size=_count(args.block_size, "--block-size"), fmt=_format(args, spec))


def _print_waste(r: dict) -> None:
    print(f"{r['model']}: {r['batch']} sequences, {r['max_len']} positions reserved each, {r['mean_len']} used")
    print(f"  contiguous: reserved {fmt_binary(r['reserved_bytes'])}, used {fmt_binary(r['used_bytes'])}, "
          f"wasted {fmt_binary(r['wasted_bytes'])} ({r['waste_fraction']:.2%})")
    print(f"  paged (blocks of {r['block_size']}): at most {fmt_binary(r['paged_wasted_bytes'])} wasted "
          f"(one partial block per sequence); {fmt_binary(r['paged_wasted_bytes_at_mean'])} if every "
          f"sequence has {r['mean_len']} tokens")


def _derivations(args) -> dict:
    from inferlab.labs import LabOptions
    from inferlab.labs.kv_sizing import LAB

    results = LAB.run(LabOptions(out=args.out, force=args.force))
    if not args.json:
        print(f"wrote {args.out / 'derivations.md'} (and results.json, manifest.json, kv_sizes.png)")
    return results


_LIST_ROW = "{:<16} {:<9} {:>6} {:>5} {:>8} {:>8} {:<6} {}"


def _list(args) -> None:
    print(_LIST_ROW.format("model", "attention", "layers", "heads", "kv_heads", "head_dim", "dtype", "source"))
    for name in model_names():
        s = get_model(name)
        tag = " (hypothetical)" if s.hypothetical else ""
        print(_LIST_ROW.format(name, s.attention, s.layers, s.heads, s.kv_heads, s.head_dim, s.dtype,
                               s.sources.get("config", "") + tag))


_COMMANDS = {
    "size": (_size, _print_size),
    "max-context": (_max_context, _print_max_context),
    "gpus": (_gpus, _print_gpus),
    "compare": (_compare, _print_compare),
    "waste": (_waste, _print_waste),
    "derivations": (_derivations, None),
}


def run(args) -> int:
    if args.kv_command == "list":
        _list(args)
        return 0
    compute, show = _COMMANDS[args.kv_command]
    result = compute(args)
    if args.json:
        print_json(result)
    elif show:
        show(result)
    return 0
