#!/usr/bin/env bash
# Instructions per key / message of the standard rows under callgrind: each row's total minus the
# same input's setup-only run, divided by the 100,000 keys of benches/callgrind.py.
#   benches/callgrind_rows.sh [OUTDIR]      (PYTHONHASHSEED is fixed so runs are comparable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
export PYTHONHASHSEED=0
# valgrind must start the interpreter itself (a pyenv shim is a shell script): the real binary
PYTHON="$(python3 -c "import sys; print(sys.executable)")"
total() {  # total instructions of one run of callgrind.py with the given arguments
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" "${PYTHON:-python3}" "$here/callgrind.py" "$@" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
declare -A setup
for kind in list arrow; do setup[$kind]=$(total none auto "$kind" shared); done
rows=("hash simd list" "hash simd arrow" "hash scalar list" "entries auto list shared"
      "entries auto arrow shared" "entries auto arrow per_bucket")
for row in "${rows[@]}"; do
    read -r -a args <<<"$row"
    n=$(total "${args[@]}")
    awk -v row="$row" -v n="$n" -v s="${setup[${args[2]}]}" 'BEGIN { printf "%-32s %7.1f\n", row, (n - s) / 100000 }'
done
