// The compile path's native part (C++17): a regex of regex.py's dialect -> its Thompson NFA
// (nfa.py's, state for state) -> its minimal byte DFA, the same result as dfa.py's Python
// construction (its reference: tests/test_dfa_native.py compares the two array for array).
//
// In: the pattern string itself (pattern_dfa: parsed here as regex.parse would, into a flat arena
// of interned nodes; whatever the parser does not take is left to regex.parse, whose errors name
// it), or regex.py's AST (regex_dfa), or nfa.py's lists (minimal_dfa). Out: the minimal DFA as two
// flat arrays, (S * 256,) int32 transitions and (S,) accepting bytes, start state 0. In between:
// subset construction over byte classes, trimming to the live states, Hopcroft's partition
// refinement, and the canonical numbering of dfa._minimize (blocks numbered in order of first
// discovery from the start, a stack of states, classes in order), which depends only on the
// minimal DFA, so any correct refinement gives the same arrays.
//
// Apart from the mask engine (_native.cpp) so that each builds and evolves alone; the plain C API,
// no dependency beyond a C++17 compiler and Python's headers. Inputs are read with the GIL held
// (nfa.charset_sequences is called back once per character class), then released for the
// construction.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <array>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct VecHash {  // FNV-1a over a vector's ints
    template <typename T>
    size_t operator()(const std::vector<T>& v) const noexcept {
        uint64_t h = 1469598103934665603ull ^ v.size();
        for (T x : v) {
            h ^= static_cast<uint64_t>(x);
            h *= 1099511628211ull;
        }
        return static_cast<size_t>(h ^ (h >> 29));
    }
};
using SetIds = std::unordered_map<std::vector<int32_t>, int32_t, VecHash>;

struct Nfa {
    int32_t n = 0, start = 0, final_ = 0;
    std::vector<int64_t> eps_off;   // (n + 1,) CSR of epsilon targets
    std::vector<int32_t> eps;
    std::vector<int64_t> edge_off;  // (n + 1,) CSR of byte edges
    std::vector<uint8_t> lo, hi;
    std::vector<int32_t> tgt;
};

// The minimal DFA: (S, 256) transitions, -1 none; accepting (S,); start 0. limit: the subset
// construction passed max_states (no arrays then).
struct Result {
    bool limit = false;
    int32_t states = 0;
    std::vector<int32_t> trans;
    std::vector<uint8_t> accepting;
};

long as_index(PyObject* o, long bound, const char* what) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) throw Bad(std::string(what) + " is not an int");
    if (v < 0 || v >= bound) throw Bad(std::string(what) + " out of range");
    return v;
}

Nfa read_nfa(PyObject* eps, PyObject* edges, long start, long final_) {
    if (!PyList_Check(eps) || !PyList_Check(edges) || PyList_GET_SIZE(eps) != PyList_GET_SIZE(edges))
        throw Bad("eps and edges must be lists of one length");
    Nfa a;
    Py_ssize_t n = PyList_GET_SIZE(eps);
    if (n <= 0 || n >= INT32_MAX) throw Bad("NFA size out of range");
    a.n = static_cast<int32_t>(n);
    if (start < 0 || start >= n || final_ < 0 || final_ >= n) throw Bad("start or final state out of range");
    a.start = static_cast<int32_t>(start);
    a.final_ = static_cast<int32_t>(final_);
    a.eps_off.assign(n + 1, 0);
    a.edge_off.assign(n + 1, 0);
    for (Py_ssize_t s = 0; s < n; ++s) {
        PyObject* e = PyList_GET_ITEM(eps, s);
        if (!PyList_Check(e)) throw Bad("eps[s] must be a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(e); ++j)
            a.eps.push_back(static_cast<int32_t>(as_index(PyList_GET_ITEM(e, j), n, "an epsilon target")));
        a.eps_off[s + 1] = static_cast<int64_t>(a.eps.size());
        PyObject* g = PyList_GET_ITEM(edges, s);
        if (!PyList_Check(g)) throw Bad("edges[s] must be a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(g); ++j) {
            PyObject* t = PyList_GET_ITEM(g, j);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) throw Bad("an edge must be a tuple (lo, hi, target)");
            long lo = as_index(PyTuple_GET_ITEM(t, 0), 256, "an edge's lo byte");
            long hi = as_index(PyTuple_GET_ITEM(t, 1), 256, "an edge's hi byte");
            if (hi < lo) throw Bad("an edge's hi byte is below its lo byte");
            a.lo.push_back(static_cast<uint8_t>(lo));
            a.hi.push_back(static_cast<uint8_t>(hi));
            a.tgt.push_back(static_cast<int32_t>(as_index(PyTuple_GET_ITEM(t, 2), n, "an edge's target")));
        }
        a.edge_off[s + 1] = static_cast<int64_t>(a.tgt.size());
    }
    return a;
}

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

