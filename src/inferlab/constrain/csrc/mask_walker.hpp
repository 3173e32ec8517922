// One token mask by a walk of the vocabulary's trie through the stack machine (C++17, no Python):
// the same semantics as grammar.py's StackGrammar._walk_mask (the Python engine, its reference:
// tests/test_native.py compares them bit for bit), by the Python engine's frame split
// (token_split.py): per top frame the tokens decided inside its automaton, only the rest walked
// through the configuration.
//
// A Slot holds what a walk keeps from mask to mask (its interned configurations, its memos of
// splits) for one user at a time: an engine has one per thread (mask_engine.hpp).

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "mask_tables.hpp"
#include "split_cache.hpp"

namespace inferlab::mask {

struct FrameBits {  // a plain top's split as a configuration of several stacks uses it (kept_split_of)
    std::vector<uint32_t> inside;  // (words,)
    std::vector<int64_t> kids;
};

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
constexpr size_t MAX_SLOT_SPLITS = 1024;  // a slot's memo of (automaton, state, deep) -> split and exits
constexpr size_t MAX_SLOT_FRAME_SPLITS = 1024;  // a slot's memo of (automaton, state) -> FrameWalk, and of
                                                // (automaton, state, items left) -> its tokens' bits

struct Slot {  // a table, the walk's node marks, and the lock of its one user at a time
    std::mutex lock;
    Table table;
    std::vector<uint8_t> marks, scratch;
    std::map<std::tuple<int32_t, int32_t, bool>, std::pair<std::shared_ptr<const Split>, std::vector<int32_t>>> splits;
    std::map<std::pair<int32_t, int32_t>, std::shared_ptr<const FrameWalk>> frames;
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<uint32_t>> frame_bits;
    std::map<std::tuple<int32_t, int32_t, bool>, FrameBits> kept;
};

// `config`'s token mask ORed into words[0, ceil(vocab_size / 32)), walked with slot's table and
// memos (the caller holds its lock); narrow_nodes: a plain split looking at fewer trie nodes is
// walked directly, with no shape. -> whether the mask was its plain top frame's split alone (one
// stack; no token left the top's plain states): then every configuration with that top
// (automaton, state, a frame below) has it. Raises Bad on a malformed configuration.
bool walk_mask(const Machine& m, const Trie& t, int64_t narrow_nodes, Slot& slot, uint32_t* words, Config config);

}  // namespace inferlab::mask
