// regex.py's parser in C++17 (no Python): a pattern's code points -> the same AST regex.parse
// builds, as nodes of a regex_ast.hpp arena.

#pragma once

#include <cstdint>
#include <vector>

#include "regex_ast.hpp"

namespace inferlab::dfa {

// pattern_dfa's front end: regex.py's parser over a pattern's code points -> the root node of the
// same AST, in `ast`. Whatever it rejects (an error, a construct of regex.py's errors, a name or
// digit outside ASCII, nesting past MAX_DEPTH) is Unsupported: regex.parse then reads it again
// and reports it in its own words.
int32_t parse_regex(Arena& ast, std::vector<uint32_t> pattern);

}  // namespace inferlab::dfa
