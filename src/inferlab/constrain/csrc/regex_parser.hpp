// regex.py's parser in C++17 (no Python): a pattern's code points -> the same AST regex.parse
// builds, as nodes of a regex_ast.hpp arena.

#pragma once

#include <cstdint>
#include <vector>

#include "regex_ast.hpp"

namespace inferlab::dfa {

// Front end 2: regex.py's parser over the pattern's code points, the same AST. Whatever it
// rejects (an error, a construct of regex.py's errors, a name or digit outside ASCII, nesting past
// MAX_DEPTH) is Unsupported: regex.parse then reads it again and reports it in its own words.
// -> the root node of `pattern` (its code points) in `ast`.
int32_t parse_regex(Arena& ast, std::vector<uint32_t> pattern);

}  // namespace inferlab::dfa
