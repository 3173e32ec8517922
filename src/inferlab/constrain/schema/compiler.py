"""The compiler: dispatch by type, and the entry points compile_schema / compile_grammar / canonical_json."""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.constrain.schema.algebra import AlgebraMixin
from inferlab.constrain.schema.arrays import ArraysMixin
from inferlab.constrain.schema.canonical import CanonicalMixin, NoCanonicalText
from inferlab.constrain.schema.combinators import CombinatorsMixin, enum_siblings
from inferlab.constrain.schema.common import (COUNT_MIN, FORMAT_POLICIES, NESTING_CUT, CompiledSchema, FLEXIBLE_WS_MAX, MAX_REGEX_CHARS,
                                              MAX_SUBSCHEMAS, OUTLINE_CHARS, SchemaError, SchemaTooLarge,
                                              _DEPENDENCY_KEYWORDS, _NOT_IN_DIALECT, _NUMBER, _OLD_DRAFTS,
                                              _STRING, _TYPES, _UNSUPPORTED, _Unsat, _child, _group,
                                              _keyword_families, _lit, _type_set, dialect_of,
                                              document_dicts, dumps)
from inferlab.constrain.schema.evaluated import EvaluatedMixin
from inferlab.constrain.schema.numbers import NumbersMixin
from inferlab.constrain.schema.objects import ObjectsMixin
from inferlab.constrain.schema.refs import RefsMixin
from inferlab.constrain.schema.resources import VALIDATION_KEYWORDS, Resources
from inferlab.constrain.schema.strings import StringsMixin
from inferlab.constrain.schema.values import ValueChecker
from inferlab.nesting import (JSON_FRAMES, MAX_SCHEMA_DEPTH, SCHEMA_FRAMES, check_value_nesting, recursion_room,
                              short_pointer, split_pointer)


