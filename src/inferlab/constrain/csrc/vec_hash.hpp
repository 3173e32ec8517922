// A hash of a vector of integers (FNV-1a), for the compile path's hash maps keyed by vectors: the
// subset construction's NFA state sets, the regex arena's node keys.

#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inferlab::dfa {

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

}  // namespace inferlab::dfa