// The subset construction's memory bound, dfa.MAX_SUBSET_ENTRIES's value (the module exports it;
// tests/test_dfa_native.py checks the two agree): the NFA states summed over the DFA states' sets.
// max_states alone bounds the rows, not the sets (100,000 states of 50,000 NFA states each is 20 GB),
// and the construction runs without the GIL, where a Python time bound cannot stop it.
constexpr int64_t MAX_SUBSET_ENTRIES = int64_t{1} << 26;

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
    // epsilon closures, once per NFA state: the states with byte edges (or final) reachable
    std::vector<std::vector<int32_t>> memo(a.n);
    std::vector<uint8_t> done(a.n, 0);
    std::vector<int32_t> stamp(a.n, -1), dfs;
    int32_t round = 0;
    auto eps_closure = [&](int32_t s) -> const std::vector<int32_t>& {
        if (done[s]) return memo[s];
        std::vector<int32_t>& out = memo[s];
        ++round;
        dfs.assign(1, s);
        stamp[s] = round;
        while (!dfs.empty()) {
            int32_t x = dfs.back();
            dfs.pop_back();
            if (ce_off[x + 1] > ce_off[x] || x == a.final_) out.push_back(x);
            for (int64_t j = a.eps_off[x]; j < a.eps_off[x + 1]; ++j) {
                int32_t t = a.eps[j];
                if (stamp[t] != round) {
                    stamp[t] = round;
                    dfs.push_back(t);
                }
            }
        }
        std::sort(out.begin(), out.end());
        done[s] = 1;
        return out;
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
    state_id(std::vector<int32_t>(eps_closure(a.start)));
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
                    const std::vector<int32_t>& cl = eps_closure(t);
                    merged.insert(merged.end(), cl.begin(), cl.end());
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


// regex.py's AST as a flat arena, read from either front end below: the Python AST (regex_dfa) or
// the pattern string itself (pattern_dfa, this file's parser of regex.py's dialect). A node is its
// key: its kind, then the ranges (lo, hi ...) of a CharSet, the items of a Concat or Alt, (item,
// min, max; -1 for none) of a Repeat, the target of a Call. Nodes are interned by key, so a
// node's number is its structural id: equal subtrees are one node, however they were read.
struct NfaLimit {};
struct Unsupported {};  // (what this file leaves to the Python side: a pattern it does not parse,
                        // an error to report in regex.py's words, a node or depth past its limits)

enum Kind : int64_t { CHARSET = 0, CONCAT = 1, ALT = 2, REPEAT = 3, CALL = 4 };
constexpr int MAX_DEPTH = 1000;  // AST levels read or built (recursion; regex.py allows 4,000 groups)

struct Arena {
    std::vector<std::vector<int64_t>> keys;
    std::unordered_map<std::vector<int64_t>, int32_t, VecHash> ids;

    int32_t intern(std::vector<int64_t>&& key) {
        auto it = ids.find(key);
        if (it != ids.end()) return it->second;
        int32_t id = static_cast<int32_t>(keys.size());
        keys.push_back(key);
        ids.emplace(std::move(key), id);
        return id;
    }
    int64_t kind(int32_t id) const { return keys[id][0]; }
};

// regex.normalize_ranges: sorted, merged where they overlap or touch, the surrogates cut out.
constexpr int64_t MAX_CODE_POINT = 0x10FFFF, SURR_LO = 0xD800, SURR_HI = 0xDFFF;

std::vector<std::pair<int64_t, int64_t>> normalize(std::vector<std::pair<int64_t, int64_t>> r) {
    std::sort(r.begin(), r.end());
    std::vector<std::pair<int64_t, int64_t>> merged, out;
    for (auto [lo, hi] : r) {
        if (!merged.empty() && lo <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, hi);
        else
            merged.emplace_back(lo, hi);
    }
    for (auto [lo, hi] : merged) {
        if (lo < SURR_LO) out.emplace_back(lo, std::min(hi, SURR_LO - 1));
        if (hi > SURR_HI) out.emplace_back(std::max(lo, SURR_HI + 1), hi);
    }
    return out;
}

// regex.negate: the complement over the code points (surrogates excluded).
std::vector<std::pair<int64_t, int64_t>> negate(const std::vector<std::pair<int64_t, int64_t>>& r) {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t next = 0;
    for (auto [lo, hi] : normalize(r)) {
        if (lo > next) out.emplace_back(next, lo - 1);
        next = hi + 1;
    }
    if (next <= MAX_CODE_POINT) out.emplace_back(next, MAX_CODE_POINT);
    return normalize(out);
}

int32_t charset_node(Arena& ast, const std::vector<std::pair<int64_t, int64_t>>& normalized) {
    std::vector<int64_t> key{CHARSET};
    for (auto [lo, hi] : normalized) {
        key.push_back(lo);
        key.push_back(hi);
    }
    return ast.intern(std::move(key));
}

// Front end 1: the Python AST (regex.py's frozen dataclasses), read with the GIL held.
constexpr int N_NAMES = 6;
const char* const NAME_TEXT[N_NAMES] = {"items", "ranges", "item", "min", "max", "target"};
PyObject* NAMES[N_NAMES];  // the AST's attribute names, interned once (PyInit__dfa_native)

struct FromPy {
    Arena& ast;
    PyObject* types[5];  // CharSet, Concat, Alt, Repeat, Call
    std::unordered_map<PyObject*, int32_t> ids;
    int depth = 0;

    int kind(PyObject* node) const {
        for (int k = 0; k < 5; ++k)
            if (Py_TYPE(node) == reinterpret_cast<PyTypeObject*>(types[k])) return k;
        throw Unsupported();  // (a node this file does not know: nfa.py builds it, or names it)
    }

    static PyObject* attr(PyObject* node, int name) {  // a new reference
        PyObject* v = PyObject_GetAttr(node, NAMES[name]);
        if (!v) throw Bad(std::string("an AST node without ") + NAME_TEXT[name]);
        return v;
    }

    static int64_t as_int(PyObject* o) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) throw Bad("an AST int is not an int");
        return v;
    }

    int32_t read(PyObject* node) {
        auto it = ids.find(node);
        if (it != ids.end()) return it->second;
        if (depth >= MAX_DEPTH) throw Unsupported();
        ++depth;
        struct Undo {
            int& d;
            ~Undo() { --d; }
        } undo{depth};
        int k = kind(node);
        std::vector<int64_t> key{k};
        if (k == CHARSET) {
            PyObject* r = attr(node, 1);
            bool ok = PyTuple_Check(r);
            for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(r); ++i) {
                PyObject* pair = PyTuple_GET_ITEM(r, i);
                ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
                if (ok) {
                    key.push_back(as_int(PyTuple_GET_ITEM(pair, 0)));
                    key.push_back(as_int(PyTuple_GET_ITEM(pair, 1)));
                }
            }
            Py_DECREF(r);
            if (!ok) throw Bad("ranges must be a tuple of (lo, hi)");
        } else if (k == CONCAT || k == ALT) {
            PyObject* t = attr(node, 0);
            if (!PyTuple_Check(t)) {
                Py_DECREF(t);
                throw Bad("items must be a tuple");
            }
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) key.push_back(read(PyTuple_GET_ITEM(t, i)));
            Py_DECREF(t);
        } else if (k == REPEAT) {
            PyObject* item = attr(node, 2);
            Py_DECREF(item);  // (the node holds it: the pointer stays valid)
            key.push_back(read(item));
            PyObject* lo = attr(node, 3);
            PyObject* hi = attr(node, 4);
            key.push_back(as_int(lo));
            key.push_back(hi == Py_None ? -1 : as_int(hi));
            Py_DECREF(lo);
            Py_DECREF(hi);
        } else {
            PyObject* t = attr(node, 5);
            key.push_back(as_int(t));
            Py_DECREF(t);
        }
        int32_t out = ast.intern(std::move(key));
        ids.emplace(node, out);
        return out;
    }
};

