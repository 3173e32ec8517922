// The Python bindings of the native mask engine (C++17, Python's plain C API: no build dependency
// beyond a C++17 compiler and Python's headers), the extension module inferlab.constrain._native.
// Every line of it that touches the Python C API is here; the engine is plain C++ under csrc/
// (mask_engine.hpp: no Python object), and the seam between them is flat arrays: a
// configuration's token mask by a walk of the vocabulary's trie through the stack machine, bit
// for bit the Python engine's (grammar.py; tests/test_native.py compares them).
// - trie((child_start (N,) int64, child_count (N,) int32, byte (N,) uint8, tok_offset (N + 1,)
//   int64, tokens (T,) int32, n_roots), vocab_size, eos_id) -> a capsule of the checked trie
//   (native.py: trie_arrays), shared by every engine over it;
// - build(the 14 arrays of constrain/tables.py's CompiledMachine in its field order, trie,
//   narrow_nodes=0) -> a capsule of the engine (docs/native-engine.md, "The seam");
// - a configuration: frames (F, 3) int32 (automaton, local state, count; -1 for a plain
//   automaton) and stack_offset (K + 1,) int64, each stack from its bottom frame; or the
//   machine's own tuple of stacks, each a tuple of (automaton, state[, count]) tuples, and None;
// - a mask: (ceil(vocab_size / 32),) 32-bit words, bit t of word t / 32 for token t; a batch's,
//   rows of a (B, words) array.
// Every table is copied and checked when an engine is built: a malformed one raises ValueError
// (the engine's Bad, its message), never reads out of bounds. Walks hold no Python object: the
// GIL is released while they run, and a batch's rows are walked on parallel threads
// (fill_next_token_bitmask_par).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mask_engine.hpp"

namespace {

namespace mask = inferlab::mask;

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

void destroy(PyObject* capsule) {
    delete static_cast<mask::Engine*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
}

mask::Engine* engine_of(PyObject* capsule) {
    return static_cast<mask::Engine*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
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
    auto e = std::make_unique<mask::Engine>(*shared);
    mask::Machine& m = e->m;
    e->narrow_nodes = narrow_nodes;
    auto item = [&](int i) { return PyTuple_GET_ITEM(mt, i); };
    if (!read_array(item(0), m.state_offset, false, "state_offset") || !read_array(item(1), m.trans, false, "trans") ||
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
    PyObject* capsule = PyCapsule_New(e.get(), "inferlab.native.Engine", destroy);
    if (capsule) e.release();
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

PyMethodDef methods[] = {
    {"trie", trie, METH_VARARGS, "trie(trie arrays, vocab_size, eos_id) -> a checked trie, shared by engines"},
    {"build", build, METH_VARARGS, "build(machine arrays, trie, narrow_nodes=0) -> engine"},
    {"engines", engines, METH_NOARGS, "engines() -> engines alive (built, not yet freed)"},
    {"split_cache", split_cache, METH_VARARGS, "split_cache(trie, clear) -> (splits, bytes) kept before the clear"},
    {"fill", fill, METH_VARARGS, "fill(engine, frames, stack_offset, out) -> (tokens allowed (up to 1,024), top frame alone): a configuration's mask"},
    {"fill_next_token_bitmask_par", fill_par, METH_VARARGS,
     "fill_next_token_bitmask_par(engine, [(frames, stack_offset)], out, rows, threads): masks on parallel threads"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "inferlab's native mask engine (C++17)", -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() { return PyModule_Create(&module); }
