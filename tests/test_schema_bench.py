"""schema-bench on a folder of tiny JSONSchemaBench-format files written here; the real folder
only in a slow test (skipped when ../shared/jsonschemabench is absent)."""

import json
import os
import time
from dataclasses import asdict

import pytest
from oracles import write_case

from inferlab.cli import main
from inferlab.bench.schema_bench import DEFAULT_DIR, BenchConfig, list_cases, run_bench


@pytest.fixture
def bench_dir(tmp_path):
    write_case(tmp_path, "Alpha---int", {"type": "integer", "minimum": 0},
               [(True, 1), (False, -1), (False, "x")])
    write_case(tmp_path, "Alpha---unique", {"type": "array", "uniqueItems": True}, [(True, [1])])
    # valid with an extra key (absent additionalProperties allows any): rejected only in strict mode
    write_case(tmp_path, "Beta---obj", {"type": "object", "properties": {"a": {"type": "integer"}}},
               [(True, {"a": 1}), (True, {"a": 1, "b": 2}), (False, {"a": "x"})])
    return tmp_path


def test_summary_by_category_hand_counted(bench_dir):
    results = run_bench(BenchConfig(directory=bench_dir))
    s = results["summary"]
    assert (s["Alpha"]["schemas"], s["Alpha"]["compiled"]) == (2, 1)
    assert s["Alpha"]["coverage"] == 0.5
    assert (s["Alpha"]["valid_accepted"], s["Alpha"]["valid"]) == (1, 1)
    assert (s["Alpha"]["invalid_rejected"], s["Alpha"]["invalid"]) == (2, 2)
    assert list(s["Alpha"]["refusals"].values()) == [1]
    assert next(iter(s["Alpha"]["refusals"])).startswith("uniqueItems: uniqueItems is not supported (only with maxItems <= ")
    assert (s["Beta"]["valid_accepted"], s["Beta"]["valid"]) == (2, 2)
    assert s["Beta"]["completeness"] == 1.0 and s["Beta"]["soundness"] == 1.0
    assert s["all"]["schemas"] == 3 and s["all"]["soundness"] == 1.0
    by_name = {r["name"]: r for r in results["schemas"]}
    assert by_name["Alpha---unique"]["reason"].startswith("uniqueItems at #/uniqueItems")
    assert by_name["Alpha---int"]["compile_ms"] > 0 and by_name["Alpha---int"]["dfa_states"] >= 2


def test_stratified_sample_is_round_robin(tmp_path):
    for k in range(5):
        write_case(tmp_path, f"A---{k}", {"type": "null"}, [])
    for k in range(2):
        write_case(tmp_path, f"B---{k}", {"type": "null"}, [])
    def counts(limit):
        picked = list_cases(tmp_path, limit, seed=0)
        return sum(p.name.startswith("A") for p in picked), sum(p.name.startswith("B") for p in picked)
    assert counts(4) == (2, 2)
    assert counts(5) == (3, 2)
    assert counts(6) == (4, 2)   # B ran out
    assert list_cases(tmp_path, 4, seed=0) == list_cases(tmp_path, 4, seed=0)
    assert len(list_cases(tmp_path, None, seed=0)) == 7


