// The Python bindings of inferlab's native code (C++17, Python's plain C API: no build dependency
// beyond a C++17 compiler and Python's headers), one extension module, inferlab.constrain._native.
// Every line that touches the Python C API is here; the engines are plain C++ under csrc/ (no
// Python object), and the seam between them is flat arrays. Both halves are optional at install
// (setup.py): where the module does not build, native.py and dfa.py use their Python twins.
//
// The mask engine (csrc/mask_engine.hpp; native.py drives it): a configuration's token mask by a
// walk of the vocabulary's trie through the stack machine, bit for bit the Python engine's
// (grammar.py; tests/test_native.py compares them).
// - trie((child_start (N,) int64, child_count (N,) int32, byte (N,) uint8, tok_offset (N + 1,)
//   int64, tokens (T,) int32, n_roots), vocab_size, eos_id) -> a capsule of the checked trie
//   (native.py: trie_arrays), shared by every engine over it;
// - build(the 14 arrays of constrain/tables.py's CompiledMachine in its field order, trie,
//   narrow_nodes=0) -> a capsule of the engine (docs/native-engine.md, "The seam"); `trans` is a
//   tuple of per-automaton tables, read in place (their buffers held by the capsule);
// - a configuration: frames (F, 3) int32 (automaton, local state, count; -1 for a plain
//   automaton) and stack_offset (K + 1,) int64, each stack from its bottom frame; or the
//   machine's own tuple of stacks, each a tuple of (automaton, state[, count]) tuples, and None;
// - a mask: (ceil(vocab_size / 32),) 32-bit words, bit t of word t / 32 for token t; a batch's,
//   rows of a (B, words) array.
// Every table is copied and checked when an engine is built: a malformed one raises ValueError,
// never reads out of bounds. Walks hold no Python object: the GIL is released while they run,
// and a batch's rows are walked on parallel threads (fill_next_token_bitmask_par). A warm
// fill's write is one call too: write_row(out, row or a tuple of ids, cleared ids).
//
// The compile path (csrc/minimal_dfa.hpp, regex_parser.hpp, nfa_builder.hpp; dfa.py drives it): a
// regex of regex.py's dialect -> its Thompson NFA (nfa.py's, state for state) -> its minimal
// byte DFA, the same result as dfa.py's Python construction (tests/test_dfa_native.py compares
// them array for array). In: the pattern string itself (pattern_dfa: parsed in C++ as
// regex.parse would; whatever the parser does not take is left to regex.parse, whose errors name
// it), or regex.py's AST (regex_dfa: read here into the same arena), or nfa.py's lists
// (minimal_dfa: read here into the NFA's flat arrays). Out: the minimal DFA as two flat arrays,
// (S * 256,) int32 transitions and (S,) accepting bytes, start state 0. Inputs are read with the
// GIL held (nfa.charset_sequences is called back once per character class), then it is released
// for the construction.
//
// Errors: the engines raise C++ exceptions, turned here into Python's: a malformed table,
// configuration or input is ValueError with its message; the compile path's limits and what it
// leaves to Python are its functions' answer codes (1, 2, 3, (4, size)); std::bad_alloc is
// MemoryError.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mask_engine.hpp"
#include "minimal_dfa.hpp"
#include "nfa.hpp"
#include "nfa_builder.hpp"
#include "regex_ast.hpp"
#include "regex_parser.hpp"

