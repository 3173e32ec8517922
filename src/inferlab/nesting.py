"""Nesting limits that do not depend on Python's recursion limit.

JSON parsing (json's C scanner), the schema compiler, the regex parser and the NFA construction
recurse once per nesting level. Each has an explicit limit, checked before Python's recursion
limit could be reached, and refused with one line naming where (a JSON pointer or a regex
position) and the limit:

    MAX_JSON_DEPTH     arrays/objects nested in a JSON file read by the CLI (check_json_nesting)
    MAX_SCHEMA_DEPTH   arrays/objects nested in a schema, and subschemas nested on one compile
                       path ($ref chains included), in constrain.schema
    MAX_REGEX_DEPTH    groups nested in one regex, in constrain.regex

Within those limits the walks run inside `recursion_room(frames)`, which raises
sys.getrecursionlimit() for the walk when the caller's limit leaves too few frames (and restores
it after), so a schema compiles or is refused with the same line under any recursion limit.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager

from inferlab.errors import InferlabError

MAX_JSON_DEPTH = 5_000
MAX_SCHEMA_DEPTH = 1_000
MAX_REGEX_DEPTH = 4_000
# Python frames one nesting level may take, with margin over what was measured (a profiler's
# deepest stack over tests/test_nesting.py's shapes, at 100-500 levels): json's C parser and
# writer 1 per level; the compiler at most 3.1 per schema level (items, properties, anyOf,
# allOf, a $ref chain; canonical_json 2); the regex parser and the NFA construction 4.0 per group.
FRAMES_PER_JSON_LEVEL = 2
FRAMES_PER_SCHEMA_LEVEL = 12
FRAMES_PER_REGEX_LEVEL = 10
JSON_FRAMES = MAX_JSON_DEPTH * FRAMES_PER_JSON_LEVEL + 200
REGEX_FRAMES = MAX_REGEX_DEPTH * FRAMES_PER_REGEX_LEVEL + 200
SCHEMA_FRAMES = MAX_SCHEMA_DEPTH * FRAMES_PER_SCHEMA_LEVEL + REGEX_FRAMES

_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')


def _frames_now() -> int:
    depth, f = 0, sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    return depth


@contextmanager
def recursion_room(frames: int):
    """Run the body with at least `frames` Python frames free above this one."""
    old = sys.getrecursionlimit()
    need = _frames_now() + frames + 50
    if need > old:
        sys.setrecursionlimit(need)
    try:
        yield
    finally:
        if need > old:
            sys.setrecursionlimit(old)


@contextmanager
def recursion_cap(frames: int):
    """Run the body with at most `frames` Python frames above this one: for a third-party
    recursion that may never end (jsonschema following a $ref cycle that makes no progress),
    so that it ends in RecursionError, not in a C stack overflow under a limit that
    recursion_room raised for the compiler's own bounded walks."""
    old = sys.getrecursionlimit()
    cap = _frames_now() + frames
    if cap < old:
        sys.setrecursionlimit(cap)
    try:
        yield
    finally:
        if cap < old:
            sys.setrecursionlimit(old)


def pointer_token(token) -> str:
    """A JSON pointer's reference token, escaped (RFC 6901: "~" as "~0", "/" as "~1")."""
    return str(token).replace("~", "~0").replace("/", "~1")


def short_pointer(parts) -> str:
    """A JSON pointer ("#/a/0/b") from its reference tokens, shortened in the middle past 8 of
    them, so a refusal stays one readable line."""
    parts = [pointer_token(p) for p in parts]
    if len(parts) > 8:
        parts = parts[:4] + [f"…({len(parts) - 7:,} more)…"] + parts[-3:]
    return "#" + "".join("/" + p for p in parts)


def split_pointer(ptr: str) -> list[str]:
    """The reference tokens of a pointer written "/a/b" (the schema compiler's form), unescaped."""
    return [p.replace("~1", "/").replace("~0", "~") for p in ptr.split("/")[1:]]


def check_json_nesting(text: str, where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """InferlabError naming the JSON pointer where `text` nests arrays/objects deeper than
    `limit`; a scan of its tokens, before json.loads (whose C parser recurses per level). Text
    that is not JSON is left for json.loads to report."""
    stack: list[list] = []  # per open container: [is an object, the current key or index]
    expect_key = False
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in ("[", "{"):
            if len(stack) == limit:
                raise InferlabError(f"{where}: nested deeper than {limit:,} arrays/objects at "
                                    f"{short_pointer([c[1] for c in stack])} (the nesting limit)")
            stack.append([tok == "{", None if tok == "{" else 0])
            expect_key = tok == "{"
        elif tok in ("]", "}"):
            if stack:
                stack.pop()
            expect_key = False
        elif tok == ",":
            if stack and stack[-1][0]:
                expect_key = True
            elif stack:
                stack[-1][1] += 1
        elif tok == ":":
            expect_key = False
        elif expect_key and stack:
            stack[-1][1] = tok[1:-1]


def check_value_nesting(value, limit: int, error) -> None:
    """Call error(pointer parts), which raises, where a Python JSON value (dicts and lists) nests
    deeper than `limit`; iterative, so it runs before any recursive walk of the value."""
    todo = [(value, 0, None)]  # (node, depth, its path as (key, parent path) links)
    while todo:
        node, depth, path = todo.pop()
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth == limit:
            parts = []
            while path is not None:
                key, path = path
                parts.append(key)
            error(parts[::-1])
        todo.extend((child, depth + 1, (key, path)) for key, child in items)
