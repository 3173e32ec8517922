// The native mask engine (C++17): a configuration's token mask by a walk of the vocabulary's
// trie through the stack machine, the same semantics as grammar.py's StackGrammar._walk_mask
// (the Python engine, its reference: tests/test_native.py compares them bit for bit).
//
// Input is the flat layout of constrain/tables.py (CompiledMachine; docs/native-engine.md), a
// flat trie (native.py: trie_arrays) and a configuration as (frames (F, 3) int32, stack_offset
// (K + 1,) int64). Every table is copied and checked when an engine is built: a malformed one
// raises ValueError, never reads out of bounds. Walks hold no Python object: the GIL is released
// while they run, and a batch's rows are walked on parallel threads (fill_next_token_bitmask_par).
//
// The bindings are this file's last part, in the plain C API (no build dependency beyond a C++17
// compiler and Python's headers).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

constexpr uint8_t PLAIN = 0, COUNTED = 1, MAP = 2;
// A closure past these is a malformed table (a map whose key can re-enter it without a byte):
// the Python engine would loop forever; this one raises.
constexpr size_t MAX_CLOSURE_STACKS = 1u << 20;
constexpr size_t MAX_STACK_FRAMES = 1u << 16;
constexpr int32_t MAX_COUNT = 1 << 30;  // a frame's count (a closure adds one: no overflow)
constexpr int32_t MAX_TRIE_DEPTH = 1 << 14;  // bytes of the longest token

struct Frame {
    int32_t a, s, n;  // automaton, local state, count (-1: a plain automaton's frame)
    bool operator<(const Frame& o) const {
        if (a != o.a) return a < o.a;
        if (s != o.s) return s < o.s;
        return n < o.n;
    }
    bool operator==(const Frame& o) const { return a == o.a && s == o.s && n == o.n; }
};
using Stack = std::vector<Frame>;  // bottom first
using Config = std::vector<Stack>;  // sorted, distinct

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A frame split (xgrammar's, token_split.py's in the Python engine): the walk of the whole trie
// from state q of automaton a on top of a stack, while the states it reaches are plain (no push,
// no pop: whatever lies below). `inside`: every token that walk reaches (the stack accepts them,
// whatever lies below); `leave`: (trie node, exit) where it reached a state that may push or pop,
// with children left: those are walked through the configurations.
//
// A split depends only on the *shape* of the plain states reachable from q: their rows with the
// states renumbered in the order a breadth-first search meets them (code 2i: the i-th plain
// state; 2j + 1: the j-th state that may push or pop, an exit). Splits are kept by shape on the
// trie, shared by every grammar over the vocabulary and by every state of the same shape (a
// string's content in any automaton: Python's token_split.shape_cache); a hit compares the
// shapes whole. A shape past SHAPE_STATES plain states is not kept (its split is the slot's).
struct Split {
    std::vector<uint32_t> inside;                     // (words,)
    std::vector<std::pair<int64_t, int32_t>> leave;   // (node, exit index), in walk order
};

// The split of a counted or map top frame (token_split's frame split over StackMachine.frame_table
// and exits, as the Python engine's _build_mask uses it for such frames), walked once per
// (automaton, state): `tokens`, those whose bytes all walk inside the frame, each with the items it
// begins after the frame's current one (a counted automaton's next item starts where an item
// ends: frame_table's merged rows), sorted by items, so that a frame `left` items from its max
// allows a prefix of them (token_split.counted_tokens); `kids`, the trie nodes read by a byte that
// may follow a push or a pop at the state their parent reached (StackMachine.exits): their
// subtrees are walked through the configuration. Every other token dies inside the frame,
// whatever lies below.
struct FrameWalk {
    std::vector<std::pair<int32_t, int32_t>> tokens;  // (items begun, token), sorted
    std::vector<int64_t> kids;
    int32_t most = 0;  // the most items a token begins
};
struct FrameBits {  // a plain top's split as a configuration of several stacks uses it (kept_split_of)
    std::vector<uint32_t> inside;  // (words,)
    std::vector<int64_t> kids;
};
constexpr size_t MAX_SLOT_FRAME_SPLITS = 1024;  // a slot's memo of (automaton, state) -> FrameWalk, and of
                                                // (automaton, state, items left) -> its tokens' bits

struct Shape {
    std::vector<int32_t> rows;   // (k, 256) codes: -1 dead, 2i plain state i, 2j + 1 exit j
    std::vector<int32_t> exits;  // the exits' local states (not part of the key: the user's own)
    uint64_t hash = 0;
};

struct SplitCache {  // per trie, shared by its engines (threads: locked), bounded by bytes
    std::mutex lock;
    std::map<uint64_t, std::vector<std::pair<std::vector<int32_t>, std::shared_ptr<const Split>>>> splits;
    // counted and map frames' walks by their automaton's signature and state (Python's frame_cache
    // by digest: a maxLength string's item automaton recurs in every schema)
    std::map<uint64_t, std::vector<std::pair<std::vector<int32_t>, std::shared_ptr<const FrameWalk>>>> frames;
    size_t bytes = 0;
    void clear() {
        splits.clear();
        frames.clear();
        bytes = 0;
    }
    size_t size() const {
        size_t n = 0;
        for (auto& [hash, entries] : splits) n += entries.size();
        for (auto& [hash, entries] : frames) n += entries.size();
        return n;
    }
};
constexpr size_t SPLIT_CACHE_BYTES = size_t(64) << 20;
constexpr size_t SHAPE_STATES = 256;
constexpr size_t REGION_STATES = 64;      // token_split.REGION_STATES
constexpr int REGION_MIN_BYTES = 32;      // token_split.REGION_MIN_BYTES
constexpr int DELTA_BYTES = 16;           // token_split.DELTA_BYTES
constexpr int QUOTE = 0x22;      // shapes up to this many plain states are shared
constexpr size_t MAX_SLOT_SPLITS = 1024;  // a slot's memo of (automaton, state, deep) -> split and exits

struct Machine {
    int32_t A = 0;
    std::vector<uint8_t> plain_at[2];  // [deep][global state]: plain(a, s, deep), precomputed
    int64_t S = 0;
    std::vector<int64_t> state_offset, call_offset, lo, hi;
    std::vector<int32_t> trans, start, callee, ret, map_first, map_next;
    std::vector<uint8_t> accepting, productive, kind, unique, reads;
    // StackMachine.exits, over global states: the row of the bytes that may be read right after a
    // push or a pop at each state (-1: none may happen there), and whether a counted automaton's
    // frame table is a DFA (StackMachine.frame_table: no accepting state reads a byte its start reads)
    std::vector<int32_t> exit_row;
    std::vector<std::array<uint64_t, 4>> exit_bytes;
    std::vector<std::vector<uint8_t>> exit_list;  // each exit row's bytes, in order
    std::vector<uint8_t> frame_dfa;

