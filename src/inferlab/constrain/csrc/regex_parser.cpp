// regex.py's parser over a pattern's code points (regex_parser.hpp), and its code point range
// algebra (regex.normalize_ranges, regex.negate).

#include "regex_parser.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace inferlab::dfa {

namespace {

// regex.normalize_ranges: sorted, merged where they overlap or touch, the surrogates cut out.
constexpr int64_t MAX_CODE_POINT = 0x10FFFF, SURR_LO = 0xD800, SURR_HI = 0xDFFF;

std::vector<std::pair<int64_t, int64_t>> normalize(std::vector<std::pair<int64_t, int64_t>> r) {
    std::sort(r.begin(), r.end());
    std::vector<std::pair<int64_t, int64_t>> merged, out;
    for (auto [lo, hi] : r) {
        if (!merged.empty() && lo <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, hi);
        else
            merged.emplace_back(lo, hi);
    }
    for (auto [lo, hi] : merged) {
        if (lo < SURR_LO) out.emplace_back(lo, std::min(hi, SURR_LO - 1));
        if (hi > SURR_HI) out.emplace_back(std::max(lo, SURR_HI + 1), hi);
    }
    return out;
}

// regex.negate: the complement over the code points (surrogates excluded).
std::vector<std::pair<int64_t, int64_t>> negate(const std::vector<std::pair<int64_t, int64_t>>& r) {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t next = 0;
    for (auto [lo, hi] : normalize(r)) {
        if (lo > next) out.emplace_back(next, lo - 1);
        next = hi + 1;
    }
    if (next <= MAX_CODE_POINT) out.emplace_back(next, MAX_CODE_POINT);
    return normalize(out);
}

int32_t charset_node(Arena& ast, const std::vector<std::pair<int64_t, int64_t>>& normalized) {
    std::vector<int64_t> key{CHARSET};
    for (auto [lo, hi] : normalized) {
        key.push_back(lo);
        key.push_back(hi);
    }
    return ast.intern(std::move(key));
}

struct Parser {
    Arena& ast;
    std::vector<uint32_t> p;
    size_t i = 0;
    int depth = 0;
    std::unordered_map<size_t, size_t> close;                                   // '(' -> after its ')'
    std::unordered_map<std::u32string, std::pair<int32_t, int>> groups;        // text -> (node, depth inside)
    int deepest = 0;

    Parser(Arena& a, std::vector<uint32_t>&& pattern) : ast(a), p(std::move(pattern)) { spans(); }

    // regex._SPANS: escapes, classes and parentheses left to right; a '(' is closed by the next
    // unmatched ')'. (A span only proposes a memo key: a group parsed to elsewhere is not kept.)
    void spans() {
        std::vector<size_t> opens;
        size_t n = p.size(), k = 0;
        while (k < n) {
            if (p[k] == '\\' && k + 1 < n) {
                k += 2;
                continue;
            }
            if (p[k] == '[') {
                size_t j = k + 1;
                if (j < n && p[j] == '^') ++j;
                if (j < n && p[j] == ']') ++j;
                while (j < n) {
                    if (p[j] == '\\' && j + 1 < n) j += 2;
                    else if (p[j] != ']' && p[j] != '\\') ++j;
                    else break;
                }
                if (j < n && p[j] == ']') {
                    k = j + 1;
                    continue;
                }
            } else if (p[k] == '(') {
                opens.push_back(k);
            } else if (p[k] == ')' && !opens.empty()) {
                close[opens.back()] = k + 1;
                opens.pop_back();
            }
            ++k;
        }
    }

    bool at(uint32_t c) const { return i < p.size() && p[i] == c; }
    bool starts(const char* s) const {
        for (size_t k = 0; s[k]; ++k)
            if (i + k >= p.size() || p[i + k] != static_cast<unsigned char>(s[k])) return false;
        return true;
    }

    int32_t parse() {
        int32_t node = alt();
        if (i < p.size()) throw Unsupported();  // unbalanced ')'
        return node;
    }

    int32_t alt() {
        std::vector<int64_t> items{concat()};
        while (at('|')) {
            ++i;
            items.push_back(concat());
        }
        if (items.size() == 1) return static_cast<int32_t>(items[0]);
        items.insert(items.begin(), ALT);
        return ast.intern(std::move(items));
    }

