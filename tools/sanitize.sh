#!/usr/bin/env bash
# Runs the test suite against kernels built with sanitizers; exits non-zero on any failing test
# and on any sanitizer report (from the test process or any child process it starts).
#
#   tools/sanitize.sh [--thread] [--keep] [pytest arguments...]
#
# Default: AddressSanitizer + UndefinedBehaviorSanitizer (leak detection on), the whole suite.
# --thread: ThreadSanitizer, over the thread tests (tests/scaleout/: the stress, worker-pool and
#           free-threading tests) unless pytest arguments name tests.
# --keep:   keep the private build directory (its path is printed) instead of removing it.
# --reuse=DIR: run again in DIR, a directory an earlier --keep run built (no copy, no build).
#
# The tree (tracked and untracked-but-not-ignored files, uncommitted edits included) is copied to
# a private directory and built there with BUCKETCORE_SANITIZE (setup.py), so nothing in the
# checkout is touched. The interpreter is $PYTHON (default: the python3 on PATH); the compiler is
# $CC (default: the one Python was built with; gcc or clang). Python is not built with the
# sanitizers, so their runtime is preloaded (LD_PRELOAD) and PYTHONMALLOC=malloc sends every
# Python allocation through it. Suppressions: tools/sanitizers/*.supp, each justified there.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

mode=address
keep=0
reuse=
args=()
for arg in "$@"; do
    case "$arg" in
        --thread) mode=thread ;;
        --keep) keep=1 ;;
        --reuse=*) reuse="${arg#--reuse=}" ;;
        *) args+=("$arg") ;;
    esac
done

# The interpreter itself, not a launcher (pyenv's shim is a shell script): children the tests
# start through sys.executable are then the same binary.
python="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
cc="${CC:-$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("CC") or "cc")')}"
read -r -a cc_cmd <<<"$cc"

runtime_of() { # the shared runtime library $1 of the compiler, or a clear failure
    local path
    path="$("${cc_cmd[@]}" -print-file-name="$1")"
    if [ ! -e "$path" ]; then
        echo "sanitize.sh: $cc has no $1 (install the compiler's sanitizer runtime)" >&2
        exit 2
    fi
    readlink -f "$path"
}

clang=0
if "${cc_cmd[@]}" --version 2>/dev/null | grep -q clang; then clang=1; fi
if [ "$mode" = address ]; then
    sanitize=address,undefined
    if [ "$clang" = 1 ]; then
        # clang's shared ASan runtime carries UBSan's too
        preload="$(runtime_of "libclang_rt.asan-$(uname -m).so")"
    else
        preload="$(runtime_of libasan.so):$(runtime_of libubsan.so)"
    fi
else
    sanitize=thread
    if [ "$clang" = 1 ]; then
        echo "sanitize.sh: --thread needs gcc's shared libtsan (clang links TSan statically into executables only)" >&2
        exit 2
    fi
    preload="$(runtime_of libtsan.so)"
    if [ "${#args[@]}" = 0 ]; then
        args=(tests/scaleout/test_threads_under_stress_lose_nothing.py
            tests/scaleout/test_the_worker_pool_runs_each_call_once.py
            tests/scaleout/test_kernels_run_without_the_gil.py)
    fi
fi

if [ -n "$reuse" ]; then
    work="$(cd "$reuse" && pwd)"
    if [ "$(cat "$work/flavour" 2>/dev/null)" != "$sanitize" ]; then
        echo "sanitize.sh: $work holds no $sanitize build (made by --keep)" >&2
        exit 2
    fi
    rm -rf "$work/reports" "$work/bin" "$work/pg"
    mkdir "$work/reports" "$work/bin"
    chmod 777 "$work/reports"
else
    work="$(mktemp -d /tmp/bucketcore-sanitize.XXXXXX)"
    chmod 755 "$work" # the PostgreSQL tests run the server's tools as the postgres user when root
    if [ "$keep" = 1 ]; then
        echo "sanitize.sh: private build in $work (kept)"
    else
        trap 'rm -rf "$work"' EXIT
    fi
    mkdir "$work/src" "$work/reports" "$work/bin"
    chmod 777 "$work/reports" # reports of processes running as the postgres user land here too
    git -C "$repo" ls-files -z --cached --others --exclude-standard |
        tar -C "$repo" -c --null -T - --ignore-failed-read 2>/dev/null | tar -x -C "$work/src"

    echo "sanitize.sh: building with BUCKETCORE_SANITIZE=$sanitize (CC=$cc)"
    start=$(date +%s)
    (cd "$work/src" && CC="$cc" BUCKETCORE_SANITIZE="$sanitize" nice -n 10 "$python" setup.py build_ext --inplace -q)
    echo "sanitize.sh: built in $(($(date +%s) - start)) s"
    echo "$sanitize" >"$work/flavour"
fi