    int32_t n_states(int32_t a) const { return int32_t(state_offset[a + 1] - state_offset[a]); }
    int64_t g(int32_t a, int32_t s) const { return state_offset[a] + s; }
    int32_t target(int32_t a, int32_t s, uint8_t b) const { return trans[size_t(g(a, s)) * 256 + b]; }
    bool acc(int32_t a, int32_t s) const { return accepting[g(a, s)] != 0; }
    bool has_calls(int32_t a, int32_t s) const { return call_offset[g(a, s) + 1] > call_offset[g(a, s)]; }
    bool numbered(int32_t a) const { return kind[a] != PLAIN; }
    // closure's fast path: a plain automaton's state that can neither push nor pop
    bool plain(int32_t a, int32_t s, bool deep) const { return plain_at[deep][g(a, s)] != 0; }
    bool live_top(const Frame& f) const { return f.n != -1 || acc(f.a, f.s) || reads[g(f.a, f.s)]; }
    bool may_act(int32_t a, int32_t q) const { return has_calls(a, q) || acc(a, q) || (numbered(a) && q == start[a]); }
    bool exit_reads(int64_t gq, uint8_t b) const {
        const int32_t r = exit_row[size_t(gq)];
        return r >= 0 && (exit_bytes[size_t(r)][b >> 6] >> (b & 63) & 1);
    }

    void check() const;
    void derive();  // reads, plain_at, exit_row/exit_bytes, frame_dfa: from the checked tables
};

struct Trie {
    int64_t n_nodes = 0, n_roots = 0;
    int32_t vocab_size = 0, eos = -1, depth = 0;  // depth: bytes of the longest token
    std::vector<int64_t> child_start, tok_offset, parent;  // parent: -1 for a root (check() fills it)
    std::vector<int32_t> child_count, tokens;
    std::vector<uint8_t> byte;
    mutable SplitCache cache;
    void check();
};

uint64_t fnv(const std::vector<int32_t>& codes) {  // FNV-1a
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : codes) h = (h ^ uint32_t(x)) * 1099511628211ull;
    return h;
}

void require(bool ok, const char* what) {  // (a literal: no string built on the checks' paths)
    if (!ok) throw Bad(what);
}

void Machine::check() const {
    require(A >= 1, "no automaton");
    require(state_offset.size() == size_t(A) + 1 && state_offset[0] == 0, "state_offset: not (A + 1,) from 0");
    for (int32_t a = 0; a < A; ++a) require(state_offset[a + 1] > state_offset[a], "state_offset: an automaton with no state");
    require(state_offset[A] == S && trans.size() == size_t(S) * 256, "trans: not (S, 256)");
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
        for (int64_t i = state_offset[a] * 256; i < state_offset[a + 1] * 256; ++i)
            require(trans[i] >= -1 && trans[i] < n, "trans: a target out of its automaton");
        for (int64_t i = call_offset[state_offset[a]]; i < call_offset[state_offset[a + 1]]; ++i)
            require(callee[i] >= 0 && callee[i] < A && ret[i] >= 0 && ret[i] < n, "call table: out of range");
    }
}

