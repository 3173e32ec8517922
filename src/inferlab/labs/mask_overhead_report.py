"""The 30-mask-overhead report: README.md, overhead.png, scaling.png, peers.png and bench.py,
rendered from the folder's results.json (and manifest.json's machine lines) alone.

Every comparison in the README is a verdict's statement, quoted verbatim; everything else is a
number with the run's own sample count and step count beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab.measure import new_figure
from inferlab.measure.verdicts import rule_paragraph, verdict_lines

MASK_ORDER = ("no mask", "naive", "indexed", "stack")   # the bar order of every panel


def duration(ms: float) -> str:
    """A duration in the unit that reads best: s, ms or us (3 significant digits)."""
    if ms >= 1000:
        return f"{ms / 1e3:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1e3:.3g} us"


def signed(ms: float) -> str:
    """duration() with a sign: a paired difference can be negative."""
    return ("-" if ms < 0 else "") + duration(abs(ms))


def share(x: float) -> str:
    """A fraction as a percentage with two significant digits below 1% (0.02%, not 0.0%)."""
    return f"{x:.1%}" if x >= 0.01 else f"{x * 100:.2g}%"


def _f(x, fmt=".3g") -> str:
    return "n/a" if x is None else format(x, fmt)


def _bars(entry: dict) -> list[tuple[str, dict]]:
    """(label, row) per configuration of a vocabulary, in MASK_ORDER."""
    rows = {"no mask": entry["no_mask"], **entry["masks"]}
    return [(k, rows[k]) for k in MASK_ORDER if k in rows] + [(k, r) for k, r in rows.items() if k not in MASK_ORDER]


# The forward and the sampling do the same work with or without a mask (same shapes, all V logits),
# so a bar that grows there grew outside the mask (a loaded host's, say): they are drawn apart.
_PARTS = (("forward_ms", "forward pass (the same work with or without a mask)", "dimgray"),
          ("sample_rest_ms", "sampling and the rest of the step", "darkgray"),
          ("mask_build_ms", "mask build (state machine / lookup)", "tab:red"),
          ("mask_apply_ms", "mask apply (to the logits)", "tab:orange"))


def _parts(b: dict) -> dict[str, float]:
    """A traced breakdown as _PARTS's keys (ms per step); they add up to the traced step."""
    forward = b.get("forward_ms", 0.0)
    return {"forward_ms": forward, "sample_rest_ms": b["rest_of_decoder_ms"] - forward,
            "mask_build_ms": b["mask_build_ms"], "mask_apply_ms": b["mask_apply_ms"]}


