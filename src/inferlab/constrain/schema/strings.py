"""Strings: ECMA-262 patterns -> the regex dialect, length bounds, formats."""

from __future__ import annotations

import re
import sys
import warnings
from functools import lru_cache
from inferlab.constrain import formats
from inferlab.constrain import regex as rx
from inferlab.errors import InferlabError
from inferlab.nesting import MAX_REGEX_DEPTH

from inferlab.constrain.schema.algebra import LENGTH_STATES, bounded_dfa, operand_dfa
from inferlab.constrain.schema.common import SchemaError, _CHAR, _SHORT_ESCAPES, _Unsat, _child, _group, _lit, _repeat
from inferlab.constrain.caches import CACHES


# Length bounds with a pattern: intersected by automaton product up to this length (beyond, the
# product counts characters in thousands of states, costs seconds and is over the regex limits).
INTERSECT_LENGTH_MAX = 16
STRING_OUTLINE_CHARS = 60  # stack mode: a longer string regex is an automaton of its own
CAPPED_LENGTH_MIN = 64  # a maxLength with a pattern capped (capped_length) below this many characters is refused


class StringsMixin:
    """Strings: ECMA-262 patterns -> the regex dialect, length bounds, formats (mixed into _Compiler)."""

    def compile_string(self, node, ptr, stack) -> str:
        """Stack mode: a string's regex longer than STRING_OUTLINE_CHARS is a call of its own
        automaton, one per distinct text (every UTF-8 character class is dozens of NFA states,
        and an object's regex would hold a copy per property and per branch of its optional
        members); the stack machine's masks split at the call."""
        out = self.string_regex(node, ptr, stack)
        if self.calls_on() and len(out) > STRING_OUTLINE_CHARS:
            return self.outline(out, force=True)
        return out

    def string_regex(self, node, ptr, stack) -> str:
        lo = node.get("minLength", 0)
        hi = node.get("maxLength")
        for key, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not float(v).is_integer()):
                raise self.error(key, _child(ptr, key), f"must be a non-negative integer, got {v!r}")
        lo, hi = int(lo), (None if hi is None else int(hi))
        if hi is not None and hi < lo:
            raise _Unsat(f"maxLength at #{_child(ptr, 'maxLength')}: maxLength {hi} < minLength {lo}: no string is valid")
        ast = None
        if "pattern" in node:
            ast = self.pattern_ast(node["pattern"], _child(ptr, "pattern"))
        if "format" in node:
            fast = self.format_ast(node["format"], _child(ptr, "format"))
            if fast is not None and ast is not None:  # both: the product of their automata
                both = self.intersection([f'"{_emit_json(ast)}"', f'"{_emit_json(fast)}"',
                                          f'"{_repeat(_CHAR, lo, hi)}"'], ptr)
                if both is None and (lo > 0 or hi is not None):  # the lengths counted apart
                    both = self.intersection([f'"{_emit_json(ast)}"', f'"{_emit_json(fast)}"'], ptr)
                    both = both and (self.length_bounded(both, lo, hi, ptr) or self.capped_length(both, lo, hi, ptr))
                if both is not None:
                    return both
                self.refuse("format", _child(ptr, "format"), "format together with this pattern: the "
                            "intersection is over the automaton size limits")
            elif fast is not None:
                ast = fast
        if ast is None:
            if self.calls_on() and hi is not None and hi >= self.count_min:
                return f'"{self.counted(_CHAR, lo, hi)}"'
            return f'"{_repeat(_CHAR, lo, hi)}"'
        if lo > 0 or hi is not None:
            limited = _with_length(ast, lo, hi)
            if limited is None:
                a, b = _length_range(ast)
                if a >= lo and (hi is None or (b is not None and b <= hi)):
                    limited = ast
                else:
                    exact = None
                    if max(lo, hi or 0) <= INTERSECT_LENGTH_MAX:
                        exact = self.intersection([f'"{_emit_json(ast)}"', f'"{_repeat(_CHAR, lo, hi)}"'], ptr)
                    if exact is not None:
                        return exact
                    exact = self.length_bounded(f'"{_emit_json(ast)}"', lo, hi, ptr)
                    if exact is not None:
                        return exact
                    limited = _length_subset(ast, lo, hi)
                    key = "maxLength" if hi is not None else "minLength"
                    if limited is None:
                        capped = self.capped_length(f'"{_emit_json(ast)}"', lo, hi, ptr)
                        if capped is not None:
                            return capped
                        self.refuse(key, _child(ptr, key), "length bounds together with this pattern/format "
                                    "cannot be intersected" + (f" (the counted automaton is over {LENGTH_STATES:,} "
                                    f"states, and no cap of at least {CAPPED_LENGTH_MIN} characters fits and admits a string)"
                                    if self.calls_on() and hi is not None else ""))
                        limited = ast
                    else:
                        self.narrow(f"{key} at #{ptr} with a pattern/format: a subset is generated (no search "
                                    "padding; the length budget split evenly over the repeated parts)")
            ast = limited
        if isinstance(ast, rx.Alt) and not ast.items:
            raise self.error("pattern" if "pattern" in node else "format", ptr,
                             "no string of the allowed lengths matches")
        return f'"{_emit_json(ast)}"'

    def length_bounded(self, regex: str, lo: int, hi: int | None, ptr: str) -> str | None:
        """Stack mode: the strings of `regex` (quotes included) with lo to hi characters, exact,
        as a call of an automaton whose DFA counts them (algebra.bounded_dfa), where the regex of
        that many characters is over the product's limits; None with calls off or past the
        bounded DFA's own limit (the caller narrows or refuses). No such string: unsatisfiable
        here, as an empty intersection is (an automaton that accepts nothing would be a dead end
        after its key)."""
        if not self.calls_on():
            return None
        try:
            dfa = bounded_dfa(regex, lo, hi)
        except InferlabError:
            return None
        if not dfa.accepting.any():
            raise _Unsat(f"no text at #{ptr} satisfies all of its constraints")
        return self.bounded(regex, lo, hi)

    def capped_length(self, regex: str, lo: int, hi: int | None, ptr: str) -> str | None:
        """Stack mode, where the exact product of `regex` with lo..hi characters is over
        algebra.LENGTH_STATES (an e-mail format under maxLength 1024: ~60 DFA states times 1,024
        counts): the strings of lo to `cap` characters, `cap` < hi the most that fits (the product
        is about the DFA's states times the counts), exact up to it. A narrowing, recorded, naming
        maxLength and the cap; None with calls off, without maxLength, or where no cap of at least
        max(lo, CAPPED_LENGTH_MIN) characters fits or admits a string."""
        if not self.calls_on() or hi is None:
            return None
        try:
            states = operand_dfa(regex).n_states
        except InferlabError:
            return None
        cap = min(hi - 1, LENGTH_STATES // max(states, 1))
        for _ in range(3):  # each try that is over the limit costs a product of LENGTH_STATES triples
            if cap < max(lo, CAPPED_LENGTH_MIN):
                return None
            try:
                dfa = bounded_dfa(regex, lo, cap)
            except InferlabError:
                cap //= 2
                continue
            if not dfa.accepting.any():
                return None
            self.narrow(f"maxLength at #{_child(ptr, 'maxLength')} with a pattern/format: strings of at most {cap} "
                        f"characters are generated, not {hi} (the exact automaton is over the size limit)")
            return self.bounded(regex, lo, cap)
        return None

    def pattern_ast(self, pattern, ptr):
        if not isinstance(pattern, str):
            raise self.error("pattern", ptr, "must be a string")
        if _group_nesting(pattern) > MAX_REGEX_DEPTH:  # before re.compile, which recurses per group
            raise self.error("pattern", ptr, f"groups nested deeper than {MAX_REGEX_DEPTH:,} (the nesting limit)")
        pattern = _control_escapes(pattern)
        try:
            with warnings.catch_warnings():  # Python's own notes on "[[" or "--" in a class: the
                warnings.simplefilter("ignore", FutureWarning)  # pattern is parsed as ECMA-262 below
                re.compile(pattern)
        except re.error as exc:
            raise self.error("pattern", ptr, f"not a valid regex ({exc})") from None
        try:
            return _pattern_ast(pattern, self.operand_depth > 0)
        except InferlabError as exc:
            self.refuse("pattern", ptr, str(exc))
            return None

    def custom_format(self, name, ptr) -> bool:
        """Stack mode: a format outside the specification's list is an annotation (listed); so is
        a name of draft 3 alone where $schema names a later dialect, and (format policy
        "annotate", in either mode) every format."""
        if self.format_policy == "annotate" and isinstance(name, str):
            note = f"format {name!r} at #{ptr}: not enforced (format policy: annotate)"
            if note not in self.unenforced_formats:
                self.unenforced_formats.append(note)
            return True
        if not self.stack_mode or not isinstance(name, str):
            return False
        if name in formats.SPEC_FORMATS and not (name in formats.DRAFT3_ONLY and self.dialect not in (None, "draft-03")):
            return False
        note = f"format {name!r} at #{ptr}: not a format of the specification, an annotation (not enforced)"
        if note not in self.unenforced_formats:
            self.unenforced_formats.append(note)
        return True

    def format_ast(self, name, ptr):
        if self.custom_format(name, ptr):
            return None
        if self.operand_depth:  # the operand of a complement: a superset, so the complement is sound
            if name not in formats.SUPERSETS:
                self.refuse("format", ptr, "a format inside a negated schema (not, if) is not supported "
                            f"(negated: {', '.join(formats.SUPERSETS)})")
                return None
            self.operand_losses.append(f"not/if over format {name} at #{ptr}: the complement leaves out strings "
                                       f"that are not a {name} either ({formats.SUPERSET_LOSSES[name]})")
            return _superset_format_ast(name)
        if name not in formats.FORMATS:
            self.refuse("format", ptr, f"unknown format {name!r} (known: {', '.join(formats.FORMATS)})")
            return None
        if name in formats.NARROWINGS:
            self.narrow(f"format {name} at #{ptr}: {formats.NARROWINGS[name]}")
        return _format_ast(name)


@lru_cache(maxsize=None)
def _unicode_class(name: str) -> tuple[tuple[int, int], ...]:
    """Code points of Python's Unicode \\d, \\w or \\s (the sets jsonschema's re.search uses): the
    runs that `re` itself matches in a string of every code point (a run's offsets are its code
    points), one C-level scan instead of a Python test per code point."""
    text = "".join(map(chr, range(sys.maxunicode + 1)))
    return rx.normalize_ranges([(m.start(), m.end() - 1) for m in re.finditer(rf"\{name}+", text)])


def _class_text(ranges) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


# ECMA-262's classes (22.2.2.9): \\d and \\w are ASCII; \\s is WhiteSpace (tab, VT, FF, space,
# NBSP, ZWNBSP U+FEFF, the Unicode Zs spaces) and LineTerminator (LF, CR, U+2028, U+2029)
_ECMA_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_",
                 "s": "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"}