void Machine::derive() {
    reads.assign(size_t(S), 0);
    for (int64_t i = 0; i < S * 256; ++i)
        if (trans[size_t(i)] >= 0) reads[size_t(i / 256)] = 1;
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

// The configurations one walker has met, interned (as StackMachine's ids): each one's closure
// and its byte transitions, computed on first need, so that trie nodes reaching the same
// configuration (a string's characters, an enum's letters at one depth) cost a table lookup.
// Kept across masks; forgotten at a mask's start once past MAX_TABLE_CONFIGS.
struct Table {
    std::map<Config, int32_t> ids;
    std::vector<Config> closed;                      // the closure of each
    std::vector<std::array<int32_t, 256>> next;      // -2 not computed, -1 dead
    void clear() {
        ids.clear();
        closed.clear();
        next.clear();
    }
};
constexpr size_t MAX_TABLE_CONFIGS = 1u << 12;  // (1 KB of steps each, and a closure)
  // (256 int32 each: 16 MB at most, per slot)

struct Slot {  // a table, the walk's node marks, and the lock of its one user at a time
    std::mutex lock;
    Table table;
    std::vector<uint8_t> marks, scratch;
    std::map<std::tuple<int32_t, int32_t, bool>, std::pair<std::shared_ptr<const Split>, std::vector<int32_t>>> splits;
    std::map<std::pair<int32_t, int32_t>, std::shared_ptr<const FrameWalk>> frames;
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<uint32_t>> frame_bits;
    std::map<std::tuple<int32_t, int32_t, bool>, FrameBits> kept;
};

struct Engine {
    Machine m;
    int64_t narrow_nodes = 0;  // a plain split looking at fewer trie nodes is walked directly, with no shape
    std::shared_ptr<const Trie> trie;
    const Trie& t;
    explicit Engine(std::shared_ptr<const Trie> shared) : trie(std::move(shared)), t(*trie) { ++alive; }
    ~Engine() { --alive; }
    static inline std::atomic<long> alive{0};  // engines not yet freed (_native.engines(): a leak check)
    std::mutex slots_lock;
    std::vector<std::unique_ptr<Slot>> slots;  // slot k: the single fill's (0) or a batch thread's
    Slot& slot(size_t k) {
        std::lock_guard<std::mutex> guard(slots_lock);
        while (slots.size() <= k) slots.push_back(std::make_unique<Slot>());
        return *slots[k];
    }
};

class Walker {
  public:
    Walker(const Engine& e, Slot& slot, uint32_t* words)
        : m(e.m), t(e.t), narrow_nodes(e.narrow_nodes), tab(slot.table), out(words), memo(slot.splits), frames(slot.frames),
          frame_bits(slot.frame_bits), kept(slot.kept), mark(slot.marks), scratch(slot.scratch) {
        if (mark.size() != size_t(t.n_nodes)) mark.assign(size_t(t.n_nodes), 0);
    }

    // Was the last mask its plain top frame's split alone (one stack; no token left the top's
    // plain states)? Then every configuration with that top (automaton, state, a frame below) has it.
    bool top_only = false;

    void mask(Config config) {
        for (auto& st : config) check_stack(st);
        if (tab.ids.size() > MAX_TABLE_CONFIGS) tab.clear();
        if (memo.size() > MAX_SLOT_SPLITS) memo.clear();
        if (frames.size() > MAX_SLOT_FRAME_SPLITS) frames.clear();
        if (frame_bits.size() > MAX_SLOT_FRAME_SPLITS) frame_bits.clear();
        if (kept.size() > MAX_SLOT_FRAME_SPLITS) kept.clear();
        const int32_t id = intern(std::move(config));
        const Config cl = tab.closed[id];  // (a copy: the table may grow under the walk)
        if (t.eos >= 0) {
            for (auto& st : cl)
                if (st.size() == 1 && m.acc(st[0].a, st[0].s)) { set(t.eos); break; }
        }
        if (cl.size() == 1 && m.plain(cl[0].back().a, cl[0].back().s, cl[0].size() > 1)) {
            // one stack, its top plain: the top's split, then its leaving paths from the stack
            const Stack& st = cl[0];
            const auto& [split, exits] = split_of(st.back().a, st.back().s, st.size() > 1);
            for (size_t w = 0; w < split->inside.size(); ++w) out[w] |= split->inside[w];
            for (auto [v, j] : split->leave) {
                Stack moved = st;
                moved.back().s = exits[j];
                walk(intern(Config{std::move(moved)}), t.child_start[v], t.child_count[v]);
            }
            top_only = split->leave.empty();
            return;
        }
        // several stacks (or a top that may push or pop): each top's split, then the trie
        // paths that leave one walked through the whole configuration
        std::vector<int64_t> marked;
        auto keep = [&](int64_t v) {
            if (mark[v] == 2) return;
            mark[v] = 2;  // below it: every node
            marked.push_back(v);
            for (int64_t u = t.parent[v]; u >= 0 && mark[u] == 0; u = t.parent[u]) {
                mark[u] = 1;  // on a path to one
                marked.push_back(u);
            }
        };
        for (auto& st : cl) {
            const Frame top = st.back();
            if (m.numbered(top.a)) {
                if (m.kind[top.a] == COUNTED && !m.frame_dfa[top.a]) {  // (as the Python engine: the whole walk)
                    for (int64_t v : marked) mark[v] = 0;
                    walk(id, 0, t.n_roots);
                    return;
                }
                const FrameWalk& split = frame_walk_of(top.a, top.s);
                const std::vector<uint32_t>& inside = frame_inside(top, split);
                for (size_t w = 0; w < inside.size(); ++w) out[w] |= inside[w];
                for (int64_t v : split.kids) keep(v);
                continue;
            }
            const FrameBits& split = kept_split_of(top.a, top.s, st.size() > 1);
            for (size_t w = 0; w < split.inside.size(); ++w) out[w] |= split.inside[w];
            for (int64_t v : split.kids) keep(v);
        }
        if (!marked.empty()) walk_marked(id, 0, t.n_roots);
        for (int64_t v : marked) mark[v] = 0;
    }

  private:
    const Machine& m;
    const Trie& t;
    const int64_t narrow_nodes;
    Table& tab;
    uint32_t* out;
    std::map<std::tuple<int32_t, int32_t, bool>, std::pair<std::shared_ptr<const Split>, std::vector<int32_t>>>& memo;
    std::map<std::pair<int32_t, int32_t>, std::shared_ptr<const FrameWalk>>& frames;
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<uint32_t>>& frame_bits;
    std::map<std::tuple<int32_t, int32_t, bool>, FrameBits>& kept;
    std::vector<uint8_t>& mark;  // per trie node: 1 on a path to a leaving node, 2 a leaving node (0 after a mask)
    std::vector<uint8_t>& scratch;  // per trie node: delta_split's marks (0 after each)

    // The split of (automaton a, state q, deep) and its exits' local states: the slot's memo, else
    // the trie's cache by shape, else walked now.
    const std::pair<std::shared_ptr<const Split>, std::vector<int32_t>>& split_of(int32_t a, int32_t q, bool deep) {
        auto key = std::make_tuple(a, q, deep);
        auto it = memo.find(key);
        if (it != memo.end()) return it->second;
        {  // a narrow state (structure, a key's name): walked directly, where its shape would cost more
            auto made = std::make_shared<Split>();
            std::vector<int32_t> exits, exit_of;
            int64_t budget = narrow_nodes;
            made->inside.assign(size_t((t.vocab_size + 31) / 32), 0);
            if (budget > 0 && narrow_walk(*made, exits, exit_of, a, q, deep, 0, t.n_roots, budget))
                return memo.emplace(key, std::make_pair(std::shared_ptr<const Split>(std::move(made)), std::move(exits)))
                    .first->second;
        }
        const int32_t base = delta_base(a, q);
        if (base >= 0) {
            auto got = delta_split(a, q, base, deep);
            return memo.emplace(key, std::move(got)).first->second;
        }
        std::vector<int32_t> region = region_of(a, q, deep);
        if (!region.empty()) {  // the walk inside the region shared, the tokens leaving it walked on
            Shape shape = region_shape(a, region, deep);
            auto shared = cached_split(shape, [&](Split& made) { shape_walk(made, shape.rows, 0, 0, t.n_roots, true); });
            auto made = std::make_shared<Split>();
            made->inside = shared->inside;
            std::vector<int32_t> exits, exit_of;
            int64_t budget = INT64_MAX;
            for (auto [v, i] : shared->leave)
                visit(*made, exits, exit_of, a, m.target(a, region[size_t(i)], t.byte[v]), deep, v, budget);
            return memo.emplace(key, std::make_pair(std::shared_ptr<const Split>(std::move(made)), std::move(exits)))
                .first->second;
        }
        Shape shape = shape_of(a, q, deep);
        auto split = cached_split(shape, [&](Split& made) { shape_walk(made, shape.rows, 0, 0, t.n_roots, false); });
        return memo.emplace(key, std::make_pair(split, std::move(shape.exits))).first->second;
    }

    // token_split.delta_base: the loop state whose split state q's derives from, or -1: the most
    // frequent target of q's row (the lowest on a tie), where q's row differs from its row on at
    // most DELTA_BYTES bytes and it is its own most frequent target (bases never chain).
    int32_t delta_base(int32_t a, int32_t q) const {
        auto most = [&](int32_t x, int& live) {
            std::vector<int32_t> count(size_t(m.n_states(a)), 0);
            live = 0;
            for (int b = 0; b < 256; ++b) {
                const int32_t y = m.target(a, x, uint8_t(b));
                if (y >= 0) ++count[size_t(y)], ++live;
            }
            return int32_t(std::max_element(count.begin(), count.end()) - count.begin());
        };
        int live = 0, base_live = 0;
        const int32_t base = most(q, live);
        if (live < REGION_MIN_BYTES || base == q) return -1;
        int differ = 0;
        for (int b = 0; b < 256; ++b) differ += m.target(a, q, uint8_t(b)) != m.target(a, base, uint8_t(b));
        if (differ > DELTA_BYTES || most(base, base_live) != base) return -1;
        return base;
    }

    // token_split.delta_frame: q's split from its base's, walking only where q's walk differs from
    // the base's at the same trie node (the subtrees of the differing first bytes, as deep as a
    // declared name's prefix goes on); everywhere else the base's tokens and leaving nodes hold.
    std::pair<std::shared_ptr<const Split>, std::vector<int32_t>> delta_split(int32_t a, int32_t q, int32_t base, bool deep) {
        const auto got = split_of(a, base, deep);  // (a copy: split_of may add to the memo)
        const Split& from = *got.first;
        auto made = std::make_shared<Split>();
        made->inside = from.inside;
        std::vector<int32_t> exits, exit_of;
        std::vector<int64_t> touched;  // scratch marks: 1 a node q's walk decides, 2 a subtree dead from q
        if (scratch.size() != size_t(t.n_nodes)) scratch.assign(size_t(t.n_nodes), 0);
        for (int64_t v = 0; v < t.n_roots; ++v) {
            const int32_t x = m.target(a, q, t.byte[v]), y = m.target(a, base, t.byte[v]);
            if (x != y) delta_walk(*made, exits, exit_of, touched, a, deep, v, x, y);
        }
        for (auto [u, j] : from.leave) {  // the base's leaving nodes where its walk still holds
            bool holds = scratch[size_t(u)] == 0;
            for (int64_t w = t.parent[u]; holds && w >= 0; w = t.parent[w]) holds = scratch[size_t(w)] != 2;
            if (!holds) continue;
            const int32_t x = got.second[size_t(j)];
            if (exit_of.empty()) exit_of.assign(size_t(m.n_states(a)), -1);
            if (exit_of[size_t(x)] < 0) {
                exit_of[size_t(x)] = int32_t(exits.size());
                exits.push_back(x);
            }
            made->leave.emplace_back(u, exit_of[size_t(x)]);
        }
        for (int64_t v : touched) scratch[size_t(v)] = 0;
        return {std::shared_ptr<const Split>(std::move(made)), std::move(exits)};
    }

    // Node v, read into state x by q's walk and y by the base's (-2: the base's walk did not get
    // here, -1: dead), which differ: v's tokens are q's to decide, and below it what differs.
    void delta_walk(Split& split, std::vector<int32_t>& exits, std::vector<int32_t>& exit_of, std::vector<int64_t>& touched,
                    int32_t a, bool deep, int64_t v, int32_t x, int32_t y) {
        const bool below = y >= 0 && m.plain(a, y, deep);  // the base walked v's children
        touched.push_back(v);
        scratch[size_t(v)] = 1;
        for (int64_t k = t.tok_offset[v]; k < t.tok_offset[v + 1]; ++k) {
            const int32_t tok = t.tokens[k];
            if (x >= 0) split.inside[size_t(tok >> 5)] |= uint32_t(1) << (tok & 31);
            else split.inside[size_t(tok >> 5)] &= ~(uint32_t(1) << (tok & 31));
        }
        if (!t.child_count[v]) return;
        if (x < 0 || !m.plain(a, x, deep)) {  // q's walk stops here: the base's below v does not hold
            scratch[size_t(v)] = 2;
            if (below) clear_below(split, v);
            if (x >= 0) {
                int64_t budget = INT64_MAX;
                visit(split, exits, exit_of, a, x, deep, v, budget);  // (v's leaving at exit x)
            }
            return;
        }
        for (int64_t c = t.child_start[v]; c < t.child_start[v] + t.child_count[v]; ++c) {
            const int32_t xc = m.target(a, x, t.byte[c]), yc = below ? m.target(a, y, t.byte[c]) : -2;
            if (xc == yc || (xc < 0 && yc == -2)) continue;  // (the walks meet, or neither has tokens below)
            delta_walk(split, exits, exit_of, touched, a, deep, c, xc, yc);
        }
    }

    // Clears the tokens of every node below v (the base's, where q's walk stops at v).
    void clear_below(Split& split, int64_t v) const {
        for (int64_t c = t.child_start[v]; c < t.child_start[v] + t.child_count[v]; ++c) {
            for (int64_t k = t.tok_offset[c]; k < t.tok_offset[c + 1]; ++k)
                split.inside[size_t(t.tokens[k] >> 5)] &= ~(uint32_t(1) << (t.tokens[k] & 31));
            if (t.child_count[c]) clear_below(split, c);
        }
    }

    // The split of a shape: the trie's cache's (shapes up to SHAPE_STATES states), else walk(split) now.
    template <typename Walk>
    std::shared_ptr<const Split> cached_split(const Shape& shape, Walk walk) {
        std::shared_ptr<const Split> split;
        const bool shared = shape.rows.size() <= SHAPE_STATES * 256 + 1;
        if (shared) {
            std::lock_guard<std::mutex> guard(t.cache.lock);
            auto hit = t.cache.splits.find(shape.hash);
            if (hit != t.cache.splits.end())
                for (auto& [rows, s] : hit->second)
                    if (rows == shape.rows) split = s;
        }
        if (!split) {
            auto made = std::make_shared<Split>();
            made->inside.assign(size_t((t.vocab_size + 31) / 32), 0);
            walk(*made);
            split = made;
            if (shared) {
                std::lock_guard<std::mutex> guard(t.cache.lock);
                const size_t bytes = made->inside.size() * 4 + made->leave.size() * 16 + shape.rows.size() * 4;
                if (t.cache.bytes + bytes > SPLIT_CACHE_BYTES) t.cache.clear();
                t.cache.bytes += bytes;
                t.cache.splits[shape.hash].emplace_back(shape.rows, split);
            }
        }
        return split;
    }

    // A region (token_split.region): the plain states reached from q by bytes other than a quote,
    // breadth first by byte (q first), or none where they reach REGION_STATES. Inside a string, its
    // content loop: thousands of states of a schema, and of every schema, share its walk.
    std::vector<int32_t> region_of(int32_t a, int32_t q, bool deep) const {
        std::vector<int32_t> order{q}, index(size_t(m.n_states(a)), -1);
        index[size_t(q)] = 0;
        for (size_t i = 0; i < order.size(); ++i) {
            for (int b = 0; b < 256; ++b) {
                const int32_t x = m.target(a, order[i], uint8_t(b));
                if (b == QUOTE || x < 0 || !m.plain(a, x, deep) || index[size_t(x)] >= 0) continue;
                if (order.size() == REGION_STATES) return {};
                index[size_t(x)] = int32_t(order.size());
                order.push_back(x);
            }
        }
        return order;
    }

    // A region's shape: per region state, per byte, -1 dead, 2i region state i, 1 leaving the
    // region (a quote, or a state outside it); then a -3 (no shape_of rows end so).
    Shape region_shape(int32_t a, const std::vector<int32_t>& region, bool deep) const {
        Shape shape;
        std::vector<int32_t> index(size_t(m.n_states(a)), -1);
        for (size_t i = 0; i < region.size(); ++i) index[size_t(region[i])] = int32_t(i);
        for (int32_t q : region) {
            for (int b = 0; b < 256; ++b) {
                const int32_t x = m.target(a, q, uint8_t(b));
                shape.rows.push_back(x < 0 ? -1 : b != QUOTE && m.plain(a, x, deep) && index[size_t(x)] >= 0 ? 2 * index[size_t(x)] : 1);
            }
        }
        shape.rows.push_back(-3);
        shape.hash = fnv(shape.rows);
        return shape;
    }

    // The FrameWalk of a counted or map frame's (automaton, state): the slot's memo, else the
    // trie's cache by the automaton's signature (up to SHAPE_STATES states), else walked now.
    const FrameWalk& frame_walk_of(int32_t a, int32_t q) {
        auto it = frames.find({a, q});
        if (it != frames.end()) return *it->second;
        std::vector<int32_t> sig;
        uint64_t hash = 0;
        const bool shared = size_t(m.n_states(a)) <= SHAPE_STATES;
        std::shared_ptr<const FrameWalk> got;
        if (shared) {
            sig = {m.n_states(a), m.start[a], m.kind[a], q};
            for (int32_t x = 0; x < m.n_states(a); ++x) {
                const int64_t gx = m.g(a, x);
                sig.insert(sig.end(), &m.trans[size_t(gx) * 256], &m.trans[size_t(gx) * 256] + 256);
                sig.push_back(m.accepting[size_t(gx)]);
                const int32_t row = m.exit_row[size_t(gx)];
                sig.push_back(row >= 0);
                if (row >= 0)
                    for (uint64_t w : m.exit_bytes[size_t(row)]) {
                        sig.push_back(int32_t(uint32_t(w)));
                        sig.push_back(int32_t(uint32_t(w >> 32)));
                    }
            }
            hash = fnv(sig);
            std::lock_guard<std::mutex> guard(t.cache.lock);
            auto hit = t.cache.frames.find(hash);
            if (hit != t.cache.frames.end())
                for (auto& [key, walk] : hit->second)
                    if (key == sig) got = walk;
        }
        if (!got) {
            auto made = std::make_shared<FrameWalk>();
            auto emit = [&made](int32_t items, int32_t tok) {
                made->most = std::max(made->most, items);
                made->tokens.emplace_back(items, tok);
            };
            frame_walk(emit, made->kids, a, q, 0, 0, t.n_roots);
            std::stable_sort(made->tokens.begin(), made->tokens.end(),
                             [](auto& x, auto& y) { return x.first < y.first; });
            got = made;
            if (shared) {
                std::lock_guard<std::mutex> guard(t.cache.lock);
                const size_t bytes = made->tokens.size() * 8 + made->kids.size() * 8 + sig.size() * 4;
                if (t.cache.bytes + bytes > SPLIT_CACHE_BYTES) t.cache.clear();
                t.cache.bytes += bytes;
                t.cache.frames[hash].emplace_back(std::move(sig), got);
            }
        }
        return *frames.emplace(std::make_pair(a, q), std::move(got)).first->second;
    }

    // The bits of the tokens a top frame allows inside it: those of its FrameWalk that begin at most
    // the items its count leaves (a counted frame's hi - 1 - count; any for a map or no max).
    const std::vector<uint32_t>& frame_inside(const Frame& top, const FrameWalk& split) {
        int64_t left = split.most;
        if (m.kind[top.a] == COUNTED && m.hi[top.a] != -1)
            left = std::min<int64_t>(left, std::max<int64_t>(m.hi[top.a] - 1 - top.n, 0));
        auto key = std::make_tuple(top.a, top.s, int32_t(left));
        auto it = frame_bits.find(key);
        if (it != frame_bits.end()) return it->second;
        std::vector<uint32_t> bits(size_t((t.vocab_size + 31) / 32), 0);
        for (auto [items, tok] : split.tokens) {
            if (items > left) break;
            bits[size_t(tok >> 5)] |= uint32_t(1) << (tok & 31);
        }
        return frame_bits.emplace(key, std::move(bits)).first->second;
    }

    // The trie's nodes [c0, c0 + n) read from state q of a frame of automaton a with `begun` items
    // begun after the frame's current one (a counted frame: at an item's end, a byte its start
    // reads begins the next): emit(items, token) for each token inside it, and the kids (children
    // read by an exit byte of the state their parent reached) into `kids`.
    template <typename Emit>
    void frame_walk(Emit& emit, std::vector<int64_t>& kids, int32_t a, int32_t q, int32_t begun, int64_t c0, int64_t n) const {
        const bool restart = m.kind[a] == COUNTED && m.acc(a, q);
        for (int64_t v = c0; v < c0 + n; ++v) {
            const uint8_t b = t.byte[v];
            int32_t to = m.target(a, q, b), items = begun;
            if (to < 0 && restart) {
                to = m.target(a, m.start[a], b);
                ++items;
            }
            if (to < 0) continue;
            for (int64_t k = t.tok_offset[v]; k < t.tok_offset[v + 1]; ++k) emit(items, t.tokens[k]);
            if (!t.child_count[v]) continue;
            exit_kids(kids, m.g(a, to), v);
            frame_walk(emit, kids, a, to, items, t.child_start[v], t.child_count[v]);
        }
    }

    // The children of trie node v read by a byte that may follow a push or a pop at global state gq.
    void exit_kids(std::vector<int64_t>& kids, int64_t gq, int64_t v) const {
        const int32_t row = m.exit_row[size_t(gq)];
        if (row < 0) return;
        const int64_t lo = t.child_start[v], hi = lo + t.child_count[v];
        const auto& few = m.exit_list[size_t(row)];
        if (few.size() * 8 < size_t(hi - lo)) {  // (children are sorted by byte: find each exit byte)
            for (uint8_t x : few) {
                const uint8_t* at = std::lower_bound(&t.byte[size_t(lo)], &t.byte[size_t(hi)], x);
                if (at != &t.byte[size_t(hi)] && *at == x) kids.push_back(lo + (at - &t.byte[size_t(lo)]));
            }
        } else {
            for (int64_t c = lo; c < hi; ++c)
                if (m.exit_reads(gq, t.byte[c])) kids.push_back(c);
        }
    }

    // A plain top's split for a configuration of several stacks: split_of's, each node where it
    // leaves (a state that may push or pop) walked on inside the automaton, so that only the
    // children read by an exit byte are walked through the configuration (token_split's frame
    // split), not the leaving nodes' whole subtrees.
    const FrameBits& kept_split_of(int32_t a, int32_t q, bool deep) {
        auto key = std::make_tuple(a, q, deep);
        auto it = kept.find(key);
        if (it != kept.end()) return it->second;
        const auto& [split, exits] = split_of(a, q, deep);
        FrameBits out;
        out.inside = split->inside;
        auto emit = [&out](int32_t, int32_t tok) { out.inside[size_t(tok >> 5)] |= uint32_t(1) << (tok & 31); };
        for (auto [v, j] : split->leave) {
            exit_kids(out.kids, m.g(a, exits[size_t(j)]), v);
            frame_walk(emit, out.kids, a, exits[size_t(j)], 0, t.child_start[v], t.child_count[v]);
        }
        return kept.emplace(key, std::move(out)).first->second;
    }

    // The split (shape_walk's) through automaton a's own rows from state q (exits numbered as met), while it looks
    // at fewer than `budget` trie nodes: false past that (the walk is wide: its shape is shared).
    bool narrow_walk(Split& split, std::vector<int32_t>& exits, std::vector<int32_t>& exit_of, int32_t a, int32_t q,
                     bool deep, int64_t c0, int64_t n, int64_t& budget) const {
        if ((budget -= n) < 0) return false;
        const int32_t* row = &m.trans[size_t(m.g(a, q)) * 256];
        for (int64_t v = c0; v < c0 + n; ++v) {
            const int32_t x = row[t.byte[v]];
            if (x >= 0 && !visit(split, exits, exit_of, a, x, deep, v, budget)) return false;
        }
        return true;
    }

    // Trie node v, read into state x of automaton a: its tokens, then its children walked on
    // (narrow_walk) where x is plain, else v leaves at exit x.
    bool visit(Split& split, std::vector<int32_t>& exits, std::vector<int32_t>& exit_of, int32_t a, int32_t x, bool deep,
               int64_t v, int64_t& budget) const {
        set_tokens(split.inside, v);
        if (!t.child_count[v]) return true;
        if (m.plain(a, x, deep)) return narrow_walk(split, exits, exit_of, a, x, deep, t.child_start[v], t.child_count[v], budget);
        if (exit_of.empty()) exit_of.assign(size_t(m.n_states(a)), -1);
        if (exit_of[size_t(x)] < 0) {
            exit_of[size_t(x)] = int32_t(exits.size());
            exits.push_back(x);
        }
        split.leave.emplace_back(v, exit_of[size_t(x)]);
        return true;
    }

    // The plain states reachable from q (q first, whatever it is), breadth first, as codes.
    Shape shape_of(int32_t a, int32_t q, bool deep) const {
        Shape shape;
        std::vector<int32_t> index(size_t(m.n_states(a)), -1), exit(size_t(m.n_states(a)), -1), order{q};
        index[q] = 0;
        for (size_t i = 0; i < order.size(); ++i) {
            const int32_t* row = &m.trans[size_t(m.g(a, order[i])) * 256];
            for (int b = 0; b < 256; ++b) {
                const int32_t x = row[b];
                int32_t code = -1;
                if (x >= 0 && m.plain(a, x, deep)) {
                    if (index[x] < 0) {
                        index[x] = int32_t(order.size());
                        order.push_back(x);
                    }
                    code = 2 * index[x];
                } else if (x >= 0) {
                    if (exit[x] < 0) {
                        exit[x] = int32_t(shape.exits.size());
                        shape.exits.push_back(x);
                    }
                    code = 2 * exit[x] + 1;
                }
                shape.rows.push_back(code);
            }
        }
        shape.hash = fnv(shape.rows);
        return shape;
    }

    // The walk of a shape's codes from its state i: 2j goes on to state j; an odd code is an exit
    // (shape_of's exit code / 2: the node's tokens inside, its children leaving there) or, in a
    // region's shape, the node leaving the region from state i (its tokens the state's to decide).
    void shape_walk(Split& split, const std::vector<int32_t>& rows, int32_t i, int64_t c0, int64_t n, bool region) const {
        const int32_t* row = &rows[size_t(i) * 256];
        for (int64_t v = c0; v < c0 + n; ++v) {
            const int32_t code = row[t.byte[v]];
            if (code < 0) continue;
            if (region && code % 2) {
                split.leave.emplace_back(v, i);
                continue;
            }
            set_tokens(split.inside, v);
            if (!t.child_count[v]) continue;
            if (code % 2 == 0)
                shape_walk(split, rows, code / 2, t.child_start[v], t.child_count[v], region);
            else
                split.leave.emplace_back(v, code / 2);
        }
    }

    void set_tokens(std::vector<uint32_t>& bits, int64_t v) const {
        for (int64_t k = t.tok_offset[v]; k < t.tok_offset[v + 1]; ++k)
            bits[size_t(t.tokens[k] >> 5)] |= uint32_t(1) << (t.tokens[k] & 31);
    }

    // walk() over the marked nodes only (mark 1: this node, its marked children; 2: everything below)
    void walk_marked(int32_t id, int64_t c0, int64_t n) {
        for (int64_t v = c0; v < c0 + n; ++v) {
            if (!mark[v]) continue;
            const int32_t to = step(id, t.byte[v]);
            if (to < 0) continue;
            set_node(v);
            if (!t.child_count[v]) continue;
            if (mark[v] == 2)
                walk(to, t.child_start[v], t.child_count[v]);
            else
                walk_marked(to, t.child_start[v], t.child_count[v]);
        }
    }

    // config: any order; -> its id, closure computed
    int32_t intern(Config config) {
        std::sort(config.begin(), config.end());
        config.erase(std::unique(config.begin(), config.end()), config.end());
        auto it = tab.ids.find(config);
        if (it != tab.ids.end()) return it->second;
        Config cl = closure(config);
        const int32_t id = int32_t(tab.closed.size());
        tab.ids.emplace(std::move(config), id);
        tab.closed.push_back(std::move(cl));
        std::array<int32_t, 256> row;
        row.fill(-2);
        tab.next.push_back(row);
        return id;
    }

    // the configuration after byte b (-1: none), as StackMachine.row's column b
    int32_t step(int32_t id, uint8_t b) {
        int32_t got = tab.next[id][b];
        if (got != -2) return got;
        Config next;
        for (auto& st : tab.closed[id]) {
            const int32_t to = m.target(st.back().a, st.back().s, b);
            if (to < 0) continue;
            Stack moved = st;
            moved.back().s = to;
            next.push_back(std::move(moved));
        }
        got = next.empty() ? -1 : intern(std::move(next));
        tab.next[id][b] = got;  // (after intern: tab.next may have grown)
        return got;
    }

    void set(int32_t tok) { out[tok >> 5] |= uint32_t(1) << (tok & 31); }
    void set_node(int64_t v) {
        for (int64_t i = t.tok_offset[v]; i < t.tok_offset[v + 1]; ++i) set(t.tokens[i]);
    }

    void check_stack(const Stack& st) const {
        require(!st.empty(), "config: an empty stack");
        for (auto& f : st) {
            require(f.a >= 0 && f.a < m.A && f.s >= 0 && f.s < m.n_states(f.a) && f.n >= -1 && f.n <= MAX_COUNT,
                    "config: a frame out of range");
        }
    }

    // StackMachine.closure, step by step (the same work order: which pushes a stack was reached
    // with can decide the pushes after it).
    Config closure(const Config& config) const {
        if (config.size() == 1) {
            const Stack& st = config[0];
            if (m.plain(st.back().a, st.back().s, st.size() > 1)) return config;
        }
        std::set<Stack> seen;
        std::vector<std::pair<Stack, std::vector<int32_t>>> work;
        for (auto& st : config) work.emplace_back(st, std::vector<int32_t>());
        auto push = [&](Stack st, std::vector<int32_t> pushed) {
            require(st.size() <= MAX_STACK_FRAMES, "closure: a stack past its bound (malformed tables)");
            work.emplace_back(std::move(st), std::move(pushed));
        };
        auto with = [](std::vector<int32_t> pushed, int32_t a) {
            pushed.insert(std::lower_bound(pushed.begin(), pushed.end(), a), a);
            return pushed;
        };
        auto has = [](const std::vector<int32_t>& pushed, int32_t a) {
            return std::binary_search(pushed.begin(), pushed.end(), a);
        };
        // a push of each productive callee not pushed yet in this closure (top moved to its return state)
        auto push_callees = [&](const Stack& below, const Frame& top, const std::vector<int32_t>& pushed, int64_t c0,
                                int64_t c1) {
            for (int64_t i = c0; i < c1; ++i) {
                const int32_t c = m.callee[i];
                if (has(pushed, c) || !m.productive[c]) continue;
                Stack next = below;
                next.push_back({top.a, m.ret[i], top.n});
                next.push_back({c, m.start[c], m.numbered(c) ? 0 : -1});
                push(std::move(next), with(pushed, c));
            }
        };
        while (!work.empty()) {
            auto [st, pushed] = std::move(work.back());
            work.pop_back();
            if (!seen.insert(st).second) continue;
            require(seen.size() <= MAX_CLOSURE_STACKS, "closure: past its bound (malformed tables)");
            const Frame top = st.back();
            const int32_t a = top.a, s = top.s;
            Stack below(st.begin(), st.end() - 1);
            const int64_t c0 = m.call_offset[m.g(a, s)], c1 = m.call_offset[m.g(a, s) + 1];
            if (m.kind[a] == MAP) {
                const int64_t lo = m.lo[a], hi = m.hi[a];
                const int32_t first = m.map_first[a], nxt = m.map_next[a], start = m.start[a];
                if (s == start) {
                    if (top.n >= lo && st.size() > 1) push(below, pushed);
                    if (hi == -1 || top.n < hi) {
                        const int32_t key = top.n == 0 && first >= 0 ? first : nxt;
                        for (int64_t i = c0; i < c1; ++i) {
                            if (m.callee[i] != key) continue;
                            Stack next = below;
                            next.push_back({a, m.ret[i], top.n + 1});
                            next.push_back({key, m.start[key], -1});
                            push(std::move(next), with(pushed, key));
                        }
                    }
                    continue;
                }
                push_callees(below, top, pushed, c0, c1);
                if (m.acc(a, s)) {
                    Stack next = below;
                    next.push_back({a, start, top.n});
                    push(std::move(next), pushed);
                }
                continue;
            }
            if (m.kind[a] == COUNTED) {
                const int32_t start = m.start[a];
                const int64_t done = int64_t(top.n) + (s != start);
                if (s == start || m.acc(a, s)) {
                    if (s != start && (m.hi[a] == -1 || done < m.hi[a])) {
                        Stack next = below;
                        next.push_back({a, start, int32_t(done)});
                        push(std::move(next), pushed);
                    }
                    if (done >= m.lo[a] && st.size() > 1) push(below, pushed);
                }
                continue;
            }
            push_callees(below, top, pushed, c0, c1);
            if (st.size() > 1 && m.acc(a, s)) push(below, pushed);
        }
        Config out;
        for (auto& st : seen)
            if (m.live_top(st.back())) out.push_back(st);
        return out;  // (std::set iterates sorted)
    }

    // The trie's nodes [c0, c0 + n) read from configuration id.
    void walk(int32_t id, int64_t c0, int64_t n) {
        {
            const Config& cl = tab.closed[id];
            if (cl.size() == 1 && m.plain(cl[0].back().a, cl[0].back().s, cl[0].size() > 1)) {
                const Stack st = cl[0];  // (a copy: the table may grow under the walk)
                walk_plain(st, st.back().s, c0, n);
                return;
            }
        }
        for (int64_t v = c0; v < c0 + n; ++v) {
            const int32_t to = step(id, t.byte[v]);
            if (to < 0) continue;
            set_node(v);
            if (t.child_count[v]) walk(to, t.child_start[v], t.child_count[v]);
        }
    }

    // One stack whose top stays plain: only the top's DFA state moves (no configuration is
    // interned until the walk reaches a state that may push or pop).
    void walk_plain(const Stack& st, int32_t q, int64_t c0, int64_t n) {
        const int32_t a = st.back().a;
        const bool deep = st.size() > 1;
        const int32_t* row = &m.trans[size_t(m.g(a, q)) * 256];
        for (int64_t v = c0; v < c0 + n; ++v) {
            const int32_t to = row[t.byte[v]];
            if (to < 0) continue;
            set_node(v);
            if (!t.child_count[v]) continue;
            if (m.plain(a, to, deep)) {
                walk_plain(st, to, t.child_start[v], t.child_count[v]);
            } else {
                Stack moved = st;
                moved.back().s = to;
                walk(intern(Config{std::move(moved)}), t.child_start[v], t.child_count[v]);
            }
        }
    }
};

// ---- bindings -------------------------------------------------------------------------------

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
    delete static_cast<Engine*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
}

