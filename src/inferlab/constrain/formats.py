"""String `format`s as exact regexes over the JSON string's decoded content (the schema compiler
writes a character as JSON does: escaped where JSON says so).

Each regex matches exactly the strings of the grammar named next to it. Where the grammar is a
narrowing of the RFC (a subset: never looser), NARROWINGS says how, and the schema compiler records
it in `CompiledSchema.narrowed`. The narrowings also keep every accepted string valid for Python's
checkers used by `jsonschema.FormatChecker` (e.g. `datetime.date.fromisoformat` has no year 0).

- date       RFC 3339 full-date, with the days of each month and the Gregorian leap-year rule
- time       RFC 3339 full-time: partial-time time-offset
- date-time  RFC 3339 date-time: full-date "T" full-time
- email      RFC 5322 §3.4.1 addr-spec, dot-atom local part and dot-atom domain of hostname labels
- uuid       RFC 4122 §3 textual form (8-4-4-4-12 hex digits, either case)
- uri        RFC 3986 §3 URI (scheme ":" hier-part [ "?" query ] [ "#" fragment ])
- uri-reference  RFC 3986 §4.1 URI-reference (a URI or a relative reference)
- iri, iri-reference  RFC 3987 §2.2 IRI and IRI-reference: the same grammars over iunreserved
             (ucschar added) and iprivate in the query
- ipv4       RFC 2673 §3.2 dotted-quad, decimal octets 0-255 without leading zeros
- ipv6       RFC 3986 §3.2.2 IPv6address (groups of 1-4 hex digits, "::", an IPv4 tail), no zone id
- hostname   RFC 1123 §2.1 host name: dot-separated labels of letters, digits and inner hyphens,
             none with "--" in its 3rd and 4th characters (RFC 5890's reserved labels, A-labels among them)
- duration   RFC 3339 Appendix A duration (JSON Schema's definition): designators in order, whole
             numbers, no sign (jsonschema's checker, isoduration, takes more: fractions, signs,
             P1Y2D; every string of this grammar passes it)
- json-pointer           RFC 6901 §3: "/"-prefixed tokens, "~" only as ~0 or ~1
- relative-json-pointer  draft-bhutton-relative-json-pointer-00: an integer, then "#" or a JSON pointer
- uri-template           RFC 6570 §2: literals and {operator varspec, ...} expressions (levels 1-4)
- regex      a regular subset of what Python's `re` compiles (jsonschema's check): literals,
             ".", escapes, classes, groups nested at most two deep, quantifiers, anchors
"""

from __future__ import annotations

_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001-9999
# leap years: divisible by 4 and not by 100, or divisible by 400 (0000 excluded)
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][48]|[13579][26]|[2468]0)00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HOUR = r"(?:[01][0-9]|2[0-3])"
_MINUTE = r"[0-5][0-9]"
TIME = rf"{_HOUR}:{_MINUTE}:{_MINUTE}(?:\.[0-9]+)?(?:Z|[+-]{_HOUR}:{_MINUTE})"
DATE_TIME = rf"{DATE}T{TIME}"

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@{_LABEL}(?:\.{_LABEL})*"

_HEX = "[0-9a-fA-F]"
UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"

# RFC 3986 §3.2.2 IPv6address (RFC 4291 §2.2 text forms): hex groups h16, "::" for one or more zero
# groups, an IPv4 dotted quad as the last 32 bits (ls32); no zone id ("%eth0"), as jsonschema says
_H16 = rf"{_HEX}{{1,4}}"
_LS32 = rf"(?:{_H16}:{_H16}|{IPV4})"


def _h16s(lo: int, hi: int) -> str:
    """lo..hi groups `h16 ":"` (the prefix before "::" is the same with the colon before)."""
    return f"(?:{_H16}:){{{lo},{hi}}}" if hi else ""


IPV6 = "|".join([
    rf"{_h16s(6, 6)}{_LS32}",
    rf"::{_h16s(5, 5)}{_LS32}",
    rf"(?:{_H16})?::{_h16s(4, 4)}{_LS32}",
    *(rf"(?:{_h16s(0, k)}{_H16})?::{_h16s(4 - k, 4 - k)}{_LS32}" for k in (1, 2)),
    rf"(?:{_h16s(0, 3)}{_H16})?::{_H16}:{_LS32}",
    rf"(?:{_h16s(0, 4)}{_H16})?::{_LS32}",
    rf"(?:{_h16s(0, 5)}{_H16})?::{_H16}",
    rf"(?:{_h16s(0, 6)}{_H16})?::",
])
IPV6 = f"(?:{IPV6})"

