"""Reading a user's JSON file: any failure is one line naming the file (InferlabError, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.nesting import JSON_FRAMES, check_json_nesting, recursion_room


def loads(text: str, where: str):
    """json.loads of a user's text: the nesting is checked first (one line naming the JSON
    pointer past nesting.MAX_JSON_DEPTH), then parsed with room for it, so the outcome never
    depends on Python's recursion limit. json.JSONDecodeError propagates."""
    check_json_nesting(text, where)
    with recursion_room(JSON_FRAMES):
        return json.loads(text)


def read_json(path, *, label: str | None = None, missing: str = "file not found"):
    """The JSON value in `path`. `label` prefixes messages (e.g. "--schema FILE"); `missing` says
    what a missing file means to the caller."""
    path = Path(path)
    where = label or str(path)
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
