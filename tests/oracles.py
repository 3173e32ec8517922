"""The tests' shared oracles and generators: what several test modules check against, in one
module, so that no test module imports another (issue 49).

- validators: validator(schema) (jsonschema, the schema's dialect, format checker on),
  assert_exact, agrees_with_jsonschema, assert_agrees_with_re_search (Python's re);
- the reference stack interpreter: Reference (sets of stacks walked byte by byte), key_state
  (the keys written in the open objects, from the text alone), bitmask_ids, random_walk,
  walk_against_oracle, generate_checked;
- generators: hypothesis strategies of schemas (SCHEMAS, SCALARS), of small regexes
  (small_regex), sample() of a regex AST's language, small vocabularies, shared text (CORPUS,
  TEXT), stub tokenizers and models (ByteTokenizer, DigitsMask, ClosingBiasedModel).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import numpy as np
from hypothesis import strategies as st

from inferlab.constrain import regex as rx, vocabulary_of
from inferlab.constrain.matcher import MatcherMask
from inferlab.constrain.nfa import call_bytes
from inferlab.constrain.schema import canonical_json, compile_grammar, compile_schema
from inferlab.constrain.stack import StackGrammar, build_machine, compile_machine
from inferlab.constrain.vocab import Vocabulary
from inferlab.errors import InferlabError
from inferlab.model.generate import generate


# --- from test_schema_budget.py -------------------------------------------------------------------

def key_orders(x, limit: int = 64) -> list:
    """x with its objects' keys in every order (at most `limit` variants)."""
    if isinstance(x, dict):
        variants = (dict(zip(keys, values)) for keys in itertools.permutations(x)
                    for values in itertools.product(*(key_orders(x[k], limit) for k in keys)))
    elif isinstance(x, list):
        variants = (list(items) for items in itertools.product(*(key_orders(i, limit) for i in x)))
    else:
        variants = iter([x])
    return list(itertools.islice(variants, limit))


def serializations(x, schema, limit: int = 64):
    """The texts of one JSON value a grammar may be asked to accept, canonical_json's first: JSON
    objects are unordered, and a grammar writes an object's keys in one order per branch, which
    canonical_json (declared names first, from the branch it judges the instance to match) need
    not pick, so each key order is tried both canonicalised and as written (compact)."""
    seen = set()
    for y in key_orders(x, limit):
        for text in (canonical_json(y, schema), json.dumps(y, separators=(",", ":"), ensure_ascii=False)):
            if text not in seen:
                seen.add(text)
                yield text


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_exact(schema, instances):
    """The compiled grammar accepts an instance's canonical text iff jsonschema accepts it."""
    _, machine = compile_machine(schema)
    v = validator(schema)
    verdicts = {True: 0, False: 0}
    for instance in instances:
        want = v.is_valid(instance)
        assert machine.accepts(canonical_json(instance, schema)) == want, (instance, want)
        verdicts[want] += 1
    assert min(verdicts.values()) >= 3, verdicts  # both answers are exercised


def all_objects(values: dict) -> list:
    """Every object over the given property values (absent included), and non-objects."""
    names = list(values)
    out = []
    for combo in itertools.product(*([*values[n], ABSENT] for n in names)):
        out.append({n: x for n, x in zip(names, combo) if x is not ABSENT})
    return out + [None, True, 0, 1.5, "kind", [], ["a"]]


ABSENT = object()


# --- from test_map_keys.py ------------------------------------------------------------------------

def key_vocab(seed: int) -> Vocabulary:
    """Every single byte, plus JSON-ish pieces over a few key letters (so walks try to repeat
    keys), some closing a key and opening the next, some holding a key twice."""
    rng = random.Random(seed)
    pieces = ['"a"', '"b"', '"a":', ',"a":', ',"b":', '"a":1,"a"', '"a":1,"b"', 'a":', 'b":', '":1,"',
              '":"a","', '{"a":1,"a', '":null,"', '{"', '":', '",', '"}', 'null', 'true', '"c":', 'c":', ',"bc":']
    pieces += ["".join(rng.choice('{}":,01abc') for _ in range(rng.randint(2, 6))) for _ in range(150)]
    toks = list(dict.fromkeys([bytes([b]) for b in range(256)] + [p.encode() for p in pieces]))
    eos = len(toks)
    return Vocabulary(tuple(toks) + (b"",), eos_id=eos, special_ids=frozenset([eos]))


