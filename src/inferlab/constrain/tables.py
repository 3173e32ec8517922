"""CompiledMachine: a StackMachine's automata as flat arrays, the seam between the compiler
(Python) and a mask engine (grammar.py's Python walk, or the native one in csrc/, bound by _native.cpp).

Layout (A automata, S states in all, C call edges; every array C-contiguous; docs/native-engine.md):

    state_offset  (A + 1,) int64   automaton k's states are the global ids state_offset[k] ..
                                   state_offset[k + 1] - 1; a state inside automaton k is named
                                   by its local id q (global = state_offset[k] + q)
    trans         A tables, automaton k's (n_k, 256) int32 (n_k its states): text transitions,
                                   local target state, -1 for none (the call marker bytes F8-FF
                                   are always -1: calls are the call table's). Not concatenated:
                                   they are the automata's own read-only text tables
                                   (machine.automaton_tables, shared by every machine over a DFA),
                                   which the native engine reads in place
    accepting     (S,) uint8       1 where the automaton may end
    start         (A,) int32       each automaton's local start state
    productive    (A,) uint8       1 where the automaton has a complete text (calls only pushed
                                   into productive automata)
    call_offset   (S + 1,) int64   CSR over global states: state g's calls are
    call_callee   (C,) int32         call_callee[call_offset[g]:call_offset[g + 1]], each with
    call_return   (C,) int32         its local return state in the caller; sorted by (callee, return)
    kind          (A,) uint8       0 plain, 1 counted (item{lo,hi}), 2 map (members lo..hi)
    lo, hi        (A,) int64       counted/map bounds; hi = -1 for no max; 0 for plain automata
    map_first     (A,) int32       a map's key automaton for its first member (-1: none, use next)
    map_next      (A,) int32       a map's key automaton for the members after it (-1: not a map)
    unique        (A,) uint8       1 where the automaton is an array of unique strings (uniqueItems)

A configuration (the grammar's state handle, an int interned by the machine) travels to an
engine as its stacks: `frames` (F, 3) int32 rows (automaton, local state, count; count -1 for a
frame of a plain automaton) and `stack_offset` (K + 1,) int64, bottom frame first.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

PLAIN, COUNTED, MAP = 0, 1, 2


@dataclass(frozen=True, eq=False)
class CompiledMachine:
    state_offset: np.ndarray
    trans: tuple[np.ndarray, ...]
    accepting: np.ndarray
    start: np.ndarray
    productive: np.ndarray
    call_offset: np.ndarray
    call_callee: np.ndarray
    call_return: np.ndarray
    kind: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    map_first: np.ndarray
    map_next: np.ndarray
    unique: np.ndarray

    @property
    def n_automata(self) -> int:
        return len(self.start)

    def arrays(self) -> dict[str, np.ndarray | tuple[np.ndarray, ...]]:
        """{field: array}, in the layout's order (what the native engine reads)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def compiled_machine(machine) -> CompiledMachine:
    """A StackMachine's tables as a CompiledMachine (built once per machine: machine.compiled)."""
    n = [d.n_states for d in machine.dfas]
    offset = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=offset[1:])
    trans = tuple(np.ascontiguousarray(t, dtype=np.int32) for t in machine.text_trans)  # (no copy: int32 already)
    accepting = np.concatenate(machine.accepting).astype(np.uint8)
    count = np.zeros(int(offset[-1]), dtype=np.int64)  # (S,) calls per global state
    for k, calls in enumerate(machine.calls):
        for s, edges in calls.items():
            count[offset[k] + s] = len(edges)
    call_offset = np.zeros(int(offset[-1]) + 1, dtype=np.int64)
    np.cumsum(count, out=call_offset[1:])
    callee = np.zeros(int(call_offset[-1]), dtype=np.int32)
    ret = np.zeros(int(call_offset[-1]), dtype=np.int32)
    for k, calls in enumerate(machine.calls):
        for s, edges in calls.items():
            at = int(call_offset[offset[k] + s])
            callee[at:at + len(edges)] = [c for c, _ in edges]
            ret[at:at + len(edges)] = [r for _, r in edges]
    a = len(n)
    kind = np.zeros(a, dtype=np.uint8)
    lo, hi = np.zeros(a, dtype=np.int64), np.zeros(a, dtype=np.int64)
    first, nxt = np.full(a, -1, dtype=np.int32), np.full(a, -1, dtype=np.int32)
    for k in range(a):
        if machine.maps[k] is not None:
            m_lo, m_hi, first[k], nxt[k] = machine.maps[k]
            kind[k], lo[k], hi[k] = MAP, m_lo, -1 if m_hi is None else m_hi
        elif machine.counts[k] is not None:
            c_lo, c_hi = machine.counts[k]
            kind[k], lo[k], hi[k] = COUNTED, c_lo, -1 if c_hi is None else c_hi
    unique = np.zeros(a, dtype=np.uint8)
    unique[sorted(machine.uniques)] = 1
    return CompiledMachine(offset, trans, accepting, np.asarray(machine.starts, dtype=np.int32),
                           np.asarray(machine.productive, dtype=np.uint8), call_offset, callee, ret,
                           kind, lo, hi, first, nxt, unique)


def config_arrays(stacks) -> tuple[np.ndarray, np.ndarray]:
    """A configuration's stacks (tuples of frames, bottom first) -> (frames (F, 3) int32,
    stack_offset (K + 1,) int64), the layout's form."""
    rows = [f if len(f) == 3 else (f[0], f[1], -1) for st in stacks for f in st]
    frames = np.asarray(rows, dtype=np.int32).reshape(-1, 3)
    offset = np.zeros(len(stacks) + 1, dtype=np.int64)
    np.cumsum([len(st) for st in stacks], out=offset[1:])
    return frames, offset
