"""Where a $ref points: base URIs ($id), anchors, embedded resources and other documents.

A schema document is indexed once: every subschema with an `$id` (`id` in drafts 3-4) starts a
resource whose URI is that id resolved against the base in effect around it; `$anchor` (and
`$dynamicAnchor`, as a plain anchor) in 2019-09/2020-12, and a bare-fragment `$id` ("#foo") up to
draft-07, name anchors in their resource. Up to draft-07 the siblings of `$ref` are ignored,
an `$id` among them too (its validators do so). A reference is resolved against the base of the
node holding it (RFC 3986), then looked up: a resource of this document, else another document
from the registry (`ref_dir`, schema.compile_grammar's), else the draft metaschemas of the
installed jsonschema-specifications package; nothing is ever downloaded. Its fragment is empty
(the resource), a JSON pointer inside the resource (percent-decoded, RFC 6901) or an anchor.

Pointers: a node of the root document is named by its JSON pointer, as everywhere in the
compiler ("/$defs/a"); a node of another document by that document's URI in brackets, then its
pointer ("[http://localhost:1234/integer.json]/type").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

from inferlab.constrain.schema.common import SchemaError, _child, dialect_of
from inferlab.nesting import pointer_token

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")  # RFC 6901: no leading zeros
_DATA_KEYWORDS = ("enum", "const", "default", "examples")  # values that are data, not schemas
# where subschemas are: an $id or anchor elsewhere (in an unknown keyword, in data) names nothing,
# as the specification and jsonschema's referencing say
_SUBSCHEMA = frozenset({"not", "if", "then", "else", "contains", "propertyNames", "additionalProperties",
                        "additionalItems", "unevaluatedProperties", "unevaluatedItems", "items", "contentSchema"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                             "dependencies"})
_OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


def _pointer(target: str) -> str:
    """A decoded pointer as the compiler's own pointers spell it (each token escaped, no
    percent-escapes: _child's form), so a target reached by two spellings is one target."""
    return "".join("/" + pointer_token(raw.replace("~1", "/").replace("~0", "~")) for raw in target.split("/")[1:])


