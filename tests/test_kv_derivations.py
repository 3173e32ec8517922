"""The generated answer sheet of seed 002 against hand arithmetic, and the lab's artifacts."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pytest

from inferlab.cli import main
from inferlab.kv import derivations
from inferlab.labs import LabOptions, all_labs
from inferlab.labs.kv_sizing import LAB


@pytest.fixture(scope="module")
def results():
    return derivations.compute()


@pytest.fixture(scope="module")
def page(results):
    return derivations.render(results)


# Block A, by hand: 2 * L * H * d_h * s per token; 4k = * 4096; 32k = * 32768.
FORWARD_BY_HAND = {
    "minigpt": (2 * 4 * 4 * 16 * 4, "2 * 4 * 4 * 16 * 1 * 4 = 2048 bytes = 2 KiB"),
    "gpt2": (2 * 12 * 12 * 64 * 2, "2 * 12 * 12 * 64 * 1 * 2 = 36864 bytes = 36 KiB"),
    "llama-2-7b": (2 * 32 * 32 * 128 * 2, "2 * 32 * 32 * 128 * 1 * 2 = 524288 bytes = 512 KiB"),
    "llama-2-13b": (2 * 40 * 40 * 128 * 2, "2 * 40 * 40 * 128 * 1 * 2 = 819200 bytes = 800 KiB"),
    "llama-2-70b-mha": (2 * 80 * 64 * 128 * 2, "2 * 80 * 64 * 128 * 1 * 2 = 2621440 bytes = 2.5 MiB"),
    "gpt-3-175b": (2 * 96 * 96 * 128 * 2, "2 * 96 * 96 * 128 * 1 * 2 = 4718592 bytes = 4.5 MiB"),
}


def test_block_a_rows(results, page):
    rows = {r["model"]: r for r in results["forward"]}
    assert list(rows) == list(FORWARD_BY_HAND)
    for name, (per_token, formula) in FORWARD_BY_HAND.items():
        assert rows[name]["per_token_bytes"] == per_token
        assert rows[name]["totals"] == {"4096": per_token * 4096, "32768": per_token * 32768}
        assert formula in page
    # table cells: GPT-3 at 4k = 18 GiB, at 32k = 144 GiB; Llama-2-13B 3.125 GiB / 25 GiB
    assert "| gpt-3-175b | 96 | 96 | 128 | fp16 | 4.5 MiB | 18 GiB | 144 GiB |" in page
    assert "| llama-2-13b | 40 | 40 | 128 | fp16 | 800 KiB | 3.125 GiB | 25 GiB |" in page


def test_block_b_inverse(results, page):
    a = results["inverse"]["a100_llama_2_7b"]
    # 40e9 - 14 * 2^30 = 40000000000 - 15032385536 = 24967614464
    assert a["free_bytes"] == 24967614464
    # 24967614464 / 524288 = 47621.96 -> 47621; / (8 * 524288) = 5952.75 -> 5952
    assert a["s_max"] == {"1": 47621, "8": 5952}
    assert "floor(24967614464 / (524288 * 8)) = **5952**" in page
    h = results["inverse"]["h100_gpt_3"]
    # 175e9 * 2 = 350e9 -> ceil(4.375) = 5 H100s; int8 175e9 -> ceil(2.1875) = 3
    assert [(g["dtype"], g["gpus_needed"]) for g in h["from_params"]] == [("fp16", 5), ("int8", 3)]
    # the lab's "350 GiB" = 375809638400 bytes -> ceil(4.70) = 5; its int8 half -> ceil(2.35) = 3
    assert [g["gpus_needed"] for g in h["as_written"]] == [5, 3]
    assert "375809638400" in page


def test_block_c_gqa(results, page):
    c = results["gqa_check"]
    # 2*32*8*128*2 = 131072 vs 2*32*32*128*2 = 524288: exactly 1/4 within the 4096 window
    assert c["4096"]["per_token_bytes"] == [131072, 524288] and c["4096"]["ratio"] == "1/4"
    assert c["4096"]["verdict"] == "exact"
    # at 32k Mistral keeps 4096 positions: 131072 * 4096 vs 524288 * 32768 -> factor 32
    assert c["32768"]["bytes_at_ctx"] == [131072 * 4096, 524288 * 32768]
    assert c["32768"]["verdict"] == "wrong"
    assert "**exact**" in page


def test_block_d_pitfalls(results, page):
    p = results["pitfalls"]
    assert p["factor_two"] == {"with": 524288, "without": 262144}
    g = p["d_vs_heads"]["gemma-2-9b"]
    # bf16: 2 * 42 * 2048 * 2 = 344064 (H_kv d_h); with d = 3584: 602112; with H d_h = 4096: 688128
    assert (g["bytes_right"], g["bytes_with_d"], g["bytes_with_H_d_h"]) == (344064, 602112, 688128)
    assert p["dtype"]["minigpt"] == {"fp32": 2048, "fp16": 1024}
    w = p["waste"]
    assert w["waste_fraction"] == 0.96875                          # 1 - 1024 / 32768
    assert w["wasted_bytes"] == 31744 * 32 * 524288 == 496 * 2**30  # 532575944704
    assert "**wasted 496 GiB**" in page and "532575944704" in page


def test_mistakes_section(results, page):
    m = {x["mistake"]: (x["wrong"], x["right"]) for x in results["mistakes"]}
    assert m["bits vs bytes"] == (2 * 32 * 32 * 128 * 16, 524288)           # 4194304, 8x
    # 40 GiB - 14 GiB = 26 GiB = 27917287424 bytes / 524288 = 53248 exactly
    assert m["GB vs GiB"] == (53248, 47621)
    assert m["forgetting B"] == (47621, 5952)
    assert m["H instead of H_kv"] == (2 * 80 * 64 * 128 * 2, 2 * 80 * 8 * 128 * 2)   # 2621440 vs 327680
    assert "## Things a first attempt gets wrong" in page and "\n4. **H instead of H_kv**" in page


def test_registered_with_run_all():
    assert LAB in all_labs() and LAB.order == 22 and LAB.name == "22-cache-sizing"


def test_lab_writes_valid_artifacts_and_refuses_overwrite(tmp_path, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "22-cache-sizing"
    LAB.run(LabOptions(out=out))
    assert {p.name for p in out.iterdir()} == {"derivations.md", "results.json", "manifest.json", "kv_sizes.png",
                                              "README.md", "derive.py"}
    assert (out / "kv_sizes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("results", "manifest"):
        schema = json.loads(resources.files("inferlab.measure").joinpath(f"schemas/{name}.schema.json").read_text())
        jsonschema.validate(json.loads((out / f"{name}.json").read_text()), schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    before = (out / "derivations.md").read_text()
    assert main(["kv", "derivations", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "derivations.md").read_text() == before
    assert main(["kv", "derivations", "--out", str(out), "--force"]) == 0


def test_page_follows_the_registry(monkeypatch):
    """No figure is typed in: halve Llama-2-7B's layers and every Llama-2-7B figure on the page moves."""
    real = derivations.get_model

    def halved(name):
        spec = real(name)
        return replace(spec, layers=16) if spec.name == "llama-2-7b" else spec

    monkeypatch.setattr(derivations, "get_model", halved)
    page = derivations.render(derivations.compute())
    # 2 * 16 * 32 * 128 * 2 = 262144; 24967614464 / 262144 = 95243.9 -> 95243
    assert "2 * 16 * 32 * 128 * 1 * 2 = 262144 bytes = 256 KiB" in page
    assert "**95243**" in page
    assert "524288" not in page and "47621" not in page
