"""JSON Schema -> regular expression: the first stage of constrained decoding.

`compile_schema(schema)` returns a regex (the dialect of `constrain.regex`, Python-`re`
compatible, whole-string match) that matches JSON texts. The guarantee is soundness: every text
the regex matches parses as JSON and validates against the schema. The regex is complete on
canonical texts (`canonical_json`) except where a documented narrowing applies; each narrowing
that a schema triggers is listed in `CompiledSchema.narrowed`. A constraint is never loosened
silently: what cannot be enforced exactly raises `SchemaError` naming the keyword and its JSON
pointer ("minimum at #/properties/age: ..."), or, with `lenient=True`, is listed in
`CompiledSchema.unenforced` (and the regex is then looser than the schema at that place).

Supported keywords
- type (a name or a list; "integer" is a subset of "number"); boolean schemas true / false;
  without type, every type, each constrained by its own keywords only (a format or pattern
  constrains strings, properties objects: {"format": "date"} also accepts 7 and null);
- enum, const: any JSON values, written canonically (compact, ensure_ascii=False); beside any
  other keywords (not, if, oneOf, allOf, $ref, ...), exactly the listed values that validate
  against the whole subschema are kept, checked by `jsonschema` (the root's dialect, format
  checker on, $ref resolved against the root; a format it cannot check here is an error). It is
  an optional dependency (extra `schema`): without it the values are checked through the other
  keywords' regexes, and keywords those cannot express are errors;
- object: properties (emitted in schema order; an optional property may be omitted), required
  (a required name missing from properties gets the additionalProperties schema),
  additionalProperties false / schema / true, or absent (then true, as JSON Schema says): extra
  keys come after the declared ones and never repeat a declared name. `extra_keys=False` (the
  strict mode of structured-output APIs, xgrammar's strict_mode) forbids them where
  additionalProperties is absent and a property is declared (a narrowing, recorded).
  patternProperties: a pattern whose schema accepts everything, beside extra keys that do too,
  changes nothing and is dropped; the others apply to the declared names they match; beside
  extra keys, each extra key has the schema of the one pattern it matches (keys of that pattern's
  subset regex that no other pattern's superset regex matches) or additionalProperties (keys no
  pattern's superset matches), by automaton products (keys that several patterns match are not
  generated: recorded); where no other extra key is valid (additionalProperties false), the
  patterns' keys alone, the same way (over the size limits: only the declared properties, a
  narrowing, recorded), and a single pattern with no declared properties is a map (its keys
  match the pattern); a single pattern every key matches (".*") applies to every key. minProperties 1, maxProperties
  0, and otherwise only where the generated objects always satisfy them (stack mode: exact on
  maps, below, and on declared members alone, at most MEMBER_BLOCK of them: an automaton per
  member and count written). propertyNames: a declared name it rejects is left out (required: unsatisfiable);
  extra and map keys are intersected with its strings' language by automaton product (exact;
  over the size limits, an error); false allows only {}. dependencies,
  dependentRequired, dependentSchemas (at most MAX_DEPENDENCIES): "without the key, or with it
  and what it needs", as exact alternatives;
- array: items (a schema, or a list in drafts 4-2019 with additionalItems), prefixItems with
  items (2020-12), minItems, maxItems; contains beside items and min/maxItems up to
  MAX_CONTAINS_BOUND (one alternative per position of the first item that satisfies it: exact),
  not with prefixItems or uniqueItems; minContains / maxContains (2019-09 on) beside items:
  `(N,)* K (,N)* (,K (,N)*){a-1,b-1}` with K the items that satisfy contains and N those that do
  not (exact; beside min/maxItems, uniqueItems or a tuple an error); uniqueItems where maxItems
  <= 1, and in stack mode over items that are only strings (below);
- string: minLength, maxLength (code points of the decoded string: an escape counts as one),
  pattern (ECMA-262 patterns in the subset below), format (constrain.formats: date, time,
  date-time, email, uuid, uri, uri-reference, iri, iri-reference, ipv4, ipv6, hostname, duration;
  regex as a recorded
  subset). Length bounds with a pattern or format: intersected exactly where the shape allows (one repeated part) or by automaton product
  (constrain.dfa_algebra) where that is small, else a recorded subset (search padding dropped,
  the length budget split over repeated parts of fixed width), else an error; pattern with
  format: their automaton product, else an error;
- integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft-4 booleans)
  as exact digit-range regexes (constrain.number_regex); multipleOf 1, and an integer k >= 2 whose
  residue automaton reads back as a regex of at most number_regex.MULTIPLE_REGEX_CHARS (2, 3, 4, 5, 6,
  7, 8, 10, 12, 15, 20, 25, 100, ...; 9, 11, 16 are refused unless both bounds leave at most numbers.LISTED_MULTIPLES
  multiples, then listed), intersected with the bounds, on a number too (its multiples are
  integers); a decimal p/10^q on an integer is the integer p/gcd(p, 10^q) (1.5: 3); under allOf two integer multipleOfs are their lcm; format int32 / int64 (the
  OpenAPI ranges, enforced: a narrowing, recorded); format double on a number is no constraint;
- number: the same bounds (any decimal values), exactly, in plain decimal notation (exponents
  are not generated for a bounded number, and next to an exclusive bound at most 15 significant
  digits, so the float comparison a validator makes agrees: narrowings, recorded); multipleOf 1,
  an integer as above, or a decimal p * 10^-q (0.01, 0.25, 1.5, 1e-8) with p <= 10,000, exactly on
  the number's decimal text as the specification divides (not Python jsonschema's float division,
  which rejects 0.07 as a multiple of 0.01; jsonschema-rs agrees), in plain decimal notation (a
  narrowing, recorded) and intersected with the bounds;
- boolean, null;
- anyOf; oneOf when no text generated for one branch validates another (types, enum/const
  values, also listed values the reference validator finds invalid on the other side, numeric
  ranges, array lengths, a required key the other branch never writes or with values it cannot
  take), since then oneOf == anyOf on what is generated; otherwise one JSON type at a time: a
  type two branches admit all of has no value matching exactly one (left out), branches
  disjoint within the type are alternatives, and else each branch without the others (`not`,
  below) where every branch has a positive negation beside the branch it is taken with, or
  for null, boolean, string and number values by automaton complement; counted first: past
  MAX_SUBSCHEMAS alternatives an error. Where that is refused or too large and the branches are objects that
  clash only through extra keys beside their declared properties (additionalProperties
  absent), those branches without such keys (a narrowing, recorded; the exact attempt then gets
  at most EXCLUSIVE_SUBSCHEMAS subschemas);
- not, exact in two ways (schema.algebra). Rewritten as positive keywords, a schema being the
  conjunction of its keywords (the anyOf of their negations): not {} (nothing), not {type}, not
  {required: [...]} (an object missing one of them), not {properties: {k: S}} (an object with
  k whose value is `not S`), not {additionalProperties: S} beside a schema whose objects hold
  finitely many names (additionalProperties false there: one of those past the declared ones,
  with a value `not S`), not min/maxItems and min/maxProperties (the other side of the bound),
  not {items: S} beside arrays whose items no value of S can be (at least one item), else an
  item that is `not S` (contains), not {contains: S} (every item `not S`), not (not
  S) = S, and anyOf/allOf of these (allOf of negations, anyOf of negations). Otherwise by automaton, type by
  type: a type the operand admits nothing of is kept as the rest of the schema says; one it
  admits all of is dropped; for null, boolean, string, integer and number, the rest's regex
  intersected with the canonical texts of the type (strings with json.dumps's escapes; numbers
  in plain decimal notation, non-integers with at most 15 significant digits: a narrowing,
  recorded) minus the operand's regex. The operand must compile flat (no calls) with no
  narrowing, since a narrowed operand would make its complement looser than the schema; that,
  a constrained object or array operand, and automata over the size limits (an operand's or
  product's DFA over dfa_algebra.MAX_PRODUCT_STATES is refused before it is minimised) are errors;
- if/then/else: (if and then) or (not if and else), each side compiled as above;
- allOf, merged into one schema, every keyword of both sides exactly or refused by name (type
  sets intersected, bounds tightened (draft-04's exclusive flags with them), required united,
  properties and patternProperties key by key: a key meets each side's declared schema, every
  matching pattern of each side, and a side's additionalProperties only where that side neither
  declares nor matches it (additionalProperties false beside the other side's patterns: that
  side's names as propertyNames); prefixItems/tuple items position by position, propertyNames
  and dependencies/dependentRequired/dependentSchemas per name, uniqueItems either, anyOf/oneOf
  distributed, two `not`s as not anyOf, a second if/then/else as its two alternatives; a keyword
  idle on its side (then without if, additionalItems without a tuple, minContains without
  contains) stays idle; different contains, pattern, multipleOf, format are refused; more than
  MAX_CONDITIONALS whose conditions, each beside the rest, are pairwise disjoint as one
  alternative per condition and one for none);
- $ref, resolved as the specification says (schema.resources): against the base URI of the node
  that holds it ($id; id in drafts 3-4), to an embedded resource, an anchor ($anchor,
  $dynamicAnchor; up to draft-07 a bare-fragment $id), a JSON pointer (percent-decoded as UTF-8
  before it is split, as RFC 6901 says), or another document: from the local registry `ref_dir`
  (--ref-dir: a folder whose files stand for any http(s) server's by path, and for their own $id)
  or the draft metaschemas of jsonschema-specifications; never downloaded, and without a
  registry a reference to another document is an error naming it. A document in another dialect
  is an error; from 2019-09 an $id with a fragment is an error. Recursion is unrolled to
  `max_ref_depth` levels of the same target (deeper branches are cut where the schema lets them
  be absent: an optional property, an anyOf branch, an empty array; recorded); in drafts 4-7 the
  siblings of $ref are ignored (its sibling $id too), as those drafts say; from 2019-09 on they
  apply (merged);
- $dynamicRef (2020-12) and $recursiveRef (2019-09) where the target does not depend on the
  dynamic scope: a static target without that dynamic anchor (a plain $ref), the root
  resource's dynamic anchor (the outermost in every scope), or the only resource that holds it
  (checked again once the compile has read every document); otherwise an error naming it;
- unevaluatedProperties / unevaluatedItems (schema.evaluated): the schema as cases (the anyOf
  branches that pass, the oneOf branch, if or not if, the dependentSchemas taken; allOf and $ref
  always), each with what it evaluates, then additionalProperties (items after prefixItems)
  beyond that: exact; past evaluated.MAX_CASES cases, beside contains or a scope-dependent
  $dynamicRef, an error;
- annotations and unknown keywords (title, description, default, examples, $schema, $id,
  $comment, deprecated, readOnly, x-..., ...) are ignored: they constrain nothing. A draft-03
  schema is read as draft-04, and draft-03's own keywords (divisibleBy, disallow, extends, a
  boolean required, schemas inside type, its time format) are errors;
- a listed number (enum, const) stands for each text of it the grammar holds: 2.0 and 2, 1e-07
  and 0.0000001 (common.number_spellings), so a `not`, `oneOf` or `if` over it takes all out;
- the dialect that $schema names decides which keywords constrain: one its draft does not define
  (a draft-04 schema's const, if/then/else, contains, propertyNames; a draft-07 schema's
  dependentRequired, prefixItems, ...; a 2019-09 or 2020-12 schema's dependencies) is ignored
  there, as that draft's validators ignore it, and listed (CompiledGrammar.ignored). Without
  $schema, every keyword above applies (dependencies and additionalItems included).
- a $schema that names a metaschema of the registry (ref_dir) whose $vocabulary leaves out the
  validation vocabulary: that vocabulary's keywords (type, enum, minimum, required, ...) are
  annotations in the document, ignored and listed likewise (resources.unused_validation);

Everything else that constrains instances (the `not`s above that cannot be exact, multipleOf other than
the forms above, uniqueItems (but the forms above), a scope-dependent $dynamicRef, formats not listed, ...) is an
error unless lenient. minimum > maximum is an error; a subschema nothing satisfies (false, an enum with no
value of the type, an empty merge, minLength > maxLength, minItems > maxItems, minProperties >
maxProperties) is left out exactly where the schema allows absence (an
optional property, an anyOf branch, an empty array) and is an error elsewhere.

Nesting: a schema document nests at most nesting.MAX_SCHEMA_DEPTH (1,000) arrays/objects, and
subschemas (a $ref chain included) are compiled at most that deep; a pattern's groups nest at
most nesting.MAX_REGEX_DEPTH (4,000). Deeper is a SchemaError naming the JSON pointer and the
limit. These limits, not Python's recursion limit, decide: the compiler makes room for them.

Pattern subset (ECMA-262 as JSON Schema says; the syntax checked by Python's `re`, which
jsonschema uses): the dialect of `constrain.regex` (literals, escapes, classes, groups, `|`,
quantifiers), `^` at the start and `$` at the end of a top-level alternative, the control escape
`\\cX` (X an ASCII letter: X mod 32), named groups
`(?<name>...)`, lookaheads `(?=...)` `(?!...)` outside groups (exact: the rest of the text
intersected with, or stripped of, the lookahead's language followed by anything, by automaton
product; a negative one's body taken as a superset of both dialects so the result stays a subset). The
class escapes mean ECMA-262's sets, as JSON Schema specifies: `\\d \\w` ASCII digits and word
characters, `\\s` WhiteSpace and LineTerminator (U+FEFF and the Zs spaces included, Python's
U+001C-U+001F and U+0085 not), `\\D \\W \\S` their complements (a non-ASCII digit matches \\D, as
jsonschema with Python's `re` would not say: its `\\d` is Unicode); `.` excludes all four ECMA line
terminators and `$` is the end of the string. Inside a negated operand (not, if) each is read as
a superset of ECMA-262's and Python's sets, so the complement is sound under either reading.
A format inside a negated operand is read as formats.SUPERSETS[name], a superset of both the
RFC's and jsonschema's checker's strings (date, time, date-time, email, uuid, ipv4, ipv6,
hostname, uri, iri, json-pointer): the complement is sound, and what it leaves out (strings that
are no such format but look like one) is a recorded narrowing; another format there is refused.

Whitespace: "compact" generates none (`{"a":1}`); "flexible" allows up to FLEXIBLE_WS_MAX
characters of JSON whitespace (space, tab, newline, carriage return) around every structural
token (`{ } [ ] : ,`).

Unconstrained values (a true schema, an array without items, an extra key's value under absent or true additionalProperties)
are generated up to `any_depth` levels of nested arrays/objects (JSON nesting is not regular; a
narrowing, recorded).

Stack mode (`compile_grammar`, run by constrain.stack): the same keywords, compiled into automata
that call each other, which lifts these narrowings and limits:
- $ref (whose siblings do not constrain, or in drafts 4-7) is a call of its target's automaton,
  compiled once: recursion is exact, with no depth cap (max_ref_depth does not apply);
- unconstrained values are one recursive automaton: any nesting (any_depth does not apply);
- a string's maxLength >= COUNT_MIN without pattern/format is counted by the frame; so are an
  array's items past its first where minItems or maxItems is >= COUNT_MIN and the item calls no
  automaton (arrays.repeated_items: maxItems 1000 of a 24-character id is one small counted DFA);
- length bounds with a pattern or format that the regex product cannot hold (over
  strings.INTERSECT_LENGTH_MAX characters) are exact too: an automaton of its own whose DFA is
  the pattern's times a character counter (dfa_algebra.length_bounded; CompiledGrammar.lengths),
  up to algebra.LENGTH_STATES states, where compile_schema records a subset or refuses; past
  that (an e-mail format under maxLength 1024), where no subset shape applies, the strings up to
  the most characters whose product fits, at least strings.CAPPED_LENGTH_MIN (a narrowing naming
  maxLength, its pointer and the cap), else an error;
- a string's regex over 60 characters (strings.STRING_OUTLINE_CHARS: the UTF-8 character class
  alone is more) is an automaton of its own, one per distinct text, not a copy per use;
- a subschema regex over OUTLINE_CHARS is an automaton of its own, and objects over
  MEMBER_BLOCK members are compiled a block at a time, so size grows with the schema, not with
  nesting times uses;
- format policy (`format=`, --format): "assert", the default and the generation default, enforces
  the formats above; a format the specification does not define is an annotation (listed in
  CompiledGrammar.unenforced_formats); other specification formats are errors. "annotate" (the
  specification's default reading, a leniency) enforces none and lists every one it left out.
- no object repeats a key (compared decoded: "a" and "\u0061" are one key), extra keys and
  unconstrained objects included: the matcher tracks the keys written (constrain.keys);
- minProperties / maxProperties beside extra keys (additionalProperties, a patternProperties
  map) are exact when every declared property is required: the extra members are a *map*
  automaton whose frame counts them (CompiledGrammar.maps). A patternProperties map whose keys
  can run out (a pattern with finitely many completions, such as "^[ab]$") is a map too, so
  a key with no unused completion is never begun; fewer keys than minProperties is unsatisfiable.
  With an optional declared property beside extra keys, they are refused as in the regex.
- uniqueItems over items that are only strings (compared decoded: "a" and "\u0061" are one),
  whose language has no partial item with finitely many completions (so the written items can
  never leave a begun item without an unused value): the array is an automaton of its own
  (CompiledGrammar.uniques) and the matcher tracks its items as it tracks keys; items from a
  finite list (enum, const, booleans, null) as one automaton per set of values written, up to
  arrays.MAX_UNIQUE_AUTOMATA (400: 9 values, or more under a small maxItems); other items
  (objects, numbers, longer lists, bounded strings) are refused.
The flat regex (compile_schema) cannot forbid repeats: there extra keys may repeat a key, and
uniqueItems is refused.
"""