# at most 4 labels of at most 62 characters keeps the name within RFC 1123's 253 characters; no
# label with "--" in its 3rd and 4th characters: RFC 5890 §2.3.1 reserves those (R-LDH labels), and
# only a valid A-label ("xn--" and Punycode that decodes to an IDNA2008 U-label) is a host name
# then, which no regex decides: none is generated (a narrowing)
_HOST_LABEL = (r"[A-Za-z0-9](?:(?:[A-Za-z0-9-]{0,2}[A-Za-z0-9])"
               r"|[A-Za-z0-9-](?:[A-Za-z0-9][A-Za-z0-9-]|-[A-Za-z0-9])(?:[A-Za-z0-9-]{0,57}[A-Za-z0-9]))?")
HOSTNAME = rf"{_HOST_LABEL}(?:\.{_HOST_LABEL}){{0,3}}"

# RFC 3986 §3 with its ABNF rule names; RFC 3987 §2.2's IRI is the same grammar over a wider
# unreserved set (iunreserved: ucschar added), with iprivate allowed in the query alone
_PCT = rf"%{_HEX}{_HEX}"
_SUB_DELIMS = r"[!$&'()*+,;=]"


def _rfc3986(unreserved: str, private: str = "") -> tuple[str, str]:
    """(URI, URI-reference) of RFC 3986 §3 and §4.1, or with iunreserved and iprivate (RFC 3987's
    IRI, IRI-reference); the host is a reg-name (no IP-literal: a narrowing, NARROWINGS)."""
    pchar = rf"(?:{unreserved}|{_PCT}|{_SUB_DELIMS}|[:@])"
    segment, segment_nz = rf"{pchar}*", rf"{pchar}+"
    userinfo = rf"(?:{unreserved}|{_PCT}|{_SUB_DELIMS}|:)*"
    reg_name = rf"(?:{unreserved}|{_PCT}|{_SUB_DELIMS})*"
    authority = rf"(?:{userinfo}@)?{reg_name}(?::[0-9]*)?"
    hier_part = (
        rf"(?://{authority}(?:/{segment})*"       # "//" authority path-abempty
        rf"|/(?:{segment_nz}(?:/{segment})*)?"    # path-absolute
        rf"|{segment_nz}(?:/{segment})*"          # path-rootless
        r"|)"                                     # path-empty
    )
    query = rf"(?:{pchar}|{private + '|' if private else ''}[/?])*"
    fragment = rf"(?:{pchar}|[/?])*"
    absolute = rf"[A-Za-z][A-Za-z0-9+.-]*:{hier_part}(?:\?{query})?(?:#{fragment})?"
    segment_nz_nc = rf"(?:{unreserved}|{_PCT}|{_SUB_DELIMS}|@)+"  # no ":" (it would read as a scheme)
    relative_part = (
        rf"(?://{authority}(?:/{segment})*"
        rf"|/(?:{segment_nz}(?:/{segment})*)?"
        rf"|{segment_nz_nc}(?:/{segment})*"       # path-noscheme
        r"|)"
    )
    return absolute, rf"(?:{absolute}|{relative_part}(?:\?{query})?(?:#{fragment})?)"


URI, URI_REFERENCE = _rfc3986(r"[A-Za-z0-9._~-]")
# ucschar and iprivate (RFC 3987 §2.2) in the BMP only: the reference checker (jsonschema's,
# rfc3987-syntax) rejects every code point beyond it, which the RFC allows (a narrowing)
_IUNRESERVED = "[A-Za-z0-9._~\\xa0-\\ud7ff\\uf900-\\ufdcf\\ufdf0-\\uffef-]"
IRI, IRI_REFERENCE = _rfc3986(_IUNRESERVED, private="[\\ue000-\\uf8ff]")

# RFC 3339 Appendix A, rule by rule (dur-second ... duration)
_DIGITS = "[0-9]+"
_DUR_SECOND = rf"{_DIGITS}S"
_DUR_MINUTE = rf"{_DIGITS}M(?:{_DUR_SECOND})?"
_DUR_HOUR = rf"{_DIGITS}H(?:{_DUR_MINUTE})?"
_DUR_TIME = rf"T(?:{_DUR_HOUR}|{_DUR_MINUTE}|{_DUR_SECOND})"
_DUR_DAY = rf"{_DIGITS}D"
_DUR_WEEK = rf"{_DIGITS}W"
_DUR_MONTH = rf"{_DIGITS}M(?:{_DUR_DAY})?"
_DUR_YEAR = rf"{_DIGITS}Y(?:{_DUR_MONTH})?"
_DUR_DATE = rf"(?:{_DUR_DAY}|{_DUR_MONTH}|{_DUR_YEAR})(?:{_DUR_TIME})?"
DURATION = rf"P(?:{_DUR_DATE}|{_DUR_TIME}|{_DUR_WEEK})"


