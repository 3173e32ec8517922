"""Does inferlab's token bitmask equal xgrammar's, step by step, on real schemas? (issue 11)

For a seeded sample of JSONSchemaBench schemas (../shared/jsonschemabench, read-only) that both
compile, each valid test instance is written in inferlab's canonical compact form, tokenized
(longest match) with MiniGPT's vocabulary loaded as a Hugging Face PreTrainedTokenizerFast, and
both bitmasks are compared before every token and before EOS. Per schema: "equal", "differ"
(the first step where they differ, with the text so far and up to 8 tokens each side only
allows), or why it was not compared. The reasons for differences are the readers' to judge: a
peer's looser reading is not a bug of ours (tests/test_hf.py pins the known ones).

    python benchmarks/xgrammar_agreement.py --out benchmarks/results/xgrammar_agreement [--schemas 60] [--force] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

from inferlab.cli.common import add_lab_arguments, parse_out_args, positive_int
from inferlab.constrain.hf_vocab import hf_vocabulary
from inferlab.constrain.matcher import GrammarMatcher, allocate_token_bitmask, compile_json_schema, unpack_bitmask
from inferlab.constrain.schema import canonical_json
from inferlab.constrain.vocab import longest_match
from inferlab.errors import InferlabError
from inferlab.measure.progress import progress_bar
from inferlab.cli.publish import benchmark_main
from inferlab.model.checkpoints import load_default_model

EXPERIMENT = "xgrammar-agreement"
DEFAULT_BENCH = Path(__file__).resolve().parents[1] / ".." / "shared" / "jsonschemabench"


def compare(xgr, compiled, grammar, ids: list[int], vocab, V: int) -> dict | None:
    """None if equal at every step; else the first difference."""
    xm, m = xgr.GrammarMatcher(compiled), GrammarMatcher(grammar)
    xb, ob = xgr.allocate_token_bitmask(1, V), allocate_token_bitmask(1, V)
    for k, t in enumerate(ids):
        xm.fill_next_token_bitmask(xb)
        m.fill_next_token_bitmask(ob)
        theirs, ours = unpack_bitmask(xb.numpy()[0], V), unpack_bitmask(ob[0], V)
        text = b"".join(vocab.token_bytes[i] for i in ids[:k]).decode("utf-8", errors="replace")
        if not np.array_equal(theirs, ours):
            show = lambda ids_: [vocab.token_bytes[i].decode("utf-8", errors="replace") or f"<{i}>" for i in ids_[:8]]
            return {"step": k, "text_so_far": text[-60:], "xgrammar_only": show(np.flatnonzero(theirs & ~ours)),
                    "inferlab_only": show(np.flatnonzero(ours & ~theirs))}
        if not (xm.accept_token(t) & m.accept_token(t)):  # equal masks: both refuse (outside both)
            return {"step": k, "text_so_far": text[-60:], "both_refuse": True}
    return None


def run(args) -> dict:
    try:
        import transformers
        import xgrammar as xgr
    except ImportError as exc:
        raise InferlabError(f"this benchmark needs transformers and xgrammar: {exc}") from None
    files = sorted(Path(args.bench).glob("*.json"))
    if not files:
        raise InferlabError(f"--bench {args.bench}: no JSONSchemaBench files there")
    files = random.Random(args.seed).sample(files, min(args.schemas, len(files)))
    with tempfile.TemporaryDirectory() as tmp:
        load_default_model().tokenizer.save(Path(tmp) / "tokenizer.json")
        tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(Path(tmp) / "tokenizer.json"),
                                                   eos_token="<|endoftext|>")
    V, vocab = len(tok), hf_vocabulary(tok)
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V,
                                                                      stop_token_ids=[tok.eos_token_id]))
    rows = []
    with progress_bar(len(files), EXPERIMENT) as step:
        for f in files:
            rows.append({"schema": f.name, **one_schema(f, xgr, compiler, vocab, V, tok.eos_token_id)})
            step(f.name)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    config = {"bench": str(args.bench), "schemas": len(files), "seed": args.seed, "vocab": "MiniGPT 512 (HF fast)",
              "xgrammar_options": {"any_whitespace": False, "separators": [",", ":"], "strict_mode": True}}
    return {"schema_version": 1, "experiment": EXPERIMENT, "config": config, "rows": rows, "summary": counts}


def one_schema(path: Path, xgr, compiler, vocab, V: int, eos: int) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    instances = [t["data"] for t in doc.get("tests", []) if t.get("valid")][:3]
    if not instances:
        return {"status": "no_valid_instances"}
    try:
        # strict on both sides (xgrammar's strict_mode): no extra keys where additionalProperties is absent
        grammar = compile_json_schema(doc["schema"], vocab, max_states=20_000, extra_keys=False)
    except InferlabError as exc:
        return {"status": "inferlab_refuses", "why": str(exc)[:200]}
    try:
        compiled = compiler.compile_json_schema(json.dumps(doc["schema"]), any_whitespace=False,
                                                separators=(",", ":"), strict_mode=True)
    except Exception as exc:  # xgrammar raises several types for unsupported schemas
        return {"status": "xgrammar_refuses", "why": str(exc)[:200]}
    outside = None
    for inst in instances:
        ids = longest_match(vocab, canonical_json(inst, doc["schema"], extra_keys=False).encode()) + [eos]
        diff = compare(xgr, compiled, grammar, ids, vocab, V)
        if diff and not diff.get("both_refuse"):
            return {"status": "differ", **diff}
        outside = outside or diff
    if outside:
        return {"status": "equal_until_both_refuse", **outside}
    return {"status": "equal"}


def report(results: dict) -> None:
    print(f"{results['config']['schemas']} schemas: {results['summary']}")
    for r in results["rows"]:
        if r["status"] == "differ":
            print(f"  {r['schema']}: after {r['text_so_far']!r}: xgrammar only {r['xgrammar_only']}, "
                  f"inferlab only {r['inferlab_only']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_lab_arguments(p, default_out="benchmarks/results/xgrammar_agreement")
    p.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="JSONSchemaBench folder")
    p.add_argument("--schemas", type=positive_int, default=60, help="schemas sampled (default 60)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_out_args(p, argv)
    return benchmark_main("xgrammar_agreement", args, EXPERIMENT, lambda: run(args), report)


if __name__ == "__main__":
    sys.exit(main())