class _Compiler(EvaluatedMixin, AlgebraMixin, RefsMixin, StringsMixin, NumbersMixin, ArraysMixin, ObjectsMixin, CombinatorsMixin, CanonicalMixin):
    def __init__(self, root, *, whitespace, lenient, max_ref_depth, extra_keys, any_depth,
                 stack_mode: bool = False, outline_chars: int = 4_000, count_min: int = COUNT_MIN,
                 format: str = "assert", ref_dir=None):
        if whitespace not in ("compact", "flexible"):
            raise SchemaError(f"whitespace must be 'compact' or 'flexible', got {whitespace!r}")
        if format not in FORMAT_POLICIES:
            raise SchemaError(f"format must be one of {', '.join(FORMAT_POLICIES)}, got {format!r}")
        self.format_policy = format
        if max_ref_depth < 1:
            raise SchemaError(f"max_ref_depth must be >= 1, got {max_ref_depth}")
        self.root = root
        self.ws = "" if whitespace == "compact" else f"[ \\t\\n\\r]{{0,{FLEXIBLE_WS_MAX}}}"
        self.lenient = lenient
        self.max_ref_depth = max_ref_depth
        self.extra_keys = extra_keys
        self.any_depth = any_depth
        self.unenforced: list[str] = []
        self.narrowed: list[str] = []
        self.ref_depth = 0
        self.calls = 0
        self.max_calls, self.calls_before = MAX_SUBSCHEMAS, 0  # a budget: calls_before + its size
        self.depth = 0  # compile() calls open on the Python stack
        self.recursive = False  # some $ref target was entered again inside itself
        # Stack mode (compile_grammar): a plain $ref, an unconstrained value and any subschema
        # whose regex exceeds OUTLINE_CHARS become calls `(?&k)` of automaton k, compiled once.
        self.stack_mode = stack_mode
        self.outline_chars = outline_chars
        self.count_min = count_min
        self.counts: dict[int, tuple[int, int]] = {}  # counted automaton -> (min, max) items
        self.maps: dict[int, tuple] = {}  # map automaton -> (min, max or None, first key or -1, next key)
        self.lengths: dict[int, tuple] = {}  # length-bounded string automaton -> (min, max or None) characters
        self.uniques: dict[str, int] = {}  # regex of an array of unique strings -> its automaton
        self.automata: list[str] = [""]     # regexes; 0 is the root, filled last
        # per automaton, the JSON pointer of the subschema it was made for (a refusal of its DFA
        # names it); `where`: the pointers of the compile() calls open, innermost last
        self.sources: list[str] = [""]
        self.where: list[str] = [""]
        self.ref_automaton: dict[str, int] = {}
        self.unsat_refs: dict[str, _Unsat] = {}
        self.outlined: dict[str, int] = {}  # regex text -> automaton
        self.inline = 0                     # > 0: calls are off (the regex goes to Python's re)
        self.unenforced_formats: list[str] = []
        self.dialect = dialect_of(root)
        # $id bases, anchors and other documents: where each $ref points
        self.resources = Resources(root, self.dialect, ref_dir)
        # a metaschema of the registry without the validation vocabulary: its keywords are
        # annotations in the document, read as keywords the dialect lacks
        self.vocabulary_off = self.resources.unused_validation(self.error)
        self.not_in_dialect = _NOT_IN_DIALECT.get(self.dialect, frozenset()) | (
            VALIDATION_KEYWORDS if self.vocabulary_off else frozenset())
        # the document's own nodes: only these are read in its dialect (of_document)
        self.document = set(document_dicts(root)) if self.not_in_dialect else set()  # (+ other documents read)
        self.values = ValueChecker(root, self.not_in_dialect, self.document, assert_formats=format == "assert")  # enum/const beside other keywords
        self._any_of_cases = False  # (schema.evaluated: an anyOf among the cases of the keyword rewritten)
        self.operand_depth = 0  # > 0: compiling the operand of a complement (patterns as supersets)
        self.operand_losses: list[str] = []  # what an operand's format supersets cost its complement
        self.clashes: dict[tuple, tuple] = {}  # oneOf branches (ids, stacks) -> (the objects, first clash)
        self.old_draft = self.dialect in _OLD_DRAFTS
        self.ignored: list[str] = []  # "keyword at #/pointer: ..." of each keyword the dialect lacks
        # draft-03/04: an integer is a number written without a fraction, so 12345.0 is not one;
        # from draft-06 on it is (a zero fractional part), and its canonical text is 12345
        self.integral_floats = self.dialect not in ("draft-03", "draft-04")

    def refuse(self, keyword: str, ptr: str, reason: str) -> None:
        """Not enforceable exactly: an error, or (lenient) a listed unenforced constraint."""
        message = f"{keyword} at #{ptr}: {reason}"
        if not self.lenient:
            raise SchemaError(message)
        if message not in self.unenforced:
            self.unenforced.append(message)

    def checkpoint(self) -> tuple:
        """What rollback needs to undo a compile attempt that raised (its automata, messages)."""
        return len(self.automata), len(self.narrowed), len(self.unenforced), len(self.unenforced_formats), self.calls

    def rollback(self, saved: tuple) -> None:
        n, narrowed, unenforced, formats, self.calls = saved
        del self.automata[n:], self.sources[n:]
        for table in (self.ref_automaton, self.outlined, self.uniques):  # key -> automaton
            for key in [key for key, k in table.items() if k >= n]:
                del table[key]
        for table in (self.counts, self.maps, self.lengths):  # automaton -> what it counts
            for k in [k for k in table if k >= n]:
                del table[k]
        del self.narrowed[narrowed:], self.unenforced[unenforced:], self.unenforced_formats[formats:]

    def of_document(self, node) -> bool:
        """Whether `node` is the document's own (read in its dialect), not one the compiler built."""
        return id(node) in self.document

    def in_dialect(self, node: dict, ptr: str) -> dict:
        """`node`, a node of the document, without the keywords its dialect lacks (each listed in
        self.ignored); one the compiler built keeps them (a negation's contains)."""
        for k in node:
            if k in self.not_in_dialect:
                why = (f"an annotation: the metaschema {self.vocabulary_off} leaves out the validation vocabulary"
                       if self.vocabulary_off and k in VALIDATION_KEYWORDS else f"not a {self.dialect} keyword")
                note = f"{k} at #{ptr}: {why} (ignored, as its validators do)"
                if note not in self.ignored:
                    self.ignored.append(note)
        return {k: v for k, v in node.items() if k not in self.not_in_dialect}

    def narrow(self, message: str) -> None:
        if message not in self.narrowed:
            self.narrowed.append(message)

    @staticmethod
    def error(keyword: str, ptr: str, reason: str) -> SchemaError:
        return SchemaError(f"{keyword} at #{ptr}: {reason}")

    def tok(self, text: str) -> str:
        """A structural token with optional whitespace around it."""
        return f"{self.ws}{_lit(text)}{self.ws}" if self.ws else _lit(text)

    def compile(self, node, ptr: str, stack: tuple = ()) -> str:
        self.calls += 1
        if self.calls > self.max_calls:
            raise SchemaTooLarge(f"subschemas at #{ptr}: the schema expands to more than "
                                 f"{self.max_calls - self.calls_before:,} subschemas ($ref unrolling, anyOf/allOf "
                                 "distribution) here: lower max_ref_depth or simplify it")
        if self.depth == MAX_SCHEMA_DEPTH:  # $ref chains nest compiles deeper than the document
            raise SchemaError(f"subschemas nested deeper than {MAX_SCHEMA_DEPTH:,} at "
                              f"{short_pointer(split_pointer(ptr))} ($ref included; the nesting limit)")
        self.depth += 1
        self.where.append(ptr)
        try:
            out = self._compile(node, ptr, stack)
            if len(out) > self.outline_chars and self.calls_on():
                return self.outline(out)
        finally:
            self.depth -= 1
            self.where.pop()
        if len(out) > MAX_REGEX_CHARS:  # stop an unrolled blow-up as soon as one part is too big
            raise SchemaTooLarge(f"the regex for #{ptr} exceeds {MAX_REGEX_CHARS:,} characters: "
                              "lower max_ref_depth or simplify the schema")
        return out

    def _compile(self, node, ptr: str, stack: tuple) -> str:
        if isinstance(node, dict) and any(k in node and not (k in self.not_in_dialect and self.of_document(node))
                                          for k in ("$dynamicRef", "$recursiveRef")):
            node = self.static_dynamic_ref(node, ptr)  # (a call below where it stands alone)
        if self.calls_on() and isinstance(node, dict) and "$ref" in node:
            call = self.call_ref(node, ptr)
            if call is not None:
                return call
        node, ptr, stack = self.flatten(node, ptr, stack)
        if node is True:
            return self.any_value(ptr)
        if node is False:
            raise _Unsat(f"false schema at #{ptr}")
        if ("const" in node or "enum" in node) and set(enum_siblings(node)) - {"type"} and self.values.available:
            return self.compile_enum(node, ptr, stack)  # any siblings: the values are checked
        if any(k in node for k in _DEPENDENCY_KEYWORDS):
            return self.compile(self.dependencies_as_any_of(node, ptr), ptr, stack)
        if "if" in node:
            return self.compile_conditional(node, ptr, stack)
        if "not" in node:
            return self.compile_negated({k: v for k, v in node.items() if k != "not"}, node["not"], ptr,
                                        _child(ptr, "not"), stack)
        for key, reason in _UNSUPPORTED.items():
            if key in node:
                self.refuse(key, _child(ptr, key), reason)
        if "anyOf" in node or "oneOf" in node:
            return self.compile_alternatives(node, ptr, stack)
        if "const" in node or "enum" in node:
            return self.compile_enum(node, ptr, stack)
        parts, failures = [], []
        families = None if "type" in node else _keyword_families(node)
        for t in self.types_of(node, ptr):
            try:  # without "type", a type whose keywords are absent is unconstrained
                own = node if families is None or t in families else {}
                parts.append(getattr(self, "compile_" + t)(own, ptr, stack))
            except _Unsat as exc:
                failures.append(exc)
        if not parts:
            raise failures[0]  # keeps the reason (and whether it was a recursion cut)
        for exc in failures:
            self.note_cut(exc)
        return _group(parts)

    def types_of(self, node, ptr) -> list[str]:
        if "type" in node:
            types = _type_set(node["type"])
            for t in types:
                if t not in _TYPES and t != "integer":
                    raise self.error("type", _child(ptr, "type"), f"unknown type {t!r}")
            if not types:
                raise self.error("type", _child(ptr, "type"), "an empty list of types allows nothing")
            if "number" in types:
                types.discard("integer")
            return [t for t in ("null", "boolean", "object", "array", "integer", "number", "string") if t in types]
        if not _keyword_families(node):
            return ["any"]
        return ["null", "boolean", "object", "array", "number", "string"]  # each constrained by its own keywords

    def compile_any(self, node, ptr, stack) -> str:
        return self.any_value(ptr)

    def any_value(self, ptr: str) -> str:
        if self.calls_on():  # exact: one recursive automaton, any nesting
            if "any" not in self.ref_automaton:
                k = self.ref_automaton["any"] = self.new_automaton()
                self.automata[k] = self._any(1, inner=f"(?&{k})")
            return f"(?&{self.ref_automaton['any']})"
        self.narrow(f"unconstrained value at #{ptr}: {NESTING_CUT} {self.any_depth} levels")
        return self._any(self.any_depth)

    def _any(self, depth: int, inner: str | None = None) -> str:
        scalar = f"(?:{_STRING}|{_NUMBER}|true|false|null)"
        if depth == 0:
            return scalar
        inner = self._any(depth - 1) if inner is None else inner
        comma = self.tok(",")
        array = f"{self.tok('[')}(?:{inner}(?:{comma}{inner})*)?{self.tok(']')}"
        member = f"{_STRING}{self.tok(':')}{inner}"
        obj = f"{self.tok('{')}(?:{member}(?:{comma}{member})*)?{self.tok('}')}"
        return f"(?:{scalar}|{array}|{obj})"

    def compile_null(self, node, ptr, stack) -> str:
        return "null"

    def compile_boolean(self, node, ptr, stack) -> str:
        return "(?:true|false)"


