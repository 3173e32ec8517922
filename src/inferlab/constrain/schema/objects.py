"""Objects: properties, required, additionalProperties, patternProperties, dependencies."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from itertools import combinations

from inferlab.constrain import regex as rx
from inferlab.constrain.dfa import compile_regex
from inferlab.constrain.keys import completions

from inferlab.constrain.schema.common import (MAX_DEPENDENCIES, MEMBER_BLOCK, _CHAR, _DEPENDENCY_KEYWORDS,
                                              _NOTHING, SchemaError, _Unsat, _child, _constraining, _group, _lit, dumps)
from inferlab.constrain.schema.algebra import _combined
from inferlab.constrain.schema.strings import _emit_json, _json_char_ranges, _pattern_ast, _universal_pattern
from inferlab.errors import InferlabError
from inferlab.constrain.caches import CACHES


# patternProperties with at most this many patterns: the keys of each set of them get a language
# of their own (2^n - n - 1 automaton products); past it such keys are not generated (recorded)
OVERLAP_PATTERNS = 4


class ObjectsMixin:
    """Objects: properties, required, additionalProperties, patternProperties, dependencies (mixed into _Compiler)."""

    def dependencies_as_any_of(self, node, ptr) -> dict:
        """dependencies / dependentRequired / dependentSchemas {name: X}: an object without `name`,
        or one with `name` that also meets X (a list of required names, or a schema). Exact."""
        deps = []  # (name, dependency): one name may be in two keywords, each a constraint of its own
        for key in _DEPENDENCY_KEYWORDS:
            value = node.get(key, {})
            if not isinstance(value, dict):
                raise self.error(key, _child(ptr, key), "must be an object")
            deps += value.items()
        if len(deps) > MAX_DEPENDENCIES:
            self.refuse(_DEPENDENCY_KEYWORDS[0] if "dependencies" in node else "dependentRequired", ptr,
                        f"{len(deps)} dependencies (more than {MAX_DEPENDENCIES}) would give 2^{len(deps)} alternatives")
            return {k: v for k, v in node.items() if k not in _DEPENDENCY_KEYWORDS}
        branches = []
        for name, dep in deps:
            if isinstance(dep, list):
                present = {"required": [name, *dep]}
            else:
                present = {"allOf": [{"required": [name]}, dep]}
            branches.append({"anyOf": [{"properties": {name: False}}, present]})
        rest = {k: v for k, v in node.items() if k not in _DEPENDENCY_KEYWORDS}
        return {"allOf": [rest, *branches]}

    def compile_object(self, node, ptr, stack) -> str:
        props = node.get("properties", {})
        if not isinstance(props, dict):
            raise self.error("properties", _child(ptr, "properties"), "must be an object")
        required = list(dict.fromkeys(node.get("required", [])))
        extra = node.get("additionalProperties")
        extra_ptr = _child(ptr, "additionalProperties")
        pattern_props = node.get("patternProperties") or {}
        names_rx = self.property_names(node, ptr, stack)
        if names_rx == _NOTHING:  # no key is a valid name: only {}
            node = {**node, "maxProperties": 0}
        if node.get("maxProperties") == 0:
            props, extra, pattern_props = {}, False, {}  # only {} (an error below if a key is required)
        if extra is None and (self.extra_keys or not (props or pattern_props)):
            extra = True  # with no properties declared, forbidding extra keys would leave only {}
        if pattern_props and _accepts_all(extra):
            # a pattern whose schema accepts everything changes nothing beside extra keys that do too
            self.check_patterns(pattern_props, ptr)  # a bad regex is an error all the same
            pattern_props = {pat: sub for pat, sub in pattern_props.items() if not _accepts_all(sub)}
        gen_extra = extra is not None and extra is not False
        schemas = dict(props)
        patterns = self.check_patterns(pattern_props, ptr) if pattern_props else []
        for name in required:
            if name not in schemas:
                if extra is False and not any(p.search(name) for p in patterns):
                    raise _Unsat(f"required at #{ptr}: {name!r} is required but additionalProperties is false")
                # (a name some pattern matches gets that pattern's schema below, whatever extra is)
                matched = any(p.search(name) for p in patterns)  # additionalProperties does not apply
                schemas[name] = True if extra is None or extra is False or matched else extra
        if len(pattern_props) == 1 and _universal_pattern(next(iter(pattern_props))):
            # a pattern every key matches (".*"): it applies to every key, additionalProperties to none
            (pat, sub), = pattern_props.items()
            schemas = {name: sub if v is True else {"allOf": [v, sub]} for name, v in schemas.items()}
            extra, extra_ptr, pattern_props = sub, _child(ptr, "patternProperties", pat), {}
            gen_extra = sub is not False
        map_kv = None  # (key regex, value regex) of a patternProperties map
        if pattern_props and not schemas and not gen_extra and len(pattern_props) == 1:
            # a map: every key matches the one pattern and has its schema (in stack mode no key
            # repeats; in a flat regex keys may repeat, and the value json.loads keeps is valid)
            (pat, sub), = pattern_props.items()
            pat_ptr = _child(ptr, "patternProperties", pat)
            key_ast = self.pattern_ast(pat, pat_ptr)
            if key_ast is not None:
                try:
                    map_kv = (f'"{_emit_json(key_ast)}"', self.compile(sub, pat_ptr, stack))
                except _Unsat as exc:
                    self.note_cut(exc)
                if extra is None:
                    self.narrow(f"additionalProperties absent at #{ptr}: only keys matching the pattern are generated")
                extra, pattern_props = False, {}
        if pattern_props:
            for pat, compiled in zip(pattern_props, self.check_patterns(pattern_props, ptr)):
                sub = pattern_props[pat]
                for name in schemas:
                    if compiled.search(name):
                        schemas[name] = sub if schemas[name] is True else {"allOf": [schemas[name], sub]}
        if names_rx is not None:  # declared names propertyNames rejects: absent (unsatisfiable if required)
            for name in [n for n in schemas if not re.fullmatch(names_rx, dumps(n))]:
                if name in required:
                    raise _Unsat(f"propertyNames at #{ptr}: the required name {name!r} is not a valid name")
                del schemas[name]
            if map_kv is not None:
                try:
                    map_kv = (self.names_within(map_kv[0], names_rx, ptr), map_kv[1])
                except _Unsat:  # no key of the pattern is a valid name
                    map_kv = None
        members = []  # (regex or None when the key must be absent, required)
        for name, sub in schemas.items():
            sub_ptr = _child(ptr, "properties", name) if name in props else extra_ptr
            key_rx = _lit(dumps(name)) + self.tok(":")
            try:
                value = self.compile(sub, sub_ptr, stack)
                if self.calls_on() and len(schemas) > MEMBER_BLOCK and len(value) > 16:
                    value = self.outline(value, force=True)  # shared by the members (blocked_object_body)
                members.append((key_rx + value, name in required))
            except _Unsat as exc:
                if name in required:
                    raise
                self.note_cut(exc)
        extra_members = []
        if gen_extra:
            extra_members = self.extra_members(schemas, pattern_props, (extra, extra_ptr), names_rx, ptr, stack)
        elif any(sub is not False for sub in pattern_props.values()):
            extra_members = self.pattern_members(schemas, pattern_props, names_rx, ptr, stack)
        if extra is None and map_kv is None:
            self.narrow(f"additionalProperties absent at #{ptr}: extra keys are not generated")
        extra_kv = map_kv if not extra_members else extra_members[0] if len(extra_members) == 1 else None
        if extra_kv is not None and self.calls_on() and all(req for _, req in members) and (
                "maxProperties" in node or node.get("minProperties", 0) > len(members)
                or (map_kv is not None and _keys_can_run_out(map_kv[0]))):
            return f"{self.tok('{')}{self.map_body(node, ptr, members, extra_kv)}{self.tok('}')}"
        extra_rx = None if extra_kv is None else extra_kv[0] + self.tok(":") + extra_kv[1]
        if len(extra_members) > 1:
            extra_rx = _group([key + self.tok(":") + value for key, value in extra_members])
        if extra_rx is None and self.counts_members(node, members):
            return f"{self.tok('{')}{self.counted_members(members, node.get('minProperties', 0), node.get('maxProperties'), ptr)}{self.tok('}')}"
        nonempty = self.check_property_counts(node, ptr, len(members), sum(r for _, r in members), extra_rx is not None)
        if self.calls_on() and (len(members) > MEMBER_BLOCK or (members and extra_rx is not None)):
            body = self.called_object_body(members, extra_rx, nonempty=nonempty)
        else:
            body = self.object_body(members, extra_rx, nonempty=nonempty)
        if body is None:
            raise _Unsat(f"minProperties at #{ptr}: no property can be written")
        return f"{self.tok('{')}{body}{self.tok('}')}"

    def extra_members(self, schemas, pattern_props, extra, names_rx, ptr, stack) -> list[tuple[str, str]]:
        """The members after the declared ones: [(key regex, value regex)], a key language per
        pattern (pattern_key_regions) and one for the keys no pattern matches, which get
        extra = (additionalProperties, its pointer), or none when that is None. A key never
        repeats a declared name."""
        regions = self.pattern_key_regions(pattern_props, ptr) if pattern_props else [(None, None)]
        out = []
        for region, pats in regions:  # (key language beside the patterns, the patterns it matches)
            sub, sub_ptr = extra if pats is None else (_all_of([pattern_props[p] for p in pats]),
                                                       _child(ptr, "patternProperties", pats[0]))
            if sub is None:
                continue
            try:
                value = self.any_value(sub_ptr) if sub is True else self.compile(sub, sub_ptr, stack)
                key_rx = _key_not_in(tuple(schemas))
                if region is not None:
                    key_rx = self.names_within(key_rx, region, ptr, "patternProperties")
                if names_rx is not None:
                    key_rx = self.names_within(key_rx, names_rx, ptr)
                out.append((key_rx, value))
            except _Unsat as exc:  # no value (or key) fits: no such extra key can be written
                self.note_cut(exc)
        return out

    def pattern_members(self, schemas, pattern_props, names_rx, ptr, stack) -> list[tuple[str, str]]:
        """Beside declared properties, with no other extra key (additionalProperties false, or
        absent with extra_keys off): the keys that match a pattern, as extra_members. Where
        their key languages are over the size limits, only the declared properties are
        generated (a narrowing, recorded), as a refusal would lose the whole schema."""
        saved, lenient = self.checkpoint(), self.lenient
        self.lenient = False  # (lenient would loosen a key language that is over the limits)
        try:
            out = self.extra_members(schemas, pattern_props, (None, None), names_rx, ptr, stack)
        except SchemaError as exc:
            self.rollback(saved)
            self.narrow(f"patternProperties at #{ptr}: only the declared properties are generated; other keys "
                        f"that match its {len(pattern_props)} patterns are not ({exc})")
            return []
        finally:
            self.lenient = lenient
        return out

    def check_patterns(self, pattern_props: dict, ptr: str) -> list:
        """The patterns compiled by Python's re (what jsonschema searches with); a bad one is an error."""
        out = []
        for pat in pattern_props:
            try:
                out.append(re.compile(pat))
            except re.error as exc:
                raise self.error("patternProperties", _child(ptr, "patternProperties", pat), f"bad regex ({exc})") from None
        return out

    def property_names(self, node, ptr, stack) -> str | None:
        """propertyNames: the regex of the valid names (quoted JSON strings, compiled inline; a
        narrowed regex only writes fewer keys), _NOTHING when no string is one, None when it
        constrains nothing."""
        names = node.get("propertyNames", True)
        if names is True or names == {}:
            return None
        names_ptr = _child(ptr, "propertyNames")
        self.inline += 1
        try:
            return self.compile(self.merge(names, {"type": "string"}, names_ptr, stack), names_ptr, stack)
        except _Unsat:
            return _NOTHING
        finally:
            self.inline -= 1

    def names_within(self, key_rx: str, names_rx: str, ptr: str, keyword: str = "propertyNames") -> str:
        """The keys of key_rx within names_rx (automaton product: exact), or a refusal."""
        out = self.intersection([key_rx, names_rx], ptr)  # _Unsat when none is left
        if out is None:
            self.refuse(keyword, _child(ptr, keyword), f"the key language and {keyword} together are over the "
                        "automaton size limits")
            return key_rx
        return out

    def pattern_key_regions(self, pattern_props: dict, ptr: str) -> list[tuple[str | None, tuple | None]]:
        """Extra keys beside patternProperties: [(key regex, patterns)], a key language per set of
        patterns (the keys each of them matches and no other pattern can: they meet every one's
        schema), and (regex, None) for the keys no pattern can match (those take
        additionalProperties). A pattern's own keys come from its subset regex, the others are
        removed as supersets (constrain.schema.strings), so no key is given a schema it does not
        have. Sets of several patterns are built up to OVERLAP_PATTERNS patterns (2^n languages);
        past that, or past the automaton limits, keys that several patterns match are not
        generated (recorded)."""
        canonical = f'"{_json_char_ranges(rx.negate(()))}*"'  # every key, canonically written
        subs, sups = {}, {}
        for pat in pattern_props:
            pat_ptr = _child(ptr, "patternProperties", pat)
            ast = self.pattern_ast(pat, pat_ptr)
            try:
                sups[pat] = f'"{_emit_json(_pattern_ast(pat, True))}"'
            except InferlabError as exc:
                self.refuse("patternProperties", pat_ptr, f"{exc} (the keys it cannot match are not known)")
                continue
            if ast is not None and pattern_props[pat] is not False:
                subs[pat] = f'"{_emit_json(ast)}"'
        # (regexes, ops, patterns): the keys no pattern can match, then each pattern's own keys
        regions = [((canonical, *sups.values()), ("minus",) * len(sups), None)]
        for pat, sub in subs.items():
            others = [sups[q] for q in sups if q != pat]
            regions.append(((canonical, sub, *others), ("and",) + ("minus",) * len(others), (pat,)))
        out = []
        for regexes, ops, pats in regions:
            try:
                region = _combined(regexes, ops)
            except InferlabError as exc:
                self.refuse("patternProperties", _child(ptr, "patternProperties"), f"{exc} (keys beside the patterns)")
                continue
            if region is not None:
                out.append((region, pats))
        if len(pattern_props) > 1 and not self.overlap_regions(subs, sups, canonical, out):
            self.narrow(f"patternProperties at #{ptr}: extra keys that several patterns match are not generated")
        return out

    def overlap_regions(self, subs: dict, sups: dict, canonical: str, out: list) -> bool:
        """Appends to `out` the key language of each set of two or more patterns (the keys all of
        them match, as subsets, and no other can, as supersets); False where that is not done
        (more than OVERLAP_PATTERNS patterns, or a product over the automaton limits)."""
        if len(sups) > OVERLAP_PATTERNS:
            return False
        found = []
        for n in range(2, len(subs) + 1):
            for pats in combinations(subs, n):
                others = [sups[q] for q in sups if q not in pats]
                try:
                    region = _combined((canonical, *(subs[p] for p in pats), *others),
                                       ("and",) * n + ("minus",) * len(others))
                except InferlabError:
                    return False
                if region is not None:
                    found.append((region, pats))
        out += found
        return True

    def map_body(self, node, ptr, members, extra_kv) -> str:
        """Stack mode: the required members, then the extra members as a map automaton (see
        CompiledGrammar.maps): its frame counts the members, so min/maxProperties are exact; the
        key context (constrain.keys) keeps its keys from repeating. Exact."""
        lo, hi = node.get("minProperties", 0), node.get("maxProperties")
        n = len(members)
        if hi is not None and hi < n:
            raise _Unsat(f"maxProperties at #{_child(ptr, 'maxProperties')}: maxProperties {hi} < {n} required: "
                         "no object is valid")
        if hi is not None and lo > hi:
            raise _Unsat(f"minProperties at #{_child(ptr, 'minProperties')}: minProperties {lo} > maxProperties {hi}: "
                         "no object is valid")
        key_rx, value_rx = extra_kv
        lo, hi = max(0, lo - n), None if hi is None else hi - n
        available = _key_count(key_rx)
        if available < lo:
            raise _Unsat(f"minProperties at #{ptr}: {lo} more keys needed, the key pattern allows {available}")
        first = -1 if n else self.new_automaton()
        nxt = self.new_automaton()
        self.automata[nxt] = self.tok(",") + key_rx
        if first >= 0:
            self.automata[first] = key_rx
        m = self.new_automaton()
        key_call = f"(?&{nxt})" if first < 0 else f"(?:(?&{first})|(?&{nxt}))"
        self.automata[m] = key_call + self.tok(":") + value_rx
        self.maps[m] = (lo, hi, first, nxt)
        written = self.object_body(members, None) or ""
        return f"{written}(?&{m})"

    def counts_members(self, node, members) -> bool:
        """Stack mode, declared members only: are min/maxProperties beyond what the required
        members decide, within what counted_members builds?"""
        lo, hi = node.get("minProperties"), node.get("maxProperties")
        n_req = sum(req for _, req in members)
        if not (self.calls_on() and members and len(members) <= MEMBER_BLOCK):
            return False
        if any(x is not None and (isinstance(x, bool) or not isinstance(x, int)) for x in (lo, hi)):
            return False
        if hi is not None and (hi < n_req or (lo or 0) > hi):
            return False  # an error, from check_property_counts
        return (lo is not None and lo > max(n_req, 1)) or (hi is not None and hi < len(members))

    def counted_members(self, members, lo: int, hi: int | None, ptr: str) -> str:
        """Stack mode: declared members in schema order with at least lo and at most hi written,
        exact: after member j with c written, the rest is automaton (j, c) (c counted up to hi,
        or to lo when unbounded above), so the regex grows as members times counts."""
        comma, cap, memo = self.tok(","), (lo if hi is None else hi), {}

        def rest(j: int, c: int) -> str | None:  # members j.. once c were written; None: impossible
            if len(members) - j < lo - c:
                return None
            if j == len(members):
                return ""
            if (j, c) not in memo:
                rx_j, req = members[j]
                alts = []
                if hi is None or c < hi:
                    after = rest(j + 1, min(c + 1, cap))
                    if after is not None:
                        alts.append(f"{comma if c else ''}{rx_j}{after}")
                if not req:
                    after = rest(j + 1, c)
                    if after is not None:
                        alts.append(after)
                memo[(j, c)] = None if not alts else self.outline(_group(alts) if len(alts) > 1 else alts[0], force=True)
            return memo[(j, c)]

        body = rest(0, 0)
        if body is None:
            raise _Unsat(f"minProperties at #{ptr}: at most {len(members)} properties can be written")
        return body

    def check_property_counts(self, node, ptr, n_members: int, n_required: int, open_: bool) -> bool:
        """min/maxProperties where they are exact; True when at least one member must be written."""
        lo, hi = node.get("minProperties"), node.get("maxProperties")
        nonempty = lo == 1 and n_required == 0
        if lo is not None and lo > n_required and not nonempty:
            self.refuse("minProperties", _child(ptr, "minProperties"),
                        f"minProperties {lo} > the {n_required} required properties")
        if hi is not None and (open_ or hi < n_members):
            if hi < n_required:
                raise _Unsat(f"maxProperties at #{_child(ptr, 'maxProperties')}: maxProperties {hi} < {n_required} "
                             "required: no object is valid")
            self.refuse("maxProperties", _child(ptr, "maxProperties"),
                        "extra keys are counted only in stack mode, with every declared property required" if open_ else
                        f"maxProperties {hi} < the {n_members} possible properties")
        return nonempty

    def called_object_body(self, members, extra_rx, *, nonempty: bool) -> str:
        """Stack mode: the extra members as automata of their own (called after the declared
        ones), so the DFA of the declared members is not multiplied by the extra-key pattern;
        over MEMBER_BLOCK members, the declared ones a block at a time too. Exact."""
        if extra_rx is None:
            after_tail, first_tail = "", (_NOTHING if nonempty else "")
        else:  # one automaton per extra member, so its key's DFA is built once
            member = self.outline(extra_rx, force=True)
            after_tail = self.outline(f"(?:{self.tok(',')}{member})*", force=True)
            first_tail = self.outline(f"{member}{after_tail}" if nonempty else f"(?:{member}{after_tail})?", force=True)
        if len(members) > MEMBER_BLOCK:
            return self.blocked_object_body(members, after_tail, first_tail)
        written = self.object_body(members, None, nonempty=True)
        if any(req for _, req in members):
            return f"{written}{after_tail}"
        return f"(?:{written}{after_tail}|{first_tail})"

    def blocked_object_body(self, members, after_tail: str, first_tail: str) -> str:
        """Stack mode, many members: the body as two automata per block of MEMBER_BLOCK members,
        so the regex nests at most a block deep and the automata stay small (exact).

        after[b]: the rest of the body from block b when a member was already written (each
        member with its leading comma), then a call of after[b+1]; first[b]: the same when
        nothing was written yet: the block's members with at least one written (object_body),
        then after[b+1]; or, when the block may be skipped, first[b+1]. Past the last block:
        after_tail and first_tail (the extra members, or the end)."""
        comma = self.tok(",")
        after_next, first_next = after_tail, first_tail
        for start in range((len(members) - 1) // MEMBER_BLOCK * MEMBER_BLOCK, -1, -MEMBER_BLOCK):
            block = members[start:start + MEMBER_BLOCK]
            after = "".join(f"{comma}{rx_j}" if req else f"(?:{comma}{rx_j})?" for rx_j, req in block)
            written = self.object_body(block, None, nonempty=True)
            skip = "" if any(req for _, req in block) else f"|{first_next}"
            body = f"{written}{after_next}{skip}"
            first_next = self.outline(body, force=True) if start else f"(?:{body})"
            after_next = self.outline(after + after_next, force=True)
        return first_next

    def object_body(self, members, extra_rx, *, nonempty: bool = False) -> str | None:
        """Members in schema order, each required or optional, then extra members; a comma only
        between two written members.

        Built left to right so each member appears at most twice: written[j] matches members
        0..j when at least one of them was written (then member j needs a leading comma).
        """
        comma = self.tok(",")
        written = None
        seen_required = False
        for rx_j, req in members:
            if written is None:
                written = rx_j
            elif req:
                written = f"{written}{comma}{rx_j}" if seen_required else f"(?:{written}{comma}{rx_j}|{rx_j})"
            else:
                written = f"{written}(?:{comma}{rx_j})?" if seen_required else f"(?:{written}(?:{comma}{rx_j})?|{rx_j})"
            seen_required = seen_required or req
        if extra_rx is not None:
            extras = f"(?:{comma}{extra_rx})*"
            if written is None:
                written = extra_rx + extras
            elif seen_required:
                written = written + extras
            else:
                written = f"(?:{written}{extras}|{extra_rx}{extras})"
        if written is None:
            return None if nonempty else ""
        return written if seen_required or nonempty else f"(?:{written})?"


def _all_of(schemas: list):
    """The schema of the values all of `schemas` accept (one of them alone where there is one)."""
    return schemas[0] if len(schemas) == 1 else {"allOf": schemas}


def _accepts_all(schema) -> bool:
    """A schema every value satisfies: true, or an object of annotations only ({})."""
    return schema is True or (isinstance(schema, dict) and not _constraining(schema))


@lru_cache(maxsize=1024)
def _key_not_in(names: tuple[str, ...]) -> str:
    """A JSON object key (canonical text) whose decoded value is none of `names`.

    Over the trie of the names, with p a path from its root, such a key is: p, then a character
    no name holds, then anything; p, then a character some name holds but none continues p with,
    then anything; or p alone where it is not a name. Characters no name holds (most of Unicode,
    and the escapes) are then written once rather than at every trie node.
    """
    if not names:
        return f'"{_CHAR}*"'
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True
    used = {ord(ch) for name in names for ch in name}

    def char(ch: str) -> str:
        return _json_char_ranges(((ord(ch), ord(ch)),))

    def path(node) -> str:  # any p
        alts = [char(ch) + path(node[ch]) for ch in node if ch is not None]
        return f"(?:{'|'.join(alts)})?" if alts else ""

    others: dict[frozenset, str | None] = {}  # a node's next characters -> the names' other characters

    def other(nexts: frozenset) -> str | None:
        # (kept per set of next characters: a name's inner nodes mostly have one, shared by many)
        if nexts not in others:
            rest = used - {ord(ch) for ch in nexts}
            others[nexts] = _json_char_ranges(_ranges(rest)) if rest else None
        return others[nexts]

    def leave(node) -> str | None:  # p, then a character of the names that no name continues p with
        first = other(frozenset(ch for ch in node if ch is not None))
        alts = [first] if first is not None else []
        alts += [char(ch) + rest for ch in node if ch is not None and (rest := leave(node[ch])) is not None]
        return _group(alts) if alts else None

    def stop(node) -> str | None:  # p that is not a name; None when there is none
        alts = [char(ch) + rest for ch in node if ch is not None and (rest := stop(node[ch])) is not None]
        if None in node:
            return _group(alts) if alts else None
        return f"(?:{'|'.join(alts)})?" if alts else ""

    # non-canonical escapes (e.g. \u0061 for "a") could spell a declared name, so keys are canonical
    anything = f"{_json_char_ranges(rx.negate(()))}*"
    unused = rx.negate(_ranges(used))
    keys = [path(trie) + _json_char_ranges(unused) + anything] if unused else []
    keys += [part + anything for part in [leave(trie)] if part is not None]
    keys += [part for part in [stop(trie)] if part is not None]
    return f'"{_group(keys)}"'


def _ranges(code_points: set[int]) -> tuple[tuple[int, int], ...]:
    """Sorted code points as (lo, hi) runs."""
    out: list[list[int]] = []
    for c in sorted(code_points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return tuple((lo, hi) for lo, hi in out)


@lru_cache(maxsize=256)
def _key_completions(key_rx: str) -> tuple:
    dfa = compile_regex(key_rx)
    return dfa, completions(dfa)


def _key_count(key_rx: str) -> float:
    """How many keys the key regex (a quoted JSON string, canonical) allows; math.inf if unbounded."""
    dfa, counts = _key_completions(key_rx)
    return counts[dfa.start]


def _keys_can_run_out(key_rx: str) -> bool:
    """Has some partial key finitely many completions (then a map may run out of unused keys)?"""
    dfa, counts = _key_completions(key_rx)
    return any(counts[s] != math.inf for s in range(dfa.n_states) if not dfa.accepting[s])


# kept across compiles: the one owner names, sizes and clears them (caches.CACHES)
CACHES.register_lru(_key_not_in, "compile")
CACHES.register_lru(_key_completions, "compile")
