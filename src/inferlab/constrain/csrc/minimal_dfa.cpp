// NFA -> minimal DFA (minimal_dfa.hpp): byte classes, determinize, live states, Hopcroft, the
// canonical numbering.

#include "minimal_dfa.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vec_hash.hpp"

namespace inferlab::dfa {

namespace {

using SetIds = std::unordered_map<std::vector<int32_t>, int32_t, VecHash>;

// dfa.byte_classes: bytes no edge tells apart share a class.
int32_t byte_classes(const Nfa& a, int32_t* cls) {
    bool cut[257] = {};
    cut[0] = true;
    for (size_t e = 0; e < a.lo.size(); ++e) {
        cut[a.lo[e]] = true;
        cut[a.hi[e] + 1] = true;
    }
    int32_t c = -1;
    for (int b = 0; b < 256; ++b) {
        if (cut[b]) ++c;
        cls[b] = c;
    }
    return c + 1;
}

// dfa._determinize: rows (S, C) over classes, accepting (S,); false past max_states or
// MAX_SUBSET_ENTRIES.
bool determinize(const Nfa& a, const int32_t* cls, int32_t nc, int64_t max_states, std::vector<int32_t>& rows,
                 std::vector<uint8_t>& accepting) {
    // per NFA state: its (class, target) pairs, one per class its edges read
    std::vector<int64_t> ce_off(a.n + 1, 0);
    std::vector<std::pair<int32_t, int32_t>> ce;
    for (int32_t s = 0; s < a.n; ++s) {
        for (int64_t e = a.edge_off[s]; e < a.edge_off[s + 1]; ++e)
            for (int32_t c = cls[a.lo[e]]; c <= cls[a.hi[e]]; ++c) ce.emplace_back(c, a.tgt[e]);
        ce_off[s + 1] = static_cast<int64_t>(ce.size());
    }
    // epsilon closures, once per NFA state: the states with byte edges (or final) reachable,
    // sorted; all in one flat array (a closure per state in a vector of its own was a third of
    // a large pattern's allocations)
    std::vector<int32_t> clo;                          // the closures, one after another
    std::vector<int64_t> clo_at(a.n, -1), clo_len(a.n, 0);
    std::vector<int32_t> stamp(a.n, -1), dfs;
    int32_t round = 0;
    auto eps_closure = [&](int32_t s) -> std::pair<const int32_t*, const int32_t*> {
        if (clo_at[s] < 0) {
            int64_t at = static_cast<int64_t>(clo.size());
            ++round;
            dfs.assign(1, s);
            stamp[s] = round;
            while (!dfs.empty()) {
                int32_t x = dfs.back();
                dfs.pop_back();
                if (ce_off[x + 1] > ce_off[x] || x == a.final_) clo.push_back(x);
                for (int64_t j = a.eps_off[x]; j < a.eps_off[x + 1]; ++j) {
                    int32_t t = a.eps[j];
                    if (stamp[t] != round) {
                        stamp[t] = round;
                        dfs.push_back(t);
                    }
                }
            }
            std::sort(clo.begin() + at, clo.end());
            clo_at[s] = at;
            clo_len[s] = static_cast<int64_t>(clo.size()) - at;
        }
        const int32_t* p = clo.data() + clo_at[s];
        return {p, p + clo_len[s]};
    };
    SetIds ids;
    std::vector<const std::vector<int32_t>*> sets;
    bool over = false;
    int64_t entries = 0;  // NFA states summed over sets
    auto state_id = [&](std::vector<int32_t>&& key) -> int32_t {
        auto it = ids.find(key);
        if (it != ids.end()) return it->second;
        entries += static_cast<int64_t>(key.size());
        if (static_cast<int64_t>(sets.size()) >= max_states || entries > MAX_SUBSET_ENTRIES) {
            over = true;
            return -1;
        }
        int32_t id = static_cast<int32_t>(sets.size());
        bool acc = std::binary_search(key.begin(), key.end(), a.final_);
        auto ins = ids.emplace(std::move(key), id).first;
        sets.push_back(&ins->first);
        accepting.push_back(acc);
        return id;
    };
    {
        auto [b, e] = eps_closure(a.start);
        state_id(std::vector<int32_t>(b, e));
    }
    SetIds moves;  // a class's (sorted) NFA targets -> the DFA state of their closure
    std::vector<std::vector<int32_t>> bucket(nc);
    std::vector<int32_t> touched, merged;
    for (size_t i = 0; i < sets.size(); ++i) {
        for (int32_t s : *sets[i])
            for (int64_t j = ce_off[s]; j < ce_off[s + 1]; ++j) {
                auto [c, t] = ce[j];
                if (bucket[c].empty()) touched.push_back(c);
                bucket[c].push_back(t);
            }
        size_t base = rows.size();
        rows.resize(base + nc, -1);
        for (int32_t c : touched) {
            std::vector<int32_t>& ts = bucket[c];
            std::sort(ts.begin(), ts.end());
            ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
            auto it = moves.find(ts);
            int32_t sid;
            if (it != moves.end()) {
                sid = it->second;
            } else {
                merged.clear();
                for (int32_t t : ts) {
                    auto [b, e] = eps_closure(t);  // (pointers into clo: read before the next closure grows it)
                    merged.insert(merged.end(), b, e);
                }
                std::sort(merged.begin(), merged.end());
                merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
                sid = state_id(std::vector<int32_t>(merged));
                if (over) return false;
                moves.emplace(ts, sid);
            }
            rows[base + c] = sid;
            ts.clear();
        }
        touched.clear();
    }
    return true;
}

// dfa._trim: the states from which an accepting state is reachable.
std::vector<uint8_t> live_states(const std::vector<int32_t>& rows, const std::vector<uint8_t>& accepting, int32_t nc) {
    size_t n = accepting.size();
    std::vector<int64_t> off(n + 1, 0);
    for (int32_t t : rows)
        if (t >= 0) ++off[t + 1];
    for (size_t i = 0; i < n; ++i) off[i + 1] += off[i];
    std::vector<int32_t> pred(off[n]);
    std::vector<int64_t> fill(off.begin(), off.end() - 1);
    for (size_t s = 0; s < n; ++s)
        for (int32_t c = 0; c < nc; ++c) {
            int32_t t = rows[s * nc + c];
            if (t >= 0) pred[fill[t]++] = static_cast<int32_t>(s);
        }
    std::vector<uint8_t> live(accepting);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < n; ++s)
        if (live[s]) stack.push_back(static_cast<int32_t>(s));
    while (!stack.empty()) {
        int32_t t = stack.back();
        stack.pop_back();
        for (int64_t j = off[t]; j < off[t + 1]; ++j)
            if (!live[pred[j]]) {
                live[pred[j]] = 1;
                stack.push_back(pred[j]);
            }
    }
    return live;
}

// dfa._hopcroft on a partial, trimmed DFA (every initial block in the worklist: Valmari &
// Lehtinen, 2008): the block of each state, as a refinable partition (a block's states are a
// range of `elems`; the marked ones are moved to its front).
std::vector<int32_t> hopcroft(const std::vector<int32_t>& rows, const std::vector<uint8_t>& accepting, int32_t nc) {
    int32_t n = static_cast<int32_t>(accepting.size());
    // incoming edges by target: (class, source)
    std::vector<int64_t> off(n + 1, 0);
    for (int32_t t : rows)
        if (t >= 0) ++off[t + 1];
    for (int32_t i = 0; i < n; ++i) off[i + 1] += off[i];
    std::vector<std::pair<int32_t, int32_t>> inc(off[n]);
    std::vector<int64_t> fill(off.begin(), off.end() - 1);
    for (int32_t s = 0; s < n; ++s)
        for (int32_t c = 0; c < nc; ++c) {
            int32_t t = rows[static_cast<size_t>(s) * nc + c];
            if (t >= 0) inc[fill[t]++] = {c, s};
        }
    std::vector<int32_t> elems, loc(n), blk(n), first, end, mid;
    elems.reserve(n);
    for (int pass = 0; pass < 2; ++pass) {  // the accepting states, then the others
        int32_t b = static_cast<int32_t>(first.size());
        int32_t from = static_cast<int32_t>(elems.size());
        for (int32_t s = 0; s < n; ++s)
            if ((accepting[s] != 0) == (pass == 0)) {
                loc[s] = static_cast<int32_t>(elems.size());
                blk[s] = b;
                elems.push_back(s);
            }
        if (static_cast<int32_t>(elems.size()) > from) {
            first.push_back(from);
            end.push_back(static_cast<int32_t>(elems.size()));
            mid.push_back(from);
        }
    }
    std::vector<int32_t> work;
    std::vector<uint8_t> in_work(first.size(), 1);
    for (size_t b = 0; b < first.size(); ++b) work.push_back(static_cast<int32_t>(b));
    std::vector<std::vector<int32_t>> by_class(nc);
    std::vector<int32_t> classes, blocks;
    while (!work.empty()) {
        int32_t splitter = work.back();
        work.pop_back();
        in_work[splitter] = 0;
        for (int32_t i = first[splitter]; i < end[splitter]; ++i) {
            int32_t t = elems[i];
            for (int64_t j = off[t]; j < off[t + 1]; ++j) {
                auto [c, s] = inc[j];
                if (by_class[c].empty()) classes.push_back(c);
                by_class[c].push_back(s);
            }
        }
        for (int32_t c : classes) {
            for (int32_t s : by_class[c]) {  // distinct: one edge per (source, class)
                int32_t y = blk[s];
                if (mid[y] == first[y]) blocks.push_back(y);
                int32_t at = loc[s], to = mid[y]++;
                int32_t other = elems[to];
                elems[to] = s;
                loc[s] = to;
                elems[at] = other;
                loc[other] = at;
            }
            for (int32_t y : blocks) {
                if (mid[y] == end[y]) {  // all of y moves into the splitter: no split
                    mid[y] = first[y];
                    continue;
                }
                int32_t nb = static_cast<int32_t>(first.size());
                first.push_back(first[y]);
                end.push_back(mid[y]);
                mid.push_back(first[y]);
                in_work.push_back(0);
                first[y] = mid[y];
                for (int32_t i = first[nb]; i < end[nb]; ++i) blk[elems[i]] = nb;
                // both halves pending if y was; else the smaller half suffices (Hopcroft)
                int32_t pick = (in_work[y] || end[nb] - first[nb] <= end[y] - first[y]) ? nb : y;
                if (!in_work[pick]) {
                    in_work[pick] = 1;
                    work.push_back(pick);
                }
            }
            blocks.clear();
            by_class[c].clear();
        }
        classes.clear();
    }
    return blk;
}

}  // namespace