def _class_ranges() -> str:
    """The class ranges `re` takes that REGEX writes: both ends in one of 0-9, a-z or A-Z, the
    first not after the last ("[z-a]" is an error)."""
    runs = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return "(?:" + "|".join(f"{lo}-[{lo}-{run[-1]}]" for run in runs for lo in run) + ")"


# Each piece is valid wherever it stands, so every concatenation is: no quantifier after an anchor,
# another quantifier or nothing; escapes of a letter only where `re` defines one; "-" in a class
# only first, last or in a range; {m,n} only where m <= n shows in its digits
_PUNCT = r"[ -/:-@\[-`{-~]"                         # ASCII space and punctuation: escaped, themselves
_RX_LITERAL = r"[^\\.^$*+?{}\[\]|()]"
_RX_ESCAPE = rf"\\(?:[dDwWsSnrtfv]|{_PUNCT})"
_RX_ANCHOR = r"(?:\^|\$|\\[bBAZ])"
_RX_CLASS = rf"\[\^?-?(?:{_class_ranges()}|[^\\\[\]\-^]|\\(?:[dDwWsSnrtfvb]|{_PUNCT}))+-?\]"
_RX_COUNTS = "|".join(f"{m},[{m}-9]" for m in range(10))
_RX_QUANT = rf"(?:[*+?]|\{{(?:[0-9]{{1,3}},?|{_RX_COUNTS}|[0-9],[1-9][0-9]{{1,2}})\}})\??"


def _rx_alternatives(depth: int) -> str:
    """Alternatives of pieces, with groups nested `depth` deep at most."""
    group = rf"|\((?:\?:)?{_rx_alternatives(depth - 1)}\)" if depth else ""
    piece = rf"(?:(?:{_RX_LITERAL}|\.|{_RX_ESCAPE}|{_RX_CLASS}{group})(?:{_RX_QUANT})?|{_RX_ANCHOR})"
    return rf"(?:{piece}*(?:\|{piece}*)*)"


REGEX = _rx_alternatives(2)

# RFC 6901 §3: "/"-prefixed reference tokens, "~" escaped as ~0 or ~1
JSON_POINTER = r"(?:/(?:[^/~]|~[01])*)*"
# draft-bhutton-relative-json-pointer-00 §3: a non-negative integer, then "#" or a JSON pointer
# (no 0 before another digit: jsonschema's checker rejects 100 and 101, though the draft allows them)
RELATIVE_JSON_POINTER = rf"(?:0|[1-9][1-9]*0?)(?:#|{JSON_POINTER})"
# RFC 6570 §2: literals (pct-encoded, or the ASCII, ucschar and iprivate characters it lists)
# and expressions {operator? varspec (, varspec)*}, varspec = varname (:max-length | *)?
_PCT_ENCODED = "%[0-9A-Fa-f]{2}"
_UT_LITERAL = (r"[!#$&(-;=?-\[\]_a-z~\u00a0-\ud7ff\ue000-\ufdcf\ufdf0-\uffef"
               r"\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
               r"\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
               r"\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd"
               r"\U000d0000-\U000dfffd\U000e1000-\U000efffd\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT_ENCODED})"
_VARSPEC = rf"[A-Za-z0-9_](?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
URI_TEMPLATE = rf"(?:{_UT_LITERAL}|{_PCT_ENCODED}|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"

FORMATS = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "email": EMAIL,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "hostname": HOSTNAME,
    "duration": DURATION,
    "regex": REGEX,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
    "uri-template": URI_TEMPLATE,
}

