"""`inferlab train`: train MiniGPT on the conjugation corpus and write a model folder.

The folder is what `load_model` reads (config.json, model.safetensors, tokenizer.json,
manifest.json) plus loss.png and report.json. The shipped default model is exactly
`inferlab train --out src/inferlab/data/minigpt --force` (single-threaded BLAS, seed 0).
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from inferlab.cli.common import add_out_arguments, non_negative_int, positive_float, positive_int, thread_count
from inferlab.errors import InferlabError
from inferlab.measure.artifacts import ExperimentWriter, build_manifest
from inferlab.measure.machine import blas_threads, built_from
from inferlab.measure.plots import new_figure
from inferlab.measure.progress import LogProgress
from inferlab.model import corpus
from inferlab.model import train as tr
from inferlab.model.checkpoints import model_writer
from inferlab.model.config import GPTConfig
from inferlab.model.gpt import GPT
from inferlab.model.tokenizer import ENDOFTEXT, train_bpe

NAME = "train"
HELP = "train MiniGPT in numpy on the Spanish-conjugation corpus and write a model folder"
EXAMPLES = (
    'inferlab train --steps 200 --out /tmp/minigpt',
    'inferlab train --out src/inferlab/data/minigpt --force  # the shipped weights',
)

VOCAB_SIZE = GPTConfig().vocab_size    # the BPE is trained to exactly the model's vocabulary
VAL_POINTS = 30                        # held-out loss evaluations along a run (the loss curve's points)
TARGETS = {"parse_json": 0.90, "right_form_regular": 0.80}   # issue 4's acceptance targets
EXPERIMENT = "minigpt-train"


def add_arguments(p) -> None:
    d = tr.TrainConfig()
    add_out_arguments(p, default_out="minigpt", what="model folder")
    p.add_argument("--steps", type=positive_int, default=d.steps, help=f"optimiser steps (default {d.steps})")
    p.add_argument("--seed", type=non_negative_int, default=d.seed,
                   help=f"initialisation and batch order, a whole number >= 0 (default {d.seed})")
    p.add_argument("--threads", type=thread_count, default=1,
                   help="BLAS threads (default 1: the shipped weights are reproduced single-threaded)")
    p.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help=f"sequences per step (default {d.batch_size})")
    p.add_argument("--lr", type=positive_float, default=d.lr, help=f"peak learning rate (default {d.lr})")


def _command(args) -> str:
    return shlex.join(["inferlab", "train", "--out", str(args.out), "--steps", str(args.steps), "--seed",
                       str(args.seed), "--threads", str(args.threads), "--batch-size", str(args.batch_size),
                       "--lr", repr(args.lr)] + (["--force"] if args.force else []))


def _git_commit() -> str:
    """HEAD, with "+dirty" when a loaded inferlab module differs from it (other files in the tree
    cannot change the weights); outside git, the commit a `pip install .` was built from
    (measure.machine.built_from); else "unknown"."""
    here = Path(__file__).parent
    loaded = sorted({m.__file__ for name, m in list(sys.modules.items())
                     if name.split(".")[0] == "inferlab" and getattr(m, "__file__", None)})
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *loaded], cwd=here,
                               capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        sha, dirty = built_from()
        return "unknown" if sha is None else sha + ("+dirty" if dirty else "")
    return sha + ("+dirty" if dirty else "")


def _progress(console: Console) -> Progress | LogProgress:
    if not console.is_terminal:  # a log: whole lines, not a bar's columns cut to 80 characters
        return LogProgress()
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=console)


def _loss_figure(logs, val_curve: list[tuple[int, float]]):
    fig, ax = new_figure()
    steps = [log.step for log in logs]
    ax.plot(steps, [log.loss for log in logs], lw=0.6, alpha=0.5, label="train loss (batch)")
    window = max(1, len(logs) // 50)
    smooth = [sum(log.loss for log in logs[max(0, i - window + 1):i + 1]) / min(i + 1, window)
              for i in range(len(logs))]
    ax.plot(steps, smooth, lw=1.5, label=f"train loss ({window}-step trailing mean)")
    ax.plot([s for s, _ in val_curve], [v for _, v in val_curve], "ko-", ms=3, lw=1,
            label=f"held-out verbs (end: {val_curve[-1][1]:.3f})")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy on the JSON tokens (nats/token)")
    ax.set_title("MiniGPT on the conjugation corpus")
    ax.legend()
    return fig


def run(args) -> int:
    # Refuse a bad --out before training for minutes; model_writer checks again when it writes.
    ExperimentWriter(args.out, force=args.force)
    train_ex, held_ex = corpus.examples("train"), corpus.examples("heldout")
    if args.batch_size > len(train_ex):
        raise InferlabError(f"--batch-size {args.batch_size} is more than the {len(train_ex)} training examples")
    commit = _git_commit()     # now: the code that trains is loaded and may be edited during the run
    console = Console(stderr=True, soft_wrap=True)  # (a log keeps its lines whole)
    config = GPTConfig()
    tc = tr.TrainConfig(steps=args.steps, seed=args.seed, batch_size=args.batch_size, lr=args.lr,
                        warmup=min(tr.TrainConfig.warmup, max(1, args.steps // 10)))
    # Prompt and completion are separate pieces of the BPE's training text, as they are encoded
    # separately (encode_examples): merges never span the prompt/JSON boundary.
    text = "".join(e.prompt + ENDOFTEXT + e.completion + ENDOFTEXT for e in train_ex)
    tokenizer = train_bpe(text, VOCAB_SIZE)
    train_data, held_data = tr.encode_examples(tokenizer, train_ex), tr.encode_examples(tokenizer, held_ex)
    schema = corpus.conjugation_schema()
    console.print(f"corpus: {len(train_ex)} training examples, {len(held_ex)} held-out "
                  f"({len(corpus.verb_split()['heldout']['regular'])} regular and "
                  f"{len(corpus.verb_split()['heldout']['irregular'])} irregular held-out verbs)")

    with blas_threads(args.threads), _progress(console) as bar:
        task = bar.add_task("training", total=tc.steps, info="")
        t0 = time.perf_counter()
        seen = [0]
        val_curve: list[tuple[int, float]] = []
        eval_every = max(1, tc.steps // VAL_POINTS)
        eval_s = [0.0]

        def on_step(log, params):
            seen[0] += log.tokens
            if log.step % eval_every == 0 or log.step == tc.steps - 1:
                # Held-out loss along the way shows the generalisation gap; it reads the weights
                # only, so the trained weights do not depend on it. Its time is not counted in tok/s.
                e0 = time.perf_counter()
                val_curve.append((log.step + 1, tr.mean_loss(params, config, held_data, pad_id=tokenizer.eos_id)))
                eval_s[0] += time.perf_counter() - e0
            rate = seen[0] / (time.perf_counter() - t0 - eval_s[0])
            bar.update(task, advance=1, info=f"loss {log.loss:.4f}  held-out {val_curve[-1][1]:.4f}  {rate:,.0f} tok/s")

        params, logs = tr.train(config, tc, train_data, pad_id=tokenizer.eos_id, on_step=on_step)
        train_s = time.perf_counter() - t0 - eval_s[0]
        val_loss = val_curve[-1][1]
        model = GPT(config, params)
        etask = bar.add_task("held-out generations", total=len(held_ex), info="greedy, unmasked")
        gens = tr.evaluate_generations(model, tokenizer, held_ex, schema,
                                       on_item=lambda: bar.advance(etask))

    met = {"parse_json": gens["parse_json"] >= TARGETS["parse_json"],
           "right_form_regular": gens["right_form"]["regular"] >= TARGETS["right_form_regular"]}
    report = {
        "schema_version": 1, "experiment": EXPERIMENT,
        "validation_loss": val_loss,
        "final_train_loss": sum(log.loss for log in logs[-50:]) / len(logs[-50:]),
        "validation_curve": [{"step": s, "loss": v} for s, v in val_curve],
        "heldout": gens, "targets": TARGETS, "targets_met": met,
        "training": {"steps": tc.steps, "seconds": train_s, "tokens": seen[0],
                     "tokens_per_s": seen[0] / train_s, "threads": args.threads,
                     "n_train_examples": len(train_ex), "n_heldout_examples": len(held_ex),
                     "heldout_verbs": {k: list(v) for k, v in corpus.verb_split()["heldout"].items()}},
    }
    summary = {"validation_loss": val_loss, "parse_json": gens["parse_json"],
               "valid_schema": gens["valid_schema"], "right_form": gens["right_form"]}
    manifest = build_manifest(
        experiment=EXPERIMENT, seed=args.seed, depends_on=None, results_summary=summary, threads=args.threads,
        config={"command": _command(args), "commit": commit, "steps": tc.steps,
                "train": dataclasses.asdict(tc), "model": dataclasses.asdict(config),
                "corpus": {"holdout_every": corpus.HOLDOUT_EVERY, "holdout_offset": corpus.HOLDOUT_OFFSET}})
    writer = model_writer(model, tokenizer, args.out, force=args.force, manifest=manifest)
    writer.add_json("report.json", report)
    writer.add_figure("loss.png", _loss_figure(logs, val_curve))
    out = writer.commit()    # weights, tokenizer, report and curve land together or not at all

    console.print(f"wrote {out}/ in {train_s:.0f} s of training: held-out loss {val_loss:.4f}; "
                  f"greedy unmasked on {gens['n']} held-out prompts: {gens['parse_json']:.1%} parse as JSON, "
                  f"{gens['valid_schema']:.1%} validate, right form {gens['right_form']['regular']:.1%} "
                  f"(regular), {gens['right_form']['irregular']:.1%} (irregular)")
    if not all(met.values()):
        console.print(f"[yellow]targets not met: {', '.join(k for k, ok in met.items() if not ok)}[/yellow]")
    return 0
