"""The stack grammar's former single module, split along the native engine's seam (issue 48):
machine.py (StackMachine: configurations, closures, byte rows), grammar.py (StackGrammar: token
masks and their caches) and compiler.py (compile_machine, build_machine: schema -> DFAs -> machine).
The names other modules and tests import from here are re-exported."""

from inferlab.constrain.compiler import (
    SMALL_DFA_CACHE,
    SMALL_DFA_STATES,
    _SMALL_DFAS,
    build_machine,
    check_grammar_size,
    clear_compile_caches,
    compile_machine,
)
from inferlab.constrain.grammar import (
    MASK_CACHE_ROWS,
    NARROW_NODES,
    WARM_MS,
    GrammarStats,
    StackGrammar,
    _Interned,
    _Stepped,
    _write,
)
from inferlab.constrain.machine import Frame, Stack, StackMachine, State, call_edges

__all__ = ["MASK_CACHE_ROWS", "NARROW_NODES", "SMALL_DFA_CACHE", "SMALL_DFA_STATES", "WARM_MS", "Frame",
           "GrammarStats", "Stack", "StackGrammar", "StackMachine", "State", "_Interned", "_SMALL_DFAS",
           "_Stepped", "_write", "build_machine", "call_edges", "check_grammar_size", "clear_compile_caches",
           "compile_machine"]