@lru_cache(maxsize=None)
def _ecma_class(name: str) -> tuple[tuple[int, int], ...]:
    return rx.parse(f"[{_ECMA_CLASSES[name]}]").ranges


@lru_cache(maxsize=None)
def _narrow_class(name: str) -> tuple[tuple[int, int], ...]:
    """The code points both ECMA-262's and Python's class hold: a match under both meanings."""
    return rx.negate(rx.normalize_ranges(rx.negate(_ecma_class(name)) + rx.negate(_unicode_class(name))))


@lru_cache(maxsize=None)
def _wide_class(name: str) -> tuple[tuple[int, int], ...]:
    """The code points either meaning holds: a superset of both."""
    return rx.normalize_ranges(_ecma_class(name) + _unicode_class(name))


_PYTHON_DOT = "[^\\n]"


# ECMA `.`: anything but the line terminators \n \r U+2028 U+2029
_ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"


_ANY_CHAR = "[\\U00000000-\\U0010ffff]"


def _control_escapes(pattern: str) -> str:
    """ECMA-262's control escape `\\cX` (X an ASCII letter: the code point X mod 32, so `\\cC` and
    `\\cc` are U+0003) written as `\\xHH`, which Python's re and the dialect read alike (neither
    has `\\c`). Other escapes are copied whole, so an escaped backslash before "c" stays literal."""
    if "\\c" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and pattern.startswith("c", i + 1) and i + 2 < len(pattern) \
                and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
            out.append(f"\\x{ord(pattern[i + 2]) % 32:02x}")
            i += 3
        else:
            step = 2 if pattern[i] == "\\" else 1
            out.append(pattern[i:i + step])
            i += step
    return "".join(out)


