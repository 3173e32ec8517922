// regex.py's AST as a flat arena of interned nodes (C++17, no Python), and the NFA size estimate
// computed on it before any NFA.

#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vec_hash.hpp"

namespace inferlab::dfa {

struct Unsupported {};  // (what the native compile path leaves to the Python side: a pattern it does not
                        // parse, an error to report in regex.py's words, a node or depth past its limits)

// regex.py's AST as a flat arena, read from either front end: the Python AST (regex_dfa, in the
// bindings) or the pattern string itself (pattern_dfa, regex_parser.hpp). A node is its key: its
// kind, then the ranges (lo, hi ...) of a CharSet, the items of a Concat or Alt, (item, min, max;
// -1 for none) of a Repeat, the target of a Call. Nodes are interned by key, so a node's number
// is its structural id: equal subtrees are one node, however they were read.
enum Kind : int64_t { CHARSET = 0, CONCAT = 1, ALT = 2, REPEAT = 3, CALL = 4 };
constexpr int MAX_DEPTH = 1000;  // AST levels read or built (recursion; regex.py allows 4,000 groups)

struct Arena {
    std::vector<std::vector<int64_t>> keys;
    std::unordered_map<std::vector<int64_t>, int32_t, VecHash> ids;

    int32_t intern(std::vector<int64_t>&& key);  // -> the node of `key`, added where new
    int64_t kind(int32_t id) const { return keys[id][0]; }
};

// schema_bench's NFA size estimate of an AST (regex.py's tree, a shared subtree counted at each
// use): a counted repeat multiplies its item. Saturates past 2^62 (only compared with a limit).
// memo: (nodes,) -1 where not yet computed.
int64_t estimate(const Arena& ast, int32_t id, std::vector<int64_t>& memo);

}  // namespace inferlab::dfa
