"""Experiment artifacts: atomic file writes, the experiment folder, the manifest, schema checks.

A run's folder is published whole or not at all: files are written into a temp sibling folder,
checked against the shipped JSON Schemas, and the folder is renamed into place. An interrupted
run leaves the previous folder (or file) as it was.

Schema validation at run time uses a small built-in checker for the subset of JSON Schema our two
schema files use (listed in _KEYWORDS), so `jsonschema` stays a test-only dependency; the tests
validate every written file with the real jsonschema library as well.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import re
import shutil
import sys
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

from inferlab.errors import InferlabError
from inferlab.measure.machine import RunCost, machine_info, provenance, versions

SCHEMA_VERSION = 1
SCHEMA_NAMES = ("results", "manifest")


# --- atomic single-file writes ---------------------------------------------------------------

def _umask() -> int:
    # The only portable way to read the umask is to set it; put it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode open() would give a new file: mkstemp's 0600 is for secrets, results are not."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode mkdir() would give a new folder (mkdtemp makes 0700)."""
    return 0o777 & ~_umask()


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write data to path via a temp file in the same folder and os.replace (atomic on POSIX).
    The file gets the mode the umask gives a new file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Interrupted (error, Ctrl-C): drop the partial temp file; the old path is untouched.
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj) -> str:
    # allow_nan=False: NaN/Infinity are not JSON; a lab must write null (asv's convention).
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def atomic_write_json(path, obj) -> Path:
    return atomic_write_text(path, dumps_json(obj))


def figure_png_bytes(fig, *, dpi: int = 120) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (pyplot figures hold memory).
    No bbox_inches="tight": plots.new_figure's constrained layout already fits labels and outside
    legends, and the tight pass draws the whole figure a second time (about a third of a save)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(fig)
    return buf.getvalue()


def save_figure(fig, path) -> Path:
    """Atomic PNG write; closes the figure."""
    return atomic_write_bytes(path, figure_png_bytes(fig))


# --- schema validation (built-in subset) -----------------------------------------------------

class SchemaMismatch(ValueError):
    """A written file does not match its schema: a bug in the lab, named by JSON pointer."""


@cache
def load_schema(schema_name: str) -> dict:
    if schema_name not in SCHEMA_NAMES:
        raise ValueError(f"schema_name must be one of {SCHEMA_NAMES}, got {schema_name!r}")
    text = resources.files("inferlab.measure").joinpath(f"schemas/{schema_name}.schema.json").read_text()
    return json.loads(text)


def _is_type(value, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "object": dict, "array": list, "boolean": bool,
                              "null": type(None)}[kind])


def _check_type(v, s, p):
    kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
    if not any(_is_type(v, k) for k in kinds):
        return f"{p or '/'}: expected {' or '.join(kinds)}, got {type(v).__name__}"


def _check_required(v, s, p):
    if isinstance(v, dict):
        missing = [k for k in s["required"] if k not in v]
        if missing:
            return f"{p or '/'}: missing required key(s) {', '.join(missing)}"


def _check_properties(v, s, p):
    if isinstance(v, dict):
        for k, sub in s["properties"].items():
            if k in v and (err := _first_error(v[k], sub, f"{p}/{k}")):
                return err


def _check_additional(v, s, p):
    if isinstance(v, dict) and s["additionalProperties"] is False:
        extra = sorted(set(v) - set(s.get("properties", {})))
        if extra:
            return f"{p or '/'}: unexpected key(s) {', '.join(extra)}"


def _check_items(v, s, p):
    if isinstance(v, list):
        for i, item in enumerate(v):
            if err := _first_error(item, s["items"], f"{p}/{i}"):
                return err


def _check_minimum(v, s, p):
    if _is_type(v, "number") and v < s["minimum"]:
        return f"{p or '/'}: {v} is below the minimum {s['minimum']}"


def _check_min_length(v, s, p):
    if isinstance(v, str) and len(v) < s["minLength"]:
        return f"{p or '/'}: string shorter than {s['minLength']}"


def _check_pattern(v, s, p):
    if isinstance(v, str) and not re.search(s["pattern"], v):
        return f"{p or '/'}: {v!r} does not match {s['pattern']!r}"


