"""enum/const beside other keywords: the listed values kept by a real JSON Schema validator.

A finite list of values needs no automaton: each value either validates against the whole
subschema (every sibling keyword, `not`, `if`, `oneOf`, ... and $ref resolved against the root)
or not. The check is `jsonschema` (the reference validator, with its format checker on) when it
is importable; it stays an optional dependency (the `schema` extra) because it pulls in a
compiled package (rpds-py), and the core only needs it for this one question. Without it, the
compiler falls back to its own regexes and refuses what they cannot express, naming the keyword.
"""

from __future__ import annotations

from functools import cached_property, lru_cache

from inferlab.constrain import formats
from inferlab.nesting import recursion_cap

VALIDATOR_FRAMES = 1_000  # Python frames one check may use (Python's own default limit's worth)


@lru_cache(maxsize=1)
def _jsonschema():
    try:
        import jsonschema.validators
    except ImportError:
        return None
    return jsonschema


# Keywords a node the compiler builds may carry that an older dialect lacks: in a node of the
# document they stay ignored (its dialect), in a built one they constrain.
_BUILT_KEYWORDS = frozenset({"const", "contains", "propertyNames", "if", "dependentRequired", "dependentSchemas"})


def _built_only(check, document: frozenset):
    """A jsonschema keyword function that ignores the keyword in the document's own nodes."""
    def keyword(validator, value, instance, schema):
        if id(schema) not in document:
            yield from check(validator, value, instance, schema)
    return keyword


def reached(node, resolve):
    """Each dict of the subschema `node` and of what its $refs reach (`resolve(holder)` -> the
    subschema the $ref of the dict `holder` references), once, walked without recursion."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if isinstance(n, list):
            todo.extend(n)
            continue
        if not isinstance(n, dict) or id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        if "$ref" in n:
            todo.append(resolve(n))
        todo.extend(v for k, v in n.items() if isinstance(v, dict) or k not in ("enum", "const", "default", "examples"))


class ValueChecker:
    """Validates instances against subschemas of one root (the dialect of its $schema); jsonschema
    is imported on first use, so a schema without enum siblings never loads it."""

    def __init__(self, root, not_in_dialect=frozenset(), document=frozenset(), *, assert_formats: bool = True):
        self.root = root
        self.assert_formats = assert_formats  # the format policy: "annotate" checks none
        self.not_in_dialect = not_in_dialect  # keywords the root's dialect lacks
        self.document = document              # ids of the root's own dicts (document_dicts)

    @cached_property
    def available(self) -> bool:
        return _jsonschema() is not None and isinstance(self.root, (dict, bool))

    @cached_property
    def root_validator(self):
        js = _jsonschema()
        cls = js.validators.validator_for(self.root, default=js.Draft202012Validator)
        own = {k: _built_only(js.Draft202012Validator.VALIDATORS[k], self.document)
               for k in self.not_in_dialect & _BUILT_KEYWORDS}
        if own:  # a node the compiler built (a negation's contains) is checked in its own terms
            cls = js.validators.extend(cls, own)
        return cls(self.root, format_checker=cls.FORMAT_CHECKER if self.assert_formats else None)

    @cached_property
    def checkable_formats(self) -> frozenset:
        checker = self.root_validator.format_checker
        return frozenset(formats.SPEC_FORMATS if checker is None else checker.checkers)

    def unchecked_format(self, node, resolve) -> str | None:
        """A specification format used in `node` (or what it references) that this install of
        jsonschema cannot check (its optional checker package is missing): it would pass
        silently, so the caller refuses instead. `resolve(holder)` -> the subschema the $ref of
        the dict `holder` references."""
        for n in reached(node, resolve):
            name = n.get("format")
            if isinstance(name, str) and name in formats.SPEC_FORMATS and name not in self.checkable_formats:
                return name
        return None

    def kept(self, node, values: list) -> list:
        """The values that validate against `node` (a subschema of the root). Raises
        ValueError where the validator itself fails (a reference it cannot resolve, ...)."""
        v = self.root_validator.evolve(schema=node)
        try:
            with recursion_cap(VALIDATOR_FRAMES):  # a $ref cycle: RecursionError, caught below
                return [x for x in values if v.is_valid(x)]
        except Exception as exc:  # the validator's own errors (referencing, bad keyword values, recursion)
            raise ValueError(f"jsonschema cannot check it ({type(exc).__name__})") from None
        except BaseException as exc:  # rpds-py's panic around a RecursionError is a BaseException
            if type(exc).__name__ != "PanicException":
                raise  # (an interrupt, a time bound)
            raise ValueError("jsonschema cannot check it (PanicException)") from None