// Front end 2: regex.py's parser over the pattern's code points, the same AST. Whatever it
// rejects (an error, a construct of regex.py's errors, a name or digit outside ASCII, nesting past
// MAX_DEPTH) is Unsupported: regex.parse then reads it again and reports it in its own words.
struct Parser {
    Arena& ast;
    std::vector<uint32_t> p;
    size_t i = 0;
    int depth = 0;
    std::unordered_map<size_t, size_t> close;                                   // '(' -> after its ')'
    std::unordered_map<std::u32string, std::pair<int32_t, int>> groups;        // text -> (node, depth inside)
    int deepest = 0;

    Parser(Arena& a, std::vector<uint32_t>&& pattern) : ast(a), p(std::move(pattern)) { spans(); }

    // regex._SPANS: escapes, classes and parentheses left to right; a '(' is closed by the next
    // unmatched ')'. (A span only proposes a memo key: a group parsed to elsewhere is not kept.)
    void spans() {
        std::vector<size_t> opens;
        size_t n = p.size(), k = 0;
        while (k < n) {
            if (p[k] == '\\' && k + 1 < n) {
                k += 2;
                continue;
            }
            if (p[k] == '[') {
                size_t j = k + 1;
                if (j < n && p[j] == '^') ++j;
                if (j < n && p[j] == ']') ++j;
                while (j < n) {
                    if (p[j] == '\\' && j + 1 < n) j += 2;
                    else if (p[j] != ']' && p[j] != '\\') ++j;
                    else break;
                }
                if (j < n && p[j] == ']') {
                    k = j + 1;
                    continue;
                }
            } else if (p[k] == '(') {
                opens.push_back(k);
            } else if (p[k] == ')' && !opens.empty()) {
                close[opens.back()] = k + 1;
                opens.pop_back();
            }
            ++k;
        }
    }