Engine* engine_of(PyObject* capsule) {
    return static_cast<Engine*>(PyCapsule_GetPointer(capsule, "inferlab.native.Engine"));
}

void destroy_trie(PyObject* capsule) {
    delete static_cast<std::shared_ptr<const Trie>*>(PyCapsule_GetPointer(capsule, "inferlab.native.Trie"));
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
    auto t = std::make_shared<Trie>();
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
    } catch (const Bad& exc) {
        PyErr_SetString(PyExc_ValueError, exc.what());
        return nullptr;
    }
    auto held = std::make_unique<std::shared_ptr<const Trie>>(std::move(t));
    PyObject* capsule = PyCapsule_New(held.get(), "inferlab.native.Trie", destroy_trie);
    if (capsule) held.release();
    return capsule;
}

PyObject* engines(PyObject*, PyObject*) { return PyLong_FromLong(Engine::alive.load()); }

// split_cache(trie, clear) -> (splits kept, bytes) before an optional clear (caches.CACHES owns it)
PyObject* split_cache(PyObject*, PyObject* args) {
    PyObject* capsule;
    int clear;
    if (!PyArg_ParseTuple(args, "Op", &capsule, &clear)) return nullptr;
    auto* shared = static_cast<std::shared_ptr<const Trie>*>(PyCapsule_GetPointer(capsule, "inferlab.native.Trie"));
    if (!shared) return nullptr;
    SplitCache& cache = (*shared)->cache;
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
    auto* shared = static_cast<std::shared_ptr<const Trie>*>(PyCapsule_GetPointer(trie_capsule, "inferlab.native.Trie"));
    if (!shared) return nullptr;
    if (PyTuple_GET_SIZE(mt) != 14) {
        PyErr_SetString(PyExc_ValueError, "build: 14 machine arrays expected");
        return nullptr;
    }
    auto e = std::make_unique<Engine>(*shared);
    Machine& m = e->m;
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
    } catch (const Bad& exc) {
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
bool read_stacks(PyObject* stacks, Config& config) {
    auto bad = [](const char* what) {
        PyErr_SetString(PyExc_ValueError, what);
        return false;
    };
    if (!PyTuple_Check(stacks)) return bad("config: a tuple of stacks expected");
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(stacks); ++k) {
        PyObject* st = PyTuple_GET_ITEM(stacks, k);
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) == 0) return bad("config: a stack is no non-empty tuple");
        Stack out;
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
bool read_config(PyObject* frames_obj, PyObject* offset_obj, Config& config) {
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
        Stack st;
        for (int64_t i = offset[k]; i < offset[k + 1]; ++i) st.push_back({frames[3 * i], frames[3 * i + 1], frames[3 * i + 2]});
        config.push_back(std::move(st));
    }
    return true;
}

