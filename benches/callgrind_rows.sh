#!/usr/bin/env bash
# Instructions per key / message of the standard rows under callgrind, counted inside the kernel
# entry point only (hash_column for murmur3_32, fused_entries for bucket_entries), so the setup
# and the interpreter's start and exit do not blur the count; divided by benches/callgrind.py's
# 100,000 keys.   benches/callgrind_rows.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
export PYTHONHASHSEED=0
# valgrind must start the interpreter itself (a pyenv shim is a shell script): the real binary
python="$(python3 -c "import sys; print(sys.executable)")"
rows=("hash simd list" "hash simd arrow" "hash scalar list" "entries auto list shared"
      "entries auto arrow shared" "entries auto arrow per_bucket")
for row in "${rows[@]}"; do
    read -r -a args <<<"$row"
    entry=$([ "${args[0]}" = hash ] && echo "*hash_column*" || echo "*fused_entries*")
    n=$(valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$entry" \
        --callgrind-out-file="$out/cg.out" "$python" "$here/callgrind.py" "${args[@]}" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
    awk -v row="$row" -v n="$n" 'BEGIN { printf "%-32s %7.1f\n", row, n / 100000 }'
done