# Only Python processes get the sanitizer runtime. The PostgreSQL tests start a server with
# initdb/pg_ctl (through runuser when root): those uninstrumented programs would report their own
# leaks, so they run through wrappers that drop LD_PRELOAD (pg_fixture takes BUCKETCORE_PG_BINDIR
# and finds runuser on the PATH first).
pg_bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -n 1 || true)"
if [ -z "$pg_bindir" ] && command -v initdb >/dev/null; then pg_bindir="$(dirname "$(command -v initdb)")"; fi
if [ -n "$pg_bindir" ]; then
    mkdir "$work/pg"
    for tool in initdb pg_ctl; do
        printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s/%s "$@"\n' "$pg_bindir" "$tool" >"$work/pg/$tool"
    done
    export BUCKETCORE_PG_BINDIR="$work/pg"
fi
runuser="$(PATH="$PATH:/usr/sbin:/sbin" command -v runuser || true)"
if [ -n "$runuser" ]; then
    printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "$runuser" >"$work/bin/runuser"
fi
chmod -R a+rX "$work/bin" "$work/pg" 2>/dev/null || true
chmod a+x "$work"/bin/* "$work"/pg/* 2>/dev/null || true

supp="$repo/tools/sanitizers"
common="log_path=$work/reports/report:log_exe_name=1:print_summary=1"
export PYTHONMALLOC=malloc
export PYTHONPATH="$work/src/src${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$work/bin:$PATH"
export PYTHONDONTWRITEBYTECODE=1
if [ "$mode" = address ]; then
    # allocator_may_return_null: an impossible allocation is a MemoryError, as without ASan (the
    # tests of huge inputs expect one), not an abort. detect_leaks: at each process's exit.
    # exitcode=0: a process keeps its own exit status after a report (the report file is what
    # counts, below), so a program that is not ours, such as pyenv's bash shims the console-script
    # tests run, is not failed by the leaks of bash itself.
    #
    # intercept_tls_get_addr=0, only for a runtime that still guesses where a thread's dynamic TLS
    # block starts (gcc 12's libasan, clang before 17: the string tested below is the log line of
    # that guess). glibc 2.25 and later mallocs the TLS block of a module loaded with dlopen (the
    # atheris/libFuzzer extension, for one); when that block lands 16 bytes past a page boundary,
    # the runtime takes the 16 bytes before it, which are ASan's own chunk header,
    # for a "glibc 2.19" TLS header {size, start}, records a range starting at a small number (the
    # chunk's allocation-stack id, e.g. 0x56a9) and, at the next leak check, scans it: its helper
    # process dies ("Tracer caught signal 11: addr=0x56b0 ... LeakSanitizer has encountered a fatal
    # error") in a process whose heap happens to be laid out that way. Seen with verbosity=2:
    #   __tls_get_addr: ... => 0x6020003e5010; tls_beg: 0x6020003e5010
    #   __tls_get_addr: glibc >=2.19 suspected; tls={0x56a9 0x1000001102}
    #   Tracer caught signal 11: addr=0x56b0 ...
    # The flag turns that tracking off and nothing else: the TLS block is still a heap chunk that
    # glibc's loader allocated, and LeakSanitizer treats every chunk the loader allocated as
    # reachable and scans it (use_ld_allocations), so a pointer kept only in a TLS variable is not
    # reported as a leak. LLVM 17 replaced the guess with a lookup in the allocator: a runtime built
    # from it has no such string and gets no such flag.
    tls=
    if grep -q -a -F 'glibc >=2.19 suspected' "${preload%%:*}"; then tls=":intercept_tls_get_addr=0"; fi
    export ASAN_OPTIONS="$common:detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:strict_init_order=1:exitcode=0$tls"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="$common:print_stacktrace=1:halt_on_error=1"
else
    export TSAN_OPTIONS="$common:halt_on_error=0:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
    # everything runs several times slower: the thread tests stretch their loops, watchdogs and waits
    export BUCKETCORE_TEST_TIME_SCALE="${BUCKETCORE_TEST_TIME_SCALE:-10}"
fi

cd "$work/src"
echo "sanitize.sh: pytest ${args[*]:-(whole suite)} under $sanitize"
start=$(date +%s)
status=0
LD_PRELOAD="$preload" nice -n 10 "$python" -m pytest -q -p no:cacheprovider "${args[@]}" || status=$?
echo "sanitize.sh: tests ran in $(($(date +%s) - start)) s (pytest exit $status)"

# Reports name their program (log_exe_name). Python processes are the ones that load the kernels;
# a program the tests or their libraries start (a shell, coreutils) inherits the preloaded
# runtime and may report its own leaks, which are shown but not counted.
counted=0
for r in "$work"/reports/report*; do
    [ -e "$r" ] || continue
    exe="$(basename "$r")"
    exe="${exe#report.}"
    exe="${exe%.*}"
    case "$exe" in
        python*)
            counted=$((counted + 1))
            echo "=== sanitizer report: $r" >&2
            cat "$r" >&2
            ;;
        *) echo "sanitize.sh: not counted (a report of $exe, not a Python process): $(grep -m1 ERROR "$r")" >&2 ;;
    esac
done
if [ "$counted" -gt 0 ]; then
    echo "sanitize.sh: $counted sanitizer report(s) from Python processes" >&2
    [ "$status" = 0 ] && status=3
else
    echo "sanitize.sh: 0 sanitizer reports from Python processes"
fi
exit "$status"