    bool at(uint32_t c) const { return i < p.size() && p[i] == c; }
    bool starts(const char* s) const {
        for (size_t k = 0; s[k]; ++k)
            if (i + k >= p.size() || p[i + k] != static_cast<unsigned char>(s[k])) return false;
        return true;
    }

    int32_t parse() {
        int32_t node = alt();
        if (i < p.size()) throw Unsupported();  // unbalanced ')'
        return node;
    }

    int32_t alt() {
        std::vector<int64_t> items{concat()};
        while (at('|')) {
            ++i;
            items.push_back(concat());
        }
        if (items.size() == 1) return static_cast<int32_t>(items[0]);
        items.insert(items.begin(), ALT);
        return ast.intern(std::move(items));
    }

    int32_t concat() {
        std::vector<int64_t> items{CONCAT};
        while (i < p.size() && p[i] != '|' && p[i] != ')') items.push_back(quantifiers(atom()));
        if (items.size() == 2) return static_cast<int32_t>(items[1]);
        return ast.intern(std::move(items));
    }

    int32_t quantifiers(int32_t node) {
        bool quantified = false;
        int64_t lo, hi;
        while (quantifier(lo, hi)) {
            if (quantified) throw Unsupported();  // multiple repeat
            quantified = true;
            if (at('?')) ++i;  // lazy == greedy under whole-string matching
            node = ast.intern({REPEAT, node, lo, hi});
        }
        return node;
    }

    bool quantifier(int64_t& lo, int64_t& hi) {
        if (i >= p.size()) return false;
        uint32_t c = p[i];
        if (c == '*' || c == '+' || c == '?') {
            ++i;
            lo = c == '+' ? 1 : 0;
            hi = c == '?' ? 1 : -1;
            return true;
        }
        return c == '{' && braces(lo, hi);
    }

    static bool digits(const std::vector<uint32_t>& p, size_t a, size_t b, int64_t& out) {
        if (b - a > 9) throw Unsupported();  // (past int64's comfort; regex.py reads any size)
        out = 0;
        for (size_t k = a; k < b; ++k) out = out * 10 + (p[k] - '0');
        return true;
    }

