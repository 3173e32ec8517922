// The fills of an engine's masks (mask_engine.hpp): a slot per thread, each walk_mask's.

#include "mask_engine.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

namespace inferlab::mask {

namespace {

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

}  // namespace

Filled Engine::fill(Config config, uint32_t* out) {
    std::memset(out, 0, words() * 4);
    Slot& one = slot(0);
    std::lock_guard<std::mutex> guard(one.lock);
    const bool top_only = walk_mask(m, t, narrow_nodes, one, out, std::move(config));
    return {count_bits(out, words(), COUNT_CAP), top_only};
}

std::vector<std::string> Engine::fill_rows(std::vector<Config>& configs, const std::vector<int64_t>& rows, uint32_t* out,
                                           int threads) {
    std::vector<std::string> errors(configs.size());
    const int64_t n_words = int64_t(words());
    auto run = [&](size_t first, size_t step) {
        Slot& mine = slot(first);
        std::lock_guard<std::mutex> guard(mine.lock);
        for (size_t i = first; i < configs.size(); i += step) {
            try {  // (rows are distinct per configuration: no two threads write one)
                uint32_t* w = out + rows[i] * n_words;
                std::memset(w, 0, size_t(n_words) * 4);
                walk_mask(m, t, narrow_nodes, mine, w, std::move(configs[i]));
            } catch (const std::exception& exc) {
                errors[i] = exc.what();
            }
        }
    };
    const size_t n = std::max<size_t>(1, std::min<size_t>(size_t(std::max(threads, 1)), configs.size()));
    std::vector<std::thread> pool;
    for (size_t k = 1; k < n; ++k) pool.emplace_back(run, k, n);
    run(0, n);
    for (auto& th : pool) th.join();
    return errors;
}

}  // namespace inferlab::mask
