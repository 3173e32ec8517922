// An NFA's minimal byte DFA (C++17, no Python), the same arrays as dfa.py's Python construction
// (its reference: tests/test_dfa_native.py compares the two array for array): subset construction
// over byte classes, trimming to the live states, Hopcroft's partition refinement, and the
// canonical numbering of dfa._minimize (blocks numbered in order of first discovery from the
// start, a stack of states, classes in order), which depends only on the minimal DFA, so any
// correct refinement gives the same arrays.
//
// Layout of the answer: S states, start state 0; trans (S * 256,) int32, row s the targets of
// bytes 0..255 (-1 none); accepting (S,) bytes.

#pragma once

#include <cstdint>
#include <vector>

#include "nfa.hpp"

namespace inferlab::dfa {

// The minimal DFA: (S, 256) transitions, -1 none; accepting (S,); start 0. limit: the subset
// construction passed max_states (no arrays then).
struct Result {
    bool limit = false;
    int32_t states = 0;
    std::vector<int32_t> trans;
    std::vector<uint8_t> accepting;
};

// The subset construction's memory bound, dfa.MAX_SUBSET_ENTRIES's value (the module exports it;
// tests/test_dfa_native.py checks the two agree): the NFA states summed over the DFA states' sets.
// max_states alone bounds the rows, not the sets (100,000 states of 50,000 NFA states each is 20 GB),
// and the construction runs without the GIL, where a Python time bound cannot stop it.
constexpr int64_t MAX_SUBSET_ENTRIES = int64_t{1} << 26;

// The minimal DFA of `a`, or no arrays and `limit` past max_states DFA states or MAX_SUBSET_ENTRIES.
// Raises std::bad_alloc where memory runs out.
Result minimal_dfa(const Nfa& a, int64_t max_states);

}  // namespace inferlab::dfa