def join(base: str, ref: str) -> str:
    """RFC 3986 resolution of `ref` against `base` (a fragment alone keeps any base, a URN's too)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


class Resources:
    """The resources and anchors of one root document and of the documents it references."""

    def __init__(self, root, dialect: str | None, ref_dir=None):
        self.root = root
        self.dialect = dialect
        self.old = dialect in _OLD_DRAFTS
        self.id_key = "id" if dialect in ("draft-03", "draft-04") else "$id"
        self.ref_dir = None if ref_dir is None else Path(ref_dir)
        self.resources: dict[str, tuple] = {}   # resource URI -> (node, pointer of the node)
        self.anchors: dict[tuple[str, str], tuple] = {}  # (resource URI, name) -> (node, pointer)
        self.bases: dict[int, str] = {}  # id(node) -> its base URI, where it is not its document's
        self.documents: dict[int, str] = {}  # id(node) -> the URI of the other document it lies in
        self.foreign: list = []  # the other documents' roots (their dicts are read in the root's dialect)
        self.root_base = root.get(self.id_key) if isinstance(root, dict) and isinstance(root.get(self.id_key), str) else ""
        self.root_base = urldefrag(self.root_base)[0]
        self.dynamic: set[tuple[str, str]] = set()  # (resource URI, name) of each $dynamicAnchor
        self.recursive: set[str] = set()  # resource URIs whose root has $recursiveAnchor: true (2019-09)
        self.dynamic_choices: list[tuple] = []  # (name or None, holders seen, pointer): checked at the end
        self.prefixes: dict[int, str] = {}  # id(a document's root) -> the pointer prefix of its nodes
        self._by_id: dict[str, Path] | None = None  # ref_dir's files by their own $id (read on first need)
        self._index(root, self.root_base, "", document=None)

    @property
    def trivial(self) -> bool:
        """No nested resource and no anchor: every reference is "#/pointer" against the root."""
        return not self.bases and not self.anchors

    def _index(self, root, base: str, prefix: str, document: str | None) -> None:
        """Record the resources and anchors under `root`, whose base is `base` and pointer
        `prefix`. Walked without pointers (every compile walks the document): a resource's or
        anchor's pointer is worked out when a reference first reaches it (pointer_of)."""
        self.resources.setdefault(base, (root, prefix))
        self.prefixes[id(root)] = prefix
        todo: list = [(root, base)]
        while todo:
            node, base = todo.pop()
            if isinstance(node, dict):
                ident = node.get(self.id_key)
                if isinstance(ident, str) and node is not root and not (self.old and "$ref" in node):
                    uri, fragment = urldefrag(join(base, ident))
                    if fragment and not self.old:  # (jsonschema reads it as a resource with no $defs of its own)
                        ptr = self.pointer_of((node, None), root)[1]
                        raise SchemaError(f"$id at #{ptr}: {ident!r}: an $id with a fragment is not a "
                                          "2019-09/2020-12 resource (name the place with $anchor)")
                    if self.old and ident.startswith("#"):
                        self.anchors.setdefault((base, ident[1:]), (node, None))
                    else:
                        base = uri
                        self.resources.setdefault(uri, (node, None))
                        if fragment and self.old:
                            self.anchors.setdefault((uri, fragment), (node, None))
                if not self.old:
                    for key in ("$anchor", "$dynamicAnchor"):
                        if isinstance(node.get(key), str):
                            self.anchors.setdefault((base, node[key]), (node, None))
                    if isinstance(node.get("$dynamicAnchor"), str):
                        self.dynamic.add((base, node["$dynamicAnchor"]))
                    if node.get("$recursiveAnchor") is True and self.resources.get(base, (None,))[0] is node:
                        self.recursive.add(base)
                if base != (self.root_base if document is None else document):
                    self.bases[id(node)] = base
                if document is not None:
                    self.documents[id(node)] = document
                for k, v in node.items():
                    if k in _SUBSCHEMA and isinstance(v, dict):
                        todo.append((v, base))
                    elif k in _SUBSCHEMA_LISTS and isinstance(v, list):
                        todo.extend((x, base) for x in v)
                    elif k in _SUBSCHEMA_MAPS and isinstance(v, dict):
                        todo.extend((x, base) for x in v.values())

    def pointer_of(self, found: tuple, root=None) -> tuple:
        """(node, its pointer) of a resource or anchor entry (node, pointer or None) in the
        document `root` (by default the one the index says it lies in)."""
        node, ptr = found
        if ptr is not None:
            return found
        if root is None:
            doc = self.documents.get(id(node))
            root = self.root if doc is None else self.resources[doc][0]
        todo: list = [(root, self.prefixes[id(root)])]
        while todo:
            n, p = todo.pop()
            if n is node:
                return node, p
            items = n.items() if isinstance(n, dict) else enumerate(n) if isinstance(n, list) else ()
            todo.extend((v, _child(p, k)) for k, v in items if not (isinstance(n, dict) and k in _DATA_KEYWORDS))
        raise AssertionError("an indexed node is in its document")

    def base_of(self, node) -> str:
        doc = self.documents.get(id(node))
        return self.bases.get(id(node), self.root_base if doc is None else doc)

    def in_root_resource(self, node) -> bool:
        """Whether references in `node` resolve against the root (jsonschema's view of a subschema
        it is handed without its resource)."""
        return id(node) not in self.bases and id(node) not in self.documents

    def resolve(self, ref, node, ptr: str, error) -> tuple:
        """(target node, its pointer) of `ref` held by `node` at `ptr`; error(keyword, ptr, why)
        builds the SchemaError of a reference that does not resolve."""
        if not isinstance(ref, str):
            raise error("$ref", ptr, f"must be a string, got {ref!r}")
        uri, fragment = urldefrag(join(self.base_of(node), ref))
        found = self.resources.get(uri)
        if found is None:
            found = self._other_document(uri, ref, ptr, error)
        target, tptr = self.pointer_of(found)
        try:
            fragment = unquote(fragment, errors="strict")
        except UnicodeDecodeError:
            raise error("$ref", ptr, f"{ref!r}: its percent-escapes are not UTF-8") from None
        if fragment == "":
            return target, tptr
        if not fragment.startswith("/"):
            hit = self.anchors.get((uri, fragment))
            if hit is None:
                raise error("$ref", ptr, f"{ref!r} does not resolve (no anchor {fragment!r} in {uri or 'the document'})")
            return self.pointer_of(hit)
        # RFC 6901 in a URI fragment: percent-decoded as a whole above (as UTF-8), then split at
        # "/" and each token unescaped (~1 -> /, then ~0 -> ~)
        for raw in fragment.split("/")[1:]:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(target):
                target = target[int(token)]
            else:
                raise error("$ref", ptr, f"{ref!r} does not resolve")
        return target, tptr + _pointer(fragment)

    def dynamic_target(self, node: dict, ptr: str, error) -> str:
        """The reference a $dynamicRef (2020-12) or $recursiveRef (2019-09) of `node` stands for,
        as an absolute URI, where it does not depend on the dynamic scope: its static target has
        no dynamic anchor of that name (then it is a plain $ref); or the root resource has one
        (the outermost resource in every scope); or a single resource has one (then it is the
        static target). Otherwise an error naming the keyword: the target would depend on the
        path taken to it. check_dynamic_choices() re-checks after the compile (a document read
        later may hold another such anchor)."""
        key = "$dynamicRef" if "$dynamicRef" in node else "$recursiveRef"
        ref = node[key]
        if not isinstance(ref, str):
            raise error(key, _child(ptr, key), f"must be a string, got {ref!r}")
        self.resolve(ref, node, ptr, error)  # the static target (reads its document)
        uri, fragment = urldefrag(join(self.base_of(node), ref))
        if key == "$recursiveRef":
            if fragment or uri not in self.recursive:
                return f"{uri}#{fragment}"
            holders = sorted(self.recursive)
            chosen = self.root_base if self.root_base in self.recursive else uri
        else:
            if (uri, fragment) not in self.dynamic:
                return f"{uri}#{fragment}"
            holders = sorted(u for u, name in self.dynamic if name == fragment)
            chosen = self.root_base if (self.root_base, fragment) in self.dynamic else uri
        if chosen != self.root_base and len(holders) > 1:
            raise error(key, _child(ptr, key), f"{ref!r}: its target depends on the dynamic scope "
                        f"({len(holders)} resources hold that dynamic anchor), which is not supported")
        self.dynamic_choices.append((key, fragment, len(holders), _child(ptr, key)))
        return f"{chosen}#{fragment}"

    def check_dynamic_choices(self, error) -> None:
        """Each dynamic reference resolved by a single holder still has one (module docstring)."""
        for key, fragment, n, ptr in self.dynamic_choices:
            holders = self.recursive if key == "$recursiveRef" else {u for u, name in self.dynamic if name == fragment}
            if len(holders) != n and not (self.root_base in holders if key == "$recursiveRef"
                                          else (self.root_base, fragment) in self.dynamic):
                raise error(key, ptr, "its target depends on the dynamic scope (a document read later holds "
                            "that dynamic anchor too), which is not supported")

    def _other_document(self, uri: str, ref: str, ptr: str, error) -> tuple:
        """Another document: from ref_dir (by its own $id, else by the URI's path), else a draft
        metaschema; indexed on first use."""
        doc = self._from_ref_dir(uri, ref, ptr, error) if self.ref_dir is not None else None
        if doc is None:
            doc = _metaschema(uri)
        if doc is None:
            where = (f"not in the registry {self.ref_dir}" if self.ref_dir is not None else
                     "no registry of other documents was given (--ref-dir / ref_dir; nothing is downloaded)")
            raise error("$ref", ptr, f"{ref!r} names another document ({uri}): {where}")
        dialect = dialect_of(doc)
        if dialect is not None and dialect != self.dialect:
            raise error("$ref", ptr, f"{ref!r} names a document in another dialect ({doc.get('$schema')}), "
                        "which is not supported")
        self.foreign.append(doc)
        self._index(doc, uri, f"[{uri}]", document=uri)
        if isinstance(doc, dict) and isinstance(doc.get(self.id_key), str):  # its own $id, too
            self.resources.setdefault(urldefrag(join(uri, doc[self.id_key]))[0], (doc, f"[{uri}]"))
        self.prefixes[id(doc)] = f"[{uri}]"
        return self.resources[uri]

    def unused_validation(self, error) -> str | None:
        """The metaschema URI where the root's $schema names a metaschema of the registry whose
        $vocabulary leaves out the validation vocabulary (its keywords are then annotations), else
        None. The drafts' own metaschemas (json-schema.org) all use it and are not read."""
        uri = self.root.get("$schema") if isinstance(self.root, dict) else None
        if not isinstance(uri, str) or self.ref_dir is None or urlparse(uri).netloc.endswith("json-schema.org"):
            return None
        doc = self._from_ref_dir(urldefrag(uri)[0], uri, "/$schema", error)
        vocab = doc.get("$vocabulary") if isinstance(doc, dict) else None
        if not isinstance(vocab, dict) or any(str(k).endswith("/vocab/validation") for k in vocab):
            return None
        return uri

    def _from_ref_dir(self, uri: str, ref: str, ptr: str, error):
        if self._by_id is None:
            self._by_id = {}
            for f in sorted(self.ref_dir.rglob("*.json")):
                try:
                    ident = json.loads(f.read_text(encoding="utf-8")).get(self.id_key)
                except (ValueError, AttributeError, OSError):
                    continue
                if isinstance(ident, str):
                    self._by_id.setdefault(urldefrag(ident)[0], f)
        path = self._by_id.get(uri)
        if path is None and urlparse(uri).scheme in ("http", "https"):
            rel = urlparse(uri).path.lstrip("/")
            path = (self.ref_dir / rel).resolve()
            if not path.is_relative_to(self.ref_dir.resolve()) or not path.is_file():
                return None
        if path is None:
            return None
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise error("$ref", ptr, f"{ref!r}: {path} is not a JSON document ({exc})") from None
        if not isinstance(doc, (dict, bool)):
            raise error("$ref", ptr, f"{ref!r}: {path} is not a schema (an object or a boolean)")
        return doc


# The validation vocabulary's keywords (2019-09 and 2020-12, "Validation" §6): assertions only
# where the root's metaschema uses that vocabulary ($vocabulary lists it).
VALIDATION_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired"})


def _metaschema(uri: str):
    """A draft metaschema (or one of its vocabularies) shipped by jsonschema-specifications, or None."""
    try:
        from jsonschema_specifications import REGISTRY
    except ImportError:
        return None
    for key in (uri, uri.rstrip("#")):
        try:
            return REGISTRY.contents(key)
        except LookupError:
            continue
    return None