namespace {

namespace mask = inferlab::mask;
namespace dfa = inferlab::dfa;

// ---- the mask engine ------------------------------------------------------------------------

struct Buffer {
    Py_buffer view{};
    bool held = false;
    ~Buffer() {
        if (held) PyBuffer_Release(&view);
    }
};

// Reads a C-contiguous buffer of integers of `itemsize` bytes (signed unless `unsigned_`; a
// writable one, a mask row, of either sign: int32 as the matcher API's, uint32 as numpy views).
bool get_buffer(PyObject* obj, Buffer& buf, Py_ssize_t itemsize, bool unsigned_, bool writable, const char* name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf.view, flags) != 0) return false;
    buf.held = true;
    const char* f = buf.view.format ? buf.view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') ++f;
    const std::string kinds = writable ? "BHILQbhilq" : unsigned_ ? "BHILQ" : "bhilq";  // (an out row: either sign)
    if (buf.view.itemsize != itemsize || f[0] == 0 || f[1] != 0 || kinds.find(f[0]) == std::string::npos) {
        PyErr_Format(PyExc_ValueError, "%s: expected %s integers of %zd bytes, got format '%s' of %zd bytes", name,
                     unsigned_ ? "unsigned" : "signed", itemsize, buf.view.format ? buf.view.format : "B",
                     buf.view.itemsize);
        return false;
    }
    return true;
}

template <typename T>
bool read_array(PyObject* obj, std::vector<T>& out, bool unsigned_, const char* name) {
    Buffer buf;
    if (!get_buffer(obj, buf, sizeof(T), unsigned_, false, name)) return false;
    const T* p = static_cast<const T*>(buf.view.buf);
    out.assign(p, p + buf.view.len / Py_ssize_t(sizeof(T)));
    return true;
}

// An engine's capsule: the engine and the buffers of the transition tables it reads in place
// (released, with the GIL, when the capsule goes).
struct Owned {
    std::unique_ptr<mask::Engine> engine;
    std::vector<std::unique_ptr<Buffer>> tables;
};

void destroy(PyObject* capsule) {
    delete static_cast<Owned*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
}

mask::Engine* engine_of(PyObject* capsule) {
    auto* owned = static_cast<Owned*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
    return owned ? owned->engine.get() : nullptr;
}

// trans: a tuple of A C-contiguous int32 tables, each (states, 256), held (not copied) by `owned`
bool read_trans(PyObject* obj, Owned& owned, mask::Machine& m) {
    if (!PyTuple_Check(obj)) {
        PyErr_SetString(PyExc_ValueError, "trans: a tuple of per-automaton (states, 256) int32 tables expected");
        return false;
    }
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(obj); ++a) {
        auto buf = std::make_unique<Buffer>();
        if (!get_buffer(PyTuple_GET_ITEM(obj, a), *buf, 4, false, false, "trans")) return false;
        m.trans.push_back(static_cast<const int32_t*>(buf->view.buf));
        m.trans_size.push_back(size_t(buf->view.len) / 4);
        owned.tables.push_back(std::move(buf));
    }
    return true;
}

void destroy_trie(PyObject* capsule) {
    delete static_cast<std::shared_ptr<const mask::Trie>*>(PyCapsule_GetPointer(capsule, "inferlab.native.Trie"));
}

// trie((child_start, child_count, byte, tok_offset, tokens, n_roots), vocab_size, eos_id) -> a
// vocabulary's trie, checked once and shared by every engine over it
PyObject* trie(PyObject*, PyObject* args) {
    PyObject* tt;
    int vocab_size, eos;
    if (!PyArg_ParseTuple(args, "O!ii", &PyTuple_Type, &tt, &vocab_size, &eos)) return nullptr;
    if (PyTuple_GET_SIZE(tt) != 6) {
        PyErr_SetString(PyExc_ValueError, "trie: 6 items expected");
        return nullptr;
    }
    auto t = std::make_shared<mask::Trie>();
    if (!read_array(PyTuple_GET_ITEM(tt, 0), t->child_start, false, "child_start") ||
        !read_array(PyTuple_GET_ITEM(tt, 1), t->child_count, false, "child_count") ||
        !read_array(PyTuple_GET_ITEM(tt, 2), t->byte, true, "byte") ||
        !read_array(PyTuple_GET_ITEM(tt, 3), t->tok_offset, false, "tok_offset") ||
        !read_array(PyTuple_GET_ITEM(tt, 4), t->tokens, false, "tokens"))
        return nullptr;
    t->n_roots = PyLong_AsLongLong(PyTuple_GET_ITEM(tt, 5));
    if (PyErr_Occurred()) return nullptr;
    t->n_nodes = int64_t(t->byte.size());
    t->vocab_size = vocab_size;
    t->eos = eos;
    try {
        t->check();
    } catch (const mask::Bad& exc) {
        PyErr_SetString(PyExc_ValueError, exc.what());
        return nullptr;
    }
    auto held = std::make_unique<std::shared_ptr<const mask::Trie>>(std::move(t));
    PyObject* capsule = PyCapsule_New(held.get(), "inferlab.native.Trie", destroy_trie);
    if (capsule) held.release();
    return capsule;
}