# closers first, so a completion is found early; continuation bytes end a split character
ALPHABET = b'"}]0:,{[abcxnultrefs\x80\x90\xa0'


class Oracle:
    """Allowed tokens: the reference walk survives, no key repeats, and a completion exists
    (searched byte by byte over ALPHABET, memoized on what can matter)."""

    def __init__(self, ref, vocab):
        self.ref, self.vocab = ref, vocab
        self.memo = {}

    def live(self, stacks, text, depth=40):
        if not stacks:
            return False
        ks = key_state(text)
        if ks is None:
            return False
        key = (frozenset(stacks), ks)
        if key not in self.memo:
            self.memo[key] = False  # a loop back here adds nothing
            self.memo[key] = self.ref.can_end(stacks) or depth > 0 and any(
                self.live(self.ref.step(stacks, b), text + bytes([b]), depth - 1) for b in ALPHABET)
        return self.memo[key]

    def check(self, ids, stacks, text, rng, sample=12):
        """The mask `ids` against the brute force: every token whose reference walk survives with
        no repeated key is allowed iff a completion exists (checked for every refused survivor
        and for `sample` allowed tokens)."""
        survivors = {t for t, data in enumerate(self.vocab.token_bytes)
                     if data and t not in self.vocab.special_ids
                     and self.ref.walk(stacks, data) and key_state(text + data) is not None}
        assert ids - {self.vocab.eos_id} <= survivors, (text, sorted(ids - survivors))
        for t in survivors - ids:
            data = self.vocab.token_bytes[t]
            assert not self.live(self.ref.walk(stacks, data), text + data), (text, data)
        for t in rng.sample(sorted(ids - {self.vocab.eos_id}), min(sample, len(ids) - 1)):
            data = self.vocab.token_bytes[t]
            assert self.live(self.ref.walk(stacks, data), text + data), (text, data)
        assert (self.vocab.eos_id in ids) == (self.ref.can_end(stacks) and key_state(text) is not None), text


def walk_against_oracle(schema, seed, walks=5, max_tokens=30):
    compiled = compile_grammar(schema)
    machine = build_machine(compiled)
    vocab = key_vocab(seed)
    grammar = StackGrammar(machine, vocab)
    oracle = Oracle(Reference(machine), vocab)
    rng = random.Random(seed)
    v = validator(schema)
    finished = 0
    for _ in range(walks):
        state, stacks, text = grammar.initial_state(), {((0, machine.dfas[0].start),)}, b""
        for _ in range(max_tokens):
            ids = bitmask_ids(grammar, state)
            assert ids, f"dead end after {text!r}"
            oracle.check(ids, stacks, text, rng)
            if vocab.eos_id in ids and (len(ids) == 1 or rng.random() < 0.2):
                instance = json.loads(text, object_pairs_hook=no_repeats)
                assert v.is_valid(instance), text
                finished += 1
                break
            choices = sorted(ids - {vocab.eos_id})
            closing = [t for t in choices if any(c in vocab.token_bytes[t] for c in b'"}:,0123456789')]
            t = rng.choice(closing if closing and rng.random() < 0.7 else choices)  # so walks end
            state = grammar.advance(state, t)
            stacks = oracle.ref.walk(stacks, vocab.token_bytes[t])
            text += vocab.token_bytes[t]
    return finished


def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"repeated key in {pairs}")
    return dict(pairs)


def generate_checked(schema, tok, seeds: int, max_new_tokens: int, noise: float = 0.0) -> int:
    """Generate under the grammar; every complete output has no repeated key and validates.
    Returns how many were complete. noise: fixed random logits added, for other outputs."""
    grammar = StackGrammar(build_machine(compile_grammar(schema)), vocabulary_of(tok))
    mask = MatcherMask(grammar)
    v = validator(schema)
    model = ClosingBiasedModel(tok)
    model.logits = model.logits + np.random.default_rng(0).normal(0, noise, model.logits.shape).astype(np.float32)
    complete = 0
    for seed in range(seeds):
        g = generate(model, tok, "", mask=mask, max_new_tokens=max_new_tokens, seed=seed)
        if g.complete:
            complete += 1
            assert v.is_valid(json.loads(g.text, object_pairs_hook=no_repeats)), g.text
    return complete


