// The walk of one token mask (mask_walker.hpp): the Walker, its splits and closures.

#include "mask_walker.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace inferlab::mask {

namespace {

// A closure past these is a malformed table (a map whose key can re-enter it without a byte):
// the Python engine would loop forever; this one raises.
constexpr size_t MAX_CLOSURE_STACKS = 1u << 20;
constexpr size_t MAX_STACK_FRAMES = 1u << 16;
constexpr int32_t MAX_COUNT = 1 << 30;  // a frame's count (a closure adds one: no overflow)

constexpr size_t REGION_STATES = 64;      // token_split.REGION_STATES
constexpr int REGION_MIN_BYTES = 32;      // token_split.REGION_MIN_BYTES
constexpr int DELTA_BYTES = 16;           // token_split.DELTA_BYTES
constexpr int QUOTE = 0x22;

struct Shape {
    std::vector<int32_t> rows;   // (k, 256) codes: -1 dead, 2i plain state i, 2j + 1 exit j
    std::vector<int32_t> exits;  // the exits' local states (not part of the key: the user's own)
    uint64_t hash = 0;
};

uint64_t fnv(const std::vector<int32_t>& codes) {  // FNV-1a
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : codes) h = (h ^ uint32_t(x)) * 1099511628211ull;
    return h;
}

class Walker {
  public:
    Walker(const Machine& machine, const Trie& trie, int64_t narrow, Slot& slot, uint32_t* words)
        : m(machine), t(trie), narrow_nodes(narrow), tab(slot.table), out(words), memo(slot.splits), frames(slot.frames),
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
                sig.insert(sig.end(), m.row(a, x), m.row(a, x) + 256);
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
        const int32_t* row = m.row(a, q);
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
            const int32_t* row = m.row(a, order[i]);
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
        const int32_t* row = m.row(a, q);
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

}  // namespace

bool walk_mask(const Machine& m, const Trie& t, int64_t narrow_nodes, Slot& slot, uint32_t* words, Config config) {
    Walker walker(m, t, narrow_nodes, slot, words);
    walker.mask(std::move(config));
    return walker.top_only;
}

}  // namespace inferlab::mask
