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