# --- from test_schema_properties.py ---------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "id", "ñame", 'q"uote', "back\\slash", "a b", "é😀"])


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-50, 50), st.sampled_from([0.5, -2.25, 1e20]),
                    st.text(max_size=4))


PATTERNS = st.sampled_from(["^[a-z]+$", "^[A-Z][a-z]{0,3}$", "[0-9]", "^a|b$", '^x"y', "^\\d{2}-\\w+$",
                            "^[^\\s]*$", "é", "^.{2}$"])


FORMATS = st.sampled_from(["date", "time", "date-time", "email", "uuid", "uri", "ipv4", "hostname"])


def _bounds(draw, lo_key, hi_key, lo_range, hi_range):
    out = {}
    if draw(st.booleans()):
        out[lo_key] = draw(lo_range)
    if draw(st.booleans()):
        out[hi_key] = draw(hi_range)
    return out


@st.composite
def leaf(draw):
    kind = draw(st.sampled_from(["integer", "number", "string", "pattern", "format", "boolean", "null",
                                 "enum", "const"]))
    if kind == "integer":
        s = {"type": "integer", **_bounds(draw, "minimum", "maximum", st.integers(-120, 40), st.integers(-40, 300))}
        if draw(st.booleans()):
            s["exclusiveMinimum"] = draw(st.integers(-130, 30))
        if s.get("minimum", -1000) > s.get("maximum", 1000) or s.get("exclusiveMinimum", -1000) >= s.get("maximum", 1000) - 1:
            s.pop("maximum", None)
        return s
    if kind == "number":
        s = {"type": "number", **_bounds(draw, "minimum", "exclusiveMaximum", st.integers(-20, 5), st.integers(6, 40))}
        return s
    if kind == "string":
        lo = draw(st.integers(0, 3))
        s = {"type": "string", "minLength": lo}
        if draw(st.booleans()):
            s["maxLength"] = lo + draw(st.integers(0, 4))
        return s
    if kind == "pattern":
        s = {"type": "string", "pattern": draw(PATTERNS)}
        if draw(st.booleans()):  # length bounds on a pattern: exact, or a recorded subset
            s.update(_bounds(draw, "minLength", "maxLength", st.integers(0, 4), st.integers(2, 7)))
        return s
    if kind == "format":
        return {"type": "string", "format": draw(FORMATS)}
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        return {"enum": draw(st.lists(SCALARS, min_size=1, max_size=4))}
    return {"const": draw(SCALARS)}


