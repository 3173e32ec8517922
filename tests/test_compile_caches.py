"""What the compile path keeps across schemas (the small-DFA cache, compiler._SMALL_DFAS; the
parser's class texts; the length-bounded DFAs) gives what a cold compile gives, checked against a
compile with every compile cache cleared first."""

import numpy as np

from inferlab.constrain.compiler import clear_compile_caches, compile_machine

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20}, "b": {"type": "integer", "minimum": 3},
                                      "c": {"type": "array", "items": {"type": "number"}}}, "required": ["a"]},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "a": {"type": "string"},
                                      "n": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}}}},
    {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                                                         "name": {"type": "string"}}}},
     "$ref": "#/$defs/node"},
]


def test_warm_compiles_equal_cold_ones():
    """Each schema compiled after the others (caches filled by them, then by itself) builds the
    same automata, array for array, as compiled first after every compile cache is cleared."""
    def tables(schema):
        compiled, machine = compile_machine(schema)
        return compiled.automata, [(d.start, d.trans.copy(), d.accepting.copy()) for d in machine.dfas]

    cold = []
    for schema in SCHEMAS:
        clear_compile_caches()
        cold.append(tables(schema))
    clear_compile_caches()
    for _ in range(2):
        for schema, (automata, dfas) in zip(SCHEMAS, cold):
            got_automata, got = tables(schema)
            assert got_automata == automata
            for (s0, t0, a0), (s1, t1, a1) in zip(got, dfas, strict=True):
                assert s0 == s1
                np.testing.assert_array_equal(t0, t1)
                np.testing.assert_array_equal(a0, a1)