    // regex._Parser.braces: {m} {m,} {,n} {m,n}, ASCII digits; anything else leaves '{' a literal.
    bool braces(int64_t& lo, int64_t& hi) {
        size_t end = i + 1;
        while (end < p.size() && p[end] != '}') ++end;
        if (end >= p.size()) return false;
        size_t comma = i + 1;
        while (comma < end && p[comma] != ',') ++comma;
        bool has_comma = comma < end;
        auto all_digits = [&](size_t a, size_t b) {
            for (size_t k = a; k < b; ++k)
                if (p[k] < '0' || p[k] > '9') return false;
            return true;
        };
        for (size_t k = i + 1; k < end; ++k)
            if (p[k] > 0x7F) return false;  // (not isascii: a literal)
        bool lo_empty = comma == i + 1;
        if (!((!lo_empty && all_digits(i + 1, comma)) || (has_comma && lo_empty))) return false;
        size_t hs = has_comma ? comma + 1 : end;
        if (has_comma && hs < end && !all_digits(hs, end)) return false;
        lo = 0;
        if (!lo_empty) digits(p, i + 1, comma, lo);
        if (has_comma) {
            hi = -1;
            if (hs < end) digits(p, hs, end, hi);
        } else {
            hi = lo;
        }
        if (hi >= 0 && lo > hi) throw Unsupported();  // min repeat greater than max repeat
        i = end + 1;
        return true;
    }

    int32_t atom() {
        uint32_t c = p[i];
        if (c == '*' || c == '+' || c == '?') throw Unsupported();  // nothing to repeat
        if (c == '{') {
            size_t save = i;
            int64_t lo, hi;
            bool q = braces(lo, hi);
            i = save;
            if (q) throw Unsupported();
        }
        if (c == '(') return group();
        if (c == '[') return char_class();
        if (c == '.') {
            ++i;
            return charset_node(ast, normalize({{0, 0x09}, {0x0B, MAX_CODE_POINT}}));
        }
        if (c == '^' || c == '$') throw Unsupported();  // anchors
        if (c == '\\') return charset_node(ast, normalize(escape(false)));
        ++i;
        return charset_node(ast, normalize({{c, c}}));
    }

    // regex._Parser.group: a group text parsed before is that node again (within the depth limit).
    int32_t group() {
        size_t open = i;
        auto end = close.find(open);
        std::u32string text;
        if (end != close.end()) {
            text.assign(p.begin() + open, p.begin() + end->second);
            auto hit = groups.find(text);
            if (hit != groups.end()) {
                if (depth + hit->second.second > MAX_DEPTH) throw Unsupported();
                i = end->second;
                deepest = std::max(deepest, depth + hit->second.second);
                return hit->second.first;
            }
        }
        int outer = deepest;
        deepest = depth;
        int32_t node = group_body();
        int inner = deepest - depth;
        deepest = std::max(outer, deepest);
        if (end != close.end() && i == end->second) groups.emplace(std::move(text), std::make_pair(node, inner));
        return node;
    }

    int32_t group_body() {
        ++i;
        if (at('?')) {
            if (starts("?:")) {
                i += 2;
            } else if (starts("?&")) {  // (?&N): a call of automaton N
                size_t k = i + 2, start = k;
                while (k < p.size() && p[k] >= '0' && p[k] <= '9') ++k;
                if (k == start || k >= p.size() || p[k] != ')') throw Unsupported();
                int64_t target;
                digits(p, start, k, target);
                i = k + 1;
                return ast.intern({CALL, target});
            } else if (starts("?P<")) {  // a named group: an ASCII identifier
                size_t k = i + 3, start = k;
                while (k < p.size() && p[k] != '>') {
                    uint32_t ch = p[k];
                    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                              (k > start && ch >= '0' && ch <= '9');
                    if (!ok) throw Unsupported();
                    ++k;
                }
                if (k == start || k >= p.size()) throw Unsupported();
                i = k + 1;
            } else {
                throw Unsupported();  // lookaround, flags, conditionals, comments
            }
        }
        if (++depth > MAX_DEPTH) throw Unsupported();
        deepest = std::max(deepest, depth);
        int32_t node = alt();
        --depth;
        if (!at(')')) throw Unsupported();  // missing ')'
        ++i;
        return node;
    }

    static int hex(uint32_t c) {
        if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
        if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
        if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
        return -1;
    }