    int32_t concat() {
        std::vector<int64_t> items{CONCAT};
        while (i < p.size() && p[i] != '|' && p[i] != ')') items.push_back(quantifiers(atom()));
        if (items.size() == 2) return static_cast<int32_t>(items[1]);
        return ast.intern(std::move(items));
    }

    int32_t quantifiers(int32_t node) {
        bool quantified = false;
        int64_t lo, hi;
        while (quantifier(lo, hi)) {
            if (quantified) throw Unsupported();  // multiple repeat
            quantified = true;
            if (at('?')) ++i;  // lazy == greedy under whole-string matching
            node = ast.intern({REPEAT, node, lo, hi});
        }
        return node;
    }

    bool quantifier(int64_t& lo, int64_t& hi) {
        if (i >= p.size()) return false;
        uint32_t c = p[i];
        if (c == '*' || c == '+' || c == '?') {
            ++i;
            lo = c == '+' ? 1 : 0;
            hi = c == '?' ? 1 : -1;
            return true;
        }
        return c == '{' && braces(lo, hi);
    }

    static bool digits(const std::vector<uint32_t>& p, size_t a, size_t b, int64_t& out) {
        if (b - a > 9) throw Unsupported();  // (past int64's comfort; regex.py reads any size)
        out = 0;
        for (size_t k = a; k < b; ++k) out = out * 10 + (p[k] - '0');
        return true;
    }

    // regex._Parser.braces: {m} {m,} {,n} {m,n}, ASCII digits; anything else leaves '{' a literal.
    bool braces(int64_t& lo, int64_t& hi) {
        size_t end = i + 1;
        while (end < p.size() && p[end] != '}') ++end;
        if (end >= p.size()) return false;
        size_t comma = i + 1;
        while (comma < end && p[comma] != ',') ++comma;
        bool has_comma = comma < end;
        auto all_digits = [&](size_t a, size_t b) {
            for (size_t k = a; k < b; ++k)
                if (p[k] < '0' || p[k] > '9') return false;
            return true;
        };
        for (size_t k = i + 1; k < end; ++k)
            if (p[k] > 0x7F) return false;  // (not isascii: a literal)
        bool lo_empty = comma == i + 1;
        if (!((!lo_empty && all_digits(i + 1, comma)) || (has_comma && lo_empty))) return false;
        size_t hs = has_comma ? comma + 1 : end;
        if (has_comma && hs < end && !all_digits(hs, end)) return false;
        lo = 0;
        if (!lo_empty) digits(p, i + 1, comma, lo);
        if (has_comma) {
            hi = -1;
            if (hs < end) digits(p, hs, end, hi);
        } else {
            hi = lo;
        }
        if (hi >= 0 && lo > hi) throw Unsupported();  // min repeat greater than max repeat
        i = end + 1;
        return true;
    }

    int32_t atom() {
        uint32_t c = p[i];
        if (c == '*' || c == '+' || c == '?') throw Unsupported();  // nothing to repeat
        if (c == '{') {
            size_t save = i;
            int64_t lo, hi;
            bool q = braces(lo, hi);
            i = save;
            if (q) throw Unsupported();
        }
        if (c == '(') return group();
        if (c == '[') return char_class();
        if (c == '.') {
            ++i;
            return charset_node(ast, normalize({{0, 0x09}, {0x0B, MAX_CODE_POINT}}));
        }
        if (c == '^' || c == '$') throw Unsupported();  // anchors
        if (c == '\\') return charset_node(ast, normalize(escape(false)));
        ++i;
        return charset_node(ast, normalize({{c, c}}));
    }

    // regex._Parser.group: a group text parsed before is that node again (within the depth limit).
    int32_t group() {
        size_t open = i;
        auto end = close.find(open);
        std::u32string text;
        if (end != close.end()) {
            text.assign(p.begin() + open, p.begin() + end->second);
            auto hit = groups.find(text);
            if (hit != groups.end()) {
                if (depth + hit->second.second > MAX_DEPTH) throw Unsupported();
                i = end->second;
                deepest = std::max(deepest, depth + hit->second.second);
                return hit->second.first;
            }
        }
        int outer = deepest;
        deepest = depth;
        int32_t node = group_body();
        int inner = deepest - depth;
        deepest = std::max(outer, deepest);
        if (end != close.end() && i == end->second) groups.emplace(std::move(text), std::make_pair(node, inner));
        return node;
    }

