"""Per-step tracing of generate() (Phase 21), exported as Chrome trace-event JSON.

A Tracer records complete events ("ph": "X") with perf_counter_ns: one "step" span per decode
step and, inside it, "forward", "mask_build", "mask_apply" and "sample". The JSON opens in
Perfetto (ui.perfetto.dev) and chrome://tracing (Trace Event Format, "JSON Object Format").

Tracing is off unless a Tracer is passed: generate() then only tests `tracer is not None`, because
seed 000 warns that logging every step dominates the time of a 64-token run.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from inferlab.measure.artifacts import atomic_write_json

SPANS = ("step", "forward", "mask_build", "mask_apply", "sample")


@dataclass(frozen=True)
class Span:
    name: str
    start_ns: int
    end_ns: int
    step: int


class Tracer:
    """Collects spans; `now()` before the work, `record(name, start, step)` after it."""

    def __init__(self):
        self.spans: list[Span] = []
        self.origin_ns = time.perf_counter_ns()

    @staticmethod
    def now() -> int:
        return time.perf_counter_ns()

    def record(self, name: str, start_ns: int, step: int) -> None:
        self.spans.append(Span(name, start_ns, time.perf_counter_ns(), step))

    def trace_events(self) -> dict:
        """Chrome trace-event JSON object; ts and dur in microseconds from the tracer's creation."""
        pid, tid = os.getpid(), threading.get_ident() % 2**31
        # Parents first at equal start times, so viewers nest children under the "step" span.
        ordered = sorted(self.spans, key=lambda s: (s.start_ns, -s.end_ns))
        return {
            "traceEvents": [
                {"name": s.name, "cat": "generate", "ph": "X",
                 "ts": (s.start_ns - self.origin_ns) / 1e3, "dur": (s.end_ns - s.start_ns) / 1e3,
                 "pid": pid, "tid": tid, "args": {"step": s.step}}
                for s in ordered
            ],
            "displayTimeUnit": "ms",
        }

    def save(self, path) -> None:
        atomic_write_json(path, self.trace_events())

    def summary(self) -> dict[str, dict]:
        """Per span name: {"count", "total_ms", "mean_ms"}."""
        out: dict[str, dict] = {}
        for s in self.spans:
            entry = out.setdefault(s.name, {"count": 0, "total_ms": 0.0})
            entry["count"] += 1
            entry["total_ms"] += (s.end_ns - s.start_ns) / 1e6
        for entry in out.values():
            entry["mean_ms"] = entry["total_ms"] / entry["count"]
        return out
