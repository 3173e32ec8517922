"""Which mask engine a run uses and how it was built, read without importing the constrain
package (a leaf: measure's manifests record it, the CLI's --version names it).

The native engine is the C++17 extension inferlab/constrain/_native*.so (setup.py builds it;
docs/native-engine.md), which also holds the compile path's regex -> minimal DFA step (dfa.py's
C++ twin); its build writes _native_build.json beside it: the compiler and flags.
INFERLAB_ENGINE=python|native selects the engine. The default is DEFAULT (native) where it is
built: its masks equal the Python engine's bit for bit, and its first walks and time to first mask
are the shorter (docs/native-engine.md); where it is not built, masks use the Python engine.
constrain.native holds the engine itself (it imports the extension; a file present that does not
import counts there as not built)."""

from __future__ import annotations

import json
import os
from pathlib import Path

ENGINES = ("python", "native")
DEFAULT = "native"
_HERE = Path(__file__).resolve().parent / "constrain"


def native_present() -> bool:
    """Is the native extension's file installed beside constrain/?"""
    return any(_HERE.glob("_native.*.so")) or any(_HERE.glob("_native.*.pyd")) or any(_HERE.glob("_native.so"))


def asked() -> str | None:
    """INFERLAB_ENGINE's engine (lower case), None where unset; ValueError where it names none."""
    name = os.environ.get("INFERLAB_ENGINE", "").strip().lower()
    if name and name not in ENGINES:
        raise ValueError(f"INFERLAB_ENGINE={name!r}: expected one of {', '.join(ENGINES)}")
    return name or None


def record(built: bool | None = None) -> dict:
    """{engine, native_built, dfa_native_built, compiler, flags}: the engine masks use (native
    where asked (or the default) and built, else python; None where INFERLAB_ENGINE is malformed),
    whether the compile's DFA step runs in C++ (same automata either way; the same extension as
    the mask engine since the two became one module, so native_built's value: the key stays for
    the results files that read it), and the native build's compiler and flags (None where not built)."""
    built = native_present() if built is None else built
    try:
        name = asked() or DEFAULT
    except ValueError:
        engine = None
    else:
        engine = "native" if name == "native" and built else "python"
    out = {"engine": engine, "native_built": built, "dfa_native_built": built,
           "compiler": None, "flags": None}
    try:
        saved = json.loads((_HERE / "_native_build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return out
    if built and isinstance(saved, dict):
        out.update({k: saved.get(k) for k in ("compiler", "flags")})
    return out