PyObject* engines(PyObject*, PyObject*) { return PyLong_FromLong(mask::Engine::alive.load()); }

// split_cache(trie, clear) -> (splits kept, bytes) before an optional clear (caches.CACHES owns it)
PyObject* split_cache(PyObject*, PyObject* args) {
    PyObject* capsule;
    int clear;
    if (!PyArg_ParseTuple(args, "Op", &capsule, &clear)) return nullptr;
    auto* shared = static_cast<std::shared_ptr<const mask::Trie>*>(PyCapsule_GetPointer(capsule, "inferlab.native.Trie"));
    if (!shared) return nullptr;
    mask::SplitCache& cache = (*shared)->cache;
    std::lock_guard<std::mutex> guard(cache.lock);
    PyObject* out = Py_BuildValue("(nn)", Py_ssize_t(cache.size()), Py_ssize_t(cache.bytes));
    if (clear) cache.clear();
    return out;
}

// build(machine: tuple of the 14 CompiledMachine arrays in its field order, trie, narrow_nodes=0) -> engine
PyObject* build(PyObject*, PyObject* args) {
    PyObject *mt, *trie_capsule;
    long long narrow_nodes = 0;
    if (!PyArg_ParseTuple(args, "O!O|L", &PyTuple_Type, &mt, &trie_capsule, &narrow_nodes)) return nullptr;
    auto* shared = static_cast<std::shared_ptr<const mask::Trie>*>(PyCapsule_GetPointer(trie_capsule, "inferlab.native.Trie"));
    if (!shared) return nullptr;
    if (PyTuple_GET_SIZE(mt) != 14) {
        PyErr_SetString(PyExc_ValueError, "build: 14 machine arrays expected");
        return nullptr;
    }
    auto owned = std::make_unique<Owned>();
    owned->engine = std::make_unique<mask::Engine>(*shared);
    mask::Engine* e = owned->engine.get();
    mask::Machine& m = e->m;
    e->narrow_nodes = narrow_nodes;
    auto item = [&](int i) { return PyTuple_GET_ITEM(mt, i); };
    if (!read_array(item(0), m.state_offset, false, "state_offset") || !read_trans(item(1), *owned, m) ||
        !read_array(item(2), m.accepting, true, "accepting") || !read_array(item(3), m.start, false, "start") ||
        !read_array(item(4), m.productive, true, "productive") ||
        !read_array(item(5), m.call_offset, false, "call_offset") ||
        !read_array(item(6), m.callee, false, "call_callee") || !read_array(item(7), m.ret, false, "call_return") ||
        !read_array(item(8), m.kind, true, "kind") || !read_array(item(9), m.lo, false, "lo") ||
        !read_array(item(10), m.hi, false, "hi") || !read_array(item(11), m.map_first, false, "map_first") ||
        !read_array(item(12), m.map_next, false, "map_next") || !read_array(item(13), m.unique, true, "unique"))
        return nullptr;
    m.A = int32_t(m.start.size());
    m.S = int64_t(m.accepting.size());
    try {
        m.check();
    } catch (const mask::Bad& exc) {
        PyErr_SetString(PyExc_ValueError, exc.what());
        return nullptr;
    }
    m.derive();
    PyObject* capsule = PyCapsule_New(owned.get(), "inferlab.native.Engine", destroy);
    if (capsule) owned.release();
    return capsule;
}