def _check_const(v, s, p):
    if not _json_equal(v, s["const"]):
        return f"{p or '/'}: expected {s['const']!r}"


def _check_enum(v, s, p):
    if not any(_json_equal(v, e) for e in s["enum"]):
        return f"{p or '/'}: {v!r} is not one of {s['enum']!r}"


def _check_not(v, s, p):
    if _first_error(v, s["not"], p) is None:
        return f"{p or '/'}: must not match {s['not']!r}"


def _check_any_of(v, s, p):
    errors = [_first_error(v, sub, p) for sub in s["anyOf"]]
    if all(errors):
        return f"{p or '/'}: matches none of anyOf ({'; '.join(errors)})"


def _json_equal(a, b) -> bool:
    # JSON equality: true != 1, unlike Python's.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


_KEYWORDS = {
    "type": _check_type, "required": _check_required, "properties": _check_properties,
    "additionalProperties": _check_additional, "items": _check_items, "minimum": _check_minimum,
    "minLength": _check_min_length, "pattern": _check_pattern, "const": _check_const,
    "enum": _check_enum, "not": _check_not, "anyOf": _check_any_of,
}
_ANNOTATIONS = {"$schema", "$id", "title", "description"}


def _first_error(value, schema: dict, pointer: str) -> str | None:
    for key in schema:
        if key not in _KEYWORDS and key not in _ANNOTATIONS:
            # Refuse rather than silently skip a keyword the checker does not implement.
            raise ValueError(f"schema keyword {key!r} at {pointer or '/'} is not supported by the built-in checker")
    for key, check in _KEYWORDS.items():
        if key in schema and (err := check(value, schema, pointer)):
            return err
    return None


def validate(obj, schema_name: str) -> None:
    """Check obj against the shipped schema ("results" | "manifest"); raise SchemaMismatch."""
    err = _first_error(obj, load_schema(schema_name), "")
    if err:
        raise SchemaMismatch(f"{schema_name}.json does not match its schema at {err}")


# --- manifest ----------------------------------------------------------------------------------

