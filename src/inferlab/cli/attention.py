"""`inferlab attention`: the attention performance profile on the roofline (seed 001)."""

from __future__ import annotations

from pathlib import Path

from inferlab.cli.common import (add_budget_argument, add_lab_arguments, add_roofline_argument, check_fits_in_memory,
                                 positive_int, print_json, roofline_dir)
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json_object
from inferlab.labs.attention import EXPERIMENT, AttentionLabConfig, run_attention
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S

NAME = "attention"
HELP = "time the five attention ops over a T sweep and place them on the roofline (seed 001)"
EXAMPLES = (
    'inferlab attention --quick --out /tmp/attention',
    'inferlab attention --T 128 256 --d-model 128 --heads 8 --threads 2 --json',
    'inferlab attention --model ./Qwen2.5-0.5B --T 64 128 256 --quick',
)


def add_arguments(p) -> None:
    p.add_argument("--T", type=positive_int, nargs="+", default=[64, 128, 256, 512], metavar="T",
                   help="sequence lengths (default 64 128 256 512)")
    p.add_argument("--d-model", type=positive_int, default=None, help="model width (default 64)")
    p.add_argument("--heads", type=positive_int, default=None, help="attention heads (default 4; d_head = d_model/heads)")
    p.add_argument("--model", type=Path, default=None, metavar="DIR",
                   help="profile the attention shape (d_model, heads, KV heads, q/k/v bias) of this Hugging Face "
                        "folder's config.json (Llama, Qwen2, Mistral, GPT-2) instead of --d-model/--heads")
    add_roofline_argument(p)
    add_budget_argument(p, default=DEFAULT_BUDGET_S, quick=QUICK_BUDGET_S)
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=1)


def model_shape(folder: Path) -> dict:
    """The attention shape of a model folder's config.json (read only; no weights are loaded)."""
    from inferlab.model.checkpoints import hf_gpt2_config
    from inferlab.model.hf_llama import is_llama_family, llama_config

    where = folder / "config.json"
    if not where.is_file():
        raise InferlabError(f"--model {folder}: no config.json there")
    doc = read_json_object(where)
    if is_llama_family(doc):
        c = llama_config(doc, str(where))
        if c.head_dim * c.n_heads != c.d_model:
            raise InferlabError(f"--model {folder}: head_dim {c.head_dim} x {c.n_heads} heads is not d_model "
                                f"{c.d_model}; the profiler's ops take d_head = d_model / heads")
        return {"d_model": c.d_model, "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads, "qkv_bias": c.qkv_bias}
    if doc.get("model_type") == "gpt2":
        c = hf_gpt2_config(doc, str(where))
        return {"d_model": c.d_model, "n_heads": c.n_heads}
    raise InferlabError(f"--model {folder}: {where} is neither a Llama-family nor a GPT-2 config")


def config_from_args(args) -> AttentionLabConfig:
    if args.model is not None:
        if args.d_model is not None or args.heads is not None:
            raise InferlabError("--model sets d_model and heads; drop --d-model/--heads")
        shape = {**model_shape(args.model), "model": str(args.model)}
    else:
        shape = {"d_model": args.d_model or 64, "n_heads": args.heads or 4}
    d, heads = shape["d_model"], shape["n_heads"]
    if d % heads:
        raise InferlabError(f"--d-model {d} is not divisible by --heads {heads}")
    if len(set(args.T)) != len(args.T):
        raise InferlabError(f"--T lists a length twice: {' '.join(map(str, args.T))}")
    T = max(args.T)
    # float64 upper bound: the (H, T, T) scores and probabilities, the (T, d) activations, the weights
    check_fits_in_memory(8 * (2 * heads * T * T + 8 * T * d + 4 * d * d),
                         f"--T {T} with --d-model {d} and --heads {heads}")
    # sorted: the tables, the plots' lines and "the largest T" read the sweep in increasing T
    return AttentionLabConfig.build(quick=args.quick, T_sweep=tuple(sorted(args.T)), threads=args.threads,
                                    roofline_dir=roofline_dir(args), budget_s=args.budget_s, **shape)


def run(args) -> int:
    config = config_from_args(args)
    results = run_attention(config, args.out, force=args.force)
    if args.json:
        print_json(results)
    else:
        s = results["summary"]
        print(f"wrote {args.out}/  (softmax at T={s['largest_T']}, the largest T: "
              f"{s['softmax_GFLOPS_at_largest_T']:.3g} GFLOP/s, "
              f"{s['softmax_pct_of_total_at_largest_T']:.0f}% of the forward)")
    return 0
