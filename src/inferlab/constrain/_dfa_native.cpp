// The compile path's native part (C++17): a Thompson NFA (nfa.py's lists) -> its minimal byte DFA,
// the same result as dfa.py's Python construction (its reference: tests/test_dfa_native.py
// compares the two array for array): subset construction over byte classes, trimming to the live
// states, Hopcroft's partition refinement, and the canonical numbering of dfa._minimize (blocks
// numbered in order of first discovery from the start, a stack of states, classes in order), which
// depends only on the minimal DFA, so any correct refinement gives the same arrays.
//
// Apart from the mask engine (_native.cpp) so that each builds and evolves alone; the plain C API,
// no dependency beyond a C++17 compiler and Python's headers. The lists are read with the GIL
// held, then released for the construction.

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


// nfa.py's _Builder, on regex.py's AST (read with the GIL held): Thompson's construction run
// backwards, a fragment built once per (structural id, continuation). The same NFA as nfa.py's,
// state for state in number (so the same NFA limit); only the minimal DFA leaves this file.
struct NfaLimit {};
struct Unsupported {};  // (a call target past the marker digits, or an unknown node: left to nfa.py)

constexpr int CALL_MARK = 0xF8, CALL_BASE = 7, CALL_DIGITS = 5;
constexpr int N_NAMES = 6;
const char* const NAME_TEXT[N_NAMES] = {"items", "ranges", "item", "min", "max", "target"};
PyObject* NAMES[N_NAMES];  // the AST's attribute names, interned once (PyInit__dfa_native)

struct AstBuilder {
    PyObject* types[5];  // CharSet, Concat, Alt, Repeat, Call
    PyObject* sequences;  // nfa.charset_sequences
    int64_t max_states;
    static constexpr int MAX_DEPTH = 1000;  // AST levels (sid and build recurse; regex.py allows 4,000 groups)
    int depth = 0;
    std::vector<std::vector<int32_t>> eps;
    std::vector<std::vector<std::array<int32_t, 3>>> edges;  // (lo, hi, target)
    std::unordered_map<PyObject*, int32_t> ids;
    std::unordered_map<std::vector<int64_t>, int32_t, VecHash> table;
    std::unordered_map<uint64_t, int32_t> built;  // (structural id, continuation) -> entry
    std::unordered_map<int32_t, std::vector<std::vector<std::pair<int32_t, int32_t>>>> seqs;  // charset sid -> byte-range sequences

    int32_t state() {
        if (static_cast<int64_t>(eps.size()) >= max_states) throw NfaLimit();
        eps.emplace_back();
        edges.emplace_back();
        return static_cast<int32_t>(eps.size() - 1);
    }

    int kind(PyObject* node) const {
        for (int k = 0; k < 5; ++k)
            if (Py_TYPE(node) == reinterpret_cast<PyTypeObject*>(types[k])) return k;
        throw Unsupported();  // (a node this file does not know: nfa.py builds it, or names it)
    }

    static PyObject* attr(PyObject* node, const char* name) {  // a new reference
        PyObject* key = nullptr;
        for (int i = 0; i < N_NAMES; ++i)
            if (std::strcmp(NAME_TEXT[i], name) == 0) key = NAMES[i];
        PyObject* v = key ? PyObject_GetAttr(node, key) : PyObject_GetAttrString(node, name);
        if (!v) throw Bad(std::string("an AST node without ") + name);
        return v;
    }