Result minimal_dfa(const Nfa& a, int64_t max_states) {
    Result r;
    int32_t cls[256];
    int32_t nc = byte_classes(a, cls);
    std::vector<int32_t> rows;
    std::vector<uint8_t> accepting;
    if (!determinize(a, cls, nc, max_states, rows, accepting)) {
        r.limit = true;
        return r;
    }
    std::vector<uint8_t> live = live_states(rows, accepting, nc);
    if (!live[0]) {  // the empty language: one state, no transitions, not accepting
        r.states = 1;
        r.trans.assign(256, -1);
        r.accepting.assign(1, 0);
        return r;
    }
    // the live states renumbered; edges into dead states become -1
    size_t n0 = accepting.size();
    std::vector<int32_t> new_id(n0, -1);
    int32_t n = 0;
    for (size_t s = 0; s < n0; ++s)
        if (live[s]) new_id[s] = n++;
    std::vector<int32_t> lrows(static_cast<size_t>(n) * nc);
    std::vector<uint8_t> lacc(n);
    for (size_t s = 0; s < n0; ++s) {
        if (!live[s]) continue;
        int32_t i = new_id[s];
        lacc[i] = accepting[s];
        for (int32_t c = 0; c < nc; ++c) {
            int32_t t = rows[s * nc + c];
            lrows[static_cast<size_t>(i) * nc + c] = (t >= 0 && live[t]) ? new_id[t] : -1;
        }
    }
    std::vector<int32_t> blk = hopcroft(lrows, lacc, nc);
    // dfa._minimize's numbering: blocks in order of discovery from the start (a stack of states)
    int32_t nb = *std::max_element(blk.begin(), blk.end()) + 1;
    std::vector<int32_t> order(nb, -1), rep{0}, stack{0};
    order[blk[0]] = 0;
    int32_t k = 1;
    while (!stack.empty()) {
        int32_t s = stack.back();
        stack.pop_back();
        for (int32_t c = 0; c < nc; ++c) {
            int32_t t = lrows[static_cast<size_t>(s) * nc + c];
            if (t >= 0 && order[blk[t]] < 0) {
                order[blk[t]] = k++;
                rep.push_back(t);
                stack.push_back(t);
            }
        }
    }
    r.states = k;
    r.trans.resize(static_cast<size_t>(k) * 256);
    r.accepting.resize(k);
    for (int32_t i = 0; i < k; ++i) {
        const int32_t* row = &lrows[static_cast<size_t>(rep[i]) * nc];
        r.accepting[i] = lacc[rep[i]];
        int32_t* out = &r.trans[static_cast<size_t>(i) * 256];
        for (int b = 0; b < 256; ++b) {
            int32_t t = row[cls[b]];
            out[b] = t >= 0 ? order[blk[t]] : -1;
        }
    }
    return r;
}

}  // namespace inferlab::dfa