// A configuration as the machine holds it: a tuple of stacks, each a tuple of frames (automaton,
// state) or (automaton, state, count), bottom first (no arrays to build per mask).
bool read_stacks(PyObject* stacks, mask::Config& config) {
    auto bad = [](const char* what) {
        PyErr_SetString(PyExc_ValueError, what);
        return false;
    };
    if (!PyTuple_Check(stacks)) return bad("config: a tuple of stacks expected");
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(stacks); ++k) {
        PyObject* st = PyTuple_GET_ITEM(stacks, k);
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) == 0) return bad("config: a stack is no non-empty tuple");
        mask::Stack out;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(st); ++i) {
            PyObject* f = PyTuple_GET_ITEM(st, i);
            const Py_ssize_t n = PyTuple_Check(f) ? PyTuple_GET_SIZE(f) : 0;
            if (n != 2 && n != 3) return bad("config: a frame is no (automaton, state[, count]) tuple");
            int32_t v[3] = {0, 0, -1};
            for (Py_ssize_t j = 0; j < n; ++j) {
                const long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(f, j));
                if (x == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    return bad("config: a frame holds no integer");
                }
                if (x < INT32_MIN || x > INT32_MAX) return bad("config: a frame out of range");
                v[j] = int32_t(x);
            }
            out.push_back({v[0], v[1], v[2]});
        }
        config.push_back(std::move(out));
    }
    return true;
}

// frames_obj, offset_obj: the layout's arrays (frames (F, 3) int32, stack_offset (K + 1,) int64),
// or the machine's tuple of stacks and None.
bool read_config(PyObject* frames_obj, PyObject* offset_obj, mask::Config& config) {
    if (offset_obj == Py_None) return read_stacks(frames_obj, config);
    std::vector<int32_t> frames;
    std::vector<int64_t> offset;
    if (!read_array(frames_obj, frames, false, "frames") || !read_array(offset_obj, offset, false, "stack_offset"))
        return false;
    if (frames.size() % 3 || offset.empty() || offset[0] != 0 || size_t(offset.back()) != frames.size() / 3) {
        PyErr_SetString(PyExc_ValueError, "config: frames not (F, 3), or stack_offset not (K + 1,) from 0 to F");
        return false;
    }
    for (size_t k = 0; k + 1 < offset.size(); ++k) {
        if (offset[k + 1] <= offset[k]) {
            PyErr_SetString(PyExc_ValueError, "config: an empty stack");
            return false;
        }
        mask::Stack st;
        for (int64_t i = offset[k]; i < offset[k + 1]; ++i) st.push_back({frames[3 * i], frames[3 * i + 1], frames[3 * i + 2]});
        config.push_back(std::move(st));
    }
    return true;
}

// fill(engine, frames, stack_offset, out (words,) 32-bit) -> (tokens allowed (up to COUNT_CAP), top_only):
// out = the mask; top_only: walk_mask's answer
PyObject* fill(PyObject*, PyObject* args) {
    PyObject *capsule, *frames, *offset, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &capsule, &frames, &offset, &out_obj)) return nullptr;
    mask::Engine* e = engine_of(capsule);
    if (!e) return nullptr;
    mask::Config config;
    if (!read_config(frames, offset, config)) return nullptr;
    Buffer out;
    if (!get_buffer(out_obj, out, 4, true, true, "out"))
        return nullptr;
    if (out.view.len != Py_ssize_t(e->words()) * 4) {
        PyErr_SetString(PyExc_ValueError, "out: not (ceil(vocab_size / 32),)");
        return nullptr;
    }
    std::string error;
    mask::Filled got{0, false};
    Py_BEGIN_ALLOW_THREADS
    try {
        // (straight into `out`: its buffer is held, and no Python code runs until the GIL is back)
        got = e->fill(std::move(config), static_cast<uint32_t*>(out.view.buf));
    } catch (const std::exception& exc) {
        error = exc.what();
    }
    Py_END_ALLOW_THREADS
    if (!error.empty()) {
        PyErr_SetString(PyExc_ValueError, error.c_str());
        return nullptr;
    }
    return Py_BuildValue("(LO)", got.allowed, got.top_only ? Py_True : Py_False);
}