def overhead_figure(results: dict):
    """Stacked per-step breakdown (traced run), one panel per vocabulary, bars in MASK_ORDER."""
    table = results["table"]
    fig, axes = new_figure(1, len(table), figsize=(4.4 * len(table), 5.2))
    axes = np.atleast_1d(axes)
    for ax, entry in zip(axes, table):
        bars = [(name, row["breakdown"]) for name, row in _bars(entry)]
        parts = [_parts(b) for _, b in bars]
        bottom = np.zeros(len(bars))
        for key, label, color in _PARTS:
            vals = np.array([p[key] for p in parts])
            ax.bar([n for n, _ in bars], vals, bottom=bottom, color=color, label=label)
            bottom += vals
        for i, (name, b) in enumerate(bars):
            mask_ms = b["mask_build_ms"] + b["mask_apply_ms"]
            # one short item per line: two lines side by side at this width overlap their neighbours
            note = duration(bottom[i]) + (f"\nmask {duration(mask_ms)}\n({share(mask_ms / b['step_ms'])})"
                                          if name != "no mask" else "")
            ax.annotate(note, (i, bottom[i]), ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, bottom.max() * 1.4)
        name = f"{entry['shape']['architecture']} (--model)\n" if entry.get("real_model") else ""
        ax.set_title(f"{name}vocab {entry['vocab_size']:,}, {entry['no_mask']['steps']}-step run", fontsize=10)
        ax.set_ylabel("ms per decode step (traced run)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8)
    fig.suptitle("Per-step breakdown (Block B, one traced run per bar)")
    return fig


def _minigpt_shaped(results: dict) -> list[dict]:
    """The rows of MiniGPT's shape (the scaling series), by vocabulary; a --model row has its own shape."""
    return sorted((e for e in results["table"] if not e.get("real_model")), key=lambda e: e["vocab_size"])


def _staggered_labels(table: list[dict]) -> list[str]:
    """'V\nN steps' per vocabulary; a tick within 0.4 decade of the previous one (cl100k beside Qwen)
    drops two lines, so neighbouring labels never overlap."""
    labels, prev, low = [], None, False
    for e in table:
        v = e["vocab_size"]
        steps = "/".join(str(s) for s in sorted({r["steps"] for _, r in _bars(e)}))
        low = prev is not None and np.log10(v / prev) < 0.4 and not low
        labels.append(("\n\n" if low else "") + f"{v:,}\n{steps} steps")
        prev = v
    return labels


def _value_axis(ax, values) -> None:
    """The y axis for `values`: log with 1-2-5 ticks written as plain numbers where they span more
    than a decade, else linear. Over a narrower span a log axis shows one labelled decade or none
    (matplotlib's log axis writes no tick label under a decade's span, two for a single bar)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    v = np.asarray([x for x in values if np.isfinite(x) and x > 0])   # (n,)
    if v.size == 0 or v.max() <= 10 * v.min():
        return
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def _headroom(ax, lo: float, hi: float, used: float) -> None:
    """y limits that keep the data [lo, hi] in the bottom `used` fraction of the axes, on the
    axis's own scale, so a note and the legend above them cover nothing."""
    bottom = lo / 2 if ax.get_yscale() == "log" else max(lo - 0.1 * hi, 0.0)
    top = bottom * (hi / bottom) ** (1 / used) if ax.get_yscale() == "log" else bottom + (hi - bottom) / used
    ax.set_ylim(bottom, top)


def _dodged(v: list[int], i: int, n: int) -> np.ndarray:
    """Series i of n moved 0.04 decade apart around V (log x): bars at one V stay apart."""
    return np.asarray(v, dtype=float) * 10 ** (0.04 * (i - (n - 1) / 2))


def scaling_figure(results: dict):
    """Per-step ms against vocabulary size, each point marked with its step count; lines only
    where there are two vocabularies or more to join. The series sit side by side at each V."""
    table = _minigpt_shaped(results)
    fig, ax = new_figure(figsize=(6.8, 4.6))
    style = "o-" if len(table) > 1 else "o"
    series = [("no mask", "k", [(e["vocab_size"], e["no_mask"]) for e in table])]
    series += [(f"{kind} mask", color, [(e["vocab_size"], e["masks"][kind]) for e in table if kind in e["masks"]])
               for kind, color in (("naive", "tab:red"), ("indexed", "tab:blue"), ("stack", "tab:green"))]
    series = [s for s in series if s[2]]
    values = []
    for i, (label, color, pts) in enumerate(series):
        ms = np.array([p[1]["ms_per_step"] for p in pts])                             # (points,)
        lo = np.array([p[1]["ms_per_step_p10"] for p in pts])
        hi = np.array([p[1]["ms_per_step_p90"] for p in pts])
        ax.errorbar(_dodged([p[0] for p in pts], i, len(series)), ms, yerr=np.stack([ms - lo, hi - ms]), fmt=style,
                    color=color, label=label + " (median, p10-p90)", capsize=3)
        values += [*lo, *hi]
    builds = [(e["vocab_size"], e["masks"]["naive"]["breakdown"]["mask_build_ms"]) for e in table if "naive" in e["masks"]]
    if len(builds) > 1:
        ax.plot(*zip(*builds), "x--", color="tab:red", alpha=0.7, label="naive mask build alone (traced)")
        v0, b0 = builds[0]
        v = np.array([b[0] for b in builds], dtype=float)
        ax.plot(v, b0 * v / v0, ":", color="tab:red", label=f"build linear in V (from V={v0:,})")
        values += [b0 * v[-1] / v0, *(b for _, b in builds)]
    ax.set_xscale("log")
    _value_axis(ax, values)
    if len(table) == 1:
        # the note and the legend sit above the data, on the room _headroom leaves them
        _headroom(ax, min(values), max(values), used=0.6)
        ax.text(0.98, 0.97, "one vocabulary ran: no scaling to draw", transform=ax.transAxes, ha="right",
                va="top", fontsize=9, color="dimgrey")
        v = table[0]["vocab_size"]
        ax.set_xlim(v / 10 ** 0.5, v * 10 ** 0.5)
    # each vocabulary's decode steps under its tick: large vocabularies run shorter generations
    ax.set_xticks([e["vocab_size"] for e in table], _staggered_labels(table))
    ax.minorticks_off()
    ax.set_xlabel("vocabulary size V (and the decode steps its runs took)")
    ax.set_ylabel("ms per decode step (Block A)")
    ax.legend(fontsize=8, loc="upper left" if len(table) == 1 else "best")   # one vocabulary: the note is upper right
    ax.set_title("Per-step time against the vocabulary")
    return fig


def peers_figure(results: dict):
    """Per-step mask time of each peer and of our indexed mask, grouped by vocabulary: the mean
    over each round's >= 50 ms walk, median over the rounds with p10-p90 whiskers where the run
    kept them; each bar labelled with its value; every peer without a number is named under the
    axis, with why."""
    by_vocab = results["peers"]
    # in the table's order: ours first, then the peers
    names = list(dict.fromkeys(n for per in by_vocab.values() for n, r in per.items() if r.get("mean_us")))
    fig, ax = new_figure(figsize=(7.5, 4.8))
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(by_vocab))
    values = []
    for i, name in enumerate(names):
        rows = [per.get(name, {}) for per in by_vocab.values()]
        vals = np.array([r.get("mean_us") or np.nan for r in rows])                       # (vocabs,)
        lo = np.array([r.get("mean_us_p10", r.get("mean_us")) or np.nan for r in rows])
        hi = np.array([r.get("mean_us_p90", r.get("mean_us")) or np.nan for r in rows])
        bars = ax.bar(x + i * width, vals, width, label=name, yerr=[vals - lo, hi - vals], capsize=2)
        ax.bar_label(bars, labels=["" if np.isnan(u) else duration(u / 1e3) for u in vals], fontsize=8)
        values += [u for u in (*lo, *hi) if not np.isnan(u)]
    ax.set_xticks(x + width * (len(names) - 1) / 2, [f"V={int(v):,}" for v in by_vocab])
    _value_axis(ax, values)
    if values:
        # a bar starts at 0 on a linear axis; room above the tallest for its label and the legend
        _headroom(ax, min(values) if ax.get_yscale() == "log" else 0.0, max(values), used=0.75)
    ax.set_ylabel("per-step mask time (us): mean of a >= 50 ms walk,\nmedian of the rounds (p10-p90)")
    ax.set_title("Peers on the same schema, vocabulary and token path")
    missing = sorted({f"{n}: {r.get('note', 'no result')}" for per in by_vocab.values() for n, r in per.items()
                      if not r.get("mean_us")})
    # under the axis, where the layout makes room for it: inside, it covered the bars
    ax.set_xlabel("\n".join(["vocabulary (peers: int32 bitmask fill, their native path; inferlab-indexed: "
                               "lookup + apply to the logits)",
                               *(["", "no number for:"] + [m[:100] for m in missing] if missing else [])]),
                  fontsize=8)
    if names:
        ax.legend(fontsize=8, loc="upper right")
    return fig


