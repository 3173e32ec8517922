"""String formats: each regex against an independent checker (stdlib parsers) and hand cases."""

import datetime
import ipaddress
import random
import re
import uuid

import pytest

from inferlab.constrain.formats import FORMATS


def ok(fmt, text):
    return re.fullmatch(FORMATS[fmt], text) is not None


EXAMPLES = {   # one instance and one non-instance of each format, written by hand
    "date": ("2024-02-29", "2023-02-29"), "time": ("23:59:59Z", "25:00:00Z"),
    "date-time": ("2024-01-31T12:00:00+01:00", "2024-01-31 12:00:00"), "email": ("a.b@example.com", "a@@b"),
    "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"),
    "uri": ("https://example.com/a?b=c#d", "no scheme"), "uri-reference": ("../a/b?c", "a b"),
    "ipv4": ("192.168.0.1", "256.1.1.1"), "hostname": ("a-b.example.com", "-a.example.com"),
    "ipv6": ("fe80::1:2.3.4.5", "1:2:3:4:5:6:7:8:9"), "duration": ("P1Y2M3DT4H5M6S", "PT"),
    "regex": ("^[a-z0-9-]+$", "a{3,2}"),
    "json-pointer": ("/a~1b/~0", "/a~2"), "relative-json-pointer": ("2/0/x", "01/a"),
    "uri-template": ("http://e.com/{term:1}/{+path*}", "{a,}"),
    "iri": ("http://\u0192\u00f8\u00f8.\u00df\u00e5r/?\u2202=\ue000#\u00e9", "\u00e2\u03c0\u03c0"),
    "iri-reference": ("/\u00e2\u03c0\u03c0#x", "#a\\b"),
}


def test_every_format_is_in_the_automaton_dialect():
    """Each format's regex compiles to our byte DFA, which agrees with Python's re on a hand-picked
    instance and non-instance."""
    from inferlab.constrain.dfa import compile_regex
    assert set(EXAMPLES) == set(FORMATS)
    for fmt, (good, bad) in EXAMPLES.items():
        dfa = compile_regex(FORMATS[fmt])
        assert dfa.fullmatch(good) and ok(fmt, good), fmt
        assert not dfa.fullmatch(bad) and not ok(fmt, bad), fmt


def test_date_agrees_with_datetime_on_every_day_of_sample_years():
    # leap-year rule: 4 yes, 100 no, 400 yes; year 0 does not exist for Python's date
    for year in (1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9999):
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    datetime.date(year, month, day)
                    real = True
                except ValueError:
                    real = False
                assert ok("date", text) == real, text


@pytest.mark.parametrize("text", ["0000-01-01", "2024-1-01", "2024-01-1", "20240101", "2024-01-01 ", "+2024-01-01"])
def test_date_rejects(text):
    assert not ok("date", text)


@pytest.mark.parametrize("text,good", [
    ("12:30:00Z", True), ("23:59:59.123456+05:30", True), ("00:00:00-00:00", True),
    ("24:00:00Z", False), ("12:60:00Z", False), ("12:30:00", False),   # RFC 3339 needs an offset
    ("12:30Z", False), ("12:30:00+5:30", False), ("12:30:00.Z", False), ("12:30:61Z", False),
])
def test_time_hand_cases(text, good):
    assert ok("time", text) == good


def test_date_time_accepted_strings_parse_with_fromisoformat():
    rng = random.Random(0)
    accepted = 0
    for _ in range(3000):
        text = (f"{rng.randint(0, 9999):04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}T"
                f"{rng.randint(0, 25):02d}:{rng.randint(0, 61):02d}:{rng.randint(0, 61):02d}"
                + rng.choice(["", ".5", ".123456"]) + rng.choice(["Z", "+01:00", "-12:30", "", "+24:00"]))
        try:
            parsed = datetime.datetime.fromisoformat(text)
            real = parsed.tzinfo is not None and not text.endswith(":60")  # an offset is required
        except ValueError:
            real = False
        assert ok("date-time", text) == real, text
        accepted += real
    assert accepted > 100  # the sample reaches both sides