    // regex._Parser.escape: the ranges of `\X` at i (ASCII \d \w \s and their complements).
    std::vector<std::pair<int64_t, int64_t>> escape(bool in_class) {
        ++i;
        if (i >= p.size()) throw Unsupported();
        uint32_t c = p[i++];
        static const std::vector<std::pair<int64_t, int64_t>> DIGIT{{0x30, 0x39}},
            WORD{{0x30, 0x39}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}}, SPACE{{0x09, 0x0D}, {0x20, 0x20}};
        switch (c) {
            case 'd': return DIGIT;
            case 'w': return WORD;
            case 's': return SPACE;
            case 'D': return negate(DIGIT);
            case 'W': return negate(WORD);
            case 'S': return negate(SPACE);
            case 'n': return {{'\n', '\n'}};
            case 't': return {{'\t', '\t'}};
            case 'r': return {{'\r', '\r'}};
            case 'f': return {{'\f', '\f'}};
            case 'v': return {{'\v', '\v'}};
            case 'a': return {{'\a', '\a'}};
            default: break;
        }
        if (c == 'b' && in_class) return {{8, 8}};  // backspace, as in Python
        if (c == 'x' || c == 'u' || c == 'U') {
            size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            if (i + n > p.size()) throw Unsupported();
            int64_t cp = 0;
            for (size_t k = 0; k < n; ++k) {
                int h = hex(p[i + k]);
                if (h < 0) throw Unsupported();
                cp = cp * 16 + h;
            }
            if (cp > MAX_CODE_POINT) throw Unsupported();
            i += n;
            return {{cp, cp}};
        }
        if (c > 0x7F) throw Unsupported();  // (Unicode digits and letters: regex.py decides)
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alnum) throw Unsupported();  // anchors, backreferences, unknown escapes
        return {{c, c}};
    }

    int32_t char_class() {
        ++i;
        bool negated = at('^');
        if (negated) ++i;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        bool first = true;
        while (true) {
            if (i >= p.size()) throw Unsupported();  // unterminated
            if (p[i] == ']' && !first) {
                ++i;
                break;
            }
            first = false;
            auto lo = class_item();
            if (at('-') && i + 1 < p.size() && p[i + 1] != ']') {
                ++i;
                auto hi = class_item();
                if (lo.size() != 1 || hi.size() != 1 || lo[0].first != lo[0].second || hi[0].first != hi[0].second ||
                    hi[0].first < lo[0].first)
                    throw Unsupported();  // bad character range
                ranges.emplace_back(lo[0].first, hi[0].first);
            } else {
                ranges.insert(ranges.end(), lo.begin(), lo.end());
            }
        }
        auto rs = normalize(ranges);
        return charset_node(ast, negated ? negate(rs) : rs);
    }

    std::vector<std::pair<int64_t, int64_t>> class_item() {
        if (p[i] == '\\') return escape(true);
        uint32_t c = p[i++];
        return {{c, c}};
    }
};

// schema_bench's NFA size estimate of an AST (regex.py's tree, a shared subtree counted at each
// use): a counted repeat multiplies its item. Saturates past 2^62 (only compared with a limit).
int64_t estimate(const Arena& ast, int32_t id, std::vector<int64_t>& memo) {
    if (memo[id] >= 0) return memo[id];
    const auto& key = ast.keys[id];
    constexpr int64_t CAP = int64_t{1} << 62;
    int64_t out;
    if (key[0] == CHARSET) {
        out = static_cast<int64_t>((key.size() - 1) / 2) + 1;
    } else if (key[0] == CONCAT || key[0] == ALT) {
        out = 1;
        for (size_t k = 1; k < key.size(); ++k) {
            int64_t item = estimate(ast, static_cast<int32_t>(key[k]), memo);  // (both at most CAP: no overflow)
            out = item > CAP - out ? CAP : out + item;
        }
    } else if (key[0] == CALL) {
        out = 6;
    } else {
        int64_t copies = std::max<int64_t>(key[3] >= 0 ? key[3] : key[2] + 1, 1);
        int64_t item = estimate(ast, static_cast<int32_t>(key[1]), memo);
        out = item > (CAP - 1) / copies ? CAP : item * copies + 1;
    }
    return memo[id] = out;
}

// nfa.py's _Builder on the arena: Thompson's construction run backwards, a fragment built once
// per (node, continuation). The same NFA as nfa.py's, state for state in number (so the same NFA
// limit); only the minimal DFA leaves this file. Charset byte sequences are nfa.charset_sequences'
// (called with the GIL held, once per charset node).
constexpr int CALL_MARK = 0xF8, CALL_BASE = 7, CALL_DIGITS = 5;

struct NfaBuilder {
    const Arena& ast;
    PyObject* sequences;  // nfa.charset_sequences
    int64_t max_states;
    int depth = 0;
    std::vector<std::vector<int32_t>> eps;
    std::vector<std::vector<std::array<int32_t, 3>>> edges;  // (lo, hi, target)
    std::unordered_map<uint64_t, int32_t> built;  // (node, continuation) -> entry
    std::unordered_map<int32_t, std::vector<std::vector<std::pair<int32_t, int32_t>>>> seqs;  // charset -> byte-range sequences

