#!/usr/bin/env bash
# Coverage-guided fuzzing of bucketcore with atheris (docs/fuzzing.md).
#
#   tools/fuzz.sh build                      instrumented copy of the kernels (ASan + UBSan + libFuzzer
#                                            coverage, clang) in $BUCKETCORE_FUZZ_BUILD
#   tools/fuzz.sh list                       the harness names
#   tools/fuzz.sh run NAME|all [-t SECONDS] [-n RUNS] [-- LIBFUZZER-ARGS...]
#                                            run one harness (or each in turn) on its seed corpus
#   tools/fuzz.sh repro NAME FILE...         run a harness once per input file, with a Python
#                                            traceback of what went wrong (no libFuzzer)
#
# `run` uses the instrumented build when it exists (LD_PRELOAD of atheris' ASan+libFuzzer runtime),
# the ordinary build of the source tree otherwise (Python-level coverage only, no sanitizer). New
# inputs go to $BUCKETCORE_FUZZ_WORK/<harness>/corpus (the repository's seed corpus is only read),
# crash reproducers to $BUCKETCORE_FUZZ_WORK/<harness>/. Exit status: non-zero on a finding.
#
# Environment:
#   BUCKETCORE_FUZZ_BUILD  instrumented build directory (default: build/fuzz in the repository)
#   BUCKETCORE_FUZZ_WORK   corpus and artifact directory (default: build/fuzz-work)
#   CC                     the clang to build with (default: clang, else clang-16)
#   PYTHON                 the interpreter (default: python3)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUCKETCORE_FUZZ_BUILD:-$repo/build/fuzz}"
work="${BUCKETCORE_FUZZ_WORK:-$repo/build/fuzz-work}"
python="${PYTHON:-python3}"
sanitize="address,undefined,fuzzer-no-link"

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

harnesses() {
    for f in "$repo"/fuzz/fuzz_*.py; do
        basename "$f" .py | sed 's/^fuzz_//'
    done
}

find_clang() {
    if [ -n "${CC:-}" ]; then
        echo "$CC"
    elif command -v clang >/dev/null; then
        echo clang
    elif command -v clang-16 >/dev/null; then
        echo clang-16
    else
        echo "tools/fuzz.sh build: no clang on PATH (set CC): libFuzzer coverage needs clang" >&2
        exit 1
    fi
}

do_build() {
    local cc
    cc="$(find_clang)"
    mkdir -p "$build"
    # A copy of the sources: the instrumented kernels never replace the ordinary in-place build.
    rm -rf "$build/src"
    mkdir -p "$build/src"
    (cd "$repo" && tar -c --exclude='*.so' --exclude='__pycache__' --exclude='src/_bucketcore/*.c' src setup.py pyproject.toml) |
        tar -x -C "$build"
    cd "$build"
    # Cython's generated constructors (tp_new through vectorcall) add a zero offset to a NULL
    # argument array, which clang's UBSan reports as pointer overflow: the macro has Cython
    # construct objects through its older, equivalent path, so that no report is Cython's own.
    local cython_flags="-DCYTHON_VECTORCALL_TPNEW=0"
    if grep -q BUCKETCORE_SANITIZE setup.py; then
        BUCKETCORE_SANITIZE="$sanitize" CC="$cc" CFLAGS="$cython_flags" "$python" setup.py build_ext --inplace -q
    else
        # A setup.py without the sanitizer switch: the same flags through the compiler variables
        # setuptools reads, and this private copy of setup.py compiles at -O1 instead of -O3.
        sed -i 's/"-O3"/"-O1"/' setup.py
        CC="$cc" LDSHARED="$cc -shared" \
            CFLAGS="-fsanitize=$sanitize -fno-sanitize-recover=undefined -O1 -g -fno-omit-frame-pointer $cython_flags" \
            LDFLAGS="-fsanitize=$sanitize" \
            "$python" setup.py build_ext --inplace -q
    fi
    echo "instrumented build in $build/src"
}

# The interpreter environment of a run: the instrumented kernels (if built) first on sys.path,
# atheris' ASan runtime (which carries UBSan's and libFuzzer's) preloaded before anything else.
run_env() {
    local atheris_dir
    if ls "$build"/src/_bucketcore/_hashing*.so >/dev/null 2>&1; then
        atheris_dir="$("$python" -c 'import atheris; print(atheris.path())')"
        export LD_PRELOAD="$atheris_dir/asan_with_fuzzer.so"
        export PYTHONPATH="$build/src${PYTHONPATH:+:$PYTHONPATH}"
        # CPython and numpy keep allocations until exit by design: leak checking would report
        # them, not bucketcore. Python's allocator sizes requests itself, so a failed huge malloc
        # is an error return there, not a crash.
        export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:abort_on_error=1:detect_stack_use_after_return=0}"
        export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
        # str and bytes keys in blocks of their own, so a read past a key's end is caught too
        # (pymalloc packs small objects into arenas without redzones).
        export PYTHONMALLOC=malloc
        echo "instrumented: $build/src (ASan + UBSan + libFuzzer coverage)" >&2
    else
        # the source tree's in-place build if there is one, else the installed bucketcore
        if ls "$repo"/src/_bucketcore/_hashing*.so >/dev/null 2>&1; then
            export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
        fi
        echo "not instrumented: no build in $build (run tools/fuzz.sh build); Python coverage only" >&2
    fi
}

do_run() {
    local name="$1"
    shift
    local seconds="" runs="" extra=()
    while [ $# -gt 0 ]; do
        case "$1" in
        -t) seconds="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) usage ;;
        esac
    done
    local names
    if [ "$name" = all ]; then
        names="$(harnesses)"
    else
        [ -f "$repo/fuzz/fuzz_$name.py" ] || { echo "no harness fuzz/fuzz_$name.py (tools/fuzz.sh list)" >&2; exit 2; }
        names="$name"
    fi
    run_env
    local status=0 n
    for n in $names; do
        local out="$work/$n"
        mkdir -p "$out/corpus"
        local args=("-artifact_prefix=$out/" "-print_final_stats=1" "-timeout=20" "-rss_limit_mb=4096")
        [ -n "$seconds" ] && args+=("-max_total_time=$seconds")
        [ -n "$runs" ] && args+=("-runs=$runs")
        echo "== $n" >&2
        "$python" "$repo/fuzz/fuzz_$n.py" "${args[@]}" "${extra[@]}" "$out/corpus" "$repo/fuzz/corpus/$n" || status=$?
    done
    return $status
}

do_repro() {
    local name="$1"
    shift
    [ -f "$repo/fuzz/fuzz_$name.py" ] || { echo "no harness fuzz/fuzz_$name.py (tools/fuzz.sh list)" >&2; exit 2; }
    run_env
    "$python" - "$repo/fuzz" "fuzz_$name" "$@" <<'PY'
import importlib, sys
sys.path.insert(0, sys.argv[1])
harness = importlib.import_module(sys.argv[2])
for path in sys.argv[3:]:
    print(f"== {path}", file=sys.stderr)
    with open(path, "rb") as f:
        harness.test_one_input(f.read())
PY
}

main() {
    [ $# -ge 1 ] || usage
    local cmd="$1"
    shift
    case "$cmd" in
    build) do_build ;;
    list) harnesses ;;
    run) [ $# -ge 1 ] || usage; do_run "$@" ;;
    repro) [ $# -ge 2 ] || usage; do_repro "$@" ;;
    *) usage ;;
    esac
}

# One line: bash has read all of it before it runs, so editing the file meanwhile is harmless.
main "$@"; exit $?