def _vocab_cell(e: dict) -> str:
    return f"{e['vocab_size']:,}" + (" (--model)" if e.get("real_model") else "")


def _mask_share(row: dict) -> tuple[float, float]:
    """(mask build + apply ms, its share of the traced step) from a row's Block B breakdown."""
    b = row["breakdown"]
    ms = b["mask_build_ms"] + b["mask_apply_ms"]
    return ms, ms / b["step_ms"]


def _model_lines(results: dict) -> list[str]:
    """The --model row next to MiniGPT's: shape, forward cost and the mask's share of a step."""
    real = [e for e in results["table"] if e.get("real_model")]
    if not real:
        return []
    rows = [e for e in results["table"] if e["vocab"] == "512"] + real
    lines = ["## On a real model (--model)", "",
             f"Model: {real[0]['model']}, with the folder's own tokenizer.json. Its rows above and below ran "
             f"{real[0]['no_mask']['steps']}-step generations (its runs stop after "
             f"{results['config'].get('model_max_new_tokens')} new tokens, fewer with the naive mask at a large "
             "vocabulary, to bound the run's time); MiniGPT's ran its own length (steps column of "
             "Block A, prefill included). ms/step without a mask is Block A's median (p10-p90); the mask's time and share are from "
             "the traced Block B run (one run, no interval); the ratio is Block A's paired one.", "",
             "| model | d_model | layers | heads / KV heads | V | float32 weights | no-mask ms/step | mask | "
             "mask build+apply per step | share of the traced step | paired ratio vs no mask (p10-p90) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in rows:
        sh, nm = e["shape"], e["no_mask"]
        head = (f"| {'--model ' + sh['architecture'] if e.get('real_model') else 'MiniGPT'} | {sh['d_model']} | "
                f"{sh['n_layers']} | {sh['n_heads']} / {sh['kv_heads']} | {sh['vocab_size']:,} | "
                f"{sh['weight_bytes'] / 1e6:.4g} MB | {_f(nm['ms_per_step'])} ({_f(nm['ms_per_step_p10'])}-"
                f"{_f(nm['ms_per_step_p90'])})")
        for kind, r in e["masks"].items():
            ms, frac = _mask_share(r)
            rp = r["ratio_paired"]
            lines.append(f"{head} | {kind} | {duration(ms)} | {share(frac)} | {_f(rp['value'])} "
                         f"({_f(rp['p10'])}-{_f(rp['p90'])}) |")
    ids = [v for v in results["verdicts"] if v["id"].endswith("model_vs_minigpt") or v["id"] == "model_step_vs_minigpt"]
    lines += ["", "What changes from MiniGPT (verdicts, quoted from the list above):", "", *verdict_lines(ids), ""]
    return lines


def _jump_forward_lines(results: dict) -> list[str]:
    """The jump-forward row (issue 11): passes saved, same text, tokens/s as a paired ratio."""
    row = results.get("jump_forward")
    if row is None:
        return []
    sm, t, tok = row["summary"], row["timing"], row["timed_tokens"]
    ratio = row["tokens_per_s_ratio"]
    tps = lambda name: tok[name] / t[name]["median_ms"] * 1e3  # noqa: E731
    verdict = [v for v in results["verdicts"] if v["id"] == "jump_forward_tokens_per_s"]
    return ["## Jump-forward", "",
            f"MiniGPT (V={row['vocab_size']:,}) on the conjugation schema, both decodes masked by the grammar "
            f"matcher; jump-forward appends the text the grammar forces without sampling it. Prompts: "
            + ", ".join(f"`{p}`" for p in row["prompts"]) + f"; quality over {sm['runs']} decodes each (prompts x "
            f"seeds x temperatures 0 and 1); timing: every prompt at greedy per call, {row['rounds']} interleaved "
            "rounds, first call discarded.", "",
            "| decoding | forward passes | tokens forced | valid | tokens/s (median) | tokens/s ratio vs plain, "
            "paired (p10-p90) |", "|---|---|---|---|---|---|",
            f"| plain masked | {sm['plain_forward_passes']} | 0 | {sm['plain_valid']}/{sm['runs']} | "
            f"{tps('plain'):.4g} | 1 |",
            f"| jump-forward | {sm['jump_forward_passes']} | {sm['tokens_forced']} | {sm['jump_valid']}/{sm['runs']} | "
            f"{tps('jump_forward'):.4g} | {_f(ratio['value'])} ({_f(ratio['p10'])}-{_f(ratio['p90'])}) |", "",
            f"Forward passes saved: {sm['forward_passes_saved']} of {sm['plain_forward_passes']}. Same text as plain "
            f"decoding: {sm['same_text']}/{sm['runs']} ({sm['same_text_greedy']}/{sm['greedy_runs']} at greedy); "
            "where they differ, why: " + (", ".join(f"{k} {n}" for k, n in sm["differ_reasons"].items()) or "none")
            + " (rng_shift: fewer passes, other random draws; tokenization: different tokens for the same text; "
            "numerics: several tokens in one pass round differently).", "", *verdict_lines(verdict), ""]


def _block_a_table(results: dict) -> list[str]:
    lines = ["| vocab | mask | steps | rounds | ms/step median (p10-p90) | ratio vs no mask, paired (p10-p90) | compile (ms) | tokens agree until |",
             "|---|---|---|---|---|---|---|---|"]
    for e in results["table"]:
        for name, r in _bars(e):
            ms = f"{_f(r['ms_per_step'])} ({_f(r['ms_per_step_p10'])}-{_f(r['ms_per_step_p90'])})"
            if name == "no mask":
                lines.append(f"| {_vocab_cell(e)} | none | {r['steps']} | {r['call']['n']} | {ms} | 1 | - | - |")
                continue
            ag, rp = r["agreement"], r["ratio_paired"]
            agree = (f"step {ag['agree_prefix']} ({'mask filtered the unmasked choice' if ag['explained_by_mask'] else 'NOT explained by the mask'})"
                     if ag["diverged"] else f"all {ag['agree_prefix']} steps")
            lines.append(f"| {_vocab_cell(e)} | {name} | {r['steps']} | {r['call']['n']} | {ms} | "
                         f"{_f(rp['value'])} ({_f(rp['p10'])}-{_f(rp['p90'])}) | {_f(r['compile_ms'])} | {agree} |")
    return lines


# Where the mask's own traced work is under this share of a resolved Block A extra, the README says
# where the rest was measured.
MASK_EXPLAINS = 0.5


def _vs_none(results: dict, e: dict, kind: str) -> dict:
    """The verdict on `kind`'s per-step time over no mask at e's vocabulary (mask_verdicts): its
    CI is the one the lab decides by, so this section resolves exactly what the verdicts resolve."""
    vid = f"{kind}_vs_none_{e['vocab_size']}{'_model' if e.get('real_model') else ''}"
    return next(v for v in results["verdicts"] if v["id"] == vid)


def _extra_ms(e: dict, verdict: dict) -> tuple[float, float, float]:
    """Block A's extra ms per step with a mask: (ratio - 1) x the no-mask ms/step, over the
    verdict's 95% CI, as (median, low, high)."""
    base = e["no_mask"]["ms_per_step"]
    return tuple((verdict[k] - 1) * base for k in ("value", "ci_low", "ci_high"))


def _traced_pair(key: str, masked: dict, plain: dict) -> str:
    """'with / without' of one _PARTS key from two traced breakdowns; n/a where a run lacks it."""
    if "forward_ms" not in masked["breakdown"] or "forward_ms" not in plain["breakdown"]:
        return "n/a"
    return f"{duration(_parts(masked['breakdown'])[key])} / {duration(_parts(plain['breakdown'])[key])}"


def _outside_the_mask(e: dict, kind: str, r: dict, verdict: dict) -> str:
    """Where Block A resolves a mask's extra time but the mask's traced work is a small part of
    it: the numbers of the parts whose work does not depend on the mask, and what they can mean."""
    extra, lo, hi = _extra_ms(e, verdict)
    mask_ms = _mask_share(r)[0]
    noisy = [f"{name} {row['call']['spread']:.0%}" for name, row in (("no mask", e["no_mask"]), (kind, r))
             if row.get("noisy")]
    return (f"At V={e['vocab_size']:,} Block A puts the {kind} mask's extra time at {duration(extra)} per step "
            f"(95% CI {signed(lo)} to {signed(hi)}); the mask's own traced work (build + apply, "
            f"{duration(mask_ms)}) is {share(mask_ms / extra)} of it, so the other {duration(extra - mask_ms)} "
            "lies outside the mask timer. The forward pass and the sampling do the same work with or without "
            f"a mask; traced, with / without it they took {_traced_pair('forward_ms', r, e['no_mask'])} and "
            f"{_traced_pair('sample_rest_ms', r, e['no_mask'])} per step (one run each, no interval)"
            + (f"; the Block A samples are noisy (spread: {', '.join(noisy)} of the median)" if noisy else "")
            + ". Time there is the machine's (load, clock) or the mask's footprint in the caches, and one run "
            "cannot tell which: rerun before reading that verdict as the mask's cost.")


def _block_a_vs_b_lines(results: dict) -> list[str]:
    """Block A's extra time per mask beside the traced parts of Block B: why a resolved ratio can
    exceed what the mask's own traced work explains (a 1.65x beside a 37 us mask was once left
    unexplained)."""
    lines = ["## Block A against Block B", "",
             "Block A's extra time per step with each mask is (ratio - 1) x the no-mask ms/step, over the 95% CI "
             "its verdict decides by; beside it, the traced parts of Block B (one run each, no interval).", "",
             "| vocab | mask | Block A extra per step (95% CI) | mask build + apply (traced) | "
             "forward, with / without the mask (traced) | sampling and rest, with / without (traced) |",
             "|---|---|---|---|---|---|"]
    notes, resolved = [], 0
    for e in results["table"]:
        for kind, r in e["masks"].items():
            verdict = _vs_none(results, e, kind)
            extra, lo, hi = _extra_ms(e, verdict)
            mask_ms = _mask_share(r)[0]
            lines.append(f"| {_vocab_cell(e)} | {kind} | {signed(extra)} ({signed(lo)} to {signed(hi)}) | {duration(mask_ms)} | "
                         f"{_traced_pair('forward_ms', r, e['no_mask'])} | "
                         f"{_traced_pair('sample_rest_ms', r, e['no_mask'])} |")
            if verdict["outcome"] == "above":  # its verdict resolves an extra time
                resolved += 1
                if mask_ms < MASK_EXPLAINS * extra:
                    notes.append(_outside_the_mask(e, kind, r, verdict))
            if mask_ms > hi:
                notes.append(f"At V={e['vocab_size']:,} the {kind} mask's traced work ({duration(mask_ms)} per step) "
                             f"is above the whole of Block A's interval for its extra time (up to {duration(hi)}): "
                             "the traced run took longer than Block A's (tracing's own cost, or load in its "
                             "minute), so read Block B's parts as shares of its step, not as times of Block A's.")
    if resolved and not notes:
        notes.append(f"Where Block A resolves a mask's extra time, the mask's own traced work is at least "
                     f"{MASK_EXPLAINS:.0%} of it.")
    return lines + [""] + [line for note in notes for line in (note, "")]


def _fraction_paragraph(default: dict) -> str:
    parts = []
    for name, r in _bars(default):
        if name == "no mask":
            continue
        b = r["breakdown"]
        frac = _mask_share(r)[1]
        parts.append(f"the **{name}** mask spends {duration(b['mask_build_ms'])} building and "
                     f"{duration(b['mask_apply_ms'])} applying per step, **{frac:.1%}** of a "
                     f"{duration(b['step_ms'])} traced step")
    return ("**1. What fraction of the step is mask construction?** At V = "
            f"{default['vocab_size']:,} (Block B, one traced run of {default['no_mask']['steps']} steps, no "
            "interval): " + "; ".join(parts) + ". The seed guessed 20-40% for a pure-Python state machine "
            "over ~512 tokens.")


def _scaling_paragraph(results: dict) -> str:
    rows = _minigpt_shaped(results)
    ran = ", ".join(f"{e['vocab_size']:,}" for e in rows)
    text = f"**2. Scaling with the vocabulary.** Vocabularies measured in this run: V = {ran}. "
    naive = [(e["vocab_size"], e["masks"]["naive"]["breakdown"]["mask_build_ms"]) for e in rows if "naive" in e["masks"]]
    if len(naive) >= 2:
        (v0, b0), (v1, b1) = naive[0], naive[-1]
        slope = np.log(b1 / b0) / np.log(v1 / v0)
        text += (f"The naive mask's traced build time goes from {duration(b0)} at V={v0:,} to {duration(b1)} at "
                 f"V={v1:,}: x{_f(b1 / b0)} for x{_f(v1 / v0)} tokens, a log-log slope of {slope:.2f} (1.00 is "
                 "the seed's linear prediction; one traced run per point, no interval). ")
    else:
        text += "With one vocabulary there is no scaling to report. "
    text += ("The per-vocabulary comparisons are the verdicts above. At large vocabularies every "
             "configuration of that vocabulary runs the same shorter generation (the steps column), so "
             "its rows share one baseline.")
    return text


def _roofline_paragraph(results: dict) -> str:
    r = results["roofline"]
    text = "**3. Roofline placement.** "
    if "naive" in r:
        n = r["naive"]
        text += (f"The naive scan takes {_f(n['ns_per_token_check'])} ns per token check "
                 f"({_f(n['ns_per_transition'])} ns per DFA transition, {_f(n['transitions_per_step'])} transitions "
                 f"a step). Counting at least {_f(n['bytes_per_token_check_lower_bound'])} bytes touched per check "
                 f"(token byte plus two CPython pointers per transition), it moves {_f(n['effective_GBps'])} GB/s, "
                 f"{n['fraction_of_dram_roof']:.2%} of this machine's DRAM roof ({_f(r['dram_GBps'])} GB/s, triad "
                 "median), and does no floating-point work: a Python loop of bytecode dispatch, list indexing "
                 "and branches per token. ")
    if "indexed" in r:
        text += (f"The indexed mask does {duration(r['indexed']['mask_us_per_step'] / 1e3)} of work a step: a list "
                 "lookup and a scatter of -inf over the shorter of the allowed/disallowed id lists.")
    wide = r.get("ceilings", {}).get("wide_ceilings")
    if wide:
        text += " Caution: the roofline this uses has wide ceilings (" + "; ".join(wide) + ")."
    return text


def _throughput_paragraph(results: dict) -> str:
    x = 1e3 / results["per_step_ms_no_mask"]
    text = f"**4. Tokens per second.** Without a mask X = {x:.0f} tok/s"
    if "per_step_ms_with_mask" in results:
        text += (f"; with the naive mask Y = {1e3 / results['per_step_ms_with_mask']:.0f} tok/s "
                 f"(Block A medians; the paired per-step ratio is {_f(results['ratio'])})")
    if "per_step_ms_with_indexed_mask" in results:
        text += f"; with the indexed mask Y = {1e3 / results['per_step_ms_with_indexed_mask']:.0f} tok/s"
    return text + f" (vocab {results['vocab_size']:,}, {results['steps']}-step runs). The seed's mark Y/X < 0.5 is the verdict above on whether the naive mask halves tokens per second."


def _peers_lines(results: dict) -> list[str]:
    if "peers" not in results:
        return ["Peers were not run (`--peers`)."]
    lines = ["Each is walked along the same token path (our indexed mask's masked run), the engines taking turns "
             "in each round; a round's sample is an engine's fill time per step over >= 50 ms of walks "
             "(perf_counter_ns around each fill). Per-step mean: the median of those samples over the rounds "
             "(p10-p90). Its ratio to inferlab-indexed's is taken per round: the median of the per-round ratios "
             "(p10-p90) and its 95% CI (order statistics; fewer than 6 rounds give a lower coverage, named). The single readings' median and p95 show the shape of a walk (one step is "
             "microseconds: they are no samples of the 50 ms rule). Each peer fills an int32 bitmask row in "
             "place on its fastest native path, through the adapters `schema-bench --peers` uses "
             "(bench/schema_peers.py), with our vocabulary's ids; ours looks up its row and applies it to the "
             "logits, which is more work.", "",
             "None of the peers' grammars is byte-exact for this schema, so their allowed sets differ from ours "
             "on a few tokens (tests/test_mask_overhead.py checks each difference): llguidance and outlines-core "
             "leave DEL, the C1 controls and some escapes out of strings, which JSON allows; llguidance also "
             "allows only one split of the text the grammar forces; outlines-core allows a space around the "
             "separators; xgrammar, in forma's maxLength string, takes raw control bytes (which JSON forbids) "
             "and no escapes.", "",
             "| V | implementation | compile (ms) | per-step mean (us, p10-p90) | single readings: median / p95 (us) | "
             "mean / inferlab's (p10-p90; CI) | note |",
             "|---|---|---|---|---|---|---|"]
    for v, per in results["peers"].items():
        for name, r in per.items():
            lines.append(f"| {int(v):,} | {name} | {_f(r.get('compile_ms'))} | {_with_range(r, 'mean_us')} | "
                         f"{_f(r.get('median_us'))} / {_f(r.get('p95_us'))} | {_ratio_cell(r.get('ratio_to_inferlab'))} | "
                         f"{r.get('note', '')} |")
    return lines


def _with_range(r: dict, key: str) -> str:
    """A value with its p10-p90 where the run kept them (runs before the interleaved rounds did not)."""
    if f"{key}_p10" not in r:
        return _f(r.get(key))
    return f"{_f(r[key])} ({_f(r[f'{key}_p10'])}-{_f(r[f'{key}_p90'])})"


def _ratio_cell(ratio) -> str:
    """ratio_to_inferlab: an interval with its basis, or (runs before the interleaved rounds) a
    ratio of two separate runs' means, said to be so."""
    if ratio is None:
        return _f(None)
    if not isinstance(ratio, dict):
        return f"{_f(ratio)} (means of separate walks, no interval)"
    ci = (f"; {ratio['confidence'] * 100:.1f}% CI {_f(ratio['ci_low'])}-{_f(ratio['ci_high'])}"
          if "ci_low" in ratio else "")
    return f"{_f(ratio['value'])} ({_f(ratio['p10'])}-{_f(ratio['p90'])}{ci}, {ratio['basis']})"


def readme_text(results: dict, manifest: dict) -> str:
    default = next(e for e in results["table"] if e["vocab_size"] == results["vocab_size"])
    hw = manifest["hardware"]
    c = results["config"]
    rounds = sorted({r["call"]["n"] for e in results["table"] for _, r in _bars(e)})
    steps = sorted({r["steps"] for e in results["table"] for _, r in _bars(e)})
    budget = results.get("budget", {})
    lines = [
        "# 30-mask-overhead: what a JSON-schema mask costs per decode step (seed 000)", "",
        f"Run on {hw.get('cpu_model')} with {c['threads']} BLAS thread(s), governor "
        f"{hw.get('cpu_governor_at_run')}, seed {c['seed']}, temperature {c['temperature']}"
        f"{', --quick' if c['quick'] else ''}. Each row took {'-'.join(map(str, (rounds[0], rounds[-1]))) if len(rounds) > 1 else rounds[0]} "
        f"interleaved rounds ({c['trials']} first, more while a comparison was undecided or unconfirmed, within "
        f"{_f(budget.get('seconds'))} s of extra rounds shared by the vocabularies); first call discarded, gc off, tracing off, >= 50 ms per sample. "
        f"Generation runs up to {c['max_new_tokens']} new tokens; the runs actually took "
        f"{', '.join(map(str, steps))} decode steps (the steps column; a run stops at EOS). "
        "Reproduce: `python bench.py` or the command in manifest.json.", "",
        f"Prompt: `{default['prompt']}` (a held-out verb). Schema: the conjugation schema. Model at V=512: "
        f"{default['model']}.", "",
        "## Verdicts", "",
        rule_paragraph({f"{k} mask vs no mask": m for k, m in c.get("equivalence_margins", {}).items()}), "",
        *verdict_lines(results["verdicts"]), "",
        "## Block A: ms per decode step", "",
        "ms/step = median wall time of one generate() call / decode steps of that call (prefill included, as the "
        "seed's total / (trials x tokens)). Each round times no mask and each mask, their calls in chunks of about 5 ms "
        "shuffled together; the paired ratio is the median over rounds of each round's own per-step ratio.", "",
        *_block_a_table(results), "",
        "Vocabulary preprocessing (byte trie, once per tokenizer): "
        + ", ".join(f"V={e['vocab_size']:,}: {_f(e.get('vocab_preprocessing_ms'))} ms" for e in results["table"]) + ".", "",
        "Top level of results.json (the seed's keys, default run, the seed's mask = the naive scan; ratios paired): "
        f"vocab_size {results['vocab_size']}, per_step_ms_no_mask {_f(results['per_step_ms_no_mask'])}, "
        f"per_step_ms_with_mask {_f(results.get('per_step_ms_with_mask'))}, ratio {_f(results.get('ratio'))}; "
        f"indexed: ratio_indexed {_f(results.get('ratio_indexed'))}.", "",
        "## Block B: breakdown", "", "![overhead](overhead.png)", "",
        *_block_a_vs_b_lines(results),
        "## Scaling", "", "![scaling](scaling.png)", "",
        *[f"- {note}" for note in results.get("skipped", [])], "",
        "Vocabularies other than 512 use MiniGPT's shape with that vocabulary's embedding and tied LM head, "
        "**random weights** (the token path differs from a trained model's; the per-step cost does not depend "
        "on the weights' values). A --model row is that folder's own shape and vocabulary (next section).", "",
        *_model_lines(results),
        *_jump_forward_lines(results),
        "## Block C: interpretation", "",
        _fraction_paragraph(default), "", _scaling_paragraph(results), "",
        _roofline_paragraph(results), "", _throughput_paragraph(results), "",
        "## Peers", "", *_peers_lines(results), "",
    ]
    if "peers" in results:
        lines += ["![peers](peers.png)", ""]
    return "\n".join(lines)


def bench_script(config: dict) -> str:
    fields = ", ".join(f"{k}={tuple(v) if isinstance(v, list) else (f'Path({v!r})' if k in ('roofline_dir', 'model_dir') and v else repr(v))}"
                       for k, v in config.items())
    return f'''"""Reproduce this folder's measurements through the package; prints results.json to stdout."""
import json
from pathlib import Path

from inferlab.labs.mask_overhead import MaskLabConfig, measure_all

config = MaskLabConfig({fields})
print(json.dumps(measure_all(config), indent=2))
'''


def render(results: dict, manifest: dict, folder: Path) -> dict[str, object]:
    files = {"bench.py": bench_script(results["config"]), "overhead.png": overhead_figure(results),
             "scaling.png": scaling_figure(results), "README.md": readme_text(results, manifest)}
    if "peers" in results:
        files["peers.png"] = peers_figure(results)
    return files
