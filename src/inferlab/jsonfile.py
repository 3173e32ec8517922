"""Reading a user's JSON file: any failure is one line naming the file (InferlabError, exit 2)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.nesting import JSON_FRAMES, check_json_nesting, recursion_room


class _NotPlainJSON(ValueError):
    """What json.loads accepts but a user's file must not hold (loads names it)."""


def _constant(name: str):
    raise _NotPlainJSON(f"{name} is not JSON (no NaN or Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotPlainJSON(f"the number {text[:40]} is out of the float range")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _NotPlainJSON(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS:,})")
    return int(text)


def _pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _NotPlainJSON(f"the key {json.dumps(key)[:60]} is repeated in one object (which value is meant?)")
    return out


MAX_INT_DIGITS = 4_300  # Python's own limit for int(str) (sys.get_int_max_str_digits)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


def loads(text: str, where: str):
    """json.loads of a user's text: the nesting is checked first (one line naming the JSON
    pointer past nesting.MAX_JSON_DEPTH), then parsed with room for it, so the outcome never
    depends on Python's recursion limit. What json.loads takes but JSON is not, or cannot be a
    user's meaning, is one line naming it (InferlabError): NaN and Infinity, a number past the
    float range, an integer past Python's digit limit, a repeated key in one object, a lone
    UTF-16 surrogate escape. json.JSONDecodeError propagates."""
    check_json_nesting(text, where)
    try:
        with recursion_room(JSON_FRAMES):
            value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                               object_pairs_hook=_pairs)
        if _SURROGATE_ESCAPE.search(text):  # (rare: a pair is two escapes; a lone one is no character)
            _no_lone_surrogates(value)
    except _NotPlainJSON as exc:
        raise InferlabError(f"{where}: {exc}") from None
    return value


def _no_lone_surrogates(value) -> None:
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v)
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _NotPlainJSON(f"the string {json.dumps(v)[:40]} holds a lone UTF-16 surrogate (no character)") from None


def read_json(path, *, label: str | None = None, missing: str = "file not found"):
    """The JSON value in `path`. `label` prefixes messages (e.g. "--schema FILE"); `missing` says
    what a missing file means to the caller."""
    path = Path(path)
    where = label or str(path)
    if path.exists() and not path.is_file():  # a folder, or a device such as /dev/zero (read forever)
        raise InferlabError(f"{where}: not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InferlabError(f"{where}: {missing}") from None
    except OSError as exc:
        raise InferlabError(f"{where}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InferlabError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    try:
        return loads(text, where)
    except json.JSONDecodeError as exc:
        raise InferlabError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def read_json_object(path, *, label: str | None = None, missing: str = "file not found") -> dict:
    """The JSON object in `path` (read_json's messages)."""
    doc = read_json(path, label=label, missing=missing)
    if not isinstance(doc, dict):
        raise InferlabError(f"{label or path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def read_json_schema(path, *, label: str | None = None) -> dict | bool:
    """The JSON schema in `path`: an object, or true/false (JSON Schema's boolean schemas)."""
    doc = read_json(path, label=label)
    if not isinstance(doc, (dict, bool)):
        raise InferlabError(f"{label or path}: expected a JSON schema (an object, true or false), got {type(doc).__name__}")
    return doc
