"""Seed 002's answer sheet, generated: every number below comes from the calculator.

The only literals are the lab's own inputs (which models and dtypes, the 4k/32k contexts, the
A100-40GB and "14GiB", the H100-80GB and "350GiB", S_max 32768, mean length 1024, batch 32, the
claimed 4x); every product, quotient and ratio is computed, so the
page cannot drift from the code, and tests check the code against hand arithmetic.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from inferlab.kv import calculator
from inferlab.kv.formulas import KVFormat, cache_bytes, default_format, formula_text, kv_cache_bytes, per_token_bytes
from inferlab.kv.registry import get_gpu, get_model, model_names
from inferlab.units import DTYPE_BITS, dtype_bytes, fmt_binary, fmt_decimal, fmt_number, parse_bytes

EXPERIMENT = "22-cache-sizing"
CONTEXTS = (4096, 32768)
# Block A: the six rows of theory/02's scaling table, with the lab's dtypes.
FORWARD = (("minigpt", "fp32"), ("gpt2", "fp16"), ("llama-2-7b", "fp16"), ("llama-2-13b", "fp16"),
           ("llama-2-70b-mha", "fp16"), ("gpt-3-175b", "fp16"))
# Block B: the lab's inputs, as the lab writes them (units included on purpose).
A100 = "A100-40GB"
LLAMA_WEIGHTS = "14GiB"
H100 = "H100-80GB"
GPT3_WEIGHTS_AS_WRITTEN = "350GiB"      # the lab's figure; 175e9 params * 2 bytes is 350 GB
WASTE = {"max_len": 32768, "mean_len": 1024, "batch": 32, "block_size": 16}
GQA_CLAIM = Fraction(4)                  # Block C: the post's "saves 4x"


def forward_row(name: str, dtype: str) -> dict:
    spec = get_model(name)
    fmt = KVFormat(dtype)
    per_tok = per_token_bytes(spec, fmt)
    return {
        "model": name, "layers": spec.layers, "kv_heads": spec.kv_heads, "head_dim": spec.head_dim,
        "dtype": dtype, "per_token_bytes": per_tok, "formula": formula_text(spec, batch=1, fmt=fmt),
        "totals": {str(c): cache_bytes(spec, seq=c, batch=1, fmt=fmt) for c in CONTEXTS},
        "max_position": spec.max_position,
    }


def inverse_a100() -> dict:
    spec = get_model("llama-2-7b")
    fmt = KVFormat("fp16")
    memory, weights = get_gpu(A100).memory_bytes, parse_bytes(LLAMA_WEIGHTS, flag="weights")
    runs = {b: calculator.max_ctx(spec, memory_bytes=memory, weights_bytes=weights, batch=b, fmt=fmt) for b in (1, 8)}
    return {"gpu": A100, "memory_bytes": memory, "weights": LLAMA_WEIGHTS, "weights_bytes": weights,
            "free_bytes": runs[1]["free_bytes"], "per_token_bytes": runs[1]["per_token_bytes"],
            "s_max": {str(b): r["s_max"] for b, r in runs.items()}, "max_position": spec.max_position}


def inverse_h100() -> dict:
    spec = get_model("gpt-3-175b")
    gpu = get_gpu(H100)
    from_params = calculator.gpus(spec, gpu=gpu, dtypes=["fp16", "int8"], kv_load=None, fmt=KVFormat("fp16"))
    as_written = parse_bytes(GPT3_WEIGHTS_AS_WRITTEN, flag="weights")
    written = {"fp16": as_written, "int8": as_written // 2}
    return {"gpu": H100, "gpu_memory_bytes": gpu.memory_bytes, "params": spec.params,
            "from_params": from_params["gpus"],
            "as_written": [{"dtype": d, "weights_bytes": w, "gpus_needed": -(-w // gpu.memory_bytes)}
                           for d, w in written.items()]}


def gqa_check() -> dict:
    mistral, llama = get_model("mistral-7b"), get_model("llama-2-7b")
    fmt = KVFormat("fp16")
    return {ctx: calculator.compare(mistral, llama, ctx=ctx, batch=1, fmt_a=fmt, fmt_b=fmt, claim=GQA_CLAIM)
            for ctx in CONTEXTS}


def pitfalls() -> dict:
    llama7, fp16 = get_model("llama-2-7b"), KVFormat("fp16")
    per_tok = per_token_bytes(llama7, fp16)
    gemma, llama70 = get_model("gemma-2-9b"), get_model("llama-2-70b")

    def two_bytes_with_width(spec, width):          # 2 * L * width * s with s = 2 (bf16)
        return kv_cache_bytes(layers=spec.layers, kv_heads=1, head_dim=width, seq=1, batch=1, dtype_bytes=2)

    minigpt = get_model("minigpt")
    return {
        "factor_two": {"with": per_tok, "without": per_tok // 2},
        "d_vs_heads": {
            "gemma-2-9b": {"d": gemma.hidden, "heads": gemma.heads, "d_h": gemma.head_dim,
                           "H_d_h": gemma.heads * gemma.head_dim,
                           "H_kv_d_h": gemma.kv_heads * gemma.head_dim,
                           "bytes_with_d": two_bytes_with_width(gemma, gemma.hidden),
                           "bytes_with_H_d_h": two_bytes_with_width(gemma, gemma.heads * gemma.head_dim),
                           "bytes_right": two_bytes_with_width(gemma, gemma.kv_heads * gemma.head_dim)},
            "llama-2-70b": {"d": llama70.hidden, "H_kv_d_h": llama70.kv_heads * llama70.head_dim,
                            "bytes_with_d": two_bytes_with_width(llama70, llama70.hidden),
                            "bytes_right": two_bytes_with_width(llama70, llama70.kv_heads * llama70.head_dim)},
        },
        "dtype": {
            "minigpt": {d: per_token_bytes(minigpt, KVFormat(d)) for d in ("fp32", "fp16")},
            "llama-2-7b_4k": {d: cache_bytes(llama7, seq=CONTEXTS[0], batch=1, fmt=default_format(d))
                              for d in ("fp32", "fp16", "fp8", "int8", "int4")},
            "formats": {d: default_format(d).describe() for d in ("fp8", "int8", "int4")},
        },
        "waste": calculator.waste(llama7, fmt=fp16, **WASTE),
    }


def mistakes(a100: dict) -> list[dict]:
    """The classic first-attempt errors, each next to the right number."""
    llama7 = get_model("llama-2-7b")
    right_tok = per_token_bytes(llama7, KVFormat("fp16"))
    bits_tok = kv_cache_bytes(layers=llama7.layers, kv_heads=llama7.kv_heads, head_dim=llama7.head_dim,
                              seq=1, batch=1, dtype_bytes=DTYPE_BITS["fp16"])
    gb = a100["memory_bytes"] // 10**9
    as_gib = gb * 2**30                             # the vendor's figure read in binary units
    wrong_gib = calculator.max_ctx(llama7, memory_bytes=as_gib, weights_bytes=a100["weights_bytes"], batch=1,
                                   fmt=KVFormat("fp16"))["s_max"]
    llama70 = get_model("llama-2-70b")
    mha70 = replace(llama70, kv_heads=llama70.heads)
    return [
        {"mistake": "bits vs bytes",
         "what": f"s = {DTYPE_BITS['fp16']} for fp16 (the bit count) in Llama-2-7B's per-token bytes",
         "unit": "bytes", "wrong": bits_tok, "right": right_tok},
        {"mistake": "GB vs GiB", "what": f"the {A100}'s vendor {gb} GB read as {gb} GiB, Llama-2-7B S_max at batch 1",
         "unit": "positions", "wrong": wrong_gib, "right": a100["s_max"]["1"]},
        {"mistake": "forgetting B", "what": "the batch-1 S_max used for a batch of 8 on the A100",
         "unit": "positions", "wrong": a100["s_max"]["1"], "right": a100["s_max"]["8"]},
        {"mistake": "H instead of H_kv",
         "what": f"Llama-2-70B's per-token bytes with its {llama70.heads} query heads instead of {llama70.kv_heads} KV heads",
         "unit": "bytes", "wrong": per_token_bytes(mha70, KVFormat("fp16")),
         "right": per_token_bytes(llama70, KVFormat("fp16"))},
    ]


def model_sizes() -> list[dict]:
    """Every registry model's 2-byte (fp16/bf16) cache at 4k and 32k, windows applied, for the plot."""
    rows = []
    for name in model_names():
        spec = get_model(name)
        fmt = KVFormat("fp16")
        rows.append({"model": name, "attention": spec.attention, "per_token_bytes": per_token_bytes(spec, fmt),
                     "sliding_window": spec.sliding_window, "sliding_layers": len(spec.sliding_layers),
                     "layers": spec.layers,
                     "totals": {str(c): cache_bytes(spec, seq=c, batch=1, fmt=fmt) for c in CONTEXTS}})
    return rows