    NfaBuilder(const Arena& a, PyObject* seq, int64_t max_nfa) : ast(a), sequences(seq), max_states(max_nfa) {}

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

    const std::vector<std::vector<std::pair<int32_t, int32_t>>>& sequences_of(int32_t node) {
        auto it = seqs.find(node);
        if (it != seqs.end()) return it->second;
        const auto& key = ast.keys[node];
        PyObject* ranges = PyTuple_New(static_cast<Py_ssize_t>((key.size() - 1) / 2));
        if (!ranges) throw std::bad_alloc();
        for (size_t k = 1; k + 1 < key.size(); k += 2) {
            PyObject* pair = Py_BuildValue("(LL)", static_cast<long long>(key[k]), static_cast<long long>(key[k + 1]));
            if (!pair) {
                Py_DECREF(ranges);
                throw Bad("charset ranges");
            }
            PyTuple_SET_ITEM(ranges, static_cast<Py_ssize_t>((k - 1) / 2), pair);
        }
        PyObject* got = PyObject_CallOneArg(sequences, ranges);
        Py_DECREF(ranges);
        if (!got) throw Bad("charset_sequences failed");
        std::vector<std::vector<std::pair<int32_t, int32_t>>> out;
        bool ok = PyTuple_Check(got);
        for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(got); ++i) {
            PyObject* seq = PyTuple_GET_ITEM(got, i);
            ok = PyTuple_Check(seq) && PyTuple_GET_SIZE(seq) > 0;
            out.emplace_back();
            for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(seq); ++j) {
                PyObject* pair = PyTuple_GET_ITEM(seq, j);
                ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
                if (ok) {
                    long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0));
                    long long hi = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1));
                    ok = !PyErr_Occurred() && 0 <= lo && lo <= hi && hi < 256;
                    out.back().emplace_back(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
                }
            }
        }
        Py_DECREF(got);
        if (!ok) throw Bad("charset_sequences gave no byte-range sequences");
        return seqs.emplace(node, std::move(out)).first->second;
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

PyObject* result_object(Result& r) {
    if (r.states < 0) return PyErr_NoMemory();
    if (r.limit) return PyLong_FromLong(2);
    PyObject* trans = PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(r.trans.data()),
                                                    static_cast<Py_ssize_t>(r.trans.size() * sizeof(int32_t)));
    PyObject* acc = trans ? PyByteArray_FromStringAndSize(reinterpret_cast<const char*>(r.accepting.data()),
                                                          static_cast<Py_ssize_t>(r.accepting.size()))
                          : nullptr;
    if (!acc) {
        Py_XDECREF(trans);
        return nullptr;
    }
    return Py_BuildValue("(NN)", trans, acc);
}

Result run_minimal(const Nfa& a, int64_t max_states) {
    Result r;
    Py_BEGIN_ALLOW_THREADS
    try {
        r = minimal_dfa(a, max_states);
    } catch (...) {  // (std::bad_alloc: reported with the GIL)
        r.limit = false;
        r.states = -1;
    }
    Py_END_ALLOW_THREADS
    return r;
}

// The arena's root -> NFA -> minimal DFA, as the Python result (see the methods' docs).
PyObject* arena_dfa(const Arena& ast, int32_t root, PyObject* sequences, int64_t max_nfa, int64_t max_states) {
    Nfa a;
    {
        NfaBuilder b(ast, sequences, max_nfa);
        int32_t final_ = b.state();
        int32_t start = b.build(root, final_);
        a = b.nfa(start, final_);
    }  // (the builder's maps freed before the construction)
    Result r = run_minimal(a, max_states);
    return result_object(r);
}

template <typename F>
PyObject* guarded(F&& body) {
    try {
        return body();
    } catch (const NfaLimit&) {
        return PyLong_FromLong(1);
    } catch (const Unsupported&) {
        return PyLong_FromLong(3);
    } catch (const Bad& e) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    } catch (const std::bad_alloc&) {
        return PyErr_NoMemory();
    }
}

