"""What the kernels declare to a free-threaded CPython (3.13t and later) through Py_mod_gil, and
every kernel hammered from many threads at once.

Every kernel is audited as correct without the GIL and declares so (docs/hardening.md says why
for each), so importing bucketcore keeps the GIL off. The declaration tests run only on a
free-threaded interpreter (CI's free-threaded job). The hammer tests run everywhere, each in a
child process that imports only bucketcore, its kernels, numpy and the suite's own helpers, so
that on a free-threaded interpreter the child really runs without the GIL (it checks so); under
the GIL they check the same results with the calls interleaved at the interpreter's switches.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import _bucketcore

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
needs_free_threading = pytest.mark.skipif(
    not FREE_THREADED, reason="not a free-threaded interpreter: Py_mod_gil is only read by 3.13t and later"
)

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, above the areas
SCALE = float(os.environ.get("BUCKETCORE_TEST_TIME_SCALE", "1"))  # tools/sanitize.sh --thread: 10


def _declared_without_gil() -> set[str]:
    """The kernels setup.py builds as running without the GIL (its FREE_THREADING_COMPATIBLE set,
    read from the source, since importing setup.py would run the build)."""
    with open(os.path.join(TESTS_DIR, os.pardir, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FREE_THREADING_COMPATIBLE" for t in node.targets
        ):
            assert isinstance(node.value, ast.Call) and len(node.value.args) == 1
            return set(ast.literal_eval(node.value.args[0]))
    raise AssertionError("setup.py has no FREE_THREADING_COMPATIBLE assignment")


WITHOUT_GIL = _declared_without_gil()
KERNELS = sorted(m.name for m in pkgutil.iter_modules(_bucketcore.__path__) if m.name.startswith("_"))


def _gil_after_importing(module: str) -> bool:
    code = f"import sys, warnings; warnings.simplefilter('ignore'); import {module}; print(sys._is_gil_enabled())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


@needs_free_threading
@pytest.mark.parametrize("name", KERNELS)
def test_a_kernel_turns_the_gil_on_exactly_when_it_declares_it_needs_it(name):
    assert _gil_after_importing(f"_bucketcore.{name}") is (name not in WITHOUT_GIL)


def test_every_kernel_is_declared_correct_without_the_gil():
    assert set(KERNELS) == WITHOUT_GIL, sorted(set(KERNELS) - WITHOUT_GIL)


@needs_free_threading
def test_importing_bucketcore_keeps_the_gil_off():
    # the package imports every kernel, and every kernel declares it runs without the GIL
    assert _gil_after_importing("bucketcore") is False


# ----------------------------------------------------------------------------------------------
# the audited kernels, hammered: 8 threads share their inputs (and, for _consumer, one object)

HAMMER_CHILD = textwrap.dedent(
    """
    import gc, importlib, json, os, sys, threading, warnings
    warnings.simplefilter("error")  # a kernel that turned the GIL back on would warn
    import numpy as np

    kernel, rounds, tests_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    THREADS = 8
    if hasattr(sys, "setswitchinterval"):
        sys.setswitchinterval(1e-6)  # under the GIL: switch as often as the interpreter can

    def run_threads(work):
        failures = []
        barrier = threading.Barrier(THREADS)

        def guarded(t):
            try:
                barrier.wait()
                work(t)
            except BaseException as exc:
                failures.append(repr(exc))

        threads = [threading.Thread(target=guarded, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return failures

    def hammer_layout():
        from _bucketcore import _layout
        rng = np.random.default_rng(5)
        hashes = rng.integers(0, 1 << 16, 50_000).astype(np.uint16)
        wide = hashes.astype(np.int64)
        splits = np.unique(rng.integers(1, 1 << 16, 300)).astype(np.uint16)
        table = np.empty(1 << 16, np.uint16)
        _layout.build_table(splits, table)
        has_key = (rng.random(50_000) > 0.1).astype(np.uint8)
        starts = splits[:7].copy()
        want = np.searchsorted(splits, hashes, side="right").astype(np.int32)
        want_hist = np.bincount(hashes, minlength=1 << 16)

        def work(t):
            for r in range(rounds):
                out = np.empty(hashes.size, np.int32)
                method = (_layout.LookupMethod.METHOD_SEARCH, _layout.LookupMethod.METHOD_TABLE)[(t + r) % 2]
                assert _layout.bucket_of(splits, wide, out, table, method) == -1
                assert np.array_equal(out, want)
                own = np.empty(1 << 16, np.uint16)
                _layout.build_table(splits, own)
                assert np.array_equal(own, table)
                bins = np.zeros(1 << 16, np.int64)
                _layout.histogram(hashes, bins)
                assert np.array_equal(bins, want_hist)
                routed = np.empty(hashes.size, np.int32)
                _layout.route_keyed(starts, hashes, has_key, routed, None, 0, starts.size + 1)
                keyed = has_key.astype(bool)
                assert np.array_equal(routed[keyed], np.searchsorted(starts, hashes[keyed], side="right"))
                prefix = np.concatenate(([0], np.cumsum(want_hist)))
                assert _layout.greedy_groups(prefix, int(prefix[-1]), 1, None) == 1

        return run_threads(work)

    def hammer_routing():
        from _bucketcore import _routing
        first = np.array([0, 4, 12], np.int32)
        rotation = np.array([0, 1], np.int32)
        tables = [np.zeros(1 << 16, np.uint8), np.full(1 << 16, 7, np.uint8)]
        segment_table = np.repeat(np.array([0, 1], np.uint8), 1 << 15)

        def work(t):
            for r in range(rounds):
                router = _routing.Router(2, True, segment_table, rotation, tables, first)  # BC_ROUTE_RANGE
                assert router.mode == 2

        return run_threads(work)

    def hammer_status():
        from _bucketcore import _status

        def work(t):
            for r in range(rounds * 50):
                assert _status.bc_status(0).name == "BC_OK"
                assert _status.bc_status["BC_ERR_NOMEM"] == 1

        return run_threads(work)

    def hammer_consumer():
        from _bucketcore import _consumer

        class Ack:
            __slots__ = ("segment_id", "message_ids")

        _consumer.bind(Ack)

        class Core(_consumer.ConsumerCore):
            def _delivered_checked(self, segment_id, message_id):
                raise AssertionError(f"checked path for {segment_id}/{message_id}")

            def _acked_checked(self, segment_id, message_id):
                return []  # acked on another thread first (shared ids) or not delivered

            def _finish_drain(self, segment_id):
                return []

        core = Core()
        shared = _consumer.SegmentTrack("assigned", "subscribe")
        draining = _consumer.SegmentTrack("assigned", "subscribe")
        core._open[0] = shared
        per = 400
        problems = []
        counts = {"tracked": 0, "acked": 0, "taken": 0}
        lock = threading.Lock()  # guards the test's own counts only

        def work(t):
            tracked = acked = taken_total = 0
            for r in range(rounds):
                base = (r * THREADS + t) * per
                ids = range(base, base + per)  # each thread's ids interleave with the others' in one array
                for m in ids:
                    tracked += core.delivered(0, m)
                for m in ids:  # a redelivery: False unless another thread's take_upto untracked it
                    tracked += core.delivered(0, m)
                seen = shared.ascending()
                if seen != sorted(seen):
                    problems.append("ascending() out of order")
                taken = shared.take_upto(base + per // 2)  # may take other threads' lower ids too
                if taken != sorted(taken):
                    problems.append("take_upto out of order")
                taken_total += len(taken)
                for m in ids:
                    result = core.acked(0, m)  # [] when a take_upto untracked it first
                    if result:
                        [ack] = result
                        if ack.segment_id != 0 or ack.message_ids != (m,):
                            problems.append(f"ack of {m}: {ack.segment_id}, {ack.message_ids}")
                        acked += 1
                draining.drain_reason = "removed" if (t + r) % 2 else None
                if draining.drain_reason not in ("removed", None):
                    problems.append("drain_reason torn")
            with lock:
                counts["tracked"] += tracked
                counts["acked"] += acked
                counts["taken"] += taken_total

        failures = run_threads(work) + problems
        if len(shared) != 0 or shared.ascending():
            failures.append(f"{len(shared)} ids left tracked: {shared.ascending()[:10]}")
        if counts["tracked"] != counts["acked"] + counts["taken"]:
            failures.append(f"ids tracked and untracked do not match: {counts}")
        return failures

    def hammer_wire():
        import zlib
        from _bucketcore import _wire
        _wire.set_crc(0, zlib.crc32)  # any checksum: the threads' encodings are compared with one thread's
        _wire.set_errors(UnicodeError, ValueError)

        class Entry:
            __slots__ = ("payloads", "hash_min", "hash_max", "message_indices")

            def __init__(self, payloads, lo, hi, first):
                self.payloads = payloads
                self.hash_min, self.hash_max = lo, hi
                self.message_indices = np.arange(first, first + len(payloads), dtype=np.int64)

        def make(k):
            payloads = [bytes([k % 251]) * (1 + (k * 7 + j) % 90) for j in range(40)]
            return Entry(payloads, k * 100, k * 100 + 50, k * 40)

        entries = [make(k) for k in range(12)]
        keys = [[f"key-{k}-{j}" for j in range(40)] for k in range(12)]
        props = [[{"p": str(j)} if j % 3 else None for j in range(40)] for k in range(12)]

        def encode(ents, ks, ps, into=None):
            return _wire.encode_entries(ents, "producer", 9, ks, ps, None, 0, True, into, 0)

        want, want_offsets = encode(entries, keys, props)
        want = bytes(want)
        problems = []

        def check_decodes(buf, offsets):
            for i in range(len(offsets) - 1):
                _wire.decode_entry(memoryview(buf)[offsets[i]:offsets[i + 1]], False)

        # shared, unchanging inputs: every thread gets one thread's bytes
        def same_inputs(t):
            into = bytearray()
            for r in range(rounds):
                got, offsets = encode(entries, keys, props, into if r % 2 else None)
                if bytes(got) != want or not np.array_equal(offsets, want_offsets):
                    problems.append("an encoding differs from one thread's")
                one = memoryview(want)[want_offsets[t % 12] : want_offsets[t % 12 + 1]]
                md, messages, _ = _wire.decode_entry(one, False)
                if len(messages) != 40:
                    problems.append("a decoded entry lost messages")

        failures = run_threads(same_inputs)

        # inputs other threads change meanwhile: payload lists, property dicts, bytearray and
        # memoryview payloads, the `into` bytearray. Each call returns a well-formed encoding of
        # what it read or raises a clean error; memory is never read after it was freed.
        moving = [make(k) for k in range(6)]
        for e in moving:
            e.payloads[0] = bytearray(b"b" * 30)
            e.payloads[1] = memoryview(bytearray(b"m" * 20))
        mkeys = [[f"k{j}" for j in range(40)] for k in range(6)]
        mprops = [[{"a": "1", "b": "2"} for j in range(40)] for k in range(6)]
        shared_into = bytearray()
        stop = threading.Event()
        errors = {}

        def mutator(t):
            rng = np.random.default_rng(t)
            while not stop.is_set():
                e = moving[int(rng.integers(6))]
                j = int(rng.integers(2, 40))
                try:
                    op = int(rng.integers(7))
                    if op == 0:
                        e.payloads[j] = bytes(int(rng.integers(1, 100)))
                    elif op == 1:
                        e.payloads[0].extend(b"x")  # refused while an encoder holds it
                    elif op == 2:
                        del e.payloads[0][: max(0, len(e.payloads[0]) - 30)]
                    elif op == 3:
                        d = mprops[int(rng.integers(6))][j]
                        d[f"n{int(rng.integers(1000))}"] = "v"
                        if len(d) > 6:
                            d.clear()
                    elif op == 4:
                        mkeys[int(rng.integers(6))][j] = f"key-{int(rng.integers(10**6))}"
                    elif op == 5:
                        shared_into.extend(b"zz")  # refused while an encoder writes into it
                    else:
                        del shared_into[: len(shared_into) // 2]
                except BufferError:
                    pass

        def encoder(t):
            for r in range(rounds * 2):
                try:
                    got, offsets = encode(moving, mkeys, mprops, shared_into if r % 2 else None)
                    if not r % 2:  # (the shared bytearray may change as soon as the call returns)
                        check_decodes(got, offsets)
                except (BufferError, RuntimeError) as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1

        def both(t):
            if t < THREADS // 2:
                try:
                    encoder(t)
                finally:
                    stop.set()
            else:
                mutator(t)

        failures += run_threads(both)
        return failures + problems

    # ------------------------------------------------------------------------------------------
    # the kernels behind `import bucketcore`, driven through the package (which imports only
    # kernels declared correct without the GIL, and numpy), and through the thread tests of the
    # suite (tests/scaleout/test_threads_under_stress_lose_nothing.py,
    # tests/scaleout/test_compiled_calls_are_atomic_under_8_threads.py) where they exist

    def suite(name, area=""):
        for where in (tests_dir, os.path.join(tests_dir, area)):
            if where not in sys.path:
                sys.path.insert(0, where)
        return importlib.import_module(name)

    def guarded_call(fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
            return []
        except BaseException as exc:
            return [f"{fn.__name__}: {exc!r}"]

    def same_table(a, b):
        return a.next_round_robin == b.next_round_robin and all(
            np.array_equal(getattr(a, f), getattr(b, f))
            for f in ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes", "order"))

    def hammer_hashing():
        # a list: items replaced, the list extended, cut, cleared and refilled (the stress suite's)
        import bucketcore as bc
        stress = suite("test_threads_under_stress_lose_nothing", "scaleout")
        failures = guarded_call(stress._hash_while_mutating, stress.SHORT, resize=True)
        # one object ndarray hashed by 4 threads (one and two threads per call) while 4 others
        # replace its items. Every item any position ever holds stays alive in `base` / `other`:
        # numpy's own item store is not safe against a reader when it frees the item it replaces
        # (docs/hardening.md), and the replacers own disjoint positions (two numpy stores to one
        # position at once are not safe either).
        n = 20_000
        base = [f"key-{i}" for i in range(n)]
        other = [f"other-{i}".encode() if i % 2 else f"autre-é-{i}" for i in range(n)]
        want_base = bc.murmur3_32(base, threads=1)
        want_other = bc.murmur3_32(other, threads=1)
        arr = np.array(base, dtype=object)
        hashers = 4
        left = [hashers]
        lock = threading.Lock()
        stop = threading.Event()
        problems = []

        def check(raw, what):
            ok = (raw == want_base) | (raw == want_other)
            if raw.shape != (n,) or not ok.all():
                problems.append(f"{what}: position {int(np.argmin(ok))} holds a hash of no key it held")

        def work(t):
            if t < hashers:
                try:
                    for r in range(rounds):
                        threads = 1 + (t + r) % 2
                        check(bc.murmur3_32(arr, threads=threads), f"murmur3_32(threads={threads})")
                        kh = bc.hash_keys(arr, threads=threads)
                        check(kh.raw, f"hash_keys(threads={threads})")
                        if not kh.has_key.all():
                            problems.append("a key lost its has_key")
                finally:
                    with lock:
                        left[0] -= 1
                        if not left[0]:
                            stop.set()
            else:
                rng = np.random.default_rng(t)
                mine = np.arange(t - hashers, n, THREADS - hashers)
                while not stop.is_set():
                    for i in rng.choice(mine, 64).tolist():
                        arr[i] = other[i] if rng.random() < 0.5 else base[i]

        failures += run_threads(work) + problems
        final = list(arr)
        if not np.array_equal(bc.murmur3_32(arr, threads=2), bc.murmur3_32(final, threads=1)):
            failures.append("the array's final state hashes differently on two threads")
        return failures

    def hammer_pipeline():
        # the threaded stages, 8 calls at once on shared inputs: BlockStage (numpy U and S over
        # threads), HashStage (a list and an object array on two threads), ScanStage
        # (bucket_entries on two threads), each giving the one-thread result
        import bucketcore as bc
        rng = np.random.default_rng(3)
        n = 30_000
        keys = [f"user-{int(v)}" if v % 11 else None for v in rng.integers(0, 5000, n)]
        text = np.array([k or "" for k in keys], dtype="U")
        objects = np.array(keys, dtype=object)
        sizes = rng.integers(1, 500, n)
        layout = bc.TopicLayout(3, [bc.Segment(5, 0, 0x3FFF), bc.Segment(6, 0x4000, 0xBFFF),
                                    bc.Segment(7, 0xC000, 0xFFFF)])
        want_hashes = bc.hash_keys(keys, threads=1)
        want_text = bc.murmur3_32(text, threads=1)
        want_table = bc.bucket_entries(keys, layout, sizes=sizes, max_messages=50, threads=1)
        problems = []

        def work(t):
            for r in range(rounds):
                if not np.array_equal(bc.murmur3_32(text, threads=2 + t % 3), want_text):
                    problems.append("numpy U over threads")
                kh = bc.hash_keys(keys if (t + r) % 2 else objects, threads=2)
                if not (np.array_equal(kh.raw, want_hashes.raw) and np.array_equal(kh.has_key, want_hashes.has_key)):
                    problems.append("objects on two threads")
                table = bc.bucket_entries(keys if r % 2 else objects, layout, sizes=sizes, max_messages=50,
                                          threads=2)
                if not same_table(table, want_table):
                    problems.append("bucket_entries on two threads")

        failures = run_threads(work)
        # a list other threads change while two-thread calls read it: each call reads the items
        # its pin took (or refuses a list whose length changed), never freed memory
        moving = list(keys)
        spare = [f"spare-{i}" for i in range(n)]
        stop = threading.Event()
        errors = {"ok": 0}

        def both(t):
            if t < THREADS // 2:
                try:
                    for r in range(rounds):
                        try:
                            table = bc.bucket_entries(moving, layout, max_messages=50, threads=2)
                            # (one thread appends an item and takes it out again: a call may count it)
                            if int(table.count.sum()) not in (n, n + 1):
                                problems.append("a message was lost from a changing list")
                            bc.murmur3_32([k for k in moving if k is not None], threads=2)
                            errors["ok"] += 1
                        except RuntimeError as exc:
                            if "changed size" not in str(exc):
                                problems.append(repr(exc))
                finally:
                    stop.set()
            else:
                rng = np.random.default_rng(t)
                while not stop.is_set():
                    i = int(rng.integers(n))
                    moving[i] = spare[i] if rng.random() < 0.5 else keys[i]
                    if t == THREADS - 1 and rng.random() < 0.01:
                        moving.append("extra")
                        moving.pop()

        failures += run_threads(both) + problems
        return failures

    def hammer_arrow():
        # the Arrow capsule readers: one array's (schema, array) capsule pair made per call and
        # hashed by 8 threads at once (string, large_string, string_view, dictionary), and one
        # pair shared by them all, which exactly one thread moves out (the others are refused)
        import bucketcore as bc
        try:
            capsules = suite("arrow_producer")
        except BaseException as exc:  # e.g. pytest's Skipped without mmh3
            return {"skip": f"the suite's Arrow producer cannot be imported: {exc!r}"}
        values = [f"value-{i % 977}".encode() if i % 13 else None for i in range(5000)]
        want = bc.hash_keys(values)
        producer = capsules.Producer()

        class Column:
            def __init__(self, make):
                self.make = make

            def __arrow_c_array__(self, requested_schema=None):
                return self.make()

        def offsets_pair(fmt, wide):
            offsets, data, bits = capsules.offsets_array(values, wide=wide)
            nulls = sum(v is None for v in values)
            return producer.pair(producer.schema(fmt), producer.array(len(values), [bits, offsets, data],
                                                                       null_count=nulls))

        def view_pair():
            views, data, bits = capsules.view_array(values)
            nulls = sum(v is None for v in values)
            array = producer.array(len(values), [bits, views, data, np.array([data.size], np.int64)],
                                   null_count=nulls)
            return producer.pair(producer.schema("vz"), array)

        uniques = sorted({v for v in values if v is not None})
        index = {v: i for i, v in enumerate(uniques)}
        codes = np.array([index.get(v, 0) for v in values], np.int32)
        code_bits = np.packbits([v is not None for v in values], bitorder="little")

        def dict_pair():
            d_off, d_data, _ = capsules.offsets_array(uniques)
            dictionary = producer.array(len(uniques), [None, d_off, d_data])
            array = producer.array(len(values), [code_bits, codes], null_count=sum(v is None for v in values),
                                   dictionary=dictionary)
            return producer.pair(producer.schema("i", dictionary=producer.schema("z")), array)

        makers = [lambda: offsets_pair("z", False), lambda: offsets_pair("Z", True), view_pair, dict_pair]
        problems = []
        lock = threading.Lock()  # guards the test's ctypes producer (its bookkeeping), not bucketcore

        def fixed(pair):  # a column whose capsules are made already
            return Column(lambda: pair)

        def work_fixed(t):
            for r in range(rounds):
                with lock:
                    pair = makers[(t + r) % len(makers)]()
                got = bc.hash_keys(fixed(pair))
                if not (np.array_equal(got.raw, want.raw) and np.array_equal(got.has_key, want.has_key)):
                    problems.append(f"layout {(t + r) % len(makers)} hashed differently")

        failures = run_threads(work_fixed)
        outcomes = []
        for r in range(rounds):
            with lock:
                shared = fixed(makers[r % len(makers)]())

            def race(t):
                try:
                    got = bc.hash_keys(shared)
                    outcomes.append(("ok", np.array_equal(got.raw, want.raw)))
                except ValueError as exc:
                    outcomes.append(("refused", "consumed already" in str(exc)))

            failures += run_threads(race)
        oks = [good for kind, good in outcomes if kind == "ok"]
        if len(oks) != rounds or not all(oks) or not all(good for kind, good in outcomes):
            failures.append(f"one shared capsule pair: {len(oks)} readers of {rounds} pairs, outcomes "
                            f"{sorted(set(outcomes))}")
        del shared, outcomes
        gc.collect()
        made = THREADS * rounds + rounds  # every pair is moved out once and released once
        if producer.released["array"] != made or producer.released["schema"] != made:
            failures.append(f"{made} pairs made, releases {dict(producer.released)}")
        return failures + problems

    def hammer_dispatch():
        # the suite's threaded Dispatcher, EntryBucketSelector and StreamConsumerState tests:
        # one object shared by 8 threads with no lock around the per-call methods
        tests = suite("test_compiled_calls_are_atomic_under_8_threads", "scaleout")
        return (guarded_call(tests.test_one_dispatcher_hammered_by_8_threads_loses_and_duplicates_nothing)
                + guarded_call(tests.test_one_selector_read_by_7_threads_while_one_changes_its_members)
                + guarded_call(tests.test_one_consumer_state_hammered_by_8_threads_tracks_every_message_once))

    def hammer_batcher():
        # one EntryBucketBatcher shared by 8 threads adding, adding many and flushing (the stress
        # suite's test)
        stress = suite("test_threads_under_stress_lose_nothing", "scaleout")
        return guarded_call(stress._shared_batcher, stress.SHORT)

    def hammer_entry():
        # Entry objects read while other threads set their message indices
        import bucketcore as bc
        batcher = bc.EntryBucketBatcher(bc.Buckets.equal_width(4), max_messages=1000)
        batcher.add_many([f"k{i}" for i in range(200)], [b"p"] * 200)
        entries = batcher.flush()
        problems = []

        def work(t):
            for r in range(rounds * 20):
                for e in entries:
                    if t % 2:
                        e.message_indices = np.arange(r % 7, dtype=np.int64)
                    elif e.count != len(e.message_indices) and e.count not in range(7):
                        problems.append("count read a torn entry")
                    repr(e)

        return run_threads(work) + problems

    def hammer_entries():
        # bucket_entries from 8 threads at once on one layout (its plan and kept stream states
        # are shared): short lists (the kept-stream path), long lists, numpy U, precomputed
        # hashes and sizes, each giving the one-thread result
        import bucketcore as bc
        rng = np.random.default_rng(7)
        layout = bc.TopicLayout(3, [bc.Segment(5, 0, 0x3FFF), bc.Segment(6, 0x4000, 0xBFFF),
                                    bc.Segment(7, 0xC000, 0xFFFF)])
        inputs = []
        for n in (5, 40, 3000):
            keys = [f"k{int(v)}" if v % 7 else None for v in rng.integers(0, 900, n)]
            sizes = rng.integers(1, 300, n)
            inputs.append((keys, None))
            inputs.append((keys, sizes))
            inputs.append((np.array([k or "" for k in keys], dtype="U"), sizes))
            inputs.append((bc.hash_keys(keys), sizes))
        want = [bc.bucket_entries(k, layout, sizes=s, max_messages=20, max_bytes=4000, round_robin=1)
                for k, s in inputs]
        problems = []

        def work(t):
            for r in range(rounds):
                for i in range(len(inputs)):
                    j = (i + t + r) % len(inputs)
                    k, s = inputs[j]
                    got = bc.bucket_entries(k, layout, sizes=s, max_messages=20, max_bytes=4000, round_robin=1)
                    if not same_table(got, want[j]):
                        problems.append(f"input {j} grouped differently")

        return run_threads(work) + problems

    failures = {"_layout": hammer_layout, "_routing": hammer_routing, "_status": hammer_status,
                "_consumer": hammer_consumer, "_wire": hammer_wire, "_hashing": hammer_hashing,
                "_keycolumns": hammer_hashing, "_pipeline": hammer_pipeline, "_arrow": hammer_arrow,
                "_dispatcher": hammer_dispatch, "_selector": hammer_dispatch, "_entry_routing": hammer_dispatch,
                "_entry": hammer_entry, "_batcher": hammer_batcher, "_grouping": hammer_entries,
                "_producer": hammer_entries}[kernel]()
    if isinstance(failures, dict):  # the hammer could not run here
        print(json.dumps(failures))
        sys.exit(0)
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    print(json.dumps({"failures": failures[:5], "gil": gil}))
    """
)


@pytest.mark.parametrize("kernel", sorted(WITHOUT_GIL))
def test_an_audited_kernel_gives_the_one_thread_results_to_8_threads_at_once(kernel):
    done = subprocess.run(
        [sys.executable, "-c", HAMMER_CHILD, kernel, "20", TESTS_DIR],
        capture_output=True,
        text=True,
        timeout=300 * SCALE,
    )
    assert done.returncode == 0, f"child exited {done.returncode}\nstderr: {done.stderr[-4000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in report:
        pytest.skip(report["skip"])
    assert report["failures"] == [], report
    if FREE_THREADED:  # importing only audited kernels (and numpy) kept the GIL off
        assert report["gil"] is False, report


# The same promise under the GIL, made deterministic: Python code the encoder itself runs (an int
# subclass's comparison, while it checks a sequence id) changes the entry's lists, its property
# dict and a bytearray payload. The encoding is that of the lists as they were when the call
# reached the entry (and of each bytearray payload as it was when the call reached its message),
# and nothing is read after it was freed (tools/sanitize.sh runs this under ASan).
def test_encode_entries_reads_an_entry_as_it_was_when_python_code_it_runs_changes_it():
    import numpy as np

    from _bucketcore import _wire
    from bucketcore import wire  # noqa: F401  (installs the CRC and the error classes)

    class Entry:
        __slots__ = ("payloads", "hash_min", "hash_max", "message_indices")

    def entry(payloads: list) -> Entry:
        e = Entry()
        e.payloads, e.hash_min, e.hash_max = payloads, 10, 20
        e.message_indices = np.arange(len(payloads), dtype=np.int64)
        return e

    buffer = bytearray(b"b" * 64)
    payloads = [b"first", buffer] + [bytes([65 + j]) * 50 for j in range(30)]
    keys = [f"key-{j}" for j in range(32)]
    props = [{"p": str(j)} for j in range(32)]
    refused: list[str] = []

    class Changing(int):
        def __lt__(self, other: object) -> bool:
            if int(self) < 2:  # from message 2 on: the bytearray payload (message 1) is held by then
                return int(self) < other  # type: ignore[operator]
            payloads.clear()
            keys.clear()
            props[5].clear()
            props[5].update({f"x{k}": "y" * 100 for k in range(50)})
            try:
                buffer.extend(b"x" * 4096)  # a payload the encoder holds: refused
            except BufferError as exc:
                refused.append(str(exc))
            return int(self) < other  # type: ignore[operator]

    want_payloads = [bytes(p) for p in payloads]
    want = _wire.encode_entries(
        [entry(want_payloads)], "p", 9, [list(keys)], [[dict(d) for d in props]], [list(range(32))], 0, True
    )[0]
    sequence = [Changing(j) for j in range(32)]
    got = _wire.encode_entries([entry(payloads)], "p", 9, [keys], [props], [sequence], 0, True)[0]
    assert got == want
    assert refused, "the comparison never ran: this test no longer changes the entry mid-call"
    assert payloads == [] and keys == []


def test_encode_entries_gives_back_every_buffer_it_held_also_when_it_raises():
    import numpy as np

    from _bucketcore import _wire
    from bucketcore import wire  # noqa: F401  (installs the CRC and the error classes)

    class Entry:
        __slots__ = ("payloads", "hash_min", "hash_max", "message_indices")

    held = bytearray(b"h" * 40)
    view_of = bytearray(b"v" * 40)
    into = bytearray()
    e = Entry()
    e.payloads, e.hash_min, e.hash_max = [held, memoryview(view_of), 42], 1, 2
    e.message_indices = np.arange(3, dtype=np.int64)
    with pytest.raises(TypeError, match=r"entries\[0\]\.payloads\[2\] must be bytes, bytearray or memoryview, not int"):
        _wire.encode_entries([e], "p", 9, None, None, None, 0, True, into)
    e.payloads[2] = b"fine"
    encoded, offsets = _wire.encode_entries([e], "p", 9, None, None, None, 0, True, into)
    assert encoded is into and len(into) == offsets[-1]
    held.extend(b"x")  # neither payload nor `into` is still exported
    into.extend(b"x")
    e.payloads[1].release()
    view_of.extend(b"x")