def compute() -> dict:
    """The whole answer sheet as data (results.json); render() turns it into derivations.md."""
    a100 = inverse_a100()
    gqa = gqa_check()
    return {
        "schema_version": 1,
        "experiment": EXPERIMENT,
        "forward": [forward_row(n, d) for n, d in FORWARD],
        "inverse": {"a100_llama_2_7b": a100, "h100_gpt_3": inverse_h100()},
        "gqa_check": {str(ctx): {"ratio": r["ratio_exact"], "per_token_bytes": r["per_token_bytes"],
                                 "bytes_at_ctx": r["at_ctx"]["bytes"], "ratio_at_ctx": r["at_ctx"]["ratio"],
                                 "verdict": r["claim"]["verdict"], "formulas": r["formulas"]}
                      for ctx, r in gqa.items()},
        "pitfalls": pitfalls(),
        "mistakes": mistakes(a100),
        "models": model_sizes(),
    }


# ---------------------------------------------------------------- rendering


def _both(n: int) -> str:
    return f"{n} bytes = {fmt_binary(n)} ({fmt_decimal(n)})"


def _ratio(a: int, b: int) -> str:
    return fmt_number(Fraction(a, b))


def render(r: dict) -> str:
    out = ["# Lab 00: KV-cache size, derived (seed 002)", "",
           "Generated by `inferlab kv derivations`: every number on this page is computed by "
           "`inferlab.kv` from the configs in `src/inferlab/kv/models.json` (sources there) and MiniGPT's "
           "`GPTConfig()`. Formula: bytes = 2 * L * H_kv * d_h * S * B * s (2 = K and V, s = bytes per element). "
           "KiB/MiB/GiB are 2^10/2^20/2^30 bytes; kB/MB/GB are 10^3/10^6/10^9.", ""]
    out += _block_a(r["forward"]) + _block_b(r["inverse"]) + _block_c(r["gqa_check"])
    out += _block_d(r["pitfalls"]) + _block_mistakes(r["mistakes"])
    return "\n".join(out) + "\n"


