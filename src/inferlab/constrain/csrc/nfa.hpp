// A Thompson NFA over bytes as flat arrays (C++17, no Python): nfa.py's NFA, state for state.
//
// Layout: n states; state s's epsilon targets are eps[eps_off[s] .. eps_off[s + 1]), its byte
// edges (lo[e], hi[e], tgt[e]) for e in [edge_off[s], edge_off[s + 1]); one start, one final
// state. Built by nfa_builder.hpp from a regex, or by the bindings from nfa.py's lists.

#pragma once

#include <cstdint>
#include <vector>

namespace inferlab::dfa {

struct Nfa {
    int32_t n = 0, start = 0, final_ = 0;
    std::vector<int64_t> eps_off;   // (n + 1,) CSR of epsilon targets
    std::vector<int32_t> eps;
    std::vector<int64_t> edge_off;  // (n + 1,) CSR of byte edges
    std::vector<uint8_t> lo, hi;
    std::vector<int32_t> tgt;
};

}  // namespace inferlab::dfa
