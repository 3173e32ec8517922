"""Tracing: the exported file is valid Chrome trace-event JSON, spans nest, summary adds up."""

import json

import numpy as np
import pytest

from inferlab.model.config import GPTConfig
from inferlab.model.generate import generate
from inferlab.model.gpt import GPT
from inferlab.model.trace import Tracer
from oracles import ByteTokenizer, DigitsMask


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    model = GPT.init(GPTConfig(vocab_size=257, d_model=16, n_heads=2, n_layers=1, context=32), seed=4)
    tracer = Tracer()
    mask = DigitsMask(257, n=6, allowed=range(256))
    g = generate(model, ByteTokenizer(), "x", mask=mask, max_new_tokens=5, seed=1, tracer=tracer)
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    tracer.save(path)
    return g, tracer, json.loads(path.read_text())


def test_trace_file_is_valid_trace_event_json(traced):
    g, _, doc = traced
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    events = doc["traceEvents"]
    for e in events:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["ph"] == "X"                                   # complete events
        assert isinstance(e["name"], str)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["args"]["step"], int)
    names = [e["name"] for e in events]
    steps = g.n_steps
    for span in ("step", "forward", "mask_build", "mask_apply", "sample"):
        assert names.count(span) == steps
    assert sorted(e["ts"] for e in events) == [e["ts"] for e in events]


def test_spans_nest_inside_their_step(traced):
    _, _, doc = traced
    events = doc["traceEvents"]
    steps = {e["args"]["step"]: e for e in events if e["name"] == "step"}
    children = [e for e in events if e["name"] != "step"]
    for e in children:
        parent = steps[e["args"]["step"]]
        assert parent["ts"] <= e["ts"] and e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3
    # within a step the children run one after the other, in the hook's order, without overlap
    for step in steps:
        mine = [e for e in children if e["args"]["step"] == step]
        assert [e["name"] for e in mine] == ["forward", "mask_build", "mask_apply", "sample"]
        for a, b in zip(mine, mine[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
    # steps follow each other
    ordered = [steps[i] for i in sorted(steps)]
    for a, b in zip(ordered, ordered[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3


def test_summary_totals_match_events(traced):
    _, tracer, doc = traced
    summary = tracer.summary()
    for name, entry in summary.items():
        durs = [e["dur"] for e in doc["traceEvents"] if e["name"] == name]
        assert entry["count"] == len(durs)
        assert entry["total_ms"] == pytest.approx(sum(durs) / 1e3)
        assert entry["mean_ms"] == pytest.approx(entry["total_ms"] / entry["count"])


def test_no_tracer_same_tokens():
    model = GPT.init(GPTConfig(vocab_size=257, d_model=16, n_heads=2, n_layers=1, context=32), seed=4)
    a = generate(model, ByteTokenizer(), "x", max_new_tokens=8, seed=3, tracer=Tracer())
    b = generate(model, ByteTokenizer(), "x", max_new_tokens=8, seed=3)
    assert a.tokens == b.tokens
    assert np.isfinite(a.elapsed_s)
