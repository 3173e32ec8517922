// The mask engine's inputs (C++17, no Python): a stack machine's tables and a vocabulary's trie,
// copied from the flat arrays of the seam and checked once, so that no walk reads out of bounds.
//
// Layouts (docs/native-engine.md, "The seam"; the bindings, _native.cpp, copy them in, but for
// the transition tables, read in place):
// - Machine: constrain/tables.py's CompiledMachine, A automata and S states in all: state_offset
//   (A + 1,), trans: per automaton a (n_states(a) * 256,) local targets (-1 none), accepting (S,),
//   start (A,), productive (A,), call_offset (S + 1,) over callee/ret (C,),
//   kind/lo/hi/map_first/map_next/unique (A,);
// - Trie: native.py's trie_arrays, N nodes level after level: child_start/child_count/byte (N,),
//   tok_offset (N + 1,) over tokens (T,), the first n_roots nodes the roots;
// - a configuration (Config): its stacks, each its frames (automaton, local state, count; -1 for
//   a plain automaton) from the bottom.
// check() raises Bad, whose message the bindings raise as ValueError.

#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "split_cache.hpp"

namespace inferlab::mask {

constexpr uint8_t PLAIN = 0, COUNTED = 1, MAP = 2;
constexpr int32_t MAX_TRIE_DEPTH = 1 << 14;  // bytes of the longest token

struct Frame {
    int32_t a, s, n;  // automaton, local state, count (-1: a plain automaton's frame)
    bool operator<(const Frame& o) const {
        if (a != o.a) return a < o.a;
        if (s != o.s) return s < o.s;
        return n < o.n;
    }
    bool operator==(const Frame& o) const { return a == o.a && s == o.s && n == o.n; }
};
using Stack = std::vector<Frame>;  // bottom first
using Config = std::vector<Stack>;  // sorted, distinct

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void require(bool ok, const char* what) {  // (a literal: no string built on the checks' paths)
    if (!ok) throw Bad(what);
}

struct Machine {
    int32_t A = 0;
    std::vector<uint8_t> plain_at[2];  // [deep][global state]: plain(a, s, deep), precomputed
    int64_t S = 0;
    std::vector<int64_t> state_offset, call_offset, lo, hi;
    std::vector<int32_t> start, callee, ret, map_first, map_next;
    // per automaton, its (n_states(a) * 256,) local targets, read in place: the bindings hold the
    // buffers as long as the engine (the automata's text tables are shared by every machine over
    // them; a copy, and the concatenation it took, cost two of them in memory and page faults)
    std::vector<const int32_t*> trans;
    std::vector<size_t> trans_size;  // each table's entries (checked: n_states(a) * 256)
    std::vector<uint8_t> accepting, productive, kind, unique, reads;
    // StackMachine.exits, over global states: the row of the bytes that may be read right after a
    // push or a pop at each state (-1: none may happen there), and whether a counted automaton's
    // frame table is a DFA (StackMachine.frame_table: no accepting state reads a byte its start reads)
    std::vector<int32_t> exit_row;
    std::vector<std::array<uint64_t, 4>> exit_bytes;
    std::vector<std::vector<uint8_t>> exit_list;  // each exit row's bytes, in order
    std::vector<uint8_t> frame_dfa;

    int32_t n_states(int32_t a) const { return int32_t(state_offset[a + 1] - state_offset[a]); }
    int64_t g(int32_t a, int32_t s) const { return state_offset[a] + s; }
    const int32_t* row(int32_t a, int32_t s) const { return trans[size_t(a)] + size_t(s) * 256; }
    int32_t target(int32_t a, int32_t s, uint8_t b) const { return row(a, s)[b]; }
    bool acc(int32_t a, int32_t s) const { return accepting[g(a, s)] != 0; }
    bool has_calls(int32_t a, int32_t s) const { return call_offset[g(a, s) + 1] > call_offset[g(a, s)]; }
    bool numbered(int32_t a) const { return kind[a] != PLAIN; }
    // closure's fast path: a plain automaton's state that can neither push nor pop
    bool plain(int32_t a, int32_t s, bool deep) const { return plain_at[deep][g(a, s)] != 0; }
    bool live_top(const Frame& f) const { return f.n != -1 || acc(f.a, f.s) || reads[g(f.a, f.s)]; }
    bool may_act(int32_t a, int32_t q) const { return has_calls(a, q) || acc(a, q) || (numbered(a) && q == start[a]); }
    bool exit_reads(int64_t gq, uint8_t b) const {
        const int32_t r = exit_row[size_t(gq)];
        return r >= 0 && (exit_bytes[size_t(r)][b >> 6] >> (b & 63) & 1);
    }

    void check() const;
    void derive();  // reads, plain_at, exit_row/exit_bytes, frame_dfa: from the checked tables
};

struct Trie {
    int64_t n_nodes = 0, n_roots = 0;
    int32_t vocab_size = 0, eos = -1, depth = 0;  // depth: bytes of the longest token
    std::vector<int64_t> child_start, tok_offset, parent;  // parent: -1 for a root (check() fills it)
    std::vector<int32_t> child_count, tokens;
    std::vector<uint8_t> byte;
    mutable SplitCache cache;
    void check();
};

}  // namespace inferlab::mask
