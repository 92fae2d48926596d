"""Build the compiled kernels of bucketcore: one extension per ``src/_bucketcore/*.pyx``.

Environment switches (all optional):

``BUCKETCORE_SANITIZE``
    A comma-separated list of sanitizers (``address``, ``undefined``, ``thread``,
    ``fuzzer-no-link``) to build the kernels with, for testing only: they are compiled with
    ``-O1 -g -fno-omit-frame-pointer -fsanitize=<list>`` (and ``-fno-sanitize-recover=undefined``
    with ``undefined``, so a report fails the run) by the compiler ``CC`` names (gcc or clang;
    ``fuzzer-no-link`` needs clang). See docs/hardening.md for running the tests under them.
``BUCKETCORE_DEBUG_SYMBOLS``
    ``1`` keeps debug info (``-g``) in a normal build, for profiling and debugging. Without it the
    kernels are built with ``-g0`` (a wheel without debug info is a sixth of the size; the symbol
    table stays, so callgrind and perf still name every function). Sanitizer builds always keep it.
``BUCKETCORE_EXTENSIONS``
    Development aid: ``_hashing,_layout`` builds only those kernels.

The kernels are translated by Cython and compiled one job per core (``-j N`` overrides the count).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import sysconfig
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext

# The sanitizers BUCKETCORE_SANITIZE may name, each passed to -fsanitize= as spelled.
SANITIZERS = ("address", "undefined", "thread", "fuzzer-no-link")
# ThreadSanitizer keeps its own shadow memory: it cannot share a process with AddressSanitizer.
INCOMPATIBLE = (("address", "thread"),)


def sanitizers_from_env(value: str) -> list[str]:
    """The sanitizer names of ``BUCKETCORE_SANITIZE``, validated (empty: no sanitizer).

    Raises
    ------
    SystemExit
        Naming the unknown or empty entry, or the pair of sanitizers that cannot be combined.
    """
    if not value.strip():
        return []
    names = [name.strip() for name in value.split(",")]
    for index, name in enumerate(names):
        if not name:
            raise SystemExit(f"BUCKETCORE_SANITIZE={value!r}: entry {index} is empty")
        if name not in SANITIZERS:
            raise SystemExit(
                f"BUCKETCORE_SANITIZE={value!r}: unknown sanitizer {name!r} (known: {', '.join(SANITIZERS)})"
            )
    for first, second in INCOMPATIBLE:
        if first in names and second in names:
            raise SystemExit(f"BUCKETCORE_SANITIZE={value!r}: {first} and {second} cannot be combined")
    return list(dict.fromkeys(names))  # each once, in the order given


def compiler_command() -> list[str]:
    """The C compiler the build uses: ``CC`` if set, else the one Python was built with."""
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def is_clang(command: list[str]) -> bool:
    """Whether ``command`` runs clang (asked from the compiler itself: ``cc`` may be either)."""
    try:
        banner = subprocess.run(command + ["--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"BUCKETCORE_SANITIZE: cannot run the C compiler {shlex.join(command)!r}: {exc}") from exc
    return "clang" in banner


def accepts(command: list[str], flag: str) -> bool:
    """Whether the compiler ``command`` compiles C with ``flag`` (no error, no warning)."""
    try:
        result = subprocess.run(
            command + ["-Werror", flag, "-x", "c", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            check=False,
        )
    except OSError:
        return False
    return result.returncode == 0


# gcc on x86-64 clears a struct of 96 bytes or more (Cython's object constructors clear the whole
# object: an emitted Entry is 176 bytes) with `rep stos`, whose start-up costs more than the
# clearing on current CPUs; this strategy clears up to 256 bytes with a loop of vector stores and
# calls the C library's memset above that. Other compilers and targets reject the flag and keep
# their own choice.
MEMSET_STRATEGY = "-mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign"

sanitize = sanitizers_from_env(os.environ.get("BUCKETCORE_SANITIZE", ""))
if sanitize and sys.platform == "win32":
    raise SystemExit("BUCKETCORE_SANITIZE needs gcc or clang; it is not supported on Windows")
if "fuzzer-no-link" in sanitize and not is_clang(compiler_command()):
    raise SystemExit(
        f"BUCKETCORE_SANITIZE: fuzzer-no-link needs clang, but CC runs {shlex.join(compiler_command())!r} "
        "(e.g. CC=clang-16)"
    )

if sys.platform == "win32":
    compile_args = ["/O2"]
    link_args: list[str] = []
elif sanitize:
    # -O1: fast enough for the whole suite, and no -O3 transformations hiding a read or a race;
    # frame pointers and -g: whole, symbolised stacks in every report.
    flag = "-fsanitize=" + ",".join(sanitize)
    compile_args = ["-O1", "-g", "-fno-omit-frame-pointer", flag, "-fno-strict-aliasing", "-Wno-unused-function"]
    if "undefined" in sanitize:
        compile_args.append("-fno-sanitize-recover=undefined")  # a UBSan report ends the process
        # Cython's vectorcall constructors add 0 to a NULL argument pointer, which clang's UBSan
        # stops on; its other constructor path is equivalent
        compile_args.append("-DCYTHON_VECTORCALL_TPNEW=0")
    link_args = [flag]
else:
    compile_args = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]
    # the interpreter's CFLAGS carry -g; a later -g0 drops the debug info it would add
    if os.environ.get("BUCKETCORE_DEBUG_SYMBOLS", "") not in ("", "0"):
        compile_args.append("-g")
    else:
        compile_args.append("-g0")
    if accepts(compiler_command(), MEMSET_STRATEGY):
        compile_args.append(MEMSET_STRATEGY)
    link_args = []

# The kernels that run correctly without the GIL, declared so through their Py_mod_gil slot
# (Cython's CYTHON_FREETHREADING_COMPATIBLE; a kernel left out would declare that it needs the GIL,
# and a free-threaded interpreter would turn the GIL back on when importing it). Every kernel is,
# so `import bucketcore` keeps the GIL off. Audited (docs/hardening.md has the long form):
#   _status    an IntEnum built at import; no other state.
#   _routing   a Router validates its tables in __cinit__ and only reads them afterwards.
#   _layout    functions over buffers with the GIL released throughout, outputs passed in by the
#              caller; the only module state is a constant.
#   _consumer  SegmentTrack methods run in a critical section on the track, over exact ints only;
#              callbacks run outside every section.
#   _wire      entries' lists read from tuples, property dicts from copies, buffers through exports.
#   _keycolumns list chunks taken (INCREF only) in the list's critical section, every object item
#              held while read, pinned object columns read from a tuple of held items.
#   _hashing   hashes what _keycolumns describes; the path knob atomic; the public functions' and
#              short_then objects' paths are set when made and never changed.
#   _pipeline  per-call stages; object columns pinned as held tuples (_keycolumns), counts atomic.
#   _arrow     capsules moved out in their critical sections; imported structs never change; the
#              dictionary-hash caches only gain entries.
#   _entry_routing  functions over buffers with the GIL released; no state.
#   _selector  a SelectorCore's table, owner slots and members read and replaced together in a
#              critical section on it.
#   _dispatcher  every method on a DispatchCore's state runs in a critical section on it.
#   _entry     Entry fields in the entry's critical section (its lists and arrays made once).
#   _batcher   a PyMutex held for a whole call and for reading its state; bytearray/memoryview
#              keys read through exports.
#   _grouping  stream states are per call, or taken from a plan's list by one call at a time.
#   _producer  the same; keys read through _keycolumns' KeyColumn.
FREE_THREADING_COMPATIBLE = frozenset(
    {
        "_status",
        "_routing",
        "_layout",
        "_consumer",
        "_wire",
        "_keycolumns",
        "_hashing",
        "_pipeline",
        "_arrow",
        "_entry_routing",
        "_selector",
        "_dispatcher",
        "_entry",
        "_batcher",
        "_grouping",
        "_producer",
    }
)

FLAVOUR = json.dumps(
    {
        "sanitize": sanitize,
        "compile_args": compile_args,
        "link_args": link_args,
        "free_threading": sorted(FREE_THREADING_COMPATIBLE),
    }
)


CYTHON_OPTIONS = {
    "language_level": 3,
    "compiler_directives": {
        "boundscheck": False,
        "wraparound": False,
        "cdivision": True,
        "initializedcheck": False,
        "embedsignature": True,
    },
}


def translate_in_parallel(extensions: list[Extension]) -> None:
    """Translate the kernels to C in one forked process per core, where the platform forks safely
    (Linux): each process translates every ``jobs``-th kernel (Cython skips what is up to date).

    cythonize's own ``nthreads`` hands its work to a process pool, which pickles its functions by
    name (this file runs as no importable module under a build backend) and, from Python 3.14,
    re-imports the running script in each worker; a fork does neither. Elsewhere build_ext's
    cythonize call translates the kernels one after the other.
    """
    jobs = min(os.cpu_count() or 1, len(extensions))
    if jobs < 2 or not sys.platform.startswith("linux"):
        return
    fork = multiprocessing.get_context("fork")
    workers = [
        fork.Process(target=cythonize, args=(extensions[first::jobs],), kwargs={"quiet": True, **CYTHON_OPTIONS})
        for first in range(jobs)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    if failed:
        raise SystemExit(f"Cython could not translate the kernels (see its messages above; exit codes {failed})")


class build_ext(_build_ext):
    """``build_ext`` that translates the kernels with Cython when it runs (so an sdist, which
    ships the ``.pyx`` sources, is made without translating anything), compiles one job per core,
    and recompiles a kernel whose last build had another flavour (sanitizers, flags): setuptools
    compares timestamps only, so an in-place build would otherwise keep the previous flavour's
    objects and libraries (a sanitized kernel in a normal build, or the reverse). The flavour each
    kernel was last built with is kept in the build directory."""

    def initialize_options(self) -> None:
        super().initialize_options()
        self.parallel = os.cpu_count() or 1  # one compile job per core unless -j says otherwise

    def run(self) -> None:
        translate_in_parallel(self.extensions)
        # cythonize returns new Extension objects; setuptools has already prepared these ones
        translated = {ext.name: ext for ext in cythonize(self.extensions, **CYTHON_OPTIONS)}
        for ext in self.extensions:
            ext.sources, ext.depends = translated[ext.name].sources, translated[ext.name].depends
        super().run()

    def build_extension(self, ext: Extension) -> None:
        stamp_path = os.path.join(self.build_temp, ext.name + ".flavour.json")
        try:
            with open(stamp_path, encoding="utf-8") as stamp:
                changed = stamp.read() != FLAVOUR
        except OSError:
            changed = True
        forced = self.force
        self.force = forced or changed
        try:
            super().build_extension(ext)
        finally:
            self.force = forced
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp_path, "w", encoding="utf-8") as stamp:
            stamp.write(FLAVOUR)


# Development aid: BUCKETCORE_EXTENSIONS=_hashing,_layout builds only those kernels in place.
only = {name for name in os.environ.get("BUCKETCORE_EXTENSIONS", "").split(",") if name}


def kernel(path: str) -> Extension:
    """The extension of one ``.pyx`` kernel."""
    name = os.path.splitext(os.path.basename(path))[0]
    return Extension(
        "_bucketcore." + name,
        [path],
        include_dirs=["src/_bucketcore", np.get_include()],
        define_macros=[
            ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
            ("CYTHON_FREETHREADING_COMPATIBLE", "1" if name in FREE_THREADING_COMPATIBLE else "0"),
        ],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )


extensions = [
    kernel(path)
    for path in sorted(glob(os.path.join("src", "_bucketcore", "*.pyx")))
    if not only or os.path.splitext(os.path.basename(path))[0] in only
]

setup(ext_modules=extensions, cmdclass={"build_ext": build_ext})
