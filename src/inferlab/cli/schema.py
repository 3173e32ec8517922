"""`inferlab schema compile SCHEMA.json [--json]` and `inferlab schema check SCHEMA.json INSTANCE.json [--json]`.

Ask the JSON-schema compiler questions. `compile` prints the stack grammar: its automata (states,
calls), whether text needs the stack, and every narrowing. `check` answers whether the grammar
accepts the instance's canonical text (constrain.schema.canonical_json): exit 0 accepted, 1
rejected, 2 bad input or a refused schema (one stderr line naming keyword and JSON pointer).
"""

from __future__ import annotations

from pathlib import Path

from inferlab.cli.common import examples_epilog, print_json
from inferlab.constrain.dfa import DEFAULT_MAX_STATES
from inferlab.constrain.schema import canonical_json
from inferlab.constrain.stack import call_edges, compile_machine
from inferlab.errors import InferlabError
from inferlab.jsonfile import read_json, read_json_schema

NAME = "schema"
HELP = "compile a JSON schema to the stack grammar and show it, or check an instance against it"
EXAMPLES = (
    "inferlab schema compile schema.json",
    "inferlab schema check schema.json instance.json --json",
)


def add_arguments(p):
    sub = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    c = _action(sub, "compile", "print automata, states, stack use and narrowings",
                "inferlab schema compile schema.json", "inferlab schema compile schema.json --json")
    k = _action(sub, "check", "does the compiled grammar accept the instance's canonical text? "
                "(exit 0 accepted, 1 rejected, 2 bad input or refused)",
                "inferlab schema check schema.json instance.json",
                "inferlab schema check schema.json instance.json --whitespace flexible --json")
    c.add_argument("schema", type=Path, help="the JSON Schema file")
    k.add_argument("schema", type=Path, help="the JSON Schema file")
    k.add_argument("instance", type=Path, help="the JSON instance to check")
    for q in (c, k):
        q.add_argument("--whitespace", choices=("compact", "flexible"), default="compact",
                       help="the whitespace the grammar allows between tokens (default compact)")
        q.add_argument("--no-extra-keys", dest="extra_keys", action="store_false",
                       help="forbid extra keys where additionalProperties is absent, as structured-output strict "
                            "modes do (default: allowed, as JSON Schema says)")
        add_policy_arguments(q)
        q.add_argument("--json", action="store_true", help="print the answer as JSON on stdout")


def add_policy_arguments(p) -> None:
    """--format and --ref-dir: the format policy and the local registry of remote references
    (schema.compile_grammar's format and ref_dir), shared with schema-bench."""
    p.add_argument("--format", dest="format_policy", choices=("assert", "annotate"), default=None,
                   help="format policy: assert enforces every format it knows and refuses the specification's "
                        "others (the default, as for generation); annotate enforces none and lists each one "
                        "left out (a leniency)")
    p.add_argument("--ref-dir", type=Path, default=None, metavar="DIR",
                   help="local registry for $refs to other documents: DIR's JSON files stand for any "
                        "http(s) server's files by path, and for their own $id (never downloaded; without it "
                        "such a $ref is refused)")


def ref_dir_of(args) -> Path | None:
    """--ref-dir, checked to be a folder (InferlabError naming the flag)."""
    if args.ref_dir is not None and not args.ref_dir.is_dir():
        raise InferlabError(f"--ref-dir {args.ref_dir}: not a folder")
    return args.ref_dir


def _action(sub, name: str, text: str, *examples: str):
    p = sub.add_parser(name, help=text, description=text, epilog=examples_epilog(*examples))
    p.set_defaults(_prog=p.prog)  # errors name the sub-subcommand
    return p


def _compile(args):
    schema = read_json_schema(args.schema, label=f"schema {args.schema}")
    return (schema, *compile_machine(schema, max_states=DEFAULT_MAX_STATES, whitespace=args.whitespace,
                                     extra_keys=args.extra_keys, format=args.format_policy or "assert",
                                     ref_dir=ref_dir_of(args)))


def describe(compiled, machine) -> dict:
    automata = []
    for k, dfa in enumerate(machine.dfas):
        calls = sorted({callee for edges in call_edges(dfa).values() for callee, _ in edges})
        info = {"automaton": k, "states": dfa.n_states, "calls": calls, "regex_chars": len(compiled.automata[k])}
        if compiled.maps[k] is not None:  # an object's extra members, counted (min/maxProperties)
            info["map_members"] = {"min": compiled.maps[k][0], "max": compiled.maps[k][1]}
        if compiled.lengths and compiled.lengths[k] is not None:  # a pattern's string, its characters counted
            info["string_length"] = {"min": compiled.lengths[k][0], "max": compiled.lengths[k][1]}
        automata.append(info)
    return {"automata": automata, "dfa_states": machine.n_states, "uses_stack": machine.uses_stack,
            "narrowed": list(compiled.narrowed), "unenforced": list(compiled.unenforced),
            "unenforced_formats": list(compiled.unenforced_formats), "ignored": list(compiled.ignored)}


def run(args) -> int:
    schema, compiled, machine = _compile(args)
    if args.action == "compile":
        info = describe(compiled, machine)
        if args.json:
            print_json(info)
            return 0
        print(f"{len(info['automata'])} automata, {info['dfa_states']} DFA states, "
              f"{'uses the stack (calls)' if info['uses_stack'] else 'one flat DFA (no stack)'}")
        for a in info["automata"]:
            calls = ", ".join(map(str, a["calls"])) or "-"
            members = a.get("map_members")
            hi = "any" if members is None or members["max"] is None else members["max"]
            counted = "" if members is None else f", a map of {members['min']}..{hi} members"
            length = a.get("string_length")
            if length is not None:
                counted += f", a string of {length['min']}..{'any' if length['max'] is None else length['max']} characters"
            print(f"  automaton {a['automaton']}: {a['states']} states, calls {calls}{counted}")
        for n in info["narrowed"]:
            print(f"  narrowed: {n}")
        for n in info["unenforced_formats"]:
            print(f"  not enforced: {n}")
        for n in info["ignored"]:
            print(f"  ignored: {n}")
        return 0
    instance = read_json(args.instance, label=f"instance {args.instance}")
    text = canonical_json(instance, schema, extra_keys=args.extra_keys, ref_dir=args.ref_dir)
    accepted = machine.accepts(text)
    if args.json:
        print_json({"accepted": accepted, "canonical_text": text})
    else:
        print(f"{'accepted' if accepted else 'rejected'}: {text if len(text) <= 200 else text[:200] + '...'}")
    return 0 if accepted else 1
