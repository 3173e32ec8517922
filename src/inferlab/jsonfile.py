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


def read_json_object(path, *, label: str | None = None, missing: str = "file not found") -> dict:
    """The JSON object in `path`. `label` prefixes messages (e.g. "--schema FILE"); `missing` says
    what a missing file means to the caller."""
    path = Path(path)
    where = label or str(path)
    try:
        doc = loads(path.read_text(encoding="utf-8"), where)
    except FileNotFoundError:
        raise InferlabError(f"{where}: {missing}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InferlabError(f"{where}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InferlabError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    return doc
