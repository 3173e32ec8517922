"""Session-wide test settings."""

from __future__ import annotations

import sys


def pytest_collection_finish(session):
    """One torch thread for the transformers oracles. Their models are tiny (tens of thousands of
    weights), so a second OpenMP thread only adds hand-offs; on a machine whose cores are busy
    elsewhere, torch's spinning workers made tests/test_hf.py and tests/test_llama.py about 3.6x
    slower (`pytest tests/test_hf.py tests/test_llama.py`, with and without this hook, under load).
    Collection has imported torch by now if any collected test uses it; the core never does."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