// Each id of the tuple `ids` (token ids) as an index below `limit`, into `out`; false with a
// ValueError (a bad id is refused before any word is written).
bool token_ids(PyObject* ids, size_t limit, std::vector<uint32_t>& out) {
    const Py_ssize_t k = PyTuple_GET_SIZE(ids);
    out.resize(static_cast<size_t>(k));
    for (Py_ssize_t i = 0; i < k; ++i) {
        long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(ids, i));
        if (t == -1 && PyErr_Occurred()) return false;
        if (t < 0 || static_cast<unsigned long long>(t) >= limit) {
            PyErr_Format(PyExc_ValueError, "write_row: token %lld outside the row's %zu tokens", t, limit);
            return false;
        }
        out[static_cast<size_t>(i)] = static_cast<uint32_t>(t);
    }
    return true;
}

// write_row(out (words,) 32-bit, row, cleared): out = row, a (words,) 32-bit row or a tuple of
// the token ids it allows (a narrow row: zeros, those bits set), then each token id of the tuple
// `cleared` cleared: StackGrammar.fill_bitmask's warm path (a cached row, and the tokens the
// written keys refuse) in one call, where np.copyto, or a Python loop over a narrow row's ids,
// cost more than the copy itself at 151k tokens.
PyObject* write_row(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "write_row(out, row: buffer or tuple, cleared: tuple)");
        return nullptr;
    }
    Buffer out, row;
    if (!get_buffer(args[0], out, 4, true, true, "out")) return nullptr;
    const size_t n = static_cast<size_t>(out.view.len) / 4;
    const bool narrow = PyTuple_Check(args[1]);
    if (!narrow && !get_buffer(args[1], row, 4, false, false, "row")) return nullptr;
    if (!narrow && row.view.len != out.view.len) {
        PyErr_SetString(PyExc_ValueError, "write_row: out and row differ in length");
        return nullptr;
    }
    std::vector<uint32_t> set, cleared;
    if ((narrow && !token_ids(args[1], 32 * n, set)) || !token_ids(args[2], 32 * n, cleared)) return nullptr;
    auto* words = static_cast<uint32_t*>(out.view.buf);
    if (narrow) {
        std::memset(words, 0, n * 4);
        for (uint32_t t : set) words[t >> 5] |= uint32_t{1} << (t & 31);
    } else {
        std::memcpy(words, row.view.buf, n * 4);
    }
    for (uint32_t t : cleared) words[t >> 5] &= ~(uint32_t{1} << (t & 31));
    Py_RETURN_NONE;
}