def extend(children):
    @st.composite
    def obj(draw):
        props = draw(st.dictionaries(NAMES, children, max_size=3))
        s = {"type": "object", "properties": props}
        if props:
            s["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=len(props)))
        extra = draw(st.sampled_from(["false", "true", "schema", "absent"]))
        if extra == "false":
            s["additionalProperties"] = False
        elif extra == "true":
            s["additionalProperties"] = True
        elif extra == "schema":
            s["additionalProperties"] = draw(children)
        if props and draw(st.integers(0, 3)) == 0:
            s["not"] = {"required": draw(st.lists(st.sampled_from(sorted(props)), min_size=1, unique=True))}
        if draw(st.integers(0, 3)) == 0:
            s["patternProperties"] = {draw(st.sampled_from([".*", "^[a-z]+$", "^x", "é"])): draw(children)}
        return s

    @st.composite
    def arr(draw):
        s = {"type": "array", "items": draw(children)}
        lo = draw(st.integers(0, 2))
        if lo:
            s["minItems"] = lo
        if draw(st.booleans()):
            s["maxItems"] = lo + draw(st.integers(0, 2))
        if draw(st.integers(0, 3)) == 0:
            s["prefixItems"] = draw(st.lists(children, min_size=1, max_size=2))
        elif draw(st.integers(0, 3)) == 0:
            s["contains"] = draw(children)
        return s

    any_of = st.lists(children, min_size=2, max_size=3).map(lambda bs: {"anyOf": bs})
    # oneOf compiles only when its branches are provably exclusive; jsonschema checks "exactly one".
    # Arbitrary branches are mostly refused; branches of distinct types are exclusive by type.
    one_of = st.lists(children, min_size=2, max_size=3).map(lambda bs: {"oneOf": bs})
    typed = {"integer": st.just({"type": "integer"}), "string": st.just({"type": "string", "maxLength": 3}),
             "boolean": st.just({"type": "boolean"}), "null": st.just({"type": "null"}), "array": arr(),
             "object": obj()}
    exclusive_one_of = (st.lists(st.sampled_from(sorted(typed)), min_size=2, max_size=3, unique=True)
                        .flatmap(lambda kinds: st.tuples(*(typed[k] for k in kinds)))
                        .map(lambda bs: {"oneOf": list(bs)}))
    return st.one_of(obj(), arr(), any_of, one_of, exclusive_one_of, exclusive_one_of)   # exclusive: 2 in 6


SCHEMAS = st.recursive(leaf(), extend, max_leaves=6)


def sample(node, rng: random.Random) -> str:
    """A random string of the AST's language (bounded repetition, mostly ASCII)."""
    if isinstance(node, rx.CharSet):
        ranges = node.ranges
        ascii_ranges = [(lo, min(hi, 0x7E)) for lo, hi in ranges if lo <= 0x7E]
        if ascii_ranges and rng.random() < 0.8:
            ranges = ascii_ranges
        lo, hi = rng.choice(ranges)
        return chr(rng.randint(lo, hi))
    if isinstance(node, rx.Concat):
        return "".join(sample(item, rng) for item in node.items)
    if isinstance(node, rx.Alt):
        return sample(rng.choice(node.items), rng)
    top = node.max if node.max is not None else node.min + 3
    return "".join(sample(node.item, rng) for _ in range(rng.randint(node.min, min(top, node.min + 3))))


# The compiler refuses some drawn schemas (unsatisfiable draws, e.g. an enum with no value of the
# type; keywords it cannot enforce exactly). Each property counts them and fails when they exceed
# MAX_REFUSED of the draws: a strategy drifting towards refused schemas would test nothing, silently.
MAX_REFUSED = 0.5


def assert_refusals_bounded(counts):
    assert counts["drawn"] >= 40, counts
    assert counts["refused"] <= MAX_REFUSED * counts["drawn"], counts


# --- from test_schema_algebra.py ------------------------------------------------------------------

ATOMS = st.sampled_from(["a", "b", "é", "😀", "[ab]", "[^a]", ".", "(?:ab)", "\\d"])


@st.composite
def small_regex(draw, depth=2, atoms=ATOMS):
    if depth == 0:
        return draw(atoms)
    kind = draw(st.sampled_from(["atom", "cat", "alt", "star", "opt", "count"]))
    if kind == "atom":
        return draw(atoms)
    a = draw(small_regex(depth - 1, atoms))
    if kind == "cat":
        return a + draw(small_regex(depth - 1, atoms))
    if kind == "alt":
        return f"(?:{a}|{draw(small_regex(depth - 1, atoms))})"
    if kind == "star":
        return f"(?:{a})*"
    if kind == "opt":
        return f"(?:{a})?"
    return f"(?:{a}){{1,3}}"


# --- from test_stack.py ---------------------------------------------------------------------------

def small_vocab(seed: int, n: int = 300) -> Vocabulary:
    """All single bytes, plus random JSON-ish multi-byte tokens (some cross value boundaries)."""
    rng = random.Random(seed)
    text = '{}[]":,0123456789-.eE truefalsenullkidsvheadtailxyé\\'
    pieces = ['{"v":', ',"kids":[', '"v":', '},{', '"kids":[', ']}', '":', '",', '"}', 'null}', ':{"', '}]}', '[]', '{}']
    for _ in range(n):
        pieces.append("".join(rng.choice(text) for _ in range(rng.randint(2, 5))))
    toks = list(dict.fromkeys([bytes([b]) for b in range(256)] + [p.encode() for p in pieces]))
    toks.insert(5, toks[260])  # a duplicate byte string
    eos = len(toks)
    return Vocabulary(tuple(toks) + (b"",), eos_id=eos, special_ids=frozenset([eos]))


class Reference:
    """Sets of explicit stacks over the DFAs; calls read off the marker paths byte by byte.

    Map frames (automaton, state, members begun), from the CompiledGrammar.maps contract: at a
    map's start, return once min members were written, or begin one more while fewer than max
    (the first member's key automaton has no comma); after a member, back to the start."""

    def __init__(self, machine):
        self.dfas = machine.dfas
        self.maps = machine.maps
        self._steps = {}
        self.calls = []
        for d in self.dfas:
            table = {}
            for s in range(d.n_states):
                for k in range(len(self.dfas)):
                    r = d.walk(call_bytes(k), s)
                    if r >= 0:
                        table.setdefault(s, []).append((k, r))
            self.calls.append(table)

    def entry(self, k):
        return (k, self.dfas[k].start) + ((0,) if self.maps[k] else ())

    def expand(self, stacks):
        out, todo = set(), [(stack, ()) for stack in stacks]
        while todo:
            stack, pushed = todo.pop()
            if stack in out:
                continue
            out.add(stack)
            a, s = stack[-1][:2]
            extra = stack[-1][2:]
            dfa = self.dfas[a]
            if self.maps[a] is not None and s == dfa.start:
                lo, hi, first, nxt = self.maps[a]
                n = extra[0]
                if n >= lo and len(stack) > 1:
                    todo.append((stack[:-1], pushed))
                if hi is None or n < hi:
                    key = first if n == 0 and first >= 0 else nxt
                    for k, r in self.calls[a].get(s, []):
                        if k == key:
                            todo.append((stack[:-1] + ((a, r, n + 1), self.entry(k)), pushed + (k,)))
                continue
            for k, r in self.calls[a].get(s, []):
                if k not in pushed:
                    todo.append((stack[:-1] + ((a, r) + extra, self.entry(k)), pushed + (k,)))
            if dfa.accepting[s]:
                if self.maps[a] is not None:
                    todo.append((stack[:-1] + ((a, dfa.start) + extra,), pushed))
                elif len(stack) > 1:
                    todo.append((stack[:-1], pushed))
        return out

    def step(self, stacks, byte):
        """The stacks after `byte` (a frozenset). Memoized: a pure function of (stacks, byte) over
        fixed DFAs, and a brute force walks every token from the same stacks, so the steps of
        their common prefixes repeat."""
        key = (frozenset(stacks), byte)
        out = self._steps.get(key)
        if out is None:
            out = self._steps[key] = frozenset(self._step(stacks, byte))
        return out

    def _step(self, stacks, byte):
        if byte >= 0xF8:
            return set()
        out = set()
        for stack in self.expand(stacks):
            a, s = stack[-1][:2]
            t = int(self.dfas[a].trans[s, byte])
            if t >= 0:
                out.add(stack[:-1] + ((a, t) + stack[-1][2:],))
        return out

    def walk(self, stacks, data):
        for b in data:
            stacks = self.step(stacks, b)
            if not stacks:
                break
        return stacks

    def can_end(self, stacks):
        return any(len(stack) == 1 and self.dfas[stack[0][0]].accepting[stack[0][1]] for stack in self.expand(stacks))


_LEX = re.compile(rb'(?P<s>"(?:[^"\\]|\\.)*")|(?P<u>"(?:[^"\\]|\\.)*\\?\Z)|(?P<p>[{}\[\],:])', re.S)


def key_state(text: bytes):
    """Rescan the whole text: None if some object repeats a key (decoded: json.loads), else (the
    key sets of the open objects, the unfinished key or None): what can still matter after it."""
    objs, expect_key, partial = [], False, None
    for m in _LEX.finditer(text):
        tok = m.group()
        if m.lastgroup == "u":  # a string still open at the end
            partial = tok if expect_key else None
        elif m.lastgroup == "s":
            if expect_key:
                name = json.loads(tok)
                if name in objs[-1]:
                    return None
                objs[-1] = objs[-1] | {name}
                expect_key = False
        elif tok == b"{":
            objs.append(frozenset())
            expect_key = True
        elif tok == b"[":
            objs.append(None)
        elif tok in (b"}", b"]"):
            objs.pop()
        elif tok == b",":
            expect_key = objs[-1] is not None
        elif tok == b":":
            expect_key = False
    return tuple(objs), partial


def bitmask_ids(grammar, state):
    row = np.zeros((grammar.vocab_size + 31) // 32, dtype=np.int32)
    grammar.fill_bitmask(state, row)
    bits = np.unpackbits(row.view(np.uint8), count=grammar.vocab_size, bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def brute_force_ids(ref, vocab, stacks, text=b""):
    """Tokens whose reference walk survives with no object repeating a key (these schemas' keys
    never run out, so every survivor can be completed)."""
    # A key repeats only where a string closes, on a quote byte: a token without one keeps the
    # text's answer, so the whole text is rescanned only for the tokens that hold a quote.
    text_ok = key_state(text) is not None

    def no_repeat(data: bytes) -> bool:
        return text_ok if b'"' not in data else key_state(text + data) is not None

    ids = {t for t, data in enumerate(vocab.token_bytes)
           if data and t not in vocab.special_ids and ref.walk(stacks, data) and no_repeat(data)}
    if ref.can_end(stacks):
        ids.add(vocab.eos_id)
    return ids


def random_walk(grammar, rng, ref=None, max_tokens=60):
    """A random token walk; with `ref`, every mask is checked against the brute force."""
    vocab = grammar.vocab
    state = grammar.initial_state()
    stacks = {((0, grammar.machine.dfas[0].start),)}
    out = b""
    for _ in range(max_tokens):
        ids = bitmask_ids(grammar, state)
        if ref is not None:
            assert ids == brute_force_ids(ref, vocab, stacks, out), out
        assert ids, f"dead end after {out!r}"
        if vocab.eos_id in ids and (len(ids) == 1 or rng.random() < 0.3):
            return out, True
        ids.discard(vocab.eos_id)
        # prefer closing tokens near the budget so walks finish
        t = rng.choice(sorted(ids))
        state = grammar.advance(state, t)
        assert state is not None
        out += vocab.token_bytes[t]
        if ref is not None:
            stacks = ref.walk(stacks, vocab.token_bytes[t])
    return out, False


# --- from test_schema_generate.py -----------------------------------------------------------------

@dataclass(frozen=True)
class _Config:
    vocab_size: int
    context: int = 4096


class _Cache:
    length = 0


class ClosingBiasedModel:
    """Fixed logits (V,): shorter tokens and tokens holding `"`, `}`, `]`, `,` or a digit are
    likelier; EOS is likeliest (the mask allows it only when the output is complete)."""

    def __init__(self, tok):
        score = np.array([-0.7 * len(b) + 2.5 * any(c in b for c in b'"}],0123456789') for b in tok.token_bytes],
                         dtype=np.float32)
        score[tok.eos_id] = 8.0
        self.logits = score
        self.config = _Config(tok.vocab_size)

    def new_cache(self, kind="contiguous"):
        return _Cache()

    def decode(self, ids, cache):
        cache.length += len(ids)
        return np.broadcast_to(self.logits, (len(ids), self.logits.size)).copy()


# --- from test_index.py ---------------------------------------------------------------------------

INDEX_PATTERNS = [
    r'\{"a":"[^"\\]{0,4}","b":(?:true|false|null)\}',
    r'\[(?:-?\d{1,3}(?:,-?\d{1,3}){0,3})?\]',
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
    r'(?:é|€|😀|ab)+',
    r'x{3}',
]


def random_vocab(seed: int, n: int = 250, *, all_bytes: bool = True) -> Vocabulary:
    """Random tokens over JSON-ish characters, cut at random byte offsets, so many tokens split a
    multi-byte character; plus EOS and one other special token, and one duplicate byte string."""
    rng = random.Random(seed)
    text = '{}[]":,ab-19 \\é€😀truefalsenullx'
    pieces = []
    for _ in range(n):
        s = "".join(rng.choice(text) for _ in range(rng.randint(1, 4))).encode()
        i = rng.randint(0, len(s) - 1)
        pieces.append(s[i:i + rng.randint(1, 6)])
    base = [bytes([b]) for b in range(256)] if all_bytes else []
    toks = list(dict.fromkeys(base + pieces))
    toks.insert(7, toks[300 % len(toks)])  # the duplicate
    specials = [len(toks), len(toks) + 1]
    return Vocabulary(tuple(toks) + (b"", b""), eos_id=specials[0], special_ids=frozenset(specials))


# --- from test_extra_keys.py ----------------------------------------------------------------------

KEYS = ["a", "ab", "b", "c", "x", "", "o"]


VALUES = [0, None, "a", "b", {"a": 1}]


def keyed_objects(keys=KEYS, values=VALUES, n_max: int = 2):
    """Every object of up to n_max of `keys`, in every order, each key with each of `values`."""
    for n in range(n_max + 1):
        for chosen in itertools.permutations(keys, n):
            for vals in itertools.product(values, repeat=n):
                yield dict(zip(chosen, vals))


def agrees_with_jsonschema(schema, instances, complete=lambda instance: True) -> int:
    """The stack grammar on each instance's canonical text against jsonschema: never accepts an
    invalid one, and accepts the valid ones where `complete(instance)`. Returns how many it accepted."""
    machine = build_machine(compile_grammar(schema))
    v = validator(schema)
    accepted = 0
    for instance in instances:
        ok = machine.accepts(canonical_json(instance, schema))
        assert ok <= v.is_valid(instance), instance  # sound
        if complete(instance):
            assert ok == v.is_valid(instance), instance
        accepted += ok
    return accepted


# --- from test_lookahead.py -----------------------------------------------------------------------

def assert_agrees_with_re_search(pattern, texts):
    """The stack grammar and the flat regex of {"type": "string", "pattern": pattern} accept
    exactly the texts re.search finds the pattern in (and jsonschema agrees), some of them."""
    schema = {"type": "string", "pattern": pattern}
    machine = build_machine(compile_grammar(schema))
    flat = re.compile(compile_schema(schema).regex)
    v = validator(schema)
    matched = 0
    for text in texts:
        ok = re.search(pattern, text) is not None
        assert v.is_valid(text) == ok  # the oracle is what jsonschema decides
        quoted = json.dumps(text)
        assert machine.accepts(quoted) == ok, (pattern, text)
        assert bool(flat.fullmatch(quoted)) == ok, (pattern, text)
        matched += ok
    assert matched > 0


# --- from test_lru.py -----------------------------------------------------------------------------

def run_in_threads(work, n: int = 4, interval: float = 1e-6) -> list[Exception]:
    """work(k) for k < n, each in its thread, switching threads every `interval` s so that their
    calls interleave; the exceptions they raised (a thread's would not fail a test by itself)."""
    errors = []

    def guarded(k: int) -> None:
        try:
            work(k)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return errors


# --- from test_tokenizer.py -----------------------------------------------------------------------

# A corpus that exercises every branch of the pre-tokenizers: Spanish with accents, code,
# numbers, whitespace runs, \r\n, emoji (4-byte UTF-8, ZWJ sequences), CJK, contractions in
# every case, the long s (which (?i) matches as s), combining marks, and special-token text.
CORPUS = [
    "El niño comió una manzana; ¿cuántas pingüinas viste en Cádiz? ¡Muchísimas!",
    "conjuga hablar, presente, yo:{\"verbo\":\"hablar\",\"tiempo\":\"presente\",\"forma\":\"hablo\"}",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\r\n",
    "Numbers: 1234567 3.14159 -42 1e-9 0x1F 2026-12-02 12:30:00 ٣٤٥ ⅻ ²³",
    "   leading spaces, trailing spaces   ",
    "tabs\t\t\tand  \n  mixed \u00a0\u2003 whitespace\u3000here \n",
    "I'm sure you'll see they've said it's 'quoted' — DON'T WON'T I'LL we'Re 'ſ 'S",
    "emoji 😀👍🏽 👨‍👩‍👧 flags 🇪🇸 and ❤️",
    "中文分词测试：你好，世界！日本語のテキスト、カタカナ。한국어 문장",
    "combining: e\u0301 n\u0303 vs é ñ; Ångström Ωmega ǅ",
    "x<|endoftext|>y",
    "\n\n\n",
    " ",
    "'",
    "a  b   c    d",
    "trailing newline\n",
    "\r\n\r\n  \r  \n\t",
    "punct!!! ...??? ---> <<<>>> $$$ @@@ ### %%%",
    "URL https://example.com/path?q=1&r=2#frag",
    "ends with spaces \t ",
]


# Unassigned code points (Cn) may be classified differently by the references' newer Unicode
# tables, and lone surrogates (Cs) are not text.
TEXT = st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=60)


# --- from test_generate.py ------------------------------------------------------------------------

EOS = 256


class ByteTokenizer:
    """Test double of the Tokenizer contract: one id per byte, EOS = 256."""

    vocab_size = 257
    eos_id = EOS
    special_ids = frozenset({EOS})
    token_bytes = [bytes([i]) for i in range(256)] + [b""]

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")


class DigitsMask:
    """A TokenMask: up to `n` ASCII digits, then EOS; complete once at least one digit was emitted.

    `forbid` removes extra tokens everywhere (to test that masked runs follow the unmasked RNG path).
    """

    def __init__(self, vocab_size, n=3, allowed=None, forbid=()):
        self.vocab_size = vocab_size
        self.n = n
        self.base = np.zeros(vocab_size, bool)
        self.base[list(range(48, 58)) if allowed is None else list(allowed)] = True
        self.base[list(forbid)] = False
        self.calls = []
        self.reset()

    def reset(self):
        self.count = 0

    def is_complete(self):
        return self.count >= 1

    def allowed_mask(self):
        self.calls.append("build")
        m = self.base.copy() if self.count < self.n else np.zeros(self.vocab_size, bool)
        m[EOS] = self.is_complete()
        return m

    def apply(self, logits, m):
        self.calls.append("apply")
        logits[~m] = -np.inf

    def advance(self, token):
        self.calls.append("advance")
        if not self.allowed_mask()[token]:
            raise InferlabError(f"token {token} is not allowed")
        self.calls.pop()                 # allowed_mask() above was only the check
        self.count += 1

    def allowed_ids(self):
        return np.flatnonzero(self.allowed_mask()).astype(np.int32)


# --- from test_schema_bench.py --------------------------------------------------------------------

def write_case(folder: Path, name: str, schema, tests):
    doc = {"description": name, "meta": {}, "schema": schema,
           "tests": [{"description": "", "valid": valid, "data": data} for valid, data in tests]}
    (folder / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")


# --- schemas shared by test_stack.py, test_native.py and test_caches.py ---------------------------
TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer", "minimum": 0, "maximum": 9},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
    "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node"}
LIST = {"type": "object", "properties": {"head": {"type": "string", "maxLength": 2},
                                         "tail": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["head", "tail"]}
ANY = {"type": "object", "properties": {"x": True, "y": {"type": "array"}}}
RECURSIVE = [TREE, LIST, ANY]
STRINGS = {"type": "object", "properties": {
    "a": {"type": "string"}, "b": {"type": "string", "minLength": 1}, "c": {"type": "array", "items": {"type": "string"}},
    "d": {"type": "object", "additionalProperties": {"type": "string"}}, "e": {"type": "string", "pattern": "^[a-z]+$"},
    "f": {"type": "number"}, "g": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}


@st.composite
def recursive_schemas(draw):
    """A recursive $defs node around generated subschemas: its children (array items, an optional
    property, an anyOf branch) refer back to it, so every walk runs on calls and returns."""
    child = {"$ref": "#/$defs/node"}
    kind = draw(st.sampled_from(["array", "property", "anyOf"]))
    node = {"type": "object", "properties": {"v": draw(SCHEMAS)}, "required": ["v"],
            "additionalProperties": draw(st.booleans())}
    if kind == "array":
        node["properties"]["kids"] = {"type": "array", "items": child, "maxItems": draw(st.integers(1, 3))}
    elif kind == "property":
        node["properties"]["next"] = child
    else:
        node = {"anyOf": [node, {"type": "array", "items": child, "maxItems": 2}]}
    return {"$defs": {"node": node}, "$ref": "#/$defs/node"}


FIXTURES = [TREE, LIST, ANY, STRINGS,
            {"type": "array", "items": {"type": "string", "maxLength": 5}},
            {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 4},
                                              "b": {"type": "string", "maxLength": 3}}},
            {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 3},
            {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "uniqueItems": True},
            {"type": "object", "propertyNames": {"enum": ["x", "y", "kids"]}, "minProperties": 1},
            {"type": "array", "items": {"type": "number", "minimum": -5, "maximum": 12.5}, "maxItems": 4},
            {"type": "string", "minLength": 40, "maxLength": 70},
            {"type": "array", "items": {"type": "string", "pattern": "^[ab]{0,300}x$"}}]  # (> 256 states: splits not shared)


def finite(value) -> bool:
    """No NaN or infinity anywhere in a JSON value (JSON has none; jsonschema and our texts differ there)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(finite(x) for x in value)
    if isinstance(value, dict):
        return all(finite(x) for x in value.values())
    return True