// The bits set in words[0, n), counted up to `cap` (then `cap`): the caller asks only whether a
// mask is small (SWAR: __builtin_popcount is a libgcc call without -mpopcnt).
long long count_bits(const uint32_t* words, size_t n, long long cap) {
    long long count = 0;
    for (size_t i = 0; i < n && count < cap; ++i) {
        uint32_t x = words[i];
        if (!x) continue;
        x = x - ((x >> 1) & 0x55555555u);
        x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
        count += (((x + (x >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
    }
    return std::min(count, cap);
}
constexpr long long COUNT_CAP = 1024;  // fill's answer: the mask's tokens, up to this many

Py_ssize_t words_of(const Engine* e) { return (e->t.vocab_size + 31) / 32; }

// fill(engine, frames, stack_offset, out (words,) 32-bit) -> (tokens allowed (up to COUNT_CAP), top_only):
// out = the mask; top_only: Walker::top_only
PyObject* fill(PyObject*, PyObject* args) {
    PyObject *capsule, *frames, *offset, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &capsule, &frames, &offset, &out_obj)) return nullptr;
    Engine* e = engine_of(capsule);
    if (!e) return nullptr;
    Config config;
    if (!read_config(frames, offset, config)) return nullptr;
    Buffer out;
    if (!get_buffer(out_obj, out, 4, true, true, "out"))
        return nullptr;
    if (out.view.len != words_of(e) * 4) {
        PyErr_SetString(PyExc_ValueError, "out: not (ceil(vocab_size / 32),)");
        return nullptr;
    }
    std::string error;
    long long allowed = 0;
    bool top_only = false;
    Py_BEGIN_ALLOW_THREADS
    try {
        // (straight into `out`: its buffer is held, and no Python code runs until the GIL is back)
        uint32_t* words = static_cast<uint32_t*>(out.view.buf);
        std::memset(words, 0, size_t(words_of(e)) * 4);
        Slot& slot = e->slot(0);
        std::lock_guard<std::mutex> guard(slot.lock);
        Walker walker(*e, slot, words);
        walker.mask(std::move(config));
        top_only = walker.top_only;
        allowed = count_bits(words, size_t(words_of(e)), COUNT_CAP);
    } catch (const std::exception& exc) {
        error = exc.what();
    }
    Py_END_ALLOW_THREADS
    if (!error.empty()) {
        PyErr_SetString(PyExc_ValueError, error.c_str());
        return nullptr;
    }
    return Py_BuildValue("(LO)", allowed, top_only ? Py_True : Py_False);
}

// fill_next_token_bitmask_par(engine, [(frames, stack_offset), ...], out (B, words), rows, threads):
// out[rows[i]] = the mask of configuration i, the rows walked on up to `threads` threads at once.
PyObject* fill_par(PyObject*, PyObject* args) {
    PyObject *capsule, *configs, *out_obj, *rows_obj;
    int threads;
    if (!PyArg_ParseTuple(args, "OO!OOi", &capsule, &PyList_Type, &configs, &out_obj, &rows_obj, &threads)) return nullptr;
    Engine* e = engine_of(capsule);
    if (!e) return nullptr;
    std::vector<Config> all(size_t(PyList_GET_SIZE(configs)));
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
    const Py_ssize_t words = words_of(e), n_rows = words ? out.view.len / 4 / words : 0;
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
    std::vector<std::string> errors(all.size());
    uint32_t* base = static_cast<uint32_t*>(out.view.buf);
    Py_BEGIN_ALLOW_THREADS
    auto run = [&](size_t first, size_t step) {
        Slot& slot = e->slot(first);
        std::lock_guard<std::mutex> guard(slot.lock);
        for (size_t i = first; i < all.size(); i += step) {
            try {  // (rows are distinct per configuration: no two threads write one)
                uint32_t* w = base + rows[i] * words;
                std::memset(w, 0, size_t(words) * 4);
                Walker(*e, slot, w).mask(std::move(all[i]));
            } catch (const std::exception& exc) {
                errors[i] = exc.what();
            }
        }
    };
    const size_t n = std::max<size_t>(1, std::min<size_t>(size_t(std::max(threads, 1)), all.size()));
    std::vector<std::thread> pool;
    for (size_t k = 1; k < n; ++k) pool.emplace_back(run, k, n);
    run(0, n);
    for (auto& th : pool) th.join();
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
