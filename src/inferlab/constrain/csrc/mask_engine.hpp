// The native mask engine (C++17, no Python): a machine's checked tables over a vocabulary's shared
// trie, and the fills of token masks from it, one at a time or a batch's rows on parallel threads.
//
// Layouts: the tables and the trie as mask_tables.hpp copies them; a mask is (ceil(vocab_size /
// 32),) uint32 words, bit t of word t / 32 for token t; a batch's masks are rows of one (B, words)
// array. Nothing here holds a Python object: the bindings (_native.cpp) release the GIL around
// fill and fill_rows.

#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mask_tables.hpp"
#include "mask_walker.hpp"

namespace inferlab::mask {

constexpr long long COUNT_CAP = 1024;  // fill's answer: the mask's tokens, up to this many

struct Filled {
    long long allowed;  // the mask's tokens, up to COUNT_CAP
    bool top_only;      // walk_mask's answer
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

    size_t words() const { return size_t((t.vocab_size + 31) / 32); }  // a mask's
    // The mask of `config` into out[0, words()), walked in slot 0. Raises on a malformed configuration.
    Filled fill(Config config, uint32_t* out);
    // out[rows[i] * words(), ...) = the mask of configs[i] (rows distinct, in out's range: the
    // caller's check), the configurations walked on up to `threads` threads at once -> per
    // configuration the message of what it raised, "" where none.
    std::vector<std::string> fill_rows(std::vector<Config>& configs, const std::vector<int64_t>& rows, uint32_t* out,
                                       int threads);
};

}  // namespace inferlab::mask
