"""The compiler's work budget and its cheaper exact routes, against independent oracles.

- schema equality without serialising (common._json_equal) against a canonical JSON text
  written here (sorted keys, integral floats as integers, booleans apart from numbers);
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.constrain.schema.common import _json_equal

# --- equality of JSON values -----------------------------------------------------------------

SCALAR_VALUES = st.sampled_from([0, 1, 1.0, 2.5, -1, True, False, None, "", "a", "1", "true"])
JSON_VALUES = st.recursive(SCALAR_VALUES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from("abc"), inner, max_size=3), max_leaves=8)


def canonical_text(value) -> str:
    """JSON-Schema equality as text: 1 == 1.0, true != 1, key order irrelevant."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + canonical_text(value[k]) for k in sorted(value)) + "}"
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_json_equality_is_json_schema_equality(a, b):
    assert _json_equal(a, b) == (canonical_text(a) == canonical_text(b))
    assert _json_equal(a, a) and _json_equal([a, b], [a, b])  # shared parts are equal at once
    assert _json_equal({"x": a, "y": b}, {"y": b, "x": a})
