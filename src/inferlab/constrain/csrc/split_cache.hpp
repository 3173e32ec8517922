// The splits a vocabulary's trie keeps for every engine over it (the mask engine's cache shared
// across grammars: caches.CACHES' native_splits reads and clears it through split_cache()).
//
// Layout: a Split is a bit row over the vocabulary, (ceil(vocab_size / 32),) uint32 words, with
// the (trie node, exit) pairs where its walk leaves; a FrameWalk the tokens of a counted or map
// frame with the items each begins, and the trie nodes walked on through the configuration. The
// cache holds them by a hash of their key (a shape's codes, an automaton's signature), each hit
// compared whole, bounded by SPLIT_CACHE_BYTES.

#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace inferlab::mask {

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
constexpr size_t SHAPE_STATES = 256;  // shapes (and automata's signatures) up to this many states are shared

}  // namespace inferlab::mask