PyObject* py_regex_dfa(PyObject*, PyObject* args) {
    PyObject *node, *types, *sequences;
    long long max_nfa, max_states;
    if (!PyArg_ParseTuple(args, "OLLO!O", &node, &max_nfa, &max_states, &PyTuple_Type, &types, &sequences)) return nullptr;
    if (PyTuple_GET_SIZE(types) != 5) {
        PyErr_SetString(PyExc_ValueError, "types must be (CharSet, Concat, Alt, Repeat, Call)");
        return nullptr;
    }
    return guarded([&]() {
        Arena ast;
        FromPy reader{ast, {}, {}, 0};
        for (int k = 0; k < 5; ++k) reader.types[k] = PyTuple_GET_ITEM(types, k);
        int32_t root = reader.read(node);
        return arena_dfa(ast, root, sequences, max_nfa, max_states);
    });
}

PyObject* py_pattern_dfa(PyObject*, PyObject* args) {
    PyObject *pattern, *sequences;
    long long max_nfa, max_states, estimate_limit;
    if (!PyArg_ParseTuple(args, "ULLOL", &pattern, &max_nfa, &max_states, &sequences, &estimate_limit)) return nullptr;
    return guarded([&]() -> PyObject* {
        Py_ssize_t n = PyUnicode_GET_LENGTH(pattern);
        int kind = PyUnicode_KIND(pattern);
        const void* data = PyUnicode_DATA(pattern);
        std::vector<uint32_t> cps(static_cast<size_t>(n));
        for (Py_ssize_t k = 0; k < n; ++k) cps[k] = PyUnicode_READ(kind, data, k);
        Arena ast;
        Parser parser(ast, std::move(cps));
        int32_t root = parser.parse();
        if (estimate_limit >= 0) {
            std::vector<int64_t> memo(ast.keys.size(), -1);
            int64_t size = estimate(ast, root, memo);
            if (size > estimate_limit) return Py_BuildValue("(iL)", 4, static_cast<long long>(size));
        }
        return arena_dfa(ast, root, sequences, max_nfa, max_states);
    });
}

PyObject* py_minimal_dfa(PyObject*, PyObject* args) {
    PyObject *eps, *edges;
    long start, final_;
    long long max_states;
    if (!PyArg_ParseTuple(args, "OOllL", &eps, &edges, &start, &final_, &max_states)) return nullptr;
    try {
        Nfa a = read_nfa(eps, edges, start, final_);
        Result r = run_minimal(a, max_states);
        if (r.limit) Py_RETURN_NONE;
        return result_object(r);
    } catch (const Bad& e) {
        PyErr_Clear();  // (a TypeError of PyLong_AsLong's, named instead)
        PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    } catch (const std::bad_alloc&) {
        return PyErr_NoMemory();
    }
}

PyMethodDef methods[] = {
    {"minimal_dfa", py_minimal_dfa, METH_VARARGS,
     "minimal_dfa(eps, edges, start, final, max_states) -> (trans bytearray (S*256 int32), accepting bytearray (S,))"
     " or None past max_states: nfa.NFA's lists -> dfa.compile_ast's minimal DFA (start state 0)"},
    {"regex_dfa", py_regex_dfa, METH_VARARGS,
     "regex_dfa(ast, max_nfa_states, max_states, (CharSet, Concat, Alt, Repeat, Call), charset_sequences) ->"
     " (trans, accepting) as minimal_dfa's, or 1 past max_nfa_states, 2 past max_states, 3 what nfa.py"
     " must build (a call target past the marker digits, a node type unknown here): regex.py's AST -> nfa.py's"
     " NFA -> the minimal DFA"},
    {"pattern_dfa", py_pattern_dfa, METH_VARARGS,
     "pattern_dfa(pattern, max_nfa_states, max_states, charset_sequences, estimate_limit) -> regex_dfa's answers,"
     " 3 also for a pattern regex.parse must read (its errors, constructs past this parser), or (4, size) where"
     " estimate_limit >= 0 and the NFA size estimate exceeds it: the pattern string parsed here, as regex.parse"
     " would, then regex_dfa's path; no Python AST is built"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dfa_native", "inferlab's compile path in C++17: regex -> NFA -> minimal DFA", -1,
                      methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__dfa_native(void) {
    for (int i = 0; i < N_NAMES; ++i)
        if (!(NAMES[i] = PyUnicode_InternFromString(NAME_TEXT[i]))) return nullptr;
    PyObject* m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "MAX_SUBSET_ENTRIES", PyLong_FromLongLong(MAX_SUBSET_ENTRIES)) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