# For a format inside a negated operand (not, the complement of an if): a regex of every string
# that the RFC or jsonschema's checker (the reference) counts as the format, so its complement
# holds only strings that are not. Each is looser than both readings: the complement leaves out
# the strings the superset holds past them (SUPERSET_LOSSES, recorded as a narrowing). Formats not
# listed are refused there. "." is any code point, line terminators included (_ANY).
_ANY = "[\\U00000000-\\U0010ffff]"
_DD = "[0-9][0-9]"
_CLOCK = rf"{_DD}:{_DD}:{_DD}(?:\.[0-9]+)?(?:[Zz]|[-+|]{_DD}:{_DD})\n?"   # rfc3339-validator's [\+|\-] and $
_DATE_SHAPE = rf"[0-9]{{4}}-{_DD}-{_DD}"
_SCHEME_THEN_ANY = rf"[A-Za-z][A-Za-z0-9+.-]*:{_ANY}*"
SUPERSETS = {
    "date": _DATE_SHAPE,                                     # jsonschema: that shape, then date.fromisoformat
    "time": _CLOCK,                                          # jsonschema: the date-time check after a date
    "date-time": rf"{_DATE_SHAPE}[Tt]{_CLOCK}",
    "email": rf"{_ANY}*@{_ANY}*",                            # jsonschema: "@" in the string
    "uuid": rf"{_ANY}{{8}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}{{12,}}",  # uuid.UUID strips "urn:", "{}", "-"
    "ipv4": r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}",
    "ipv6": r"[0-9A-Fa-f:.]{2,}",
    # fqdn's check: [-a-z\d] under re.IGNORECASE | re.UNICODE (Unicode digits, the Kelvin sign)
    # and $ (a final newline): every non-ASCII code point is let in
    "hostname": r"[A-Za-z0-9.\-\x80-\U0010ffff]+\n?",
    "uri": _SCHEME_THEN_ANY,
    "iri": _SCHEME_THEN_ANY,
    "json-pointer": rf"(?:/{_ANY}*)?",
}
SUPERSET_LOSSES = {
    "date": "a string of the shape 0000-00-00 is taken for a date",
    "time": "a string of the shape 00:00:00Z (digits, offset) is taken for a time",
    "date-time": "a string of the shape 0000-00-00T00:00:00Z (digits, offset) is taken for a date-time",
    "email": "every string with an '@' is taken for an email",
    "uuid": "a string of 36 or more characters with '-' at 8, 13, 18 and 23 is taken for a uuid",
    "ipv4": "four dot-separated runs of 1-3 digits are taken for an ipv4",
    "ipv6": "a string of hex digits, ':' and '.' is taken for an ipv6",
    "hostname": "a string of ASCII letters, digits, '.', '-' and non-ASCII characters is taken for a hostname",
    "uri": "a string that starts with a scheme and ':' is taken for a uri",
    "iri": "a string that starts with a scheme and ':' is taken for an iri",
    "json-pointer": "a string that starts with '/' is taken for a json-pointer",
}

# OpenAPI's integer formats: JSON Schema validators ignore them, so enforcing the range narrows
INTEGER_FORMATS = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
# a JSON number is read as a double anyway: nothing to enforce
NUMBER_FORMATS = {"double"}

NARROWINGS = {
    "date": "years 0001-9999 (Python's date has no year 0)",
    "time": "no leap second :60; 'Z' and 'T' upper case only",
    "date-time": "years 0001-9999, no leap second :60, upper-case 'T' and 'Z' only",
    "email": "no quoted local part, comments or domain literal",
    "uri": "no IP-literal ([...]) host",
    "uri-reference": "no IP-literal ([...]) host",
    "iri": "no IP-literal ([...]) host; no code point beyond the BMP (jsonschema's checker rejects them)",
    "iri-reference": "no IP-literal ([...]) host; no code point beyond the BMP (jsonschema's checker rejects them)",
    "hostname": "at most 4 labels of at most 62 characters; no label with '--' in its 3rd and 4th characters "
                "(no A-label: 'xn--' and Punycode)",
    # the RFC's own grammar, exactly; recorded because the reference checker (jsonschema's, via
    # isoduration) takes ISO 8601's wider forms, which the grammar then refuses
    "duration": "RFC 3339 Appendix A's grammar exactly (each unit at most once, in order, none skipped, whole "
                "numbers, no sign), narrower than ISO 8601's forms jsonschema's checker takes (PT4H56S, P1.5D, -P1D)",
    "regex": "literals, '.', escapes, classes (ranges within 0-9, a-z or A-Z), groups nested at most two "
             "deep, quantifiers ({m,n} with m <= n of one digit each, or m one digit and n two or three) "
             "and anchors; no lookaround, named group, flag, backreference or possessive quantifier",
    "relative-json-pointer": "no index manipulation (0+1/a, 0-1/a); no 0 before another digit in the integer "
                             "(100: jsonschema's checker rejects it)",
    "uri-template": "no operator the RFC reserves for extensions (= , ! @ |); a variable name starts with a "
                    "letter, digit or '_' (jsonschema's checker rejects {%41}); no apostrophe, which RFC 6570's "
                    "literals leave out (the test suite counts it valid)",
}

# The formats JSON Schema defines (2020-12 §7.3, plus the names of drafts 3-7); a name outside this
# list is a custom format, an annotation (schema.compile_grammar's format policy). Draft 3's
# "utc-millisec" is left out: it asks for a number, which the instance already is.
SPEC_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4",
    "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex", "host-name", "ip-address", "color"})
# Draft 3's own names: a schema that names a later dialect ($schema) uses them as custom formats
DRAFT3_ONLY = frozenset({"host-name", "ip-address", "color"})