def test_uuid_agrees_with_uuid_module_on_shapes():
    assert ok("uuid", str(uuid.UUID(int=12345)))
    assert ok("uuid", "123E4567-E89B-12D3-A456-426614174000")
    for bad in ["123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}",
                "123e4567-e89b-12d3-a456-42661417400", "123e4567-e89b-12d3-a456-42661417400g"]:
        assert not ok("uuid", bad), bad


def test_ipv4_agrees_with_ipaddress():
    rng = random.Random(1)
    for _ in range(2000):
        parts = [str(rng.choice([rng.randint(0, 300), rng.randint(0, 9)])) for _ in range(rng.choice([3, 4, 4, 5]))]
        if rng.random() < 0.1:
            parts[0] = "0" + parts[0]
        text = ".".join(parts)
        try:
            ipaddress.IPv4Address(text)
            real = True
        except ValueError:
            real = False
        assert ok("ipv4", text) == real, text


@pytest.mark.parametrize("text,good", [
    ("user@example.com", True), ("first.last+tag@sub.example.co.uk", True), ("a@b", True),
    ("no-at-sign", False), ("two@@example.com", False), (".lead@example.com", False),
    ("trail.@example.com", False), ("a..b@example.com", False), ("a@-bad.com", False),
    ("a@bad-.com", False), ('"quoted"@example.com', False), ("a b@example.com", False),
])
def test_email_hand_cases(text, good):
    assert ok("email", text) == good


@pytest.mark.parametrize("text,good", [
    ("https://example.com/a/b?x=1&y=2#frag", True), ("mailto:someone@example.com", True),
    ("urn:isbn:0451450523", True), ("file:///etc/hosts", True), ("http://u:p@h:8080/p", True),
    ("http://h:port/", False),          # a port is digits
    ("example.com/path", False),        # no scheme
    ("1http://x", False),               # a scheme starts with a letter
    ("http://exa mple.com", False), ("http://x/%zz", False), ("http://[::1]/", False),
])
def test_uri_hand_cases(text, good):
    assert ok("uri", text) == good


@pytest.mark.parametrize("text,good", [
    ("example", True), ("a-b.example.com", True), ("x" * 62, True), ("x" * 63, False),
    ("-a.com", False), ("a-.com", False), ("a..com", False), ("a.b.c.d.e", False),
    # RFC 5890 reserves "--" in the 3rd and 4th characters: no A-label (Punycode) is generated
    ("a--b.com", True), ("xn--X", False), ("xn--hello-txk", False), ("ab--c", False), ("abc-d--e", True),
])
def test_hostname_hand_cases(text, good):
    assert ok("hostname", text) == good


@pytest.mark.parametrize("fmt", ["json-pointer", "relative-json-pointer", "uri-template"])
def test_pointer_and_template_formats_are_subsets_of_jsonschemas_checkers(fmt):
    """Every string of the regex passes jsonschema's own checker (random strings over the
    characters that matter, seeded), so asserting the format never admits what it rejects."""
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if fmt not in checker.checkers:
        pytest.skip(f"jsonschema has no {fmt} checker here")
    rng = random.Random(0)
    alphabet = list("/~01a#{}%4.,:*+?&;=!@| 9'") + ["\u00e9"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(20_000)]
    accepted = [t for t in texts if ok(fmt, t)]
    assert len(accepted) >= 20 and all(checker.conforms(t, fmt) for t in accepted)


@pytest.mark.parametrize("fmt", ["iri", "iri-reference"])
def test_iris_are_subsets_of_jsonschemas_checker_and_widen_the_uri_grammar(fmt):
    """RFC 3987: every string of the IRI regex passes jsonschema's checker (rfc3987_syntax's
    grammar); a URI is an IRI; non-ASCII letters (ucschar) are allowed everywhere, a private-use
    code point (iprivate) in the query alone; both in the BMP only (jsonschema's checker rejects
    the others). Random strings over the characters that matter."""
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if fmt not in checker.checkers:
        pytest.skip(f"jsonschema has no {fmt} checker here")
    rng = random.Random(0)
    alphabet = list("h:/a?#@%41.[]\\ -") + ["\u00e9", "\u03c0", "\ue000", "\U000f0000", "\ufffe", "\x85", "\U00010300"]
    texts = [rng.choice(["", "h:", "h://"]) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
             for _ in range(2_000)]     # (rfc3987-syntax's parser: ~3 ms a string)
    accepted = [t for t in texts if ok(fmt, t)]
    assert len(accepted) >= 200 and all(checker.conforms(t, fmt) for t in accepted)
    uri = fmt.replace("iri", "uri")
    assert all(ok(fmt, t) for t in texts if ok(uri, t))
    assert ok(fmt, "h:\u00e9?\ue000") and not ok(fmt, "h:\u00e9#\ue000") and not ok(fmt, "h:\ufffe")
    assert not ok(fmt, "h:\U00010300")