def _block_a(rows: list[dict]) -> list[str]:
    out = ["## Block A: forward", "",
           "| model | L | H_kv | d_h | dtype | per token | ctx 4k | ctx 32k |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        t = row["totals"]
        out.append(f"| {row['model']} | {row['layers']} | {row['kv_heads']} | {row['head_dim']} | {row['dtype']} | "
                   f"{fmt_binary(row['per_token_bytes'])} | {fmt_binary(t['4096'])} | {fmt_binary(t['32768'])} |")
    out.append("")
    for row in rows:
        out.append(f"- **{row['model']}** per token: {row['formula']}.")
        for c in CONTEXTS:
            out.append(f"  ctx {c}: {row['per_token_bytes']} * {c} = {_both(row['totals'][str(c)])}.")
        beyond = [c for c in CONTEXTS if c > row["max_position"]]
        if beyond:
            out.append(f"  (The model's own context is {row['max_position']} positions: at ctx "
                       f"{' and '.join(map(str, beyond))} this is the formula's figure, not a run the model supports.)")
    return out + [""]


def _block_b(inv: dict) -> list[str]:
    a, h = inv["a100_llama_2_7b"], inv["h100_gpt_3"]
    out = ["## Block B: inverse", "",
           f"**1. {a['gpu']}, Llama-2-7B fp16, weights {a['weights']}.** The vendor's {fmt_decimal(a['memory_bytes'])} is "
           f"{a['memory_bytes']} bytes; {a['weights']} is {a['weights_bytes']} bytes. Free: "
           f"{a['memory_bytes']} - {a['weights_bytes']} = {_both(a['free_bytes'])}.", ""]
    for b, s in a["s_max"].items():
        out.append(f"- batch {b}: S_max = floor({a['free_bytes']} / ({a['per_token_bytes']} * {b})) = **{s}** positions.")
    beyond = [b for b, s in a["s_max"].items() if s > a["max_position"]]
    if beyond:
        out += ["", f"At batch {' and '.join(beyond)} S_max exceeds Llama-2-7B's max_position_embeddings of "
                    f"{a['max_position']}: there the model's context, not the memory, is the limit."]
    fp16 = h["from_params"][0]
    fits = "do not fit" if fp16["gpus_needed"] > 1 else "fit"
    out += ["", f"**2. {h['gpu']}, GPT-3 175B.** {h['params']} parameters; one {h['gpu']} holds "
                f"{h['gpu_memory_bytes']} bytes. The fp16 weights alone {fits} on one GPU:"]
    out.append("")
    for row in h["from_params"]:
        s = dtype_bytes(row["dtype"])
        out.append(f"- {row['dtype']}: {h['params']} * {fmt_number(s)} = {_both(row['weights_bytes'])}; "
                   f"ceil({row['weights_bytes']} / {h['gpu_memory_bytes']}) = **{row['gpus_needed']} GPUs**.")
    written = h["as_written"]
    same = all(w["gpus_needed"] == p["gpus_needed"] for w, p in zip(written, h["from_params"]))
    out += ["", f"The lab writes the fp16 weights as {GPT3_WEIGHTS_AS_WRITTEN}; taken literally that is "
                f"{written[0]['weights_bytes']} bytes -> {written[0]['gpus_needed']} GPUs in fp16 and "
                f"{written[1]['gpus_needed']} in int8 ({'the same counts' if same else 'different counts'}), but "
                f"{fmt_decimal(fp16['weights_bytes'])} is the right figure (see mistake 2). These counts hold the "
                f"weights only: every cached position adds {_fmt_row_tok('gpt-3-175b')} more.", ""]
    return out


def _fmt_row_tok(name: str) -> str:
    return fmt_binary(per_token_bytes(get_model(name), KVFormat("fp16")))


def _block_c(gqa: dict) -> list[str]:
    short, long_ = gqa["4096"], gqa["32768"]
    m, l = short["per_token_bytes"]
    return [
        "## Block C: the GQA claim", "",
        "Claim: \"Mistral-7B saves 4x the cache memory of Llama-2-7B by using GQA with H_KV = 8 instead of 32\".", "",
        f"- Mistral-7B per token: {short['formulas'][0]}.",
        f"- Llama-2-7B per token: {short['formulas'][1]}.",
        f"- Same L, d_h, B and s, so the ratio is H_kv over H_kv: {m} / {l} = {short['ratio']}.",
        f"- At the same context within Mistral's sliding window (ctx 4096: {fmt_binary(short['bytes_at_ctx'][0])} "
        f"vs {fmt_binary(short['bytes_at_ctx'][1])}, a factor "
        f"{fmt_number(Fraction(short['bytes_at_ctx'][1], short['bytes_at_ctx'][0]))}), the claim is "
        f"**{short['verdict']}**.",
        f"- Past the window Mistral's rolling buffer stops growing, so at ctx 32768 the caches are "
        f"{fmt_binary(long_['bytes_at_ctx'][0])} vs {fmt_binary(long_['bytes_at_ctx'][1])}, a factor "
        f"{fmt_number(Fraction(long_['bytes_at_ctx'][1], long_['bytes_at_ctx'][0]))}: \"4x\" is then "
        f"**{long_['verdict']}** as a statement about that context. The extra factor comes from the sliding "
        f"window, not from GQA, and Llama-2-7B itself cannot run past {get_model('llama-2-7b').max_position} positions.", ""]


def _block_d(p: dict) -> list[str]:
    f2, dv, dt, w = p["factor_two"], p["d_vs_heads"], p["dtype"], p["waste"]
    g, l70 = dv["gemma-2-9b"], dv["llama-2-70b"]
    lk = dt["llama-2-7b_4k"]
    return [
        "## Block D: pitfalls", "",
        f"**1. The factor 2.** Attention reads two cached tensors per layer, keys and values (theory/02: "
        f"one K and one V row per head per position). Dropping it halves every figure: Llama-2-7B would be "
        f"{f2['without']} bytes per token instead of {f2['with']}.", "",
        f"**2. d vs H * d_h.** The cache width is H_kv * d_h, not the model width d. They coincide only for "
        f"MHA with d_h = d / H. Gemma-2-9B has d = {g['d']} but H * d_h = {g['H_d_h']} (d_h = {g['d_h']} is not d / H = {fmt_number(Fraction(g['d'], g['heads']))}) "
        f"and, with GQA, H_kv * d_h = {g['H_kv_d_h']}: per token in bf16 that is {g['bytes_right']} bytes, "
        f"not {g['bytes_with_d']} (using d) or {g['bytes_with_H_d_h']} (using H * d_h). "
        f"Llama-2-70B: d = {l70['d']} vs H_kv * d_h = {l70['H_kv_d_h']}, so {l70['bytes_with_d']} vs "
        f"{l70['bytes_right']} bytes per token, {_ratio(l70['bytes_with_d'], l70['bytes_right'])}x off.", "",
        f"**3. fp32 vs fp16.** MiniGPT computes in fp32: {dt['minigpt']['fp32']} bytes per token, "
        f"{dt['minigpt']['fp16']} in fp16. The cache is not bound to the weights' dtype: it stores whatever "
        f"the K and V projections output, and K/V tolerate less precision than weights, so Hugging Face "
        f"offers quantized caches (QuantizedCache) and vLLM a --kv-cache-dtype. Llama-2-7B at 4k: "
        f"fp32 {fmt_binary(lk['fp32'])}, fp16 {fmt_binary(lk['fp16'])}, "
        + ", ".join(f"{dt['formats'][d]} {_both(lk[d])}" for d in ("fp8", "int8", "int4"))
        + f". The scales are why int8 and int4 are not exactly 1/2 and 1/4 of fp16 "
        f"({fmt_number(Fraction(lk['int4'], lk['fp16']))} for int4).", "",
        f"**4. Pre-allocation waste.** Llama-2-7B fp16, S_max {w['max_len']} reserved per sequence, "
        f"mean length {w['mean_len']}: a fraction 1 - {w['mean_len']}/{w['max_len']} = {w['waste_fraction']:.5g} of the "
        f"cache is never written. At batch {w['batch']}: reserved {fmt_binary(w['reserved_bytes'])}, used "
        f"{fmt_binary(w['used_bytes'])}, **wasted {fmt_binary(w['wasted_bytes'])}** ({_both(w['wasted_bytes'])}). "
        f"Paged allocation in blocks of {w['block_size']} wastes at most one partial block per sequence: "
        f"at most {fmt_binary(w['paged_wasted_bytes'])} for the batch ({fmt_binary(w['paged_wasted_bytes_at_mean'])} "
        f"when every sequence is exactly {w['mean_len']} tokens).", ""]


def _block_mistakes(rows: list[dict]) -> list[str]:
    out = ["## Things a first attempt gets wrong", ""]
    for i, m in enumerate(rows, 1):
        out.append(f"{i}. **{m['mistake']}**: {m['what']}: {m['wrong']} {m['unit']} instead of **{m['right']}** "
                   f"({fmt_number(Fraction(m['wrong'], m['right']))}x).")
    return out
