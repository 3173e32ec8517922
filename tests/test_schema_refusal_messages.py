"""Every refusal names its keyword or limit and the JSON pointer of the subschema (issue 46):
an automaton over max_states names the subschema it was made for, at the root, under a
property, and as a $ref target."""

import re

import pytest

from inferlab.constrain.dfa import StateLimit
from inferlab.constrain.stack import compile_machine

BIG = {"type": "string", "pattern": "^(a|b)*a(a|b){12}$"}  # the 13th character from the end: 2^13 DFA states


@pytest.mark.parametrize("schema, pointer", [
    (BIG, "#"),
    ({"properties": {"p": {"type": "array", "items": BIG}}}, "#/properties/p"),
    ({"$defs": {"d": {**BIG, "maxLength": 40}}, "properties": {"q": {"$ref": "#/$defs/d"}}}, "#/$defs/d"),
])
def test_a_dfa_size_refusal_names_the_limit_and_the_subschema(schema, pointer):
    with pytest.raises(StateLimit, match=rf"^max_states at {re.escape(pointer)}: .*exceeds 2000 states"):
        compile_machine(schema, max_states=2000)
