"""The stack grammar's compile driver: JSON Schema -> CompiledGrammar (schema.compile_grammar) ->
each automaton's minimal byte DFA -> StackMachine, with the DFAs kept across compiles.

Apart from the runtime modules (machine.py, grammar.py) so that those do not import the schema
compiler."""

from __future__ import annotations

from inferlab.constrain import regex as rx
from inferlab.constrain.caches import CACHES
from inferlab.constrain.dfa import DEFAULT_MAX_STATES, DFA, EstimateLimit, StateLimit, compile_regex
from inferlab.constrain.lru import LRU
from inferlab.constrain.machine import StackMachine
from inferlab.errors import InferlabError
from inferlab.gcpause import gc_disabled


def build_machine(compiled, *, max_states: int = DEFAULT_MAX_STATES) -> StackMachine:
    """CompiledGrammar -> StackMachine; each DFA within max_states."""
    dfas = _automaton_dfas(compiled, lambda k, regex: compile_regex(regex, max_states=max_states), max_states)
    return StackMachine(dfas, compiled.counts, compiled.maps, compiled.uniques)


def _automaton_dfas(compiled, regex_dfa, max_states: int) -> list[DFA]:
    """Each automaton's DFA: regex_dfa(k, regex), or a length-bounded string's (_bounded)."""
    from inferlab.constrain.schema import SchemaError

    lengths = compiled.lengths or (None,) * len(compiled.automata)
    out = []
    for k, (regex, bounds) in enumerate(zip(compiled.automata, lengths)):
        try:
            out.append(regex_dfa(k, regex) if bounds is None else _bounded(k, regex, bounds, max_states))
        except SchemaError:
            raise
        except InferlabError as exc:  # a size limit: named with the subschema the automaton is for
            where = compiled.sources[k] if k < len(compiled.sources) else None
            if where is None:
                raise
            limit = "max_states" if isinstance(exc, StateLimit) else "automaton size"
            raise type(exc)(f"{limit} at #{where}: {exc}") from None
    return out


def _bounded(k: int, regex: str, bounds: tuple, max_states: int) -> DFA:
    """A length-bounded string automaton's DFA (schema.algebra.bounded_dfa), within max_states."""
    from inferlab.constrain.schema.algebra import bounded_dfa

    out = bounded_dfa(regex, *bounds)
    if out.n_states > max_states:
        raise StateLimit(f"automaton {k} (a length-bounded string) exceeds {max_states:,} states")
    return out



def check_grammar_size(machine: StackMachine, max_states: int) -> None:
    if machine.n_states > max_states:
        raise InferlabError(f"the grammar's automata hold {machine.n_states:,} states (limit {max_states:,})")


# Small DFAs by (regex, max_states, check), across compiles: most schemas share a few automata
# (any value, strings, numbers), rebuilt otherwise for each. Kept read-only: machines share them.
SMALL_DFA_STATES = 512   # (S, 256) int32: at most 0.5 MB each
SMALL_DFA_CACHE = 512    # entries
_SMALL_DFAS = LRU(SMALL_DFA_CACHE)  # (regex, max_states, check) -> its DFA


def clear_compile_caches() -> None:
    """Forget what compiles keep across schemas (small DFAs, length-bounded strings' DFAs, the
    parser's class texts), so the next compile is a cold one (benchmarks/compile_speed.py): the
    cache owner's clear of its "compile" group (caches.CACHES)."""
    CACHES.clear("compile")


def _bounded_cache():
    from inferlab.constrain.schema import algebra  # (the schema compiler, imported where compiles run)

    return algebra


CACHES.register("small_dfas", "compile", _SMALL_DFAS.clear, lambda: len(_SMALL_DFAS),
                f"{SMALL_DFA_CACHE} DFAs of at most {SMALL_DFA_STATES} states")
CACHES.register("bounded_dfas", "compile", lambda: _bounded_cache().clear_bounded(),
                lambda: len(_bounded_cache()._BOUNDED), "schema.algebra.BOUNDED_CACHE_BYTES of DFA tables")
CACHES.register("regex_classes", "compile", lambda: rx.clear_memo(), lambda: len(rx._CLASS_MEMO) + len(rx._GROUP_MEMO),
                "regex._CLASS_MEMO_MAX class texts, group texts of regex._GROUP_MEMO_BUDGET characters")


def _keep_small(key: tuple, dfa: DFA) -> None:
    if dfa.n_states > SMALL_DFA_STATES:
        return
    dfa.trans.flags.writeable = False
    dfa.accepting.flags.writeable = False
    _SMALL_DFAS[key] = dfa


def compile_machine(schema, *, max_states: int = DEFAULT_MAX_STATES, max_nfa_estimate: int | None = None,
                    **options):
    """JSON Schema -> (CompiledGrammar, StackMachine): the one compile path of the stack grammar
    (the matcher API, generate, the HF processor, `inferlab schema`, schema-bench).

    Each automaton's DFA stays within max_states; where one does not, subschemas are outlined
    into automata of their own from a smaller size on (schema.OUTLINE_CHARS in turn) before the
    schema is refused. A SchemaError is final: keywords, or an expansion (subschemas, automata,
    a regex past MAX_REGEX_CHARS, which only calls-off parts can reach), that the outline size
    does not change. An automaton whose regex a larger size gave too is not built again: its
    DFA, or its refusal, is kept by regex text; small DFAs are kept across compiles too.
    max_nfa_estimate refuses an automaton whose regex's NFA size estimate (nfa.size_estimate) is
    over it, before its NFA is built (schema-bench's bound).
    options: those of schema.compile_grammar but outline_chars.
    """
    from inferlab.constrain.schema import OUTLINE_CHARS, SchemaError, compile_grammar

    built: dict[str, DFA | InferlabError] = {}  # regex -> its DFA or its refusal

    def dfa_of(k: int, regex: str) -> DFA:
        out = built.get(regex)
        if out is None:
            key = (regex, max_states, max_nfa_estimate)
            out = _SMALL_DFAS.get(key)
            if out is None:
                try:
                    out = compile_regex(regex, max_states=max_states, max_nfa_estimate=max_nfa_estimate)
                except EstimateLimit as exc:  # (the automaton named: the compile's refusals say where)
                    out = InferlabError(f"automaton {k}'s {exc}")
                except InferlabError as exc:
                    out = exc
                else:
                    _keep_small(key, out)
            built[regex] = out
        if isinstance(out, InferlabError):
            raise out
        return out

    # The cyclic GC paused: a compile allocates millions of small objects (AST and NFA nodes,
    # subset keys) that live until it ends, and the collector's passes over them took about a
    # third of the compile time of large schemas; what cycles it leaves are collected after.
    with gc_disabled():
        for n, outline in enumerate(OUTLINE_CHARS):
            try:
                compiled = compile_grammar(schema, outline_chars=outline, **options)
                dfas = _automaton_dfas(compiled, dfa_of, max_states)
                return compiled, StackMachine(dfas, compiled.counts, compiled.maps, compiled.uniques)
            except SchemaError:
                raise  # the schema's keywords or its expansion: outlining changes neither
            except InferlabError:
                if n + 1 == len(OUTLINE_CHARS):
                    raise
    raise AssertionError("unreachable")
