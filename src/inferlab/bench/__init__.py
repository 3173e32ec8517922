"""Benchmark harnesses over the grammar package and the engine (not tests, not the labs).

schema_bench: the JSONSchemaBench runner behind `inferlab schema-bench`; schema_peers: its --peers
adapters (llguidance, xgrammar, outlines-core), each run in a bounded child; jump_forward:
compare_jump_forward(), jump-forward against plain masked decoding (benchmarks/jump_forward.py and
the mask lab's row). They measure constrain's grammars; constrain imports none of them.
"""