# The package, one module per stage or type family: common (errors, results, regex text,
# keyword tables), refs ($ref and allOf merging, stack-mode calls), strings (patterns, lengths,
# formats), numbers, arrays, objects, combinators (anyOf/oneOf/not rewrites/if/enum), algebra
# (not by automaton complement, intersections), values (enum/const checked by jsonschema),
# canonical (the canonical text of an instance), compiler (dispatch and the entry points).
from inferlab.constrain.schema.common import (COUNT_MIN, FLEXIBLE_WS_MAX, MAX_DEPENDENCIES, MAX_REGEX_CHARS,
                                              MAX_SUBSCHEMAS, MEMBER_BLOCK, OUTLINE_CHARS, CompiledSchema,
                                              SchemaError, SchemaTooLarge, dumps)
from inferlab.constrain.schema.compiler import (CompiledGrammar, canonical_json, check_nesting, compile_grammar,
                                                compile_schema)

__all__ = ["COUNT_MIN", "FLEXIBLE_WS_MAX", "MAX_DEPENDENCIES", "MAX_REGEX_CHARS", "MAX_SUBSCHEMAS", "MEMBER_BLOCK",
           "OUTLINE_CHARS", "CompiledGrammar", "CompiledSchema", "SchemaError", "SchemaTooLarge", "canonical_json",
           "check_nesting",
           "compile_grammar", "compile_schema", "dumps"]
