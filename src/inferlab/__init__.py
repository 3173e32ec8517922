"""inferlab: measure where the time and the memory of LLM inference go, on your own CPU."""

__version__ = "0.1.0"