@pytest.mark.parametrize("text,good", [
    ("a/b", True), ("../x?y#z", True), ("//host/p", True), ("", True), ("#frag", True),
    ("http://x/y", True), ("a b", False), ("%zz", False), ("http://h:port/", False),
])
def test_uri_reference_hand_cases(text, good):
    assert ok("uri-reference", text) == good


def ipv6_by_python(text: str) -> bool:
    """jsonschema's ipv6 check: Python's IPv6Address, and no zone id."""
    try:
        return not ipaddress.IPv6Address(text).scope_id
    except ValueError:
        return False


def test_ipv6_agrees_with_ipaddress_on_random_group_sequences():
    rng = random.Random(0)
    groups = ["1", "a", "ffff", "0", "12345", "1.2.3.4", "01.2.3.4", "%e", "G", "abcd", "", "A0"]
    valid = 0
    for _ in range(6_000):
        k = rng.randint(1, 10)
        text = "".join(rng.choice(groups) + (rng.choice([":", ":", "::", "", "."]) if j < k - 1 else "")
                       for j in range(k))
        assert ok("ipv6", text) == ipv6_by_python(text), text
        valid += ipv6_by_python(text)
    assert valid > 40  # the draw reaches valid addresses of many shapes


@pytest.mark.parametrize("text", ["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
                                  "1:2:3:4:5:6:1.2.3.4", "::ffff:10.0.0.1", "FE80::AbCd", "1::2:3:4:5:6:7"])
def test_ipv6_hand_written_addresses(text):
    assert ok("ipv6", text) and ipv6_by_python(text)


@pytest.mark.parametrize("text", ["1:2:3:4:5:6:7:8:9", "1::2::3", ":1:2", "1:2:3:4:5:6:7", "fe80::1%eth0",
                                  "::1.2.3", "::01.2.3.4", "12345::", "1:2:3:4:5:6:7:1.2.3.4", ""])
def test_ipv6_hand_written_non_addresses(text):
    assert not ok("ipv6", text) and not ipv6_by_python(text)


def rfc3339_duration(text: str) -> bool:
    """RFC 3339 Appendix A's ABNF, read by hand: each rule a function returning the rest of the
    text after it, or None."""
    def digits_then(t, letter):
        i = 0
        while i < len(t) and t[i].isdigit() and t[i].isascii():
            i += 1
        return t[i + 1:] if i and t[i:i + 1] == letter else None

    def chain(letters):
        """1*DIGIT letters[0] [chain(letters[1:])]: dur-hour is chain("HMS"), dur-year chain("YMD")."""
        def rule(t):
            rest = digits_then(t, letters[0])
            if rest is None or len(letters) == 1:
                return rest
            after = chain(letters[1:])(rest)
            return rest if after is None else after
        return rule

    def dur_time(t):  # "T" (dur-hour / dur-minute / dur-second): the letter after the digits picks one
        if not t.startswith("T"):
            return None
        return next((r for r in (chain("HMS")(t[1:]), chain("MS")(t[1:]), chain("S")(t[1:])) if r is not None), None)

    if not text.startswith("P"):
        return False
    body = text[1:]
    for rule in (chain("D"), chain("MD"), chain("YMD")):  # dur-date: (dur-day / dur-month / dur-year) [dur-time]
        r = rule(body)
        if r is not None and (r == "" or dur_time(r) == ""):
            return True
    return dur_time(body) == "" or digits_then(body, "W") == ""


