#!/usr/bin/env bash
# Instructions per key / message of the standard rows under callgrind: the callgrind group of
# the bench runner (benches/callgrind.py says how they are counted).   benches/callgrind_rows.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/compare.py" callgrind "$@"
