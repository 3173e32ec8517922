"""Session-wide test settings."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def pytest_collection_finish(session):
    """One torch thread for the transformers oracles. Their models are tiny (tens of thousands of
    weights), so a second OpenMP thread only adds hand-offs; on a machine whose cores are busy
    elsewhere, torch's spinning workers made tests/test_hf.py and tests/test_llama.py about 3.6x
    slower (`pytest tests/test_hf.py tests/test_llama.py`, with and without this hook, under load).
    Collection has imported torch by now if any collected test uses it; the core never does."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


@pytest.fixture
def plain_kv_figure(monkeypatch):
    """The KV lab with an empty figure in place of its chart, for tests of where and when files
    are written (the chart itself is drawn by tests/test_kv_derivations.py and test_reports.py):
    the chart's 36 labelled log-scale bars take about half a second to draw."""
    from inferlab.labs import kv_sizing
    from inferlab.measure.plots import new_figure

    monkeypatch.setattr(kv_sizing, "sizes_figure", lambda results: new_figure(figsize=(1, 1))[0])


@pytest.fixture(scope="session")
def load_benchmark():
    """load_benchmark(name): benchmarks/<name>.py as a module (the scripts are not a package:
    each runs on its own)."""
    return _load_benchmark


def _load_benchmark(name: str):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
