"""The shared harness behind bucketcore simulate/tune/bench and benches/: workloads, timers, baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bucketcore as bc
from bucketcore.harness import best_of, best_of_rounds, key_workload, ns, tiled_layout, uuid_keys
from bucketcore.harness.timing import cpu_speeds, format_cpu_check


def test_key_sequence_numbers_each_keys_messages_in_send_order() -> None:
    w = key_workload("zipf", 5000, keys=40, zipf_s=1.0, keyless=0.1, seed=3)
    seq = w.key_sequence()
    seen: dict[int, int] = {}
    for i, k in enumerate(w.key_ids.tolist()):
        if k < 0:
            assert seq[i] == -1
        else:
            assert seq[i] == seen.get(k, 0)
            seen[k] = seq[i] + 1


def test_the_same_arguments_give_the_same_stream() -> None:
    a = key_workload("uuid", 1000, keys=100, seed=9)
    b = key_workload("uuid", 1000, keys=100, seed=9)
    c = key_workload("uuid", 1000, keys=100, seed=10)
    assert a.keys == b.keys and np.array_equal(a.key_ids, b.key_ids) and np.array_equal(a.sizes, b.sizes)
    assert not np.array_equal(a.key_ids, c.key_ids)


def test_zipf_makes_low_ranks_hot_and_keyless_share_holds() -> None:
    w = key_workload("zipf", 50_000, keys=1000, zipf_s=1.2, keyless=0.2, seed=1)
    counts = np.bincount(w.key_ids[w.key_ids >= 0], minlength=1000)
    assert counts[0] > counts[10] > counts[500]
    assert abs(w.keyless.mean() - 0.2) < 0.01
    uniform = key_workload("zipf", 50_000, keys=10, zipf_s=0.0, keyless=0.0, seed=1)
    assert np.bincount(uniform.key_ids).min() > 4000  # s = 0 is uniform


def test_column_holds_the_keys_and_none_for_keyless_messages() -> None:
    w = key_workload("uuid", 200, keys=5, keyless=0.3, seed=2)
    col = w.column()
    assert col.dtype == object and len(col) == 200
    for key_id, key in zip(w.key_ids.tolist(), col.tolist(), strict=True):
        assert key is None if key_id < 0 else key == w.keys[key_id]
    assert np.array_equal(bc.hash_keys(col).has_key, w.key_ids >= 0)
    assert list(w.column(10, 20)) == list(col[10:20])


def test_a_key_file_is_the_population(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("a\nb\nb\nb\n")
    w = key_workload("file", 4000, key_file=path, keyless=0.0, seed=1)
    assert w.keys == ["a", "b"]
    share_b = float(np.mean(w.key_ids == 1))
    assert 0.7 < share_b < 0.8  # b is three lines of four


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "uuid", "messages": 0}, "messages must be >= 1"),
        ({"kind": "uuid", "messages": 5, "keyless": 1.5}, "keyless share"),
        ({"kind": "uuid", "messages": 5, "keys": 0}, "keys must be >= 1"),
        ({"kind": "zipf", "messages": 5, "zipf_s": -1.0}, "zipf exponent"),
        ({"kind": "poisson", "messages": 5}, "workload must be"),
        ({"kind": "file", "messages": 5}, "needs key_file"),
    ],
)
def test_bad_workload_arguments_are_named(kwargs: dict, message: str) -> None:
    kind = kwargs.pop("kind")
    messages = kwargs.pop("messages")
    with pytest.raises(ValueError, match=message):
        key_workload(kind, messages, **kwargs)


def test_a_missing_or_empty_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        key_workload("file", 5, key_file=tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="holds no keys"):
        key_workload("file", 5, key_file=empty)


def test_tiled_layout_tiles_the_ring_with_equal_buckets() -> None:
    layout = tiled_layout(3, 5)
    segs = layout.active_segments
    assert [s.hash_start for s in segs] == [0, 21845, 43690] and segs[-1].hash_end == 0xFFFF
    assert all(s.buckets == bc.Buckets.equal_width(5) for s in segs)
    assert len(set(uuid_keys(100))) == 100


def test_timers_report_the_fastest_call_and_rounds_keep_order() -> None:
    calls: list[str] = []
    assert best_of(lambda: calls.append("a"), 3) >= 0 and calls == ["a"] * 3
    calls.clear()
    times = best_of_rounds([lambda: calls.append("x"), lambda: calls.append("y")], 2)
    assert calls == ["x", "y", "x", "y"] and len(times) == 2
    calls.clear()
    best_of_rounds([lambda: calls.append("x"), lambda: calls.append("y")], 2, warm=True)
    assert calls == ["x", "x", "y", "y"] * 2
    assert ns(1.0, 1000) == pytest.approx(1e6)


def test_cpu_check_gives_one_figure_per_cpu() -> None:
    speeds = cpu_speeds(lambda: sum(range(1000)), 1000, repeat=1)
    if not speeds:
        pytest.skip("threads cannot be pinned on this platform")
    assert all(v > 0 for v in speeds.values())
    assert format_cpu_check(speeds).startswith("per-CPU check")
    assert format_cpu_check({}) == ""


def test_baselines_agree_with_bucketcore() -> None:
    pytest.importorskip("mmh3", reason="the baselines need mmh3 (the bench extra)")
    from bucketcore.harness.baselines import (
        PyDispatcherAdapter,
        mmh3_hashes,
        py_route,
        reference_batches,
        run_churn,
        same_entries,
    )

    keys = uuid_keys(3000)
    assert np.array_equal(np.array(mmh3_hashes(keys), dtype=np.uint32), bc.murmur3_32(keys))
    layout = tiled_layout(2, 8)
    for policy in ("shared", "per_bucket"):
        ref = reference_batches(keys + [None, None], layout, 50, policy)
        assert same_entries(bc.bucket_entries(keys + [None, None], layout, max_messages=50, policy=policy), ref)
    buckets = bc.Buckets.equal_width(16)
    sel = bc.EntryBucketSelector(buckets)
    for i in range(5):
        sel.add_consumer(f"c{i}", i)
    hashes = np.arange(0, 0x10000, 97, dtype=np.uint16)
    assert (
        py_route(list(buckets.splits), sel.owner_slots.tolist(), hashes.tolist())
        == bc.route_entries(sel, hashes).tolist()
    )
    assert run_churn(bc.Dispatcher, 3000, churn_every=500) == run_churn(PyDispatcherAdapter, 3000, churn_every=500)


def test_best_of_result_hands_back_the_last_result_and_run_for_numbers_the_calls() -> None:
    from bucketcore.harness.timing import Stopwatch, best_of_result, run_for

    results = iter(range(3))
    seconds, last = best_of_result(lambda: next(results), 3)
    assert last == 2 and seconds >= 0
    with pytest.raises(ValueError, match="repeat"):
        best_of_result(lambda: None, 0)
    seen: list[int] = []
    calls, elapsed = run_for(seen.append, 0.0, start=5)
    assert calls == 1 and seen == [5] and elapsed >= 0  # at least one call, numbered from start
    with Stopwatch() as sw:
        sum(range(1000))
    assert sw.seconds > 0


def test_loop_baselines_agree_with_bucketcore() -> None:
    from bucketcore.harness.baselines import bisect_all, py_fits, python_route
    from bucketcore.harness.workloads import prehashed_keys, stamped_entries, uniform_hashes

    hashes = uniform_hashes(3000)
    buckets = bc.Buckets.equal_width(16)
    assert bisect_all(list(buckets.splits), hashes.tolist()) == buckets.bucket_of(hashes).tolist()
    entries = stamped_entries(3000)
    assert np.array_equal(entries.hash_min, hashes)  # the same first draw
    fits = py_fits(list(buckets.splits), entries.hash_min.tolist(), entries.hash_max.tolist())
    assert fits == bc.fits_one_bucket(buckets, entries.hash_min, entries.hash_max).tolist()
    assert not all(fits) and any(fits)
    kh = prehashed_keys(3000, keyless=0.1)
    assert 0 < int((~kh.has_key).sum()) < 3000
    for layout in (tiled_layout(16), tiled_layout(16, legacy=True)):
        routed = python_route(layout, kh.raw.tolist(), kh.segment_hash.tolist(), kh.has_key.tolist())
        assert routed == layout.route(kh).tolist()


def test_workloads_of_the_wire_store_and_capsule_rows() -> None:
    from bucketcore.harness.workloads import CapsuleOnly, payload_entries, wire_batches

    entries, keys = wire_batches(500, payload=10, per_entry=8)
    assert sum(e.count for e in entries) == 500 and all(e.count <= 8 for e in entries)
    assert [len(k) for k in keys] == [e.count for e in entries]
    assert keys[0][0] == f"key-{int(entries[0].message_indices[0]) % 10000}"
    stored = payload_entries(np.random.default_rng(1), 20, size=64)
    assert len(stored) == 20 and all(len(e.payload) == 64 and e.hash_max - e.hash_min == 200 for e in stored)
    pa = pytest.importorskip("pyarrow")
    keys_ = uuid_keys(100)
    capsule = CapsuleOnly(pa.chunked_array([pa.array(keys_)]))
    assert not hasattr(capsule, "to_pylist")
    assert np.array_equal(bc.hash_keys(capsule).raw, bc.murmur3_32(keys_))


def test_protobuf_baseline_writes_bucketcores_bytes() -> None:
    pytest.importorskip("google.protobuf", reason="protobuf builds the wire baseline")
    pytest.importorskip("google_crc32c", reason="google-crc32c checksums the wire baseline")
    from bucketcore import wire
    from bucketcore.harness.pulsar_protobuf import protobuf_encode, protobuf_stamps
    from bucketcore.harness.workloads import wire_batches

    entries, keys = wire_batches(2000)
    encoded = wire.encode_entries(entries, producer_name="p", publish_time=1_700_000_000_000, keys=keys)
    assert protobuf_encode(entries, keys, "p", 1_700_000_000_000) == encoded.buffer
    lo, hi = protobuf_stamps(encoded.buffer, encoded.offsets)
    stamps = wire.read_stamps(encoded)
    assert lo == stamps.hash_min.tolist() and hi == stamps.hash_max.tolist()


def test_naive_log_reads_back_what_it_appended(tmp_path: Path) -> None:
    from bucketcore.harness.baselines import NaiveLog
    from bucketcore.harness.workloads import payload_entries

    entries = payload_entries(np.random.default_rng(2), 30, size=16)
    log = NaiveLog(str(tmp_path / "naive.sqlite3"))
    for e in entries[:10]:
        log.append(e)
    log.fill(entries[10:])
    stamps = log.read_stamps()
    assert stamps[:, 0].tolist() == list(range(30))
    assert stamps[:, 1].tolist() == [e.hash_min for e in entries]
    assert log.read_all() == 30 * 16
    log.close()


def test_callgrind_totals_are_read_by_event_name(tmp_path: Path) -> None:
    from bucketcore.harness.callgrind import totals

    out = tmp_path / "cg.out"
    out.write_text("version: 1\nevents: Ir D1mr D1mw\nfn=x\n0 5 1\ntotals: 1234 7\n")
    assert totals(str(out)) == {"Ir": 1234, "D1mr": 7}  # trailing zero counts are left out
    (tmp_path / "empty.out").write_text("version: 1\n")
    assert totals(str(tmp_path / "empty.out")) == {}


def test_per_call_rows_run_and_the_dispatcher_row_agrees_with_its_baseline() -> None:
    pytest.importorskip("mmh3", reason="the baselines need mmh3 (the bench extra)")
    from bucketcore.harness import percall

    assert percall.dispatch_agrees(256, 16, 600)
    for row in ("consumer", "dispatch256", "add", "add10", "mmh3", "many100", "entries10", "entries100@2x8"):
        run, base = percall.make(row)
        counter = [0]
        percall.timed_calls(run, counter, 3)()
        assert counter == [3]
        if base is not None:
            base(3, 3)
    assert percall.messages_per_call("entries100@2x8") == 100 and percall.messages_per_call("add") == 1
    assert percall.calls_for("many65536@4x16", 20000) == 30
    with pytest.raises(ValueError, match="unknown row"):
        percall.make("nope")