// fill_next_token_bitmask_par(engine, [(frames, stack_offset), ...], out (B, words), rows, threads):
// out[rows[i]] = the mask of configuration i, the rows walked on up to `threads` threads at once.
PyObject* fill_par(PyObject*, PyObject* args) {
    PyObject *capsule, *configs, *out_obj, *rows_obj;
    int threads;
    if (!PyArg_ParseTuple(args, "OO!OOi", &capsule, &PyList_Type, &configs, &out_obj, &rows_obj, &threads)) return nullptr;
    mask::Engine* e = engine_of(capsule);
    if (!e) return nullptr;
    std::vector<mask::Config> all(size_t(PyList_GET_SIZE(configs)));
    for (size_t i = 0; i < all.size(); ++i) {
        PyObject* pair = PyList_GET_ITEM(configs, Py_ssize_t(i));
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_ValueError, "configs: (frames, stack_offset) pairs expected");
            return nullptr;
        }
        if (!read_config(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), all[i])) return nullptr;
    }
    std::vector<int64_t> rows;
    if (!read_array(rows_obj, rows, false, "rows")) return nullptr;
    Buffer out;
    if (!get_buffer(out_obj, out, 4, true, true, "out"))
        return nullptr;
    const Py_ssize_t words = Py_ssize_t(e->words()), n_rows = words ? out.view.len / 4 / words : 0;
    if (rows.size() != all.size() || out.view.len != n_rows * words * 4) {
        PyErr_SetString(PyExc_ValueError, "out: not (B, ceil(vocab_size / 32)), or rows not one per configuration");
        return nullptr;
    }
    std::vector<int64_t> sorted_rows = rows;
    std::sort(sorted_rows.begin(), sorted_rows.end());
    if (!rows.empty() && (sorted_rows[0] < 0 || sorted_rows.back() >= n_rows ||
                          std::adjacent_find(sorted_rows.begin(), sorted_rows.end()) != sorted_rows.end())) {
        PyErr_SetString(PyExc_ValueError, "rows: a row out of out's range, or a row given twice");
        return nullptr;
    }
    std::vector<std::string> errors;
    Py_BEGIN_ALLOW_THREADS
    errors = e->fill_rows(all, rows, static_cast<uint32_t*>(out.view.buf), threads);
    Py_END_ALLOW_THREADS
    for (auto& err : errors) {
        if (!err.empty()) {
            PyErr_SetString(PyExc_ValueError, err.c_str());
            return nullptr;
        }
    }
    Py_RETURN_NONE;
}

// ---- the compile path: regex -> NFA -> minimal DFA ------------------------------------------

// A Python input that does not read (nfa.py's lists, regex.py's AST, charset_sequences' answer):
// ValueError with its message, or the Python error already set.
struct BadInput : std::runtime_error {
    using std::runtime_error::runtime_error;
};

long as_index(PyObject* o, long bound, const char* what) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) throw BadInput(std::string(what) + " is not an int");
    if (v < 0 || v >= bound) throw BadInput(std::string(what) + " out of range");
    return v;
}

dfa::Nfa read_nfa(PyObject* eps, PyObject* edges, long start, long final_) {
    if (!PyList_Check(eps) || !PyList_Check(edges) || PyList_GET_SIZE(eps) != PyList_GET_SIZE(edges))
        throw BadInput("eps and edges must be lists of one length");
    dfa::Nfa a;
    Py_ssize_t n = PyList_GET_SIZE(eps);
    if (n <= 0 || n >= INT32_MAX) throw BadInput("NFA size out of range");
    a.n = static_cast<int32_t>(n);
    if (start < 0 || start >= n || final_ < 0 || final_ >= n) throw BadInput("start or final state out of range");
    a.start = static_cast<int32_t>(start);
    a.final_ = static_cast<int32_t>(final_);
    a.eps_off.assign(n + 1, 0);
    a.edge_off.assign(n + 1, 0);
    for (Py_ssize_t s = 0; s < n; ++s) {
        PyObject* e = PyList_GET_ITEM(eps, s);
        if (!PyList_Check(e)) throw BadInput("eps[s] must be a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(e); ++j)
            a.eps.push_back(static_cast<int32_t>(as_index(PyList_GET_ITEM(e, j), n, "an epsilon target")));
        a.eps_off[s + 1] = static_cast<int64_t>(a.eps.size());
        PyObject* g = PyList_GET_ITEM(edges, s);
        if (!PyList_Check(g)) throw BadInput("edges[s] must be a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(g); ++j) {
            PyObject* t = PyList_GET_ITEM(g, j);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) throw BadInput("an edge must be a tuple (lo, hi, target)");
            long lo = as_index(PyTuple_GET_ITEM(t, 0), 256, "an edge's lo byte");
            long hi = as_index(PyTuple_GET_ITEM(t, 1), 256, "an edge's hi byte");
            if (hi < lo) throw BadInput("an edge's hi byte is below its lo byte");
            a.lo.push_back(static_cast<uint8_t>(lo));
            a.hi.push_back(static_cast<uint8_t>(hi));
            a.tgt.push_back(static_cast<int32_t>(as_index(PyTuple_GET_ITEM(t, 2), n, "an edge's target")));
        }
        a.edge_off[s + 1] = static_cast<int64_t>(a.tgt.size());
    }
    return a;
}

