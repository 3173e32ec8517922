// Thompson's construction on a regex arena (C++17, no Python): nfa.py's _Builder, the same NFA
// state for state in number (so the same NFA limit).

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "nfa.hpp"
#include "regex_ast.hpp"

namespace inferlab::dfa {

struct NfaLimit {};  // the construction passed its max_states

// A charset's UTF-8 encodings as sequences of byte ranges, nfa.charset_sequences': given its
// normalized code point ranges as n pairs, flat (lo, hi, lo, hi ...), each sequence a non-empty
// run of (lo, hi) byte ranges, one per byte. Called once per charset node (the bindings call
// Python's, with the GIL held); may raise, which the construction lets through.
using ByteRanges = std::vector<std::pair<int32_t, int32_t>>;
using CharsetSequences = std::function<std::vector<ByteRanges>(const int64_t* ranges, size_t n)>;

// The NFA of `root` (its final state first, state 0). Raises NfaLimit past max_states states, and
// Unsupported where nfa.py must build it (a call target past the marker digits, nesting past
// MAX_DEPTH).
Nfa thompson_nfa(const Arena& ast, int32_t root, const CharsetSequences& sequences, int64_t max_states);

}  // namespace inferlab::dfa