@pytest.mark.parametrize("text,good", [
    ("P1Y", True), ("P1M", True), ("P1D", True), ("P3W", True), ("PT1H", True), ("PT1M", True), ("PT1S", True),
    ("P1Y2M3DT4H5M6S", True), ("P0D", True), ("PT36H", True), ("P1DT12H", True), ("PT1H30M", True),
    ("P", False), ("PT", False), ("P1DT", False), ("1Y", False), ("P1Y2D", False), ("PT1H30S", False),
    ("P1W2D", False), ("P1.5Y", False), ("-P1D", False), ("P1S", False), ("PT1D", False), ("p1d", False),
])
def test_duration_hand_cases(text, good):
    assert ok("duration", text) == good == rfc3339_duration(text)


def test_duration_agrees_with_the_rfc_grammar_and_passes_jsonschema():
    # random strings over the grammar's alphabet: our regex equals the hand-read ABNF, and every
    # duration it accepts passes jsonschema's checker (isoduration, which takes more)
    import jsonschema
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert "duration" in checker.checkers
    rng = random.Random(3)
    accepted = 0
    for _ in range(20000):
        text = "P" + "".join(rng.choice("0123YMWDTHMS" + "1" * 6) for _ in range(rng.randint(0, 9)))
        good = ok("duration", text)
        assert good == rfc3339_duration(text), text
        if good:
            accepted += 1
            assert checker.conforms(text, "duration"), text
    assert accepted > 500


@pytest.mark.parametrize("text", [
    "", "^[a-zA-Z0-9_]+$", r"^\d{3}-\d{4}$", "(foo|bar)", "^(?:[a-z]+)?$", r"\.json$", "[^/]+", "a{2,5}",
    "a{2,15}", "^[-a-z0-9]+$", "[a-z-]", r"^\S+@\S+$", "(a(b)c)", "x*?", r"\bword\b", "^#[0-9a-fA-F]{6}$", "a|",
    r"\\", "[.]", "é+", 'say "hi"', r"^https?://[^\s/$.?#].[^\s]*$",
])
def test_regex_format_takes_common_regexes(text):
    assert re.compile(text) is not None and ok("regex", text)


@pytest.mark.parametrize("text", ["(", "[", "a**", "*a", "[z-a]", "a{3,2}", r"\q", "a{1,2}{3}", "^*", ")", "[]", r"\1"])
def test_regex_format_rejects_what_re_rejects(text):
    with pytest.raises(re.error):
        re.compile(text)
    assert not ok("regex", text)


def test_every_string_of_the_regex_format_compiles_with_re():
    """Random walks of the format's DFA, drawn towards its structure (classes, ranges, groups,
    counts): each accepted text compiles with Python's re, jsonschema's check of the format."""
    import warnings
    import numpy as np
    from inferlab.constrain.dfa import compile_regex
    dfa = compile_regex(FORMATS["regex"])
    rng = random.Random(7)
    meta = set(b"[](){}|*+?\\-^$.,:0123456789azAZdwsbB")

    rows: dict = {}   # state -> (its live bytes, their weights): built once, the same draws as rebuilt

    def pick(state):
        if state not in rows:
            live = np.flatnonzero(dfa.trans[state] >= 0).tolist()
            rows[state] = live, [25 if b in meta else 1 if 32 <= b < 127 else 0.05 for b in live]
        live, weights = rows[state]
        return rng.choices(live, weights=weights)[0]
    checked, shapes = 0, set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "[&&]" and the like: warnings, not errors
        for _ in range(2000):
            state, out = dfa.start, bytearray()
            for _ in range(rng.randint(1, 40)):
                b = pick(state)
                out.append(b)
                state = int(dfa.trans[state, b])
            while not dfa.accepting[state] and len(out) < 400:
                b = pick(state)
                out.append(b)
                state = int(dfa.trans[state, b])
            try:
                text = out.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if not dfa.accepting[state]:
                continue
            re.compile(text)  # raises re.error on an invalid one
            checked += 1
            shapes |= {c for c in "[({" if c in text} | ({"range"} if re.search(r"\[[^\]]*\w-\w", text) else set())
    assert checked > 1500 and shapes == {"[", "(", "{", "range"}