    int32_t group_body() {
        ++i;
        if (at('?')) {
            if (starts("?:")) {
                i += 2;
            } else if (starts("?&")) {  // (?&N): a call of automaton N
                size_t k = i + 2, start = k;
                while (k < p.size() && p[k] >= '0' && p[k] <= '9') ++k;
                if (k == start || k >= p.size() || p[k] != ')') throw Unsupported();
                int64_t target;
                digits(p, start, k, target);
                i = k + 1;
                return ast.intern({CALL, target});
            } else if (starts("?P<")) {  // a named group: an ASCII identifier
                size_t k = i + 3, start = k;
                while (k < p.size() && p[k] != '>') {
                    uint32_t ch = p[k];
                    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                              (k > start && ch >= '0' && ch <= '9');
                    if (!ok) throw Unsupported();
                    ++k;
                }
                if (k == start || k >= p.size()) throw Unsupported();
                i = k + 1;
            } else {
                throw Unsupported();  // lookaround, flags, conditionals, comments
            }
        }
        if (++depth > MAX_DEPTH) throw Unsupported();
        deepest = std::max(deepest, depth);
        int32_t node = alt();
        --depth;
        if (!at(')')) throw Unsupported();  // missing ')'
        ++i;
        return node;
    }

    static int hex(uint32_t c) {
        if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
        if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
        if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
        return -1;
    }

    // regex._Parser.escape: the ranges of `\X` at i (ASCII \d \w \s and their complements).
    std::vector<std::pair<int64_t, int64_t>> escape(bool in_class) {
        ++i;
        if (i >= p.size()) throw Unsupported();
        uint32_t c = p[i++];
        static const std::vector<std::pair<int64_t, int64_t>> DIGIT{{0x30, 0x39}},
            WORD{{0x30, 0x39}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}}, SPACE{{0x09, 0x0D}, {0x20, 0x20}};
        switch (c) {
            case 'd': return DIGIT;
            case 'w': return WORD;
            case 's': return SPACE;
            case 'D': return negate(DIGIT);
            case 'W': return negate(WORD);
            case 'S': return negate(SPACE);
            case 'n': return {{'\n', '\n'}};
            case 't': return {{'\t', '\t'}};
            case 'r': return {{'\r', '\r'}};
            case 'f': return {{'\f', '\f'}};
            case 'v': return {{'\v', '\v'}};
            case 'a': return {{'\a', '\a'}};
            default: break;
        }
        if (c == 'b' && in_class) return {{8, 8}};  // backspace, as in Python
        if (c == 'x' || c == 'u' || c == 'U') {
            size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            if (i + n > p.size()) throw Unsupported();
            int64_t cp = 0;
            for (size_t k = 0; k < n; ++k) {
                int h = hex(p[i + k]);
                if (h < 0) throw Unsupported();
                cp = cp * 16 + h;
            }
            if (cp > MAX_CODE_POINT) throw Unsupported();
            i += n;
            return {{cp, cp}};
        }
        if (c > 0x7F) throw Unsupported();  // (Unicode digits and letters: regex.py decides)
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alnum) throw Unsupported();  // anchors, backreferences, unknown escapes
        return {{c, c}};
    }

    int32_t char_class() {
        ++i;
        bool negated = at('^');
        if (negated) ++i;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        bool first = true;
        while (true) {
            if (i >= p.size()) throw Unsupported();  // unterminated
            if (p[i] == ']' && !first) {
                ++i;
                break;
            }
            first = false;
            auto lo = class_item();
            if (at('-') && i + 1 < p.size() && p[i + 1] != ']') {
                ++i;
                auto hi = class_item();
                if (lo.size() != 1 || hi.size() != 1 || lo[0].first != lo[0].second || hi[0].first != hi[0].second ||
                    hi[0].first < lo[0].first)
                    throw Unsupported();  // bad character range
                ranges.emplace_back(lo[0].first, hi[0].first);
            } else {
                ranges.insert(ranges.end(), lo.begin(), lo.end());
            }
        }
        auto rs = normalize(ranges);
        return charset_node(ast, negated ? negate(rs) : rs);
    }

    std::vector<std::pair<int64_t, int64_t>> class_item() {
        if (p[i] == '\\') return escape(true);
        uint32_t c = p[i++];
        return {{c, c}};
    }
};

}  // namespace

int32_t parse_regex(Arena& ast, std::vector<uint32_t> pattern) {
    Parser parser(ast, std::move(pattern));
    return parser.parse();
}

}  // namespace inferlab::dfa
