"""A user's JSON file: what json.loads takes but is no JSON, or no meaning a user can have, is one
line naming it (InferlabError), never a traceback deep in whatever reads the value."""

import json

import pytest

from inferlab.errors import InferlabError
from inferlab.jsonfile import loads, read_json


@pytest.mark.parametrize("text, needle", [
    ('{"type":"integer","maximum":NaN}', "NaN is not JSON"),
    ('{"const":Infinity}', "Infinity is not JSON"),
    ('[-Infinity]', "-Infinity is not JSON"),
    ('{"maximum":1e400}', "the number 1e400 is out of the float range"),
    ('{"minimum":-1e400}', "the number -1e400 is out of the float range"),
    ("1" * 5000, "an integer of 5,000 digits (at most 4,300)"),
    ('{"type":"integer","type":"string"}', 'the key "type" is repeated in one object'),
    ('"\\ud800"', "holds a lone UTF-16 surrogate"),
    ('{"k":["a","\\udc00x"]}', "holds a lone UTF-16 surrogate"),
])
def test_what_json_loads_takes_but_is_no_json_is_one_line(text, needle):
    with pytest.raises(InferlabError, match="^f.json: ") as exc:
        loads(text, "f.json")
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_plain_json_reads_as_before(tmp_path):
    """A surrogate pair is one character; big integers under the limit, exponents, floats stay."""
    doc = {"a": "\U0001F600", "n": 10 ** 300, "x": 1e300, "y": -0.5, "z": [None, True]}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc), encoding="utf-8")            # (ensure_ascii: the pair as two escapes)
    assert read_json(path) == doc


def test_a_device_or_folder_is_refused_before_reading(tmp_path):
    """/dev/zero was read forever."""
    for path in ("/dev/zero", tmp_path):
        with pytest.raises(InferlabError, match="not a regular file"):
            read_json(path)