def _group_nesting(pattern: str) -> int:
    """How deep the groups of a pattern nest (escapes and classes skipped), without recursion."""
    depth = deepest = i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1) * 2
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest


def _ecma_to_dialect(pattern: str, superset: bool = False) -> list[tuple[str, bool, bool]]:
    """Split an ECMA pattern into top-level alternatives in the dialect, with their anchors.

    Returns [(text, anchored_start, anchored_end)]. Rewrites `.`, the class escapes and named
    groups so the meaning is ECMA-262's, as JSON Schema specifies (\\d \\w ASCII, \\s with U+FEFF
    and the Unicode spaces, \\D \\W \\S their complements, `.` no line terminator, `$` the end),
    or with `superset`, a superset of ECMA-262's and Python's (the operand of a complement: every
    string either validator matches must be in it).
    """
    alts, out = [], []
    depth, i, in_class, negated, class_start = 0, 0, False, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if e in "dws":  # ECMA-262's sets; a complement's operand: a superset of Python's too
                text = _ECMA_CLASSES[e]
                if superset:  # [^\d]: the complement of the *smaller* set
                    text = _class_text(_narrow_class(e) if in_class and negated else _wide_class(e))
                out.append(text if in_class else f"[{text}]")
            elif e in "DWS":
                text = _class_text(rx.negate(_narrow_class(e.lower()) if superset else _ecma_class(e.lower())))
                if in_class and negated:
                    raise SchemaError(f"negated class containing \\{e} is not supported")
                out.append(text if in_class else f"[{text}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]" and i > class_start:
                in_class = False
            out.append(c)
        elif c == "[":
            in_class, negated = True, pattern.startswith("^", i + 1)
            class_start = i + (2 if negated else 1)
            if pattern.startswith("]", class_start):
                raise SchemaError("a class starting with ']' means different things in ECMA-262 and Python")
            out.append(c)
        elif c == "(":
            depth += 1
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                close = pattern.find(">", i)
                out.append("(?:")
                i = close + 1 if close > 0 else i + 1
                continue
            out.append(c)
        elif c == ")":
            depth -= 1
            out.append(c)
        elif c == "." :
            out.append(_PYTHON_DOT if superset else _ECMA_DOT)
        elif c == "|" and depth == 0:
            alts.append("".join(out))
            out = []
        else:
            out.append(c)
        i += 1
    alts.append("".join(out))
    result = []
    for alt in _flatten_groups(alts):
        start = alt.startswith("^")
        if start:
            alt = alt[1:]
        end = _ends_anchored(alt)
        if end:
            alt = alt[:-1] + ("\\n?" if superset else "")  # Python's $ also matches before a final newline
        result.append((alt, start, end))
    return result


def _flatten_groups(alts: list[str]) -> list[str]:
    """Top-level alternatives (in the dialect) where one is a single unquantified group, anchors
    around it or not, as "(^a|b$)" or "^([^,]|$)", read as the alternatives inside it, each with
    the anchors around the group: the group changes only what it captures."""
    out = []
    for alt in alts:
        start = alt.startswith("^")
        body = alt[1:] if start else alt
        end = _ends_anchored(body)
        inner = _whole_group(body[:-1] if end else body)
        if inner is None:
            out.append(alt)
            continue
        for x in _flatten_groups(_split_top(inner)):
            out.append(("^" if start and not x.startswith("^") else "") + x + ("$" if end and not _ends_anchored(x) else ""))
    return out


def _ends_anchored(text: str) -> bool:
    return text.endswith("$") and not _escaped_at(text, len(text) - 1)


def _scan(text: str):
    """Yield (position, character, depth) of each character of `text` outside escapes and class
    contents (a class's opening "[" is yielded): depth counts the groups open around it, a
    group's own parentheses outside it."""
    depth, i, in_class = 0, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            yield i, c, depth
            in_class = True
            i += 2 if text.startswith("^", i + 1) else 1  # (a "]" first in a class is refused)
            continue
        else:
            depth -= c == ")"
            yield i, c, depth
            depth += c == "("
        i += 1


def _whole_group(text: str) -> str | None:
    """The inside of `text` where it is one group "(...)" or "(?:...)" closing at its end, else
    None (nor a lookaround or any other "(?" construct)."""
    if not text.startswith("(") or (text.startswith("(?") and not text.startswith("(?:")):
        return None
    close = next((i for i, c, depth in _scan(text) if c == ")" and depth == 0), None)
    if close != len(text) - 1:
        return None
    return text[3:-1] if text.startswith("(?:") else text[1:-1]


def _split_top(text: str) -> list[str]:
    """`text` split at its top-level "|"."""
    cuts = [i for i, c, depth in _scan(text) if c == "|" and depth == 0]
    return [text[a + 1:b] for a, b in zip([-1] + cuts, cuts + [len(text)])]


def _escaped_at(text: str, pos: int) -> bool:
    n = 0
    while pos - 1 - n >= 0 and text[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


_U_ESCAPED = [cp for cp in range(0x20) if chr(cp) not in _SHORT_ESCAPES]  # written \u00XX
_ESCAPED_CPS = (*range(0x20), 0x22, 0x5C)  # the code points a JSON string must escape, ascending


_ALL_U_ESCAPES = r"\\u00(?:0[0-7bef]|1[0-9a-f])"


@lru_cache(maxsize=4096)
def _json_char_ranges(ranges: tuple) -> str:
    """Regex for the JSON-string encodings (canonical, as json.dumps writes) of one code point
    from `ranges` (a tuple: cached, as object keys ask for the same classes at every trie node):
    unescaped where JSON allows it, else its escape."""
    # (ranges sorted and disjoint: the escaped code points they hold come out in ascending order)
    inside = [cp for lo, hi in ranges if lo <= 0x5C for cp in _ESCAPED_CPS if lo <= cp <= hi]
    short = "".join(_SHORT_ESCAPES[chr(cp)][1] for cp in inside if chr(cp) in _SHORT_ESCAPES)
    u_escaped = [cp for cp in inside if cp in _U_ESCAPED]
    plain = []
    for lo, hi in ranges:
        pieces = [(max(lo, 0x20), hi)]
        for cp in (0x22, 0x5C):
            pieces = [p for a, b in pieces for p in (((a, cp - 1), (cp + 1, b)) if a <= cp <= b else ((a, b),))]
        plain.extend((a, b) for a, b in pieces if a <= b)
    parts = []
    if plain:
        body = "".join(_class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}" for a, b in plain)
        parts.append(f"[{body}]")
    if short:
        letters = "".join(c if c.isalnum() else "\\" + c for c in short)  # b f n r t " \\
        parts.append("\\\\" + (f"[{letters}]" if len(short) > 1 else letters))
    if len(u_escaped) == len(_U_ESCAPED):
        parts.append(_ALL_U_ESCAPES)
    else:
        parts.extend(_lit(f"\\u{cp:04x}") for cp in u_escaped)
    if not parts:
        raise SchemaError("empty character class")
    return _group(parts)


def _class_char(cp: int) -> str:
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    return f"\\U{cp:08x}" if cp > 0xFFFF else f"\\u{cp:04x}"


def _emit_json(node) -> str:
    """AST over decoded characters -> regex over the JSON-string encoding of those characters."""
    if isinstance(node, rx.CharSet):
        return _json_char_ranges(node.ranges)
    if isinstance(node, rx.Concat):
        return "".join(_emit_json(item) for item in node.items)
    if isinstance(node, rx.Alt):
        return "(?:" + "|".join(_emit_json(item) for item in node.items) + ")"
    return _repeat(_emit_json(node.item), node.min, node.max)


def _length_range(node) -> tuple[int, int | None]:
    """(min, max) number of characters in the AST's language (max None = unbounded)."""
    if isinstance(node, rx.CharSet):
        return 1, 1
    if isinstance(node, rx.Concat):
        lo, hi = 0, 0
        for item in node.items:
            a, b = _length_range(item)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, rx.Alt):
        rs = [_length_range(item) for item in node.items]
        return min(a for a, _ in rs), (None if any(b is None for _, b in rs) else max(b for _, b in rs))
    if node.max == 0:
        return 0, 0
    a, b = _length_range(node.item)
    return a * node.min, (None if node.max is None or b is None else b * node.max)


def _with_length(node, lo: int, hi: int | None):
    """Intersect the AST's language with lengths in [lo, hi], exactly, or return None if this
    shape is not handled (only one variable-length part, a repeated single character, is)."""
    items = _flat_items(node)
    fixed = 0
    var = []
    for k, item in enumerate(items):
        a, b = _length_range(item)
        if a == b:
            fixed += a
        else:
            var.append(k)
    if not var:
        return node if lo <= fixed and (hi is None or fixed <= hi) else rx.Alt(())
    if len(var) > 1 and hi == fixed and lo <= fixed and all(_length_range(items[k])[0] == 0 for k in var):
        # every variable part must be empty (e.g. "[A-Z]{2}" searched in a string of length 2)
        return rx.Concat(tuple(item for k, item in enumerate(items) if k not in var))
    if len(var) != 1:
        return None
    rep = items[var[0]]
    if not (isinstance(rep, rx.Repeat) and isinstance(rep.item, rx.CharSet)):
        return None
    new_lo = max(rep.min, lo - fixed)
    new_hi = rep.max if hi is None else (hi - fixed if rep.max is None else min(rep.max, hi - fixed))
    if new_hi is not None and new_hi < new_lo:
        return rx.Alt(())
    items[var[0]] = rx.Repeat(rep.item, new_lo, new_hi)
    return rx.Concat(tuple(items))


_ANYWHERE = rx.Repeat(rx.parse(_ANY_CHAR), 0, None)  # the padding of an unanchored search


def _flat_items(node) -> list:
    """The sequence of a (nested) Concat, flattened."""
    if not isinstance(node, rx.Concat):
        return [node]
    return [leaf for item in node.items for leaf in _flat_items(item)]


def _length_subset(ast, lo: int, hi: int | None):
    """A subset of the AST's strings with lengths in [lo, hi], for the shapes _with_length cannot
    intersect exactly: the search padding is dropped, then the length budget is split evenly over
    the repeated parts (each a repeat of a fixed-length item). None if the shape is not handled."""
    out = []
    for alt in (ast.items if isinstance(ast, rx.Alt) else (ast,)):
        node = None
        for items in ([i for i in _flat_items(alt) if i != _ANYWHERE], _flat_items(alt)):
            node = _with_length(rx.Concat(tuple(items)), lo, hi) or _split_budget(items, lo, hi)
            if node is not None and not _is_empty(node):
                break  # else: keep the padding, which may be what reaches minLength
        if node is None:
            return None
        if not _is_empty(node):
            out.append(node)
    return out[0] if len(out) == 1 else rx.Alt(tuple(out))


def _is_empty(node) -> bool:
    return isinstance(node, rx.Alt) and not node.items


def _split_budget(items: list, lo: int, hi: int | None):
    fixed, reps = 0, []
    for k, item in enumerate(items):
        a, b = _length_range(item)
        if a == b:
            fixed += a
            continue
        if not isinstance(item, rx.Repeat):
            return None
        width, width_hi = _length_range(item.item)
        if width != width_hi or width == 0:
            return None
        fixed += item.min * width
        reps.append((k, width))
    items = list(items)
    need = lo - fixed
    for k, width in reps:  # the minimum first, taken by the repeated parts in order
        if need <= 0:
            break
        rep = items[k]
        take = -(-need // width) if rep.max is None else min(rep.max - rep.min, -(-need // width))
        items[k] = rx.Repeat(rep.item, rep.min + take, rep.max)
        fixed += take * width
        need -= take * width
    if need > 0:
        return rx.Alt(())
    if hi is not None:  # then what is left of maxLength, split evenly
        if hi < fixed:
            return rx.Alt(())
        share = (hi - fixed) // len(reps)
        for k, width in reps:
            rep = items[k]
            cap = rep.min + share // width
            items[k] = rx.Repeat(rep.item, rep.min, cap if rep.max is None else min(rep.max, cap))
    return rx.Concat(tuple(items))


@lru_cache(maxsize=4096)
def _pattern_ast(pattern: str, superset: bool = False):
    """ECMA pattern (search semantics) -> AST of the whole decoded strings it matches (a subset
    of what ECMA-262 and Python match, or with `superset` a superset of both)."""
    if "(?=" in pattern or "(?!" in pattern:
        return _lookahead_pattern_ast(pattern, superset)
    alts = []
    for text, start, end in _ecma_to_dialect(pattern, superset):
        core = rx.parse(text)
        items = ([] if start else [_ANYWHERE]) + [core] + ([] if end else [_ANYWHERE])
        alts.append(rx.Concat(tuple(items)) if len(items) > 1 else core)
    return alts[0] if len(alts) == 1 else rx.Alt(tuple(alts))


def _top_level(pattern: str) -> list[list[tuple]]:
    """The pattern's top-level alternatives, each a list of ("text", str) and ("look", negative,
    body) pieces: the lookaheads outside any group, with the text between them."""
    alts, pieces, start, look_at = [], [], 0, None
    for i, c, depth in _scan(pattern):
        if c == "[":
            if pattern.startswith(("[]", "[^]"), i):  # refused by _ecma_to_dialect, not split here
                raise SchemaError("a class starting with ']' means different things in ECMA-262 and Python")
        elif depth:
            continue
        elif c == "(" and pattern.startswith(("(?=", "(?!"), i):
            pieces.append(("text", pattern[start:i]))
            look_at = i
        elif c == ")" and look_at is not None:
            pieces.append(("look", pattern[look_at + 2] == "!", pattern[look_at + 3:i]))
            look_at, start = None, i + 1
        elif c == "|":
            alts.append(pieces + [("text", pattern[start:i])])
            pieces, start = [], i + 1
    alts.append(pieces + [("text", pattern[start:])])
    return alts


def _lookahead_pattern_ast(pattern: str, superset: bool):
    """A pattern with lookaheads outside groups, exactly: at a lookahead's place the rest of the
    text must (?=B) or must not (?!B) begin with a match of B, so from the end backwards the
    language of the rest is intersected with, or stripped of, B followed by anything (automaton
    product). A negative lookahead's B is taken as a superset when the result is a subset (and
    the reverse), so the result stays on its side. Lookaheads inside groups are refused."""
    from inferlab.constrain import dfa_algebra
    from inferlab.constrain.dfa import compile_ast

    def dialect(text: str, sup: bool, where: str):
        (body, start, end), = _ecma_to_dialect(text, sup) or [("", False, False)]
        if start or end:
            raise SchemaError(f"an anchor {where} a lookahead is not supported")
        return rx.parse(body) if body else rx.Concat(())

    def combine(a, b, op: str):
        out = dfa_algebra.to_regex(dfa_algebra.product(compile_ast(a), compile_ast(b), op))
        return None if out is None else rx.parse(out)  # None: the empty language

    alts = []
    for pieces in _top_level(pattern):
        first, last = pieces[0][1], pieces[-1][1]
        start = first.startswith("^")
        end = len(last) > 0 and last.endswith("$") and not _escaped_at(last, len(last) - 1)
        if start:
            pieces[0] = ("text", first[1:])
        if end:
            pieces[-1] = ("text", pieces[-1][1][:-1])
        rest = (rx.parse("\n?") if superset else rx.Concat(())) if end else _ANYWHERE
        for piece in reversed(pieces):
            if piece[0] == "text":
                rest = rx.Concat((dialect(piece[1], superset, "beside"), rest))
                continue
            negative, body = piece[1], piece[2]
            if "(?=" in body or "(?!" in body:
                raise SchemaError("a lookahead inside a lookahead is not supported")
            sup = superset != negative
            look = [rx.Concat((rx.parse(t) if t else rx.Concat(()), (rx.parse("\n?") if sup else rx.Concat(()))
                               if e else _ANYWHERE))
                    for t, s_, e in _check_no_start(_ecma_to_dialect(body, sup))]
            rest = combine(rest, look[0] if len(look) == 1 else rx.Alt(tuple(look)), "minus" if negative else "and")
            if rest is None:
                break
        if rest is not None:
            alts.append(rest if start else rx.Concat((_ANYWHERE, rest)))
    if not alts:
        raise _Unsat(f"pattern {pattern!r}: no string matches it")
    return alts[0] if len(alts) == 1 else rx.Alt(tuple(alts))


def _check_no_start(alts):
    if any(start for _, start, _ in alts):
        raise SchemaError("'^' inside a lookahead is not supported")
    return alts


@lru_cache(maxsize=None)
def _format_ast(name: str):
    return rx.parse(formats.FORMATS[name])


@lru_cache(maxsize=None)
def _superset_format_ast(name: str):
    return rx.parse(formats.SUPERSETS[name])


def _universal_pattern(pattern: str) -> bool:
    """Does the pattern's search succeed on every string? (An unanchored alternative that can
    match the empty string, such as ".*" or "".)"""
    try:
        alts = _ecma_to_dialect(pattern)
        return any(not start and not end and _length_range(rx.parse(text))[0] == 0 for text, start, end in alts)
    except InferlabError:
        return False


def _searches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


# kept across compiles: the one owner names, sizes and clears them (caches.CACHES)
CACHES.register_lru(_unicode_class, "compile")
CACHES.register_lru(_ecma_class, "compile")
CACHES.register_lru(_narrow_class, "compile")
CACHES.register_lru(_wide_class, "compile")
CACHES.register_lru(_json_char_ranges, "compile")
CACHES.register_lru(_pattern_ast, "compile")
CACHES.register_lru(_format_ast, "compile")
CACHES.register_lru(_superset_format_ast, "compile")