    static int64_t as_int(PyObject* o) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) throw Bad("an AST int is not an int");
        return v;
    }

    PyObject* items(PyObject* node) {  // a new reference to a tuple
        PyObject* t = attr(node, "items");
        if (!PyTuple_Check(t)) {
            Py_DECREF(t);
            throw Bad("items must be a tuple");
        }
        return t;
    }

    int32_t sid(PyObject* node) {
        auto it = ids.find(node);
        if (it != ids.end()) return it->second;
        if (depth >= 2 * MAX_DEPTH) throw Unsupported();  // (called from build: its levels count too)
        ++depth;
        struct Undo {
            int& d;
            ~Undo() { --d; }
        } undo{depth};
        int k = kind(node);
        std::vector<int64_t> key{k};
        if (k == 0) {
            PyObject* r = attr(node, "ranges");
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
        } else if (k == 1 || k == 2) {
            PyObject* t = items(node);
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) key.push_back(sid(PyTuple_GET_ITEM(t, i)));
            Py_DECREF(t);
        } else if (k == 3) {
            PyObject* item = attr(node, "item");
            key.push_back(sid(item));  // (the node holds it: the pointer stays valid)
            Py_DECREF(item);
            PyObject* lo = attr(node, "min");
            PyObject* hi = attr(node, "max");
            key.push_back(as_int(lo));
            key.push_back(hi == Py_None ? -1 : as_int(hi));
            Py_DECREF(lo);
            Py_DECREF(hi);
        } else {
            PyObject* t = attr(node, "target");
            key.push_back(as_int(t));
            Py_DECREF(t);
        }
        int32_t out = table.emplace(std::move(key), static_cast<int32_t>(table.size())).first->second;
        ids.emplace(node, out);
        return out;
    }

    int32_t build(PyObject* node, int32_t end) {
        struct Level {  // (the C stack: deeper ASTs are left to nfa.py)
            int& d;
            explicit Level(int& depth) : d(depth) {
                if (++d > MAX_DEPTH) throw Unsupported();
            }
            ~Level() { --d; }
        } level(depth);
        if (kind(node) == 1) {
            PyObject* t = items(node);
            for (Py_ssize_t i = PyTuple_GET_SIZE(t) - 1; i >= 0; --i) end = build(PyTuple_GET_ITEM(t, i), end);
            Py_DECREF(t);
            return end;
        }
        uint64_t key = (static_cast<uint64_t>(sid(node)) << 32) | static_cast<uint32_t>(end);
        auto it = built.find(key);
        if (it != built.end()) return it->second;
        int32_t entry = build_new(node, end);
        built.emplace(key, entry);
        return entry;
    }

    int32_t build_new(PyObject* node, int32_t end) {
        int k = kind(node);
        if (k == 0) return charset(node, end);
        if (k == 2) {
            int32_t entry = state();
            PyObject* t = items(node);
            std::vector<int32_t> outs;
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) {
                int32_t e = build(PyTuple_GET_ITEM(t, i), end);
                if (std::find(outs.begin(), outs.end(), e) == outs.end()) outs.push_back(e);
            }
            Py_DECREF(t);
            eps[entry] = std::move(outs);
            return entry;
        }
        if (k == 3) return repeat(node, end);
        PyObject* t = attr(node, "target");
        int64_t target = as_int(t);
        Py_DECREF(t);
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

    const std::vector<std::vector<std::pair<int32_t, int32_t>>>& sequences_of(PyObject* node) {
        int32_t s = sid(node);
        auto it = seqs.find(s);
        if (it != seqs.end()) return it->second;
        PyObject* r = attr(node, "ranges");
        PyObject* got = PyObject_CallOneArg(sequences, r);
        Py_DECREF(r);
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
                    int64_t lo = as_int(PyTuple_GET_ITEM(pair, 0)), hi = as_int(PyTuple_GET_ITEM(pair, 1));
                    ok = 0 <= lo && lo <= hi && hi < 256;
                    out.back().emplace_back(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
                }
            }
        }
        Py_DECREF(got);
        if (!ok) throw Bad("charset_sequences gave no byte-range sequences");
        return seqs.emplace(s, std::move(out)).first->second;
    }

    int32_t charset(PyObject* node, int32_t end) {
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

    int32_t repeat(PyObject* node, int32_t end) {
        PyObject* item = attr(node, "item");
        Py_DECREF(item);  // (the node holds it)
        PyObject* lo_o = attr(node, "min");
        PyObject* hi_o = attr(node, "max");
        int64_t lo = as_int(lo_o);
        int64_t hi = hi_o == Py_None ? -1 : as_int(hi_o);
        Py_DECREF(lo_o);
        Py_DECREF(hi_o);
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

PyObject* py_regex_dfa(PyObject*, PyObject* args) {
    PyObject *node, *types, *sequences;
    long long max_nfa, max_states;
    if (!PyArg_ParseTuple(args, "OLLO!O", &node, &max_nfa, &max_states, &PyTuple_Type, &types, &sequences)) return nullptr;
    if (PyTuple_GET_SIZE(types) != 5) {
        PyErr_SetString(PyExc_ValueError, "types must be (CharSet, Concat, Alt, Repeat, Call)");
        return nullptr;
    }
    try {
        AstBuilder b;
        for (int k = 0; k < 5; ++k) b.types[k] = PyTuple_GET_ITEM(types, k);
        b.sequences = sequences;
        b.max_states = max_nfa;
        int32_t final_ = b.state();
        int32_t start = b.build(node, final_);
        Nfa a = b.nfa(start, final_);
        b = AstBuilder();  // (its maps freed before the construction)
        Result r = run_minimal(a, max_states);
        return result_object(r);
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
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dfa_native", "inferlab's compile path in C++17: NFA -> minimal DFA", -1,
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
