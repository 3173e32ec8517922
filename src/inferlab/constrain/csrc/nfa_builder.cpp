// Thompson's construction, run backwards (nfa_builder.hpp).

#include "nfa_builder.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferlab::dfa {

namespace {

// nfa.py's _Builder on the arena: Thompson's construction run backwards, a fragment built once
// per (node, continuation). The same NFA as nfa.py's, state for state in number (so the same NFA
// limit). Charset byte sequences are the caller's (CharsetSequences), asked once per charset node.
constexpr int CALL_MARK = 0xF8, CALL_BASE = 7, CALL_DIGITS = 5;

struct NfaBuilder {
    const Arena& ast;
    const CharsetSequences& sequences;
    int64_t max_states;
    int depth = 0;
    std::vector<std::vector<int32_t>> eps;
    std::vector<std::vector<std::array<int32_t, 3>>> edges;  // (lo, hi, target)
    std::unordered_map<uint64_t, int32_t> built;  // (node, continuation) -> entry
    std::unordered_map<int32_t, std::vector<ByteRanges>> seqs;  // charset -> byte-range sequences

    NfaBuilder(const Arena& a, const CharsetSequences& seq, int64_t max_nfa) : ast(a), sequences(seq), max_states(max_nfa) {}

    int32_t state() {
        if (static_cast<int64_t>(eps.size()) >= max_states) throw NfaLimit();
        eps.emplace_back();
        edges.emplace_back();
        return static_cast<int32_t>(eps.size() - 1);
    }

    int32_t build(int32_t node, int32_t end) {
        struct Level {  // (the C stack: deeper ASTs are left to nfa.py)
            int& d;
            explicit Level(int& depth) : d(depth) {
                if (++d > MAX_DEPTH) throw Unsupported();
            }
            ~Level() { --d; }
        } level(depth);
        const auto& key = ast.keys[node];
        if (key[0] == CONCAT) {
            for (size_t k = key.size() - 1; k >= 1; --k) end = build(static_cast<int32_t>(key[k]), end);
            return end;
        }
        uint64_t memo = (static_cast<uint64_t>(node) << 32) | static_cast<uint32_t>(end);
        auto it = built.find(memo);
        if (it != built.end()) return it->second;
        int32_t entry = build_new(node, end);
        built.emplace(memo, entry);
        return entry;
    }

    int32_t build_new(int32_t node, int32_t end) {
        const auto& key = ast.keys[node];
        if (key[0] == CHARSET) return charset(node, end);
        if (key[0] == ALT) {
            int32_t entry = state();
            std::vector<int32_t> outs;
            for (size_t k = 1; k < key.size(); ++k) {
                int32_t e = build(static_cast<int32_t>(key[k]), end);
                if (std::find(outs.begin(), outs.end(), e) == outs.end()) outs.push_back(e);
            }
            eps[entry] = std::move(outs);
            return entry;
        }
        if (key[0] == REPEAT) return repeat(node, end);
        int64_t target = key[1];
        int64_t limit = 1;
        for (int i = 0; i < CALL_DIGITS; ++i) limit *= CALL_BASE;
        if (target < 0 || target >= limit) throw Unsupported();
        int marks[1 + CALL_DIGITS];
        marks[0] = CALL_MARK;
        for (int i = 0; i < CALL_DIGITS; ++i) {
            marks[1 + i] = CALL_MARK + 1 + static_cast<int>(target % CALL_BASE);
            target /= CALL_BASE;
        }
        for (int i = CALL_DIGITS; i >= 0; --i) {
            int32_t prev = state();
            edges[prev].push_back({marks[i], marks[i], end});
            end = prev;
        }
        return end;
    }

    const std::vector<ByteRanges>& sequences_of(int32_t node) {
        auto it = seqs.find(node);
        if (it != seqs.end()) return it->second;
        const auto& key = ast.keys[node];
        return seqs.emplace(node, sequences(key.data() + 1, (key.size() - 1) / 2)).first->second;
    }

    int32_t charset(int32_t node, int32_t end) {
        const auto& all = sequences_of(node);
        int32_t start = state();
        std::map<std::vector<std::pair<int32_t, int32_t>>, int32_t> prefix_state;  // a trie over the sequences
        std::vector<std::pair<int32_t, int32_t>> key;
        for (const auto& seq : all) {
            int32_t cur = start;
            key.clear();
            for (size_t k = 0; k < seq.size(); ++k) {
                auto [lo, hi] = seq[k];
                if (k + 1 == seq.size()) {
                    edges[cur].push_back({lo, hi, end});
                    break;
                }
                key.push_back(seq[k]);
                auto it = prefix_state.find(key);
                int32_t nxt;
                if (it == prefix_state.end()) {
                    nxt = state();
                    prefix_state.emplace(key, nxt);
                    edges[cur].push_back({lo, hi, nxt});
                } else {
                    nxt = it->second;
                }
                cur = nxt;
            }
        }
        return start;
    }

    int32_t repeat(int32_t node, int32_t end) {
        const auto& key = ast.keys[node];
        int32_t item = static_cast<int32_t>(key[1]);
        int64_t lo = key[2], hi = key[3];
        int32_t cur;
        if (hi < 0) {  // a Kleene star, looping through a state of its own
            cur = state();
            int32_t body = build(item, cur);
            eps[cur] = {body, end};
        } else {  // x{0,k} as nested optionals: every exit goes to `end`
            cur = end;
            for (int64_t i = 0; i < hi - lo; ++i) {
                int32_t opt = state();
                int32_t body = build(item, cur);
                eps[opt] = {body, end};
                cur = opt;
            }
        }
        for (int64_t i = 0; i < lo; ++i) cur = build(item, cur);
        return cur;
    }

    Nfa nfa(int32_t start, int32_t final_) const {
        Nfa a;
        a.n = static_cast<int32_t>(eps.size());
        a.start = start;
        a.final_ = final_;
        a.eps_off.assign(a.n + 1, 0);
        a.edge_off.assign(a.n + 1, 0);
        for (int32_t s = 0; s < a.n; ++s) {
            a.eps.insert(a.eps.end(), eps[s].begin(), eps[s].end());
            a.eps_off[s + 1] = static_cast<int64_t>(a.eps.size());
            for (const auto& e : edges[s]) {
                a.lo.push_back(static_cast<uint8_t>(e[0]));
                a.hi.push_back(static_cast<uint8_t>(e[1]));
                a.tgt.push_back(e[2]);
            }
            a.edge_off[s + 1] = static_cast<int64_t>(a.tgt.size());
        }
        return a;
    }
};

}  // namespace

Nfa thompson_nfa(const Arena& ast, int32_t root, const CharsetSequences& sequences, int64_t max_states) {
    NfaBuilder b(ast, sequences, max_states);
    int32_t final_ = b.state();
    int32_t start = b.build(root, final_);
    return b.nfa(start, final_);
}

}  // namespace inferlab::dfa