def build_manifest(*, experiment: str, seed: int, config: dict, depends_on: str | list | None,
                   results_summary: dict, threads: int | None) -> dict:
    """manifest.json in the shape of seed 001 Block F (+ BLAS library and schema_version)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment,
        "date": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "seed": seed,
        "versions": versions(),
        "depends_on": depends_on,
        "config": config,
        "hardware": machine_info(threads),
        "results_summary": results_summary,
        "provenance": provenance(),
    }


# --- the experiment folder ---------------------------------------------------------------------

def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable(out: Path, flag: str = "--out", *, given: Path | None = None) -> None:
    """Fail fast, before any measuring, when out's folder cannot be created or written; the
    message names `given` (what the user typed, when out is a folder inside it) or out.

    os.access is no answer under root, so probe: make and remove a temp folder in the nearest
    existing ancestor (the folder commit() will create things in).
    """
    shown = out if given is None else given
    anchor = _nearest_existing(Path(out).parent)
    if not anchor.is_dir():
        raise InferlabError(f"{flag} {shown}: {anchor} is not a folder")
    try:
        probe = tempfile.mkdtemp(dir=anchor, prefix=".inferlab-probe-")
        os.rmdir(probe)
    except OSError as exc:
        raise InferlabError(f"{flag} {shown}: cannot write in {anchor} ({exc.strerror or exc})") from None


def check_output_file(path, *, flag: str, force: bool) -> None:
    """Refuse, before any work, a file target that is a folder, exists without --force, or sits
    where nothing can be written."""
    path = Path(path)
    if path.is_dir():
        raise InferlabError(f"{flag} {path} is a folder; give a file name (e.g. {path / 'trace.json'})")
    if path.exists() and not force:
        raise InferlabError(f"{flag} {path} already exists; pass --force to replace it")
    if not path.absolute().parent.is_dir():
        raise InferlabError(f"{flag} {path}: folder {path.absolute().parent} does not exist")
    check_writable(path, flag)


# every folder an inferlab command writes holds one of these (an experiment's manifest, a model's
# config, `inferlab compare --out`'s compare.json)
OURS = ("manifest.json", "results.json", "config.json", "compare.json")


class ExperimentWriter:
    """Collects an experiment's files in memory, then publishes the whole folder atomically."""

    def __init__(self, out, *, force: bool):
        if not str(out).strip():
            raise InferlabError("--out: an empty path (it would be the working folder)")
        self.out = Path(out)
        self.force = force
        if self.out.exists() and force and (os.path.ismount(self.out) or self.out.resolve() == Path.cwd().resolve()):
            # --force replaces the folder by renaming it aside, which a mount point (a container's
            # volume) or the working folder refuses: say so now, not after the whole run
            raise InferlabError(f"--out {self.out} is a mount point or the working folder, which --force cannot "
                                "replace (it renames the folder aside); give a folder inside it")
        if self.out.is_dir() and force and any(self.out.iterdir()) and not any((self.out / n).is_file() for n in OURS):
            # --force deletes the folder it replaces: one that no inferlab command wrote (a home
            # folder given by mistake) is never deleted
            raise InferlabError(f"--out {self.out} holds files but none of {', '.join(OURS)}: not a folder inferlab "
                                "wrote, so --force will not delete it; give a new or an inferlab folder")
        if self.out.exists() and not force:
            raise InferlabError(f"--out {self.out} already exists; pass --force to replace it or choose another --out")
        if self.out.exists() and not self.out.is_dir():
            raise InferlabError(f"--out {self.out} exists and is not a folder")
        check_writable(self.out)
        self._files: dict[str, bytes] = {}
        self._cost = RunCost()   # the lab's wall time and peak RSS, into its manifest at commit
        # the code that runs is the checkout as it is now: a commit made during a long run must
        # not be recorded as the run's
        self._provenance = provenance()

    def _put(self, name: str, data: bytes) -> None:
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"artifact name must be a plain file name, got {name!r}")
        self._files[name] = data

    def add_bytes(self, name: str, data: bytes) -> None:
        self._put(name, bytes(data))

    def add_text(self, name: str, text: str) -> None:
        self._put(name, text.encode("utf-8"))

    def add_json(self, name: str, obj) -> None:
        self._put(name, dumps_json(obj).encode("utf-8"))

    def add_figure(self, name: str, fig) -> None:
        self._put(name, figure_png_bytes(fig))

    def _validate(self) -> None:
        for schema_name in SCHEMA_NAMES:
            data = self._files.get(f"{schema_name}.json")
            if data is not None:
                validate(json.loads(data), schema_name)

    def commit(self) -> Path:
        """Validate, write into a temp sibling folder, then rename it into place; returns out."""
        if "manifest.json" in self._files:
            manifest = json.loads(self._files["manifest.json"])
            manifest["run_cost"] = self._cost.to_json()
            if "provenance" in manifest:
                manifest["provenance"] = self._provenance
            self.add_json("manifest.json", manifest)
        self._validate()
        parent = self.out.absolute().parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{self.out.name}.tmp-"))
        try:
            os.chmod(tmp, folder_mode())
            for name, data in self._files.items():
                atomic_write_bytes(tmp / name, data)
            self._swap_in(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.out

    def _swap_in(self, tmp: Path) -> None:
        if not self.out.exists():
            os.rename(tmp, self.out)
            return
        if not self.force:
            raise InferlabError(f"--out {self.out} appeared during the run; pass --force to replace it")
        # The old folder is moved aside only now that the new one is complete, and restored if
        # the final rename fails.
        old = Path(tempfile.mkdtemp(dir=tmp.parent, prefix=f".{self.out.name}.old-"))
        os.rmdir(old)
        try:
            os.rename(self.out, old)
        except OSError as exc:  # (checked up front where it can be; a folder made immutable during the run)
            raise InferlabError(f"--out {self.out}: cannot be replaced ({exc.strerror or exc}); the old folder "
                                "is left as it was and the new results were not written") from None
        try:
            os.rename(tmp, self.out)
        except BaseException:
            os.rename(old, self.out)
            raise
        shutil.rmtree(old, ignore_errors=True)
