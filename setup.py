"""Build hook, beside pyproject.toml (which holds everything else).

Provenance: a plain `pip install .` copies the package out of the checkout, so at run time git can
no longer say which commit the code is. The build writes that commit (and whether the checkout was
dirty) into the installed package as inferlab/_build.json, which measure.machine.provenance reads
where no checkout holds the code.

The native code (docs/native-engine.md: the mask engine, and the compile path's regex -> minimal
DFA) is an optional C++17 extension, one module: its bindings (constrain/_native.cpp, the one file
that touches the Python C API) and the plain C++ engines under constrain/csrc/ (every .cpp there;
its headers are the extension's `depends`, so that an edit rebuilds it and an sdist carries them).
setuptools over scikit-build-core or meson because this file already runs the build (provenance),
the extension has no dependency beyond Python's headers, and setuptools' `optional=True` is exactly
the fallback the package needs: where no C++ compiler works, the build warns and installs the
pure-Python package (masks then use the Python engine, and say so once; the compile path its Python
construction). The compiler and flags used are written beside it (_native_build.json).
INFERLAB_NATIVE_FLAGS adds compile and link flags (the sanitizer job: -fsanitize=address,undefined).
"""

import json
import os
import shlex
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "src" / "inferlab" / "constrain" / "csrc"
FLAGS = ["-std=c++17", "-O2", "-fvisibility=hidden"] + shlex.split(os.environ.get("INFERLAB_NATIVE_FLAGS", ""))


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


class BuildPyWithCommit(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install runs from the checkout: git sees it
            return
        commit = _git("rev-parse", "HEAD")
        dirty = None if commit is None else bool(_git("status", "--porcelain", "--untracked-files=no"))
        target = Path(self.build_lib) / "inferlab" / "_build.json"
        target.write_text(json.dumps({"git_commit": commit, "git_dirty": dirty}) + "\n", encoding="utf-8")


class BuildNative(build_ext):
    """build_ext that records the compiler and flags of the native engine next to it."""

    def build_extension(self, ext):
        super().build_extension(ext)  # (optional=True: a failed compile is caught and warned by setuptools)
        target = Path(self.get_ext_fullpath(ext.name)).with_name("_native_build.json")
        compiler = getattr(self.compiler, "compiler_so", None) or getattr(self.compiler, "compiler_cxx", None)
        version = _version(compiler[0]) if compiler else None
        target.write_text(json.dumps({"compiler": version, "flags": ext.extra_compile_args}) + "\n", encoding="utf-8")


    def copy_extensions_to_source(self):  # (--inplace, editable installs: the record goes beside the module)
        super().copy_extensions_to_source()
        for ext in self.extensions:
            built = Path(self.build_lib, *ext.name.split(".")[:-1], "_native_build.json")
            if built.exists():
                Path(self.get_ext_fullpath(ext.name)).with_name(built.name).write_bytes(built.read_bytes())


def _version(cc: str) -> str | None:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else cc


def _csrc(pattern: str) -> list[str]:
    """The files of csrc/ that match, as setuptools wants them: relative to the project, sorted."""
    return sorted(str(p.relative_to(ROOT)) for p in CSRC.glob(pattern))


setup(
    cmdclass={"build_py": BuildPyWithCommit, "build_ext": BuildNative},
    ext_modules=[Extension("inferlab.constrain._native", ["src/inferlab/constrain/_native.cpp", *_csrc("*.cpp")],
                           include_dirs=[str(CSRC.relative_to(ROOT))], depends=_csrc("*.hpp"), language="c++",
                           extra_compile_args=FLAGS, extra_link_args=FLAGS[3:], optional=True)],
)