def _compile_root(c: _Compiler, schema) -> str:
    """The root's regex; an unsatisfiable or too deeply nested schema as one SchemaError.

    Nesting is bounded before any recursion could reach Python's limit: the document's arrays
    and objects (check_nesting), compile() calls (a $ref chain) and regex groups (regex.parse),
    each at a limit of inferlab.nesting; the walk runs with room for those limits."""
    check_nesting(schema)
    with recursion_room(SCHEMA_FRAMES):
        try:
            out = c.compile(schema, "")
        except _Unsat as exc:
            raise SchemaError(f"{exc} (the schema is unsatisfiable)") from None
    c.resources.check_dynamic_choices(c.error)
    return out


def check_nesting(schema) -> None:
    """SchemaError naming the JSON pointer where the schema document nests deeper than
    nesting.MAX_SCHEMA_DEPTH arrays/objects."""
    def refuse(parts):
        raise SchemaError(f"schema nested deeper than {MAX_SCHEMA_DEPTH:,} arrays/objects at "
                          f"{short_pointer(parts)} (the nesting limit)")
    check_value_nesting(schema, MAX_SCHEMA_DEPTH, refuse)


def compile_schema(schema, *, whitespace: str = "compact", lenient: bool = False, max_ref_depth: int = 3,
                   extra_keys: bool = True, any_depth: int = 1, format: str = "assert",
                   ref_dir=None) -> CompiledSchema:
    """JSON Schema (a dict or a boolean) -> CompiledSchema; raises SchemaError (see module doc).

    max_ref_depth: the deepest unrolling of a recursive $ref; when that regex is too large
    (SchemaTooLarge), shallower depths are tried, and ref_depth and `narrowed` say which was used.
    extra_keys: where additionalProperties is absent, generate extra keys, as JSON Schema allows
    them (True, the default); False forbids them there, as structured-output APIs' strict modes
    (xgrammar's strict_mode) do: a narrowing, recorded.
    any_depth: nesting depth generated for unconstrained values (1: scalars, or flat arrays and
    objects of scalars; each level multiplies the automaton, measured on the Kubernetes sample).
    format, ref_dir: as compile_grammar's.
    """
    for depth in range(max_ref_depth, 0, -1):
        c = _Compiler(schema, whitespace=whitespace, lenient=lenient, max_ref_depth=depth,
                      extra_keys=extra_keys, any_depth=any_depth, format=format, ref_dir=ref_dir)
        try:
            regex = _compile_root(c, schema)
        except SchemaTooLarge:
            if not c.recursive or depth == 1:
                raise
            continue
        if depth < max_ref_depth:
            c.narrow(f"recursion unrolled to depth {depth}: max_ref_depth={max_ref_depth} gave a regex too large")
        return CompiledSchema(regex=regex, unenforced=tuple(c.unenforced + c.unenforced_formats), ref_depth=c.ref_depth,
                              narrowed=tuple(c.narrowed), whitespace=whitespace)
    raise AssertionError("unreachable: depth 1 either returns or raises")


