// The regex arena's interning and NFA size estimate (regex_ast.hpp). Arena::intern is defined here,
// not in the header: inlined into the parser's recursive descent, it grew the sanitizer build's
// frames until a pattern nested MAX_DEPTH deep overflowed an 8 MB stack (.ci/sanitize.sh).

#include "regex_ast.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace inferlab::dfa {

int32_t Arena::intern(std::vector<int64_t>&& key) {
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    int32_t id = static_cast<int32_t>(keys.size());
    keys.push_back(key);
    ids.emplace(std::move(key), id);
    return id;
}

int64_t estimate(const Arena& ast, int32_t id, std::vector<int64_t>& memo) {
    if (memo[id] >= 0) return memo[id];
    const auto& key = ast.keys[id];
    constexpr int64_t CAP = int64_t{1} << 62;
    int64_t out;
    if (key[0] == CHARSET) {
        out = static_cast<int64_t>((key.size() - 1) / 2) + 1;
    } else if (key[0] == CONCAT || key[0] == ALT) {
        out = 1;
        for (size_t k = 1; k < key.size(); ++k) {
            int64_t item = estimate(ast, static_cast<int32_t>(key[k]), memo);  // (both at most CAP: no overflow)
            out = item > CAP - out ? CAP : out + item;
        }
    } else if (key[0] == CALL) {
        out = 6;
    } else {
        int64_t copies = std::max<int64_t>(key[3] >= 0 ? key[3] : key[2] + 1, 1);
        int64_t item = estimate(ast, static_cast<int32_t>(key[1]), memo);
        out = item > (CAP - 1) / copies ? CAP : item * copies + 1;
    }
    return memo[id] = out;
}

}  // namespace inferlab::dfa