def test_cli_json_and_bad_folder(bench_dir, tmp_path, capsys):
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experiment"] == "schema-bench" and out["summary"]["all"]["compiled"] == 2
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--no-extra-keys", "--json"]) == 0
    beta = json.loads(capsys.readouterr().out)["summary"]["Beta"]  # strict: {"a": 1, "b": 2} is rejected
    assert (beta["valid_accepted"], beta["valid"], beta["invalid_rejected"]) == (1, 2, 1)
    assert main(["schema-bench", str(tmp_path / "missing"), "--vocab", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("inferlab schema-bench: error:") and "\n" not in err


def test_cli_out_writes_results_and_refuses_to_overwrite(bench_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"results.json", "summary.png", "manifest.json"}
    assert main(["schema-bench", str(bench_dir), "--vocab", "none", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not DEFAULT_DIR.is_dir(), reason="../shared/jsonschemabench is not here")
def test_real_benchmark_sample_is_sound():
    results = run_bench(BenchConfig(directory=DEFAULT_DIR, limit=20))
    total = results["summary"]["all"]
    assert total["schemas"] == 20
    assert total["soundness"] in (None, 1.0), [r["unsound"] for r in results["schemas"] if r["unsound"]]


def test_refusal_histogram_keeps_names_and_limits():
    from inferlab.bench.schema_bench import _reason_key
    assert _reason_key("the regex for #/definitions/a exceeds 1,000,000 characters: simplify") == \
        "the regex for #… exceeds 1,000,000 characters: simplify"
    assert _reason_key("oneOf at #/x/oneOf: branches /x/oneOf/0 and /x/oneOf/1 are not provably disjoint") == \
        "oneOf: branches #… and #… are not provably disjoint"
    assert _reason_key("format at #/f: unknown format 'ipv6' (maxProperties 3)") == \
        "format: unknown format 'ipv6' (maxProperties N)"


@pytest.mark.slow  # the peers run at Qwen-free 512 tokens still takes seconds each
def test_peers_run_on_the_same_instances(bench_dir):
    """--peers: each installed peer compiles, and its accept/reject counts are over our instances;
    hand-checked: every peer accepts 1 (valid) and rejects -1 and "x" (invalid) for Alpha---int."""
    pytest.importorskip("llguidance")
    from inferlab.cli.schema_bench import _load_vocab
    results = run_bench(BenchConfig(directory=bench_dir, peers=True, mask_samples=1, mask_min_sample_s=0.001),
                        vocab=_load_vocab("512"))
    by_name = {r["name"]: r for r in results["schemas"]}
    peers = by_name["Alpha---int"]["peers"]
    assert "llguidance" in peers
    for name, p in peers.items():
        assert p["compiled"], (name, p)
        assert (p["valid_accepted"], p["valid_total"], p["invalid_total"]) == (1, 1, 2), name
        if name == "outlines-core":  # it does not enforce minimum: -1 is accepted, and shown
            assert p["invalid_rejected"] == 1 and p["unsound"] == ["-1"]
        else:
            assert p["invalid_rejected"] == 2 and p["unsound"] == [], name
        assert p["mask_us_per_token"] > 0 and p["first_mask_ms"] >= 0
    assert set(results["summary"]["all"]["peers"]) == set(peers)
    assert results["summary"]["all"]["peers"]["llguidance"]["schemas"] == 3


@pytest.mark.slow  # the peers run at Qwen-free 512 tokens still takes seconds each
def test_cli_peers_flag(bench_dir, capsys):
    pytest.importorskip("llguidance")
    assert main(["schema-bench", str(bench_dir), "--vocab", "512", "--peers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["peers"] is True and out["peers"]["llguidance"]["available"]
    assert "llguidance" in out["summary"]["all"]["peers"]


def test_cli_peers_by_name(bench_dir, capsys):
    pytest.importorskip("llguidance")
    assert main(["schema-bench", str(bench_dir), "--vocab", "512", "--peers", "llguidance", "--json"]) == 0
    got = capsys.readouterr()
    out = json.loads(got.out)
    assert set(out["summary"]["all"]["peers"]) == {"llguidance"}
    for name in ("xgrammar", "outlines-core"):  # named as left out, never silently dropped
        assert out["peers"][name] == {"available": False, "note": "not selected (--peers llguidance)"}
        # and said on the console (stderr, beside --json's stdout), as the labs say what they skip
        assert f"inferlab schema-bench: note: peer {name} skipped: not selected (--peers llguidance)" in got.err


@pytest.mark.parametrize("names", ["bogus", "llguidance,bogus", ","])
def test_cli_peers_unknown_name_exits_2(bench_dir, tmp_path, capsys, names):
    out = tmp_path / "run"
    assert main(["schema-bench", str(bench_dir), "--vocab", "512", "--peers", names, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--peers" in err and "llguidance, xgrammar, outlines-core" in err, err
    assert not out.exists()


class _FakePeer:
    """A peer that exhausts memory on one schema, time on another, and refuses the rest in its
    own words: the bounds, not its behaviour, are under test."""

    vocab_size, eos = 512, 0

    def compile(self, schema):
        if schema.get("title") == "hog memory":
            # 64 MiB blocks, each written whole at once: past the bound in a fraction of a second
            # (touching a 2 GiB buffer page by page could outlast the 3 s bound on a loaded host)
            blocks = []
            while True:
                blocks.append(b"\1" * 2**26)
        elif schema.get("title") == "hog time":
            time.sleep(60)
        raise ValueError("the fake peer refuses")


def _rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


@pytest.mark.slow  # two bounded children, one of them hogging memory (~2.5 s)
def test_a_peer_past_a_bound_is_refused_and_the_run_goes_on(tmp_path, monkeypatch):
    """Two runs, so that neither bound races the other: past the memory bound under a time bound
    no loaded host reaches (a 3 s bound shared by both once lost to a starved child: 'exceeded
    3 s' where the memory was meant), then past a 1 s time bound."""
    from inferlab.cli.schema_bench import _load_vocab
    memory_dir, time_dir = tmp_path / "memory", tmp_path / "time"
    memory_dir.mkdir()
    time_dir.mkdir()
    write_case(memory_dir, "A---memory", {"title": "hog memory", "type": "integer"}, [(True, 1)])
    write_case(memory_dir, "B---plain", {"type": "integer"}, [(True, 1), (False, "x")])
    write_case(time_dir, "A---time", {"title": "hog time", "type": "integer"}, [(True, 1)])
    monkeypatch.setattr("inferlab.bench.schema_peers.load_peers", lambda vocab, tok, names: ({"fake": _FakePeer()}, {}))
    vocab = _load_vocab("512")
    memory_mib = _rss_mib() + 256  # the child starts with at most the parent's pages

    def run(directory, timeout_s):
        return run_bench(BenchConfig(directory=directory, peers=True, timeout_s=timeout_s,
                                     peer_memory=memory_mib * 2**20, mask_min_sample_s=0.001), vocab=vocab)

    results, timed = run(memory_dir, 120), run(time_dir, 1)
    by_name = {r["name"]: r for r in results["schemas"] + timed["schemas"]}
    assert by_name["A---memory"]["peers"]["fake"]["reason"] == f"exceeded {memory_mib} MiB"
    assert by_name["A---memory"]["peers"]["fake"]["peak_rss_mb"] > memory_mib
    assert by_name["A---time"]["peers"]["fake"]["reason"] == "exceeded 1 s"
    assert by_name["B---plain"]["peers"]["fake"]["reason"] == "ValueError: the fake peer refuses"
    for r in by_name.values():  # ours ran on each, beside the refusals
        assert r["compiled"] and r["valid_accepted"] == 1 and r["peak_rss_mb"] > 0
        assert not r["peers"]["fake"]["compiled"]
    assert results["summary"]["all"]["peers"]["fake"]["compiled"] == 0
    assert results["summary"]["all"]["peers"]["fake"]["peak_rss_mb_max"] == by_name["A---memory"]["peers"]["fake"]["peak_rss_mb"]
    assert results["config"]["timeout_s"] == 120 and results["config"]["peer_memory"] == memory_mib * 2**20
    assert timed["config"]["timeout_s"] == 1


def test_the_process_peak_covers_every_schemas_peak(bench_dir):
    results = run_bench(BenchConfig(directory=bench_dir))
    peaks = [r["peak_rss_mb"] for r in results["schemas"]]
    assert all(p > 0 for p in peaks)
    assert results["peak_rss_mb"] >= max(peaks)
    assert results["summary"]["all"]["peak_rss_mb_max"] == max(peaks)


def test_ours_past_the_time_bound_is_refused(bench_dir, monkeypatch):
    import inferlab.bench.schema_bench as bench

    def slow(res, *args):
        res.compiled = True  # partly done work is dropped, as a killed peer's would be
        time.sleep(30)
    monkeypatch.setattr(bench, "_ours", slow)
    results = run_bench(BenchConfig(directory=bench_dir, timeout_s=0.2))
    for r in results["schemas"]:
        assert (r["compiled"], r["reason"]) == (False, "exceeded 0.2 s") and r["refuse_ms"] >= 200
    assert results["summary"]["all"]["refusals"] == {"exceeded N.N s": 3}
    assert results["summary"]["all"]["size_refusals"] == 0


@pytest.mark.slow  # loads the three peers (xgrammar imports torch)
def test_peers_in_a_child_match_peers_in_process(bench_dir):
    """The forked child changes where a peer runs, not what it answers."""
    pytest.importorskip("llguidance")
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.bench.schema_peers import load_peers, run_peer, run_peer_bounded
    vocab, tok = _load_vocab("512")
    peers, _ = load_peers(vocab, tok)
    timing_keys = {"compile_ms", "first_mask_ms", "mask_us_per_token", "mask_us_p99", "first_walk_us_per_token",
                   "first_walk_us", "first_walk_advance_us", "later_walk_us", "peak_rss_mb"}
    schemas = [({"type": "integer", "minimum": 0}, [(True, "1"), (False, "-1"), (True, "23")]),
               ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"]},
                [(True, '{"a":"xy"}'), (False, '{"a":"long"}'), (False, '{}')]),
               ({"type": "array", "items": {"enum": ["p", "q"]}}, [(True, '["p","q"]'), (False, '["r"]')])]
    for schema, tests in schemas:
        cases = [(valid, text, tok.encode(text)) for valid, text in tests]
        timing = cases[0][2]
        for name, peer in peers.items():
            forked = run_peer_bounded(peer, schema, cases, timing, memory_bytes=4 * 2**30, timeout_s=60)
            inproc = asdict(run_peer(peer, schema, cases, timing))
            assert forked["peak_rss_mb"] > 0
            assert {k: v for k, v in forked.items() if k not in timing_keys} == \
                {k: v for k, v in inproc.items() if k not in timing_keys}, (name, schema)
            assert forked["compiled"] and forked["mask_us_per_token"] > 0, name
            assert len(forked["first_walk_advance_us"]) == len(timing) and min(forked["first_walk_advance_us"]) > 0
            later = [tokens for valid, _, tokens in cases if valid][1:]
            assert len(forked["later_walk_us"]) == sum(map(len, later)), name  # a reading a token of each


@pytest.mark.parametrize("flag", [["--peer-memory", "4G"], ["--peer-memory", "4"], ["--peer-memory", "0GiB"],
                                  ["--peer-memory", "lots"], ["--timeout", "0"], ["--timeout", "-5"],
                                  ["--timeout", "nan"], ["--timeout", "2m"]])
def test_bad_bounds_exit_2_with_one_line_naming_the_flag(bench_dir, tmp_path, capsys, flag):
    out = tmp_path / "run"
    try:
        code = main(["schema-bench", str(bench_dir), "--vocab", "none", "--out", str(out), *flag])
    except SystemExit as exc:  # argparse's refusal of --timeout
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and flag[0] in err, err
    assert not out.exists()


def test_first_walk_readings_are_pooled_over_tokens_not_schemas():
    """MaskBench's time between masks: every token's reading counts once, whatever its schema."""
    from inferlab.bench.schema_bench import SchemaResult, summarize
    a = SchemaResult("A---a", "A", True, first_walk_us=[1.0, 2.0, 3.0])
    b = SchemaResult("A---b", "A", True, first_walk_us=[10.0])
    s = summarize([a, b])["all"]
    assert s["first_walk_tokens"] == 4
    assert s["first_walk_us_p50"] == pytest.approx(2.5)    # (2 + 3) / 2
    assert s["first_walk_us_p99"] == pytest.approx(9.79)   # 3 + 0.97 * (10 - 3), linear between ranks 2 and 3


def test_every_valid_instance_walk_is_pooled_with_the_first():
    """MaskBench's population: the first walks and the later instances' walks, token by token."""
    from inferlab.bench.schema_bench import SchemaResult, summarize
    a = SchemaResult("A---a", "A", True, first_walk_us=[4.0, 8.0], later_walk_us=[1.0, 1.0, 2.0])
    b = SchemaResult("A---b", "A", True, first_walk_us=[30.0])
    s = summarize([a, b])["all"]
    assert s["all_walks_tokens"] == 6 and s["first_walk_tokens"] == 3
    assert s["all_walks_us_p50"] == pytest.approx(3.0)     # sorted 1 1 2 4 8 30: (2 + 4) / 2
    assert s["all_walks_us_mean"] == pytest.approx(46 / 6)
    assert s["all_walks_us_p99"] == pytest.approx(28.9)    # 8 + 0.95 * (30 - 8): rank 4.95 of 0..5
    assert summarize([SchemaResult("A---c", "A", True)])["all"]["all_walks_us_p50"] is None


def test_later_instances_are_walked_on_the_first_ones_grammar(bench_dir):
    """Beta---obj has two valid instances: the second is walked after the first, a reading a token;
    the others have one."""
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.bench.schema_bench import _canonical
    vocab, tok = _load_vocab("512")
    config = BenchConfig(directory=bench_dir, mask_min_sample_s=0.001)
    by_name = {r["name"]: r for r in run_bench(config, vocab=(vocab, tok))["schemas"]}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert len(by_name["Beta---obj"]["later_walk_us"]) == len(tok.encode(_canonical({"a": 1, "b": 2}, schema, config)))
    assert min(by_name["Beta---obj"]["later_walk_us"]) > 0
    assert by_name["Alpha---int"]["first_walk_us"] and by_name["Alpha---int"]["later_walk_us"] == []


def test_time_to_first_mask_adds_the_compile_where_a_mask_was_timed():
    """MaskBench's TTFM: compile + first mask per schema; a compiled schema with no timed mask
    counts in the compile's percentiles, not in TTFM's."""
    from inferlab.bench.schema_bench import SchemaResult, summarize
    rs = [SchemaResult("A---a", "A", True, compile_ms=10.0, first_mask_ms=1.0),
          SchemaResult("A---b", "A", True, compile_ms=30.0, first_mask_ms=2.0),
          SchemaResult("A---c", "A", True, compile_ms=100.0),  # a peer whose first mask raised: none
          SchemaResult("A---d", "A", False, reason="enum at #: a refusal", refuse_ms=5.0)]
    s = summarize(rs)["all"]
    assert s["ttfm_ms_median"] == pytest.approx(21.5)   # (11 + 32) / 2
    assert s["ttfm_ms_p90"] == pytest.approx(29.9)      # 11 + 0.9 * (32 - 11)
    assert s["compile_ms_median"] == pytest.approx(30.0)
    assert s["compile_ms_p90"] == pytest.approx(86.0)   # 30 + 0.8 * (100 - 30): rank 1.8 of 0..2


def test_a_schema_without_a_valid_instance_still_has_its_first_mask_timed(tmp_path):
    """TTFM covers every compiled schema: the first mask needs no instance; the walks need one."""
    from inferlab.cli.schema_bench import _load_vocab
    write_case(tmp_path, "Alpha---only_invalid", {"type": "integer"}, [(False, "x")])
    write_case(tmp_path, "Alpha---none", {"type": "boolean"}, [])
    results = run_bench(BenchConfig(directory=tmp_path, mask_samples=1, mask_min_sample_s=0.001),
                        vocab=_load_vocab("512"))
    for r in results["schemas"]:
        assert r["compiled"] and r["first_mask_ms"] > 0, r
        assert r["first_walk_us"] == [] and r["mask_us_per_token"] is None
    s = results["summary"]["all"]
    assert s["ttfm_ms_median"] is not None and s["first_walk_tokens"] == 0


def test_the_timed_lookup_and_apply_writes_what_the_bitmask_allows(bench_dir):
    """_time_apply times MatcherMask's plan + apply; here its result is checked against the
    bitmask row at every step of a walk, then the bench records the timing per schema."""
    import numpy as np
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.constrain.matcher import MatcherMask, compile_json_schema
    vocab, tok = _load_vocab("512")
    grammar = compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}, vocab)
    hook, row = MatcherMask(grammar), np.zeros((grammar.vocab_size + 31) // 32, np.int32)
    state = grammar.initial_state()
    for _ in range(2):  # the second walk reads cached plans
        hook.reset()
        state = grammar.initial_state()
        for t in tok.encode('{"a":"xy"}'):
            logits = np.arange(grammar.vocab_size, dtype=np.float32)
            hook.apply(logits, hook.allowed_mask())
            grammar.fill_bitmask(state, row)
            allowed = np.unpackbits(row.view(np.uint8), count=grammar.vocab_size, bitorder="little").astype(bool)
            assert np.array_equal(np.isfinite(logits), allowed)
            assert np.array_equal(logits[allowed], np.flatnonzero(allowed).astype(np.float32))
            hook.advance(t)
            state = grammar.advance(state, t)
    results = run_bench(BenchConfig(directory=bench_dir, mask_min_sample_s=0.001), vocab=(vocab, tok))
    timed = [r for r in results["schemas"] if r["mask_us_per_token"] is not None]
    assert timed and all(r["apply_us_per_token"] > 0 and r["apply_us_p99"] >= r["apply_us_per_token"] for r in timed)
    assert results["summary"]["all"]["apply_us_per_token_median"] > 0


def test_our_vocabulary_preprocessing_is_timed_apart(bench_dir):
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.constrain.vocab import Vocabulary
    vocab, tok = _load_vocab("512")
    fresh = Vocabulary.from_tokenizer(tok)  # nothing built yet: the run builds its trie and key index
    results = run_bench(BenchConfig(directory=bench_dir, mask_min_sample_s=0.001), vocab=(fresh, tok))
    assert results["vocab_preprocessing_ms"] > 0
    assert run_bench(BenchConfig(directory=bench_dir))["vocab_preprocessing_ms"] is None  # no vocabulary


def test_the_mask_plot_has_a_curve_per_engine_and_panel_and_none_without_a_vocabulary(bench_dir):
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.bench.schema_bench import mask_readings, plot_masks
    assert plot_masks(run_bench(BenchConfig(directory=bench_dir))) is None
    results = run_bench(BenchConfig(directory=bench_dir, mask_min_sample_s=0.001), vocab=_load_vocab("512"))
    first, walks, warm = mask_readings(results)["inferlab"]
    timed = [r for r in results["schemas"] if r["compiled"] and r["first_walk_us"]]
    assert len(first) == sum(len(r["first_walk_us"]) for r in timed) and len(warm) == len(timed)
    assert len(walks) == len(first) + sum(len(r["later_walk_us"]) for r in timed) > len(first)  # (Beta---obj: two)
    left, middle, right = plot_masks(results).axes
    assert len(left.lines) == 2 and len(right.lines) == 1  # the first walks, and dashed, every instance
    assert left.lines[1].get_linestyle() == "--" and left.lines[1].get_color() == left.lines[0].get_color()
    assert left.lines[0].get_ydata()[-1] == 100  # every reading at or under the largest
    kinds = "".join(r["first_walk_kinds"] for r in timed)
    assert len(middle.lines) == len(set(kinds))  # a curve per kind of step met
    assert sum(len(line.get_xdata()) for line in middle.lines) == len(first)


def test_first_walk_tokens_are_pooled_by_what_their_step_did():
    """Shares of tokens and of summed time, and percentiles, per kind of step (hand-derived)."""
    from inferlab.bench.schema_bench import SchemaResult, summarize
    a = SchemaResult("A---a", "A", True, first_walk_us=[2.0, 10.0, 30.0, 4.0], first_walk_kinds="sncs")
    b = SchemaResult("A---b", "A", True, first_walk_us=[954.0], first_walk_kinds="b")
    steps = summarize([a, b])["all"]["first_walk_by_step"]
    assert list(steps) == ["state seen", "mask cached", "narrow walk", "frame split"]
    assert steps["state seen"] == {"tokens": 2, "token_share": 0.4, "time_share": pytest.approx(6 / 1000),
                                   "us_p50": 3.0, "us_p90": pytest.approx(3.8)}  # 2 + 0.9 * (4 - 2)
    assert steps["mask cached"]["time_share"] == pytest.approx(0.03) and steps["frame split"]["token_share"] == 0.2
    assert summarize([SchemaResult("A---c", "A", True, first_walk_us=[1.0])])["all"]["first_walk_by_step"] == {}


def test_first_walk_advances_are_pooled_over_tokens():
    from inferlab.bench.schema_bench import SchemaResult, summarize
    a = SchemaResult("A---a", "A", True, first_walk_us=[1.0, 1.0], first_walk_advance_us=[2.0, 6.0])
    b = SchemaResult("A---b", "A", True, first_walk_us=[1.0], first_walk_advance_us=[40.0])
    s = summarize([a, b])["all"]
    assert s["first_walk_advance_us_p50"] == 6.0 and s["first_walk_advance_us_mean"] == 16.0
    assert s["first_walk_advance_us_p99"] == pytest.approx(39.32)  # 6 + 0.98 * (40 - 6): rank 1.98 of 0..2
    assert summarize([SchemaResult("A---c", "A", True)])["all"]["first_walk_advance_us_p50"] is None


def test_a_first_walk_step_is_state_seen_exactly_where_its_state_came_before(bench_dir):
    """The kinds come from an untimed replay; here "s" is checked against the walk's own
    states (the first step re-fills the initial state, filled by the first mask), and the other
    kinds cover every new state."""
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.bench.schema_bench import STEP_KINDS, _replay_first_walk
    from inferlab.constrain.matcher import compile_json_schema
    vocab, tok = _load_vocab("512")
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["xy", "z"]}}},
              "required": ["a"]}
    tokens = tok.encode('{"a":["xy","z","xy","xy"]}')
    grammar = compile_json_schema(schema, vocab)
    kinds, advance = _replay_first_walk(grammar.machine, vocab, tokens)
    assert len(kinds) == len(advance) == len(tokens) and set(kinds) <= set(STEP_KINDS) and (advance > 0).all()
    state, seen = grammar.initial_state(), set()
    seen.add(state)
    for t, kind in zip(tokens, kinds):
        assert (kind == "s") == (state in seen), (t, kind)
        seen.add(state)
        state = grammar.advance(state, t)
    assert kinds[0] == "s" and {"n", "b", "w"} & set(kinds)
    results = run_bench(BenchConfig(directory=bench_dir, mask_min_sample_s=0.001), vocab=(vocab, tok))
    timed = [r for r in results["schemas"] if r["first_walk_us"]]
    assert timed and all(len(r["first_walk_kinds"]) == len(r["first_walk_advance_us"]) == len(r["first_walk_us"])
                         for r in timed)


def test_a_test_nested_past_pythons_recursion_limit_is_read_not_crashed_on(tmp_path, capsys):
    # the bench file check reads it within the 5,000-level limit; the schema's own run reads it
    # again, and a bare json.loads raised RecursionError there (a helper's fuzz); built as text,
    # as json.dumps would recurse
    text = '{"description": "", "meta": {}, "schema": {"type": "array"}, "tests": [{"description": "", ' \
           '"valid": true, "data": ' + "[" * 3000 + "]" * 3000 + "}]}"
    (tmp_path / "Deep---data.json").write_text(text, encoding="utf-8")
    assert main(["schema-bench", str(tmp_path), "--vocab", "none", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]["all"]
    assert summary["schemas"] == 1 and summary["valid"] == 1


def test_a_json_schema_test_suite_folder_is_read_group_by_group(tmp_path, capsys):
    """The suite's own format (lists of groups): each group a case named by its file and index; a
    schema without $schema is read in its folder's draft; format asserted under optional/format/
    only (the suite's assumption), unless --format names a policy."""
    draft = tmp_path / "draft7"
    (draft / "optional" / "format").mkdir(parents=True)
    groups = [{"description": "date", "schema": {"format": "date"},
               "tests": [{"description": "", "data": "x", "valid": True}, {"description": "", "data": "2024-01-31",
                                                                            "valid": True}]},
              # draft-07 ignores $ref's siblings: maxItems does not apply
              {"description": "ref", "schema": {"definitions": {"a": {"type": "array"}},
                                                "properties": {"f": {"$ref": "#/definitions/a", "maxItems": 1}}},
               "tests": [{"description": "", "data": {"f": [1, 2]}, "valid": True},
                         {"description": "", "data": {"f": 1}, "valid": False}]}]
    (draft / "core.json").write_text(json.dumps(groups))
    (draft / "optional" / "format" / "date.json").write_text(json.dumps(groups[:1]))
    assert main(["schema-bench", str(draft), "--vocab", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {r["name"]: r for r in out["schemas"]}
    assert set(by_name) == {"core/0: date", "core/1: ref", "optional/format/date/0: date"}
    assert (by_name["core/0: date"]["valid_accepted"], by_name["core/0: date"]["valid_total"]) == (2, 2)  # annotate
    assert by_name["optional/format/date/0: date"]["valid_accepted"] == 1  # assert: "x" is no date
    assert (by_name["core/1: ref"]["valid_accepted"], by_name["core/1: ref"]["invalid_rejected"]) == (1, 1)
    assert main(["schema-bench", str(draft / "core.json"), "--vocab", "none", "--format", "assert", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schemas"][0]["valid_accepted"] == 1 and out["config"]["format"] == "assert"
    (draft / "bad.json").write_text(json.dumps([{"schema": {}, "tests": [{"data": 1}]}]))
    assert main(["schema-bench", str(draft), "--vocab", "none"]) == 2
    assert "bad.json: /0/tests/0 is not" in capsys.readouterr().err


@pytest.mark.parametrize("broken", ["none allowed", "all allowed"])
def test_with_a_vocabulary_the_counts_go_through_the_engines_masks(bench_dir, monkeypatch, broken):
    """A sound engine's masks agree with the byte machine on every instance; an engine whose
    masks allow nothing (or everything) is counted as such: completeness (or soundness) falls
    and every instance it gets wrong is a disagreement (a mask that lets through a token the
    machine refuses counts an invalid instance as accepted)."""
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.constrain.grammar import StackGrammar
    vocab = _load_vocab("512")
    config = BenchConfig(directory=bench_dir, mask_min_sample_s=0.001)
    good = {r["name"]: r for r in run_bench(config, vocab=vocab)["schemas"]}
    assert good["Alpha---int"]["mask_disagreements"] == good["Beta---obj"]["mask_disagreements"] == 0
    fill = StackGrammar.fill_bitmask

    def broken_fill(self, state, out):
        fill(self, state, out)
        out.fill(0 if broken == "none allowed" else -1)
    monkeypatch.setattr(StackGrammar, "fill_bitmask", broken_fill)
    bad = {r["name"]: r for r in run_bench(config, vocab=vocab)["schemas"]}
    for name in ("Alpha---int", "Beta---obj"):
        g, b = good[name], bad[name]
        if broken == "none allowed":
            assert b["valid_accepted"] == 0 and b["invalid_rejected"] == g["invalid_rejected"]
            assert b["mask_disagreements"] == g["valid_accepted"] > 0
        else:
            assert b["invalid_rejected"] == 0 and b["valid_accepted"] == g["valid_accepted"]
            assert b["mask_disagreements"] == g["invalid_rejected"] > 0
    assert run_bench(config)["schemas"][0]["mask_disagreements"] is None  # (no vocabulary: the byte machine's)


def test_mask_acceptance_equals_the_byte_machine_on_prefixes_and_extensions():
    from inferlab.bench.schema_bench import mask_accepts
    from inferlab.cli.schema_bench import _load_vocab
    from inferlab.constrain.stack import StackGrammar, compile_machine
    vocab, tok = _load_vocab("512")
    machine = compile_machine({"type": "array", "items": {"enum": ["ab", 12]}, "maxItems": 2})[1]
    grammar = StackGrammar(machine.unbuilt(), vocab)
    texts = ['["ab",12]', '["ab"]', "[]", '["ab",12', '["ab",12,"ab"]', '["a"]', "[12,12]", '[12,"ab"]x']
    for text in texts:
        assert mask_accepts(grammar, tok.encode(text)) == machine.accepts(text), text
