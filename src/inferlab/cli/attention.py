"""`inferlab attention`: the attention performance profile on the roofline (seed 001)."""

from __future__ import annotations

from inferlab.cli.common import (add_budget_argument, add_lab_arguments, add_roofline_argument, check_fits_in_memory,
                                 positive_int, print_json, roofline_dir)
from inferlab.errors import InferlabError
from inferlab.labs.attention import EXPERIMENT, AttentionLabConfig, run_attention
from inferlab.measure.timing import DEFAULT_BUDGET_S, QUICK_BUDGET_S

NAME = "attention"
HELP = "time the five attention ops over a T sweep and place them on the roofline (seed 001)"
EXAMPLES = (
    'inferlab attention --quick --out /tmp/attention',
    'inferlab attention --T 128 256 --d-model 128 --heads 8 --threads 2 --json',
)


def add_arguments(p) -> None:
    p.add_argument("--T", type=positive_int, nargs="+", default=[64, 128, 256, 512], metavar="T",
                   help="sequence lengths (default 64 128 256 512)")
    p.add_argument("--d-model", type=positive_int, default=64, help="model width (default 64)")
    p.add_argument("--heads", type=positive_int, default=4, help="attention heads (default 4; d_head = d_model/heads)")
    add_roofline_argument(p)
    add_budget_argument(p, default=DEFAULT_BUDGET_S, quick=QUICK_BUDGET_S)
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=1)


def config_from_args(args) -> AttentionLabConfig:
    if args.d_model % args.heads:
        raise InferlabError(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    if len(set(args.T)) != len(args.T):
        raise InferlabError(f"--T lists a length twice: {' '.join(map(str, args.T))}")
    T, d = max(args.T), args.d_model
    # float64 upper bound: the (H, T, T) scores and probabilities, the (T, d) activations, the weights
    check_fits_in_memory(8 * (2 * args.heads * T * T + 8 * T * d + 4 * d * d),
                         f"--T {T} with --d-model {d} and --heads {args.heads}")
    return AttentionLabConfig.build(quick=args.quick, T_sweep=tuple(args.T), d_model=args.d_model,
                                    n_heads=args.heads, threads=args.threads, roofline_dir=roofline_dir(args),
                                    budget_s=args.budget_s)


def run(args) -> int:
    config = config_from_args(args)
    results = run_attention(config, args.out, force=args.force)
    if args.json:
        print_json(results)
    else:
        s = results["summary"]
        print(f"wrote {args.out}/  (softmax at T=512: {s['softmax_GFLOPS_at_T_512'] or float('nan'):.3g} GFLOP/s, "
              f"{s['softmax_pct_of_total_at_T_512'] or float('nan'):.0f}% of the forward)")
    return 0
