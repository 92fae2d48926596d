#!/usr/bin/env bash
# Proves the binary wheel stands alone: build it, install it into a fresh virtual environment that
# has no Cython and no compiler on its PATH, and run the test suite against the installed wheel
# (from a copy of tests/ outside the source tree, so nothing imports from src/). It builds
# what is committed at HEAD.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Build from the committed tree (what a clean clone holds), not from uncommitted files.
mkdir "$work/src"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
python3 -m pip wheel "$work/src" --no-deps -w "$work/dist"
wheel="$(ls "$work"/dist/bucketcore-*.whl)"
case "$wheel" in *-none-any.whl) echo "not a binary wheel: $wheel" >&2; exit 1 ;; esac

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install "$wheel[test]"  # the test extra: what the suite needs

cp -r "$work/src/tests" "$work/tests"
cd "$work"
# Only the venv on PATH: no gcc/cc, no cython; CC points nowhere in case anything tried to build.
env -i HOME="$HOME" PATH="$work/venv/bin" CC=/nonexistent \
    "$work/venv/bin/python" - <<'PY'
import importlib.util, shutil, sys
assert shutil.which("gcc") is None and shutil.which("cc") is None, "a compiler is on PATH"
assert importlib.util.find_spec("Cython") is None, "Cython is importable"
import bucketcore
assert "site-packages" in bucketcore.__file__, bucketcore.__file__
print("testing the installed wheel at", bucketcore.__file__)
PY
env -i HOME="$HOME" PATH="$work/venv/bin" CC=/nonexistent \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$work/tests"
echo "wheel OK: $(basename "$wheel")"
