// The checks of the mask engine's tables and trie, and what the engine derives from the checked
// tables (mask_tables.hpp: the layouts).

#include "mask_tables.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace inferlab::mask {

void Machine::check() const {
    require(A >= 1, "no automaton");
    require(state_offset.size() == size_t(A) + 1 && state_offset[0] == 0, "state_offset: not (A + 1,) from 0");
    for (int32_t a = 0; a < A; ++a) require(state_offset[a + 1] > state_offset[a], "state_offset: an automaton with no state");
    require(state_offset[A] == S, "state_offset: not ending at S");
    require(trans.size() == size_t(A) && trans_size.size() == size_t(A), "trans: not one table per automaton");
    require(accepting.size() == size_t(S), "accepting: not (S,)");
    for (auto v : {start.size(), productive.size(), kind.size(), lo.size(), hi.size(), map_first.size(),
                   map_next.size(), unique.size()})
        require(v == size_t(A), "a per-automaton array is not (A,)");
    require(call_offset.size() == size_t(S) + 1 && call_offset[0] == 0, "call_offset: not (S + 1,) from 0");
    for (int64_t i = 0; i < S; ++i) require(call_offset[i + 1] >= call_offset[i], "call_offset: decreasing");
    require(size_t(call_offset[S]) == callee.size() && callee.size() == ret.size(), "call table: sizes differ");
    for (int32_t a = 0; a < A; ++a) {
        int32_t n = n_states(a);
        require(start[a] >= 0 && start[a] < n, "start: out of range");
        require(kind[a] <= MAP, "kind: not 0, 1 or 2");
        require(lo[a] >= 0 && hi[a] >= -1 && (hi[a] == -1 || hi[a] >= lo[a]), "lo/hi: out of range");
        require(map_first[a] >= -1 && map_first[a] < A, "map_first: out of range");
        require(kind[a] == MAP ? (map_next[a] >= 0 && map_next[a] < A) : map_next[a] >= -1 && map_next[a] < A,
                "map_next: out of range");
        require(trans[size_t(a)] != nullptr && trans_size[size_t(a)] == size_t(n) * 256,
                "trans: an automaton's table not (its states, 256)");
        for (size_t i = 0; i < size_t(n) * 256; ++i)
            require(trans[size_t(a)][i] >= -1 && trans[size_t(a)][i] < n, "trans: a target out of its automaton");
        for (int64_t i = call_offset[state_offset[a]]; i < call_offset[state_offset[a + 1]]; ++i)
            require(callee[i] >= 0 && callee[i] < A && ret[i] >= 0 && ret[i] < n, "call table: out of range");
    }
}

