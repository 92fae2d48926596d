#!/usr/bin/env bash
# The sdist builds a working wheel on its own: make the sdist of the committed tree, build a wheel
# from that sdist alone in a fresh virtual environment (pip's isolated build, as a packager's),
# install it, then import bucketcore and hash keys against known Murmur3 values. Also checks the
# license is in the sdist and the wheel, and reports the wheel (tools/wheel_report.py).
#   tools/check_sdist.sh [OUTDIR]   (OUTDIR keeps the sdist and the wheel; default: a temp dir)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${1:-$work/dist}"
mkdir -p "$out"

mkdir "$work/src"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip build
"$work/venv/bin/python" -m build --sdist --outdir "$out" "$work/src"
sdist="$(ls "$out"/bucketcore-*.tar.gz)"
tar -tzf "$sdist" >"$work/sdist-files"
grep -q '^bucketcore-[^/]*/LICENSE$' "$work/sdist-files" || { echo "LICENSE missing from $sdist" >&2; exit 1; }

# the wheel from the sdist alone: nothing of the checkout is on hand
mkdir "$work/unpacked"
tar -xzf "$sdist" -C "$work/unpacked"
"$work/venv/bin/python" -m pip wheel -q --no-deps -w "$out" "$work/unpacked"/bucketcore-*
wheel="$(ls "$out"/bucketcore-*.whl)"
"$work/venv/bin/python" -m pip install -q "$wheel"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import bucketcore as bc

# Murmur3_32 (seed 0) of these keys, as the mmh3 package computes them
assert bc.murmur3_32("bucketcore") == 4189830413, bc.murmur3_32("bucketcore")
assert bc.murmur3_32(b"\xff") == 4251775245, bc.murmur3_32(b"\xff")
assert list(bc.murmur3_32(["bucketcore", b"\xff"])) == [4189830413, 4251775245]
print("the wheel built from the sdist imports and hashes:", bc.__file__)
PY
"$work/venv/bin/python" "$repo/tools/wheel_report.py" "$wheel"