// regex_dfa's front end: the Python AST (regex.py's frozen dataclasses), read with the GIL held.
constexpr int N_NAMES = 6;
const char* const NAME_TEXT[N_NAMES] = {"items", "ranges", "item", "min", "max", "target"};
PyObject* NAMES[N_NAMES];  // the AST's attribute names, interned once (PyInit__native)

struct FromPy {
    dfa::Arena& ast;
    PyObject* types[5];  // CharSet, Concat, Alt, Repeat, Call
    std::unordered_map<PyObject*, int32_t> ids;
    int depth = 0;

    int kind(PyObject* node) const {
        for (int k = 0; k < 5; ++k)
            if (Py_TYPE(node) == reinterpret_cast<PyTypeObject*>(types[k])) return k;
        throw dfa::Unsupported();  // (a node the native compile path does not know: nfa.py builds it, or names it)
    }

    static PyObject* attr(PyObject* node, int name) {  // a new reference
        PyObject* v = PyObject_GetAttr(node, NAMES[name]);
        if (!v) throw BadInput(std::string("an AST node without ") + NAME_TEXT[name]);
        return v;
    }

    static int64_t as_int(PyObject* o) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) throw BadInput("an AST int is not an int");
        return v;
    }

    int32_t read(PyObject* node) {
        auto it = ids.find(node);
        if (it != ids.end()) return it->second;
        if (depth >= dfa::MAX_DEPTH) throw dfa::Unsupported();
        ++depth;
        struct Undo {
            int& d;
            ~Undo() { --d; }
        } undo{depth};
        int k = kind(node);
        std::vector<int64_t> key{k};
        if (k == dfa::CHARSET) {
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
            if (!ok) throw BadInput("ranges must be a tuple of (lo, hi)");
        } else if (k == dfa::CONCAT || k == dfa::ALT) {
            PyObject* t = attr(node, 0);
            if (!PyTuple_Check(t)) {
                Py_DECREF(t);
                throw BadInput("items must be a tuple");
            }
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) key.push_back(read(PyTuple_GET_ITEM(t, i)));
            Py_DECREF(t);
        } else if (k == dfa::REPEAT) {
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

// nfa.charset_sequences (`sequences`) as the NFA construction asks it, with the GIL held: a
// charset's flat code point ranges -> its byte-range sequences.
dfa::CharsetSequences charset_sequences(PyObject* sequences) {
    return [sequences](const int64_t* key, size_t n) {
        PyObject* ranges = PyTuple_New(static_cast<Py_ssize_t>(n));
        if (!ranges) throw std::bad_alloc();
        for (size_t k = 0; k < n; ++k) {
            PyObject* pair =
                Py_BuildValue("(LL)", static_cast<long long>(key[2 * k]), static_cast<long long>(key[2 * k + 1]));
            if (!pair) {
                Py_DECREF(ranges);
                throw BadInput("charset ranges");
            }
            PyTuple_SET_ITEM(ranges, static_cast<Py_ssize_t>(k), pair);
        }
        PyObject* got = PyObject_CallOneArg(sequences, ranges);
        Py_DECREF(ranges);
        if (!got) throw BadInput("charset_sequences failed");
        std::vector<dfa::ByteRanges> out;
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
        if (!ok) throw BadInput("charset_sequences gave no byte-range sequences");
        return out;
    };
}

PyObject* result_object(dfa::Result& r) {
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

dfa::Result run_minimal(const dfa::Nfa& a, int64_t max_states) {
    dfa::Result r;
    Py_BEGIN_ALLOW_THREADS
    try {
        r = dfa::minimal_dfa(a, max_states);
    } catch (...) {  // (std::bad_alloc: reported with the GIL)
        r.limit = false;
        r.states = -1;
    }
    Py_END_ALLOW_THREADS
    return r;
}

// The arena's root -> NFA -> minimal DFA, as the Python result (see the methods' docs).
PyObject* arena_dfa(const dfa::Arena& ast, int32_t root, PyObject* sequences, int64_t max_nfa, int64_t max_states) {
    // (the NFA built with the GIL held: it calls charset_sequences back; the builder's maps are
    // freed before the construction)
    const dfa::Nfa a = dfa::thompson_nfa(ast, root, charset_sequences(sequences), max_nfa);
    dfa::Result r = run_minimal(a, max_states);
    return result_object(r);
}

template <typename F>
PyObject* guarded(F&& body) {
    try {
        return body();
    } catch (const dfa::NfaLimit&) {
        return PyLong_FromLong(1);
    } catch (const dfa::Unsupported&) {
        return PyLong_FromLong(3);
    } catch (const BadInput& e) {
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
        dfa::Arena ast;
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
        dfa::Arena ast;
        int32_t root = dfa::parse_regex(ast, std::move(cps));
        if (estimate_limit >= 0) {
            std::vector<int64_t> memo(ast.keys.size(), -1);
            int64_t size = dfa::estimate(ast, root, memo);
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
        dfa::Nfa a = read_nfa(eps, edges, start, final_);
        dfa::Result r = run_minimal(a, max_states);
        if (r.limit) Py_RETURN_NONE;
        return result_object(r);
    } catch (const BadInput& e) {
        PyErr_Clear();  // (a TypeError of PyLong_AsLong's, named instead)
        PyErr_SetString(PyExc_ValueError, e.what());
        return nullptr;
    } catch (const std::bad_alloc&) {
        return PyErr_NoMemory();
    }
}

// ---- the module -----------------------------------------------------------------------------

PyMethodDef methods[] = {
    {"trie", trie, METH_VARARGS, "trie(trie arrays, vocab_size, eos_id) -> a checked trie, shared by engines"},
    {"build", build, METH_VARARGS, "build(machine arrays, trie, narrow_nodes=0) -> engine"},
    {"engines", engines, METH_NOARGS, "engines() -> engines alive (built, not yet freed)"},
    {"split_cache", split_cache, METH_VARARGS, "split_cache(trie, clear) -> (splits, bytes) kept before the clear"},
    {"fill", fill, METH_VARARGS, "fill(engine, frames, stack_offset, out) -> (tokens allowed (up to 1,024), top frame alone): a configuration's mask"},
    {"write_row", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(write_row)), METH_FASTCALL,
     "write_row(out, row, cleared) -> None: out = row (a row, or a tuple of the token ids it allows), then the"
     " token ids in the tuple cleared cleared"},
    {"fill_next_token_bitmask_par", fill_par, METH_VARARGS,
     "fill_next_token_bitmask_par(engine, [(frames, stack_offset)], out, rows, threads): masks on parallel threads"},
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

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                      "inferlab's native code (C++17): the mask engine, and the compile path's regex -> NFA -> minimal DFA",
                      -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() {
    for (int i = 0; i < N_NAMES; ++i)
        if (!(NAMES[i] = PyUnicode_InternFromString(NAME_TEXT[i]))) return nullptr;
    PyObject* m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "MAX_SUBSET_ENTRIES", PyLong_FromLongLong(dfa::MAX_SUBSET_ENTRIES)) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