void Machine::derive() {
    reads.assign(size_t(S), 0);
    for (int32_t a = 0; a < A; ++a)
        for (int32_t s = 0; s < n_states(a); ++s)
            reads[size_t(g(a, s))] = std::any_of(row(a, s), row(a, s) + 256, [](int32_t x) { return x >= 0; });
    for (int deep = 0; deep < 2; ++deep) {
        plain_at[deep].assign(size_t(S), 0);
        for (int32_t a = 0; a < A; ++a)
            for (int32_t s = 0; s < n_states(a); ++s)
                plain_at[deep][size_t(g(a, s))] = kind[a] == PLAIN && !has_calls(a, s) && !(deep && acc(a, s));
    }
    using Bytes = std::array<uint64_t, 4>;
    const Bytes all{~0ull, ~0ull, ~0ull, ~0ull};
    auto row_bytes = [&](int32_t a, int32_t q) {
        Bytes out{0, 0, 0, 0};
        for (int b = 0; b < 256; ++b)
            if (target(a, q, uint8_t(b)) >= 0) out[size_t(b >> 6)] |= 1ull << (b & 63);
        return out;
    };
    auto merge = [](Bytes& x, const Bytes& y) {
        for (size_t i = 0; i < 4; ++i) x[i] |= y[i];
    };
    std::vector<Bytes> first(static_cast<size_t>(A)), follow(static_cast<size_t>(A), Bytes{0, 0, 0, 0});  // StackMachine._first, _follow
    for (int32_t a = 0; a < A; ++a) first[size_t(a)] = may_act(a, start[a]) ? all : row_bytes(a, start[a]);
    for (int32_t c = 0; c < A; ++c)
        for (int32_t q = 0; q < n_states(c); ++q)
            for (int64_t i = call_offset[size_t(g(c, q))]; i < call_offset[size_t(g(c, q)) + 1]; ++i)
                merge(follow[size_t(callee[size_t(i)])], may_act(c, ret[size_t(i)]) ? all : row_bytes(c, ret[size_t(i)]));
    exit_row.assign(size_t(S), -1);
    exit_bytes.clear();
    exit_list.clear();
    frame_dfa.assign(size_t(A), 1);
    for (int32_t a = 0; a < A; ++a) {
        for (int32_t q = 0; q < n_states(a); ++q) {
            if (!may_act(a, q)) continue;
            Bytes b{0, 0, 0, 0};
            if (kind[a] == MAP || (kind[a] == COUNTED && q == start[a])) {
                b = all;
            } else {
                for (int64_t i = call_offset[size_t(g(a, q))]; i < call_offset[size_t(g(a, q)) + 1]; ++i)
                    merge(b, first[size_t(callee[size_t(i)])]);
                if (acc(a, q)) merge(b, follow[size_t(a)]);
            }
            exit_row[size_t(g(a, q))] = int32_t(exit_bytes.size());
            exit_bytes.push_back(b);
            exit_list.emplace_back();
            for (int x = 0; x < 256; ++x)
                if (b[size_t(x >> 6)] >> (x & 63) & 1) exit_list.back().push_back(uint8_t(x));
            if (kind[a] == COUNTED && acc(a, q))
                for (int x = 0; x < 256; ++x)
                    if (target(a, q, uint8_t(x)) >= 0 && target(a, start[a], uint8_t(x)) >= 0) frame_dfa[size_t(a)] = 0;
        }
    }
}

void Trie::check() {
    require(vocab_size >= 0 && eos >= -1 && eos < std::max(vocab_size, 1), "trie: vocab_size/eos out of range");
    require(child_start.size() == size_t(n_nodes) && child_count.size() == size_t(n_nodes) &&
                byte.size() == size_t(n_nodes) && tok_offset.size() == size_t(n_nodes) + 1,
            "trie: node arrays differ in size");
    require(n_roots >= 0 && n_roots <= n_nodes && tok_offset[0] == 0, "trie: roots out of range");
    for (int64_t v = 0; v < n_nodes; ++v) {
        // children lie after their parent (a level's nodes follow the level above): a walk ends
        require(child_count[v] >= 0 && (child_count[v] == 0 ||
                (child_start[v] > v && child_start[v] + child_count[v] <= n_nodes)), "trie: children out of range");
        require(tok_offset[v + 1] >= tok_offset[v], "trie: tok_offset decreasing");
    }
    require(size_t(tok_offset[n_nodes]) == tokens.size(), "trie: tokens size");
    // a tree: every node below the roots is one node's child, at most MAX_TRIE_DEPTH deep (the
    // walk recurses once per byte of a token)
    std::vector<int32_t> depth(size_t(n_nodes), -1);
    parent.assign(size_t(n_nodes), -1);
    for (int64_t v = 0; v < n_roots; ++v) depth[v] = 0;
    this->depth = n_roots ? 1 : 0;
    for (int64_t v = 0; v < n_nodes; ++v) {
        require(depth[v] >= 0, "trie: a node that is no root and no node's child, or a child before its parent");
        for (int64_t c = child_start[v]; c < child_start[v] + child_count[v]; ++c) {
            require(depth[c] == -1, "trie: a node with two parents");
            require(c == child_start[v] || byte[c] > byte[c - 1], "trie: a node's children not sorted by byte, one per byte");
            depth[c] = depth[v] + 1;
            parent[c] = v;
            this->depth = std::max(this->depth, depth[c] + 1);
            require(depth[c] <= MAX_TRIE_DEPTH, "trie: deeper than MAX_TRIE_DEPTH bytes");
        }
    }
    for (int32_t t : tokens) require(t >= 0 && t < vocab_size, "trie: a token out of the vocabulary");
}

}  // namespace inferlab::mask
