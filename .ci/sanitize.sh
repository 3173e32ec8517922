#!/usr/bin/env bash
# The native extension, the mask engine and the compile path's C++ (the regex parser, NFA, DFA),
# under AddressSanitizer and UBSan (a slow CI step; runs alone too): the
# extension is built in place in a copy of src/ with the sanitizers, then the differential,
# fuzz and malformed-table tests run against it. A Python host is not built with ASan, so its
# runtime is preloaded; leak checks are off (the interpreter's own allocations at exit).
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r src setup.py pyproject.toml README.md "$work/"
rm -f "$work"/src/inferlab/constrain/_native.*.so  # (a copied .so newer than its sources would not be rebuilt)
(cd "$work" && INFERLAB_NATIVE_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g" \
  python setup.py -q build_ext --inplace)
ldd "$work"/src/inferlab/constrain/_native.*.so | grep libasan >/dev/null  # (the build took the sanitizers; not grep -q, whose early exit can fail ldd with SIGPIPE under pipefail)
LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 INFERLAB_ENGINE=native \
  PYTHONPATH="$work/src" python -m pytest -q -p no:cacheprovider tests/test_native.py tests/test_caches.py \
  tests/test_dfa_native.py