def test_a_schema_with_format_regex_compiles_with_its_narrowing_recorded():
    import jsonschema
    from inferlab.constrain.schema import canonical_json, compile_grammar
    from inferlab.constrain.stack import build_machine
    schema = {"type": "object", "properties": {"p": {"type": "string", "format": "regex"}}}
    compiled = compile_grammar(schema)
    assert any(note.startswith("format regex at #/properties/p") for note in compiled.narrowed)
    machine = build_machine(compiled)
    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for value in ["^[a-z]+$", "(", r"\d{2,4}", "a{3,2}", 'q"uote\\', "[z-a]"]:
        text = canonical_json({"p": value}, schema)
        assert machine.accepts(text) == check.is_valid({"p": value}), value


def test_duration_records_where_the_grammar_is_narrower_than_the_reference_checker():
    """RFC 3339 Appendix A exactly; jsonschema's checker takes ISO 8601's wider forms: the
    compiled grammar refuses them and says so (compiled.narrowed), never silently."""
    from inferlab.constrain.schema import compile_grammar
    from inferlab.constrain.stack import build_machine

    compiled = compile_grammar({"type": "string", "format": "duration"})
    assert any(n.startswith("format duration at #/format: RFC 3339 Appendix A") for n in compiled.narrowed)
    machine = build_machine(compiled)
    assert machine.accepts('"PT4H0M56S"') and machine.accepts('"P1Y2M"') and machine.accepts('"P3W"')
    assert not any(machine.accepts(t) for t in ('"PT4H56S"', '"P1.5D"', '"-P1D"'))


SUPERSET_SEEDS = {   # valid instances to mutate, by hand
    "date": ["2024-02-29", "1999-12-31"], "time": ["23:59:59Z", "08:30:06.283185+05:30"],
    "date-time": ["2024-01-31T12:00:00+01:00", "1985-04-12t23:20:50.52z"], "email": ["a.b@example.com"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000"], "ipv4": ["192.168.0.1"], "ipv6": ["fe80::1:2.3.4.5", "::1"],
    "hostname": ["a-b.example.com", "xn--bcher-kva.example."], "uri": ["https://example.com/a?b=c#d"],
    "iri": ["http://\u00e9.com/\u03c0"], "json-pointer": ["/a~1b/~0", ""],
}


@pytest.mark.parametrize("fmt", sorted(SUPERSET_SEEDS))
def test_a_negated_formats_superset_holds_every_instance_of_both_readings(fmt):
    """formats.SUPERSETS[fmt] is complemented inside not/if, so it must hold every string that
    jsonschema's checker or the RFC grammar (our regex) takes: seeded mutations of valid
    instances (a character replaced, inserted or dropped), and random strings."""
    from inferlab.constrain.formats import SUPERSET_LOSSES, SUPERSETS
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert set(SUPERSETS) == set(SUPERSET_LOSSES) == set(SUPERSET_SEEDS)
    rng = random.Random(fmt)
    alphabet = list("0123456789abcdefT:Z.-+/@~%{}u_ \n") + ["\u00e9", "\u0663", "\ufb06"]
    texts = []
    for _ in range(300 if fmt == "iri" else 1500):      # (rfc3987-syntax's parser: ~3 ms a string)
        t = list(rng.choice(SUPERSET_SEEDS[fmt]))
        for _ in range(rng.randint(1, 3)):
            i = rng.randint(0, len(t))
            op = rng.choice("rid")
            if op == "r" and i < len(t):
                t[i] = rng.choice(alphabet)
            elif op == "i":
                t.insert(i, rng.choice(alphabet))
            elif t and i < len(t):
                del t[i]
        texts.append("".join(t))
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(500)]
    sup = re.compile(SUPERSETS[fmt], re.DOTALL)
    valid = [t for t in texts if (fmt in checker.checkers and checker.conforms(t, fmt)) or ok(fmt, t)]
    assert len(valid) >= 50
    assert [t for t in valid if not sup.fullmatch(t)] == []
    assert any(not sup.fullmatch(t) for t in texts)         # its complement holds something