@dataclass(frozen=True)
class CompiledGrammar:
    """A schema as a recursive transition network: automaton k's regex may call `(?&j)`."""

    automata: tuple[str, ...]    # regexes (the dialect of constrain.regex with calls); 0 is the root
    unenforced: tuple[str, ...]
    narrowed: tuple[str, ...]
    whitespace: str
    unenforced_formats: tuple[str, ...] = ()  # custom formats left as annotations (format policy)
    counts: tuple[tuple[int, int] | None, ...] = ()  # per automaton: (min, max) items if counted
    # per automaton: (min, max or None, first key automaton or -1, next key automaton) if a map:
    # the members of an object beyond its declared ones, counted by the frame
    maps: tuple[tuple | None, ...] = ()
    # automata that are arrays of unique strings (uniqueItems): the matcher tracks their items
    uniques: tuple[int, ...] = ()
    # per automaton: (min, max or None) characters if its regex is a string's pattern or format
    # whose length bounds its DFA enforces (schema.algebra.bounded_dfa), not its regex
    lengths: tuple[tuple[int, int | None] | None, ...] = ()
    # keywords the schema's dialect ($schema) does not have, left out as its validators leave them
    ignored: tuple[str, ...] = ()
    # per automaton: the JSON pointer of the subschema it was first made for ("" is the root)
    sources: tuple[str, ...] = ()


def compile_grammar(schema, *, whitespace: str = "compact", lenient: bool = False,
                    extra_keys: bool = True, outline_chars: int = OUTLINE_CHARS[0],
                    count_min: int = COUNT_MIN, format: str = "assert", ref_dir=None) -> CompiledGrammar:
    """JSON Schema -> CompiledGrammar (stack mode); raises SchemaError as compile_schema does.

    Each $ref target (with no constraining siblings) is compiled once into its own automaton and
    called where it is used, so recursion is exact and has no depth cap; unconstrained values
    are one recursive automaton (any nesting); a subschema regex over OUTLINE_CHARS characters
    becomes an automaton of its own (smaller `outline_chars`: more, smaller automata); a string
    with maxLength >= count_min is a counted automaton (its frame counts characters); a pattern
    or format under length bounds too long for the regex product is an automaton whose DFA counts
    the characters (`lengths`). A schema without any of these is one automaton: a flat DFA.

    Format policy (JSON Schema 2020-12 makes `format` an annotation unless a validator opts in to
    assertion): the formats of constrain.formats are enforced exactly; a format the specification
    does not define (a custom name such as "path" or "utc-millisec") is an annotation, not
    enforced, and listed in `unenforced_formats`; a format the specification defines that is not
    implemented (idn-email, regex, duration, ...) is refused, since validators assert it. That
    is format="assert", the default (generated text then meets the format wherever a validator
    checks it). format="annotate" is a leniency, the specification's default reading: no format
    is enforced, and every one left out is listed in `unenforced_formats`.

    ref_dir: a local registry for references to other documents (schema.resources): a folder
    whose JSON files stand for any http(s) server's documents by their path ("http://host/a/b.json"
    -> ref_dir/a/b.json) and for the URI of their own $id. The draft metaschemas come from the
    installed jsonschema-specifications package. Nothing is ever downloaded: without a registry, a
    reference to another document is refused, naming it.
    """
    c = _Compiler(schema, whitespace=whitespace, lenient=lenient, max_ref_depth=3,
                  extra_keys=extra_keys, any_depth=1, stack_mode=True, outline_chars=outline_chars,
                  count_min=count_min, format=format, ref_dir=ref_dir)
    c.automata[0] = _compile_root(c, schema)
    return CompiledGrammar(automata=tuple(c.automata), unenforced=tuple(c.unenforced),
                           narrowed=tuple(c.narrowed), whitespace=whitespace,
                           unenforced_formats=tuple(c.unenforced_formats),
                           counts=tuple(c.counts.get(k) for k in range(len(c.automata))),
                           maps=tuple(c.maps.get(k) for k in range(len(c.automata))),
                           uniques=tuple(sorted(c.uniques.values())),
                           lengths=tuple(c.lengths.get(k) for k in range(len(c.automata))),
                           ignored=tuple(c.ignored), sources=tuple(c.sources))


def canonical_json(instance, schema, *, max_ref_depth: int = 3, extra_keys: bool = True,
                   any_depth: int = 1, ref_dir=None) -> str:
    """Re-serialise an instance the way compile_schema generates it: schema property order
    (declared properties first, then extra keys in instance order), compact separators,
    ensure_ascii=False, numbers as Python's json writes them, except that an integral float where
    the schema allows only integers is written as an integer, and a float under number bounds in
    positional notation (1e-05 -> 0.00001), the only notation bounded numbers are generated in."""
    c = _Compiler(schema, whitespace="compact", lenient=True, max_ref_depth=max_ref_depth,
                  extra_keys=extra_keys, any_depth=any_depth, ref_dir=ref_dir)
    # The schema's nesting is bounded by the compile that accepted it (not checked again here: a
    # walk of the whole schema per instance); the instance's by the file reader's MAX_JSON_DEPTH.
    with recursion_room(SCHEMA_FRAMES + JSON_FRAMES):
        try:
            return c.canonical(instance, schema, "")
        except NoCanonicalText:  # (a $ref cycle the walk cannot follow to an end: the plain text)
            return dumps(instance)

