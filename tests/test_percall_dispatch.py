"""Dispatcher's per-entry calls: per-consumer outboxes, the int64-column ack, membership moves."""

from __future__ import annotations

import numpy as np
import pytest

import bucketcore as bc
from bucketcore.dispatcher import Deliveries, Dispatcher

A, B, C = ("a", 1), ("b", 2), ("c", 3)


def dispatcher(n: int = 4, *members: tuple[str, int]) -> Dispatcher:
    d = Dispatcher(bc.Buckets.equal_width(n))
    for m in members:
        d.add_consumer(*m)
    return d


def test_poll_of_one_consumer_leaves_the_others_outboxes_in_order() -> None:
    d = dispatcher(4, A, B)
    stamps = [0x0001, 0xF000, 0x1000, 0xE000, 0x2000]  # buckets 0, 3, 0, 3, 0: a, b, a, b, a
    for i, h in enumerate(stamps):
        d.offer(10 + i, h)
    mine = d.poll(*A)
    assert isinstance(mine, Deliveries) and mine.entry_ids.tolist() == [10, 12, 14]
    assert mine.entry_ids.dtype == np.int64 and mine.hashes.tolist() == [1, 0x1000, 0x2000]
    assert mine.redelivered.dtype == np.bool_ and not mine.redelivered.any()
    assert len(d.poll(*A)) == 0
    rest = d.poll()
    assert list(rest) == [B] and rest[B].entry_ids.tolist() == [11, 13]
    assert d.poll() == {}


def test_poll_of_all_returns_consumers_sorted_whatever_order_they_received_in() -> None:
    d = dispatcher(4, A, B, C)
    d.offer(1, 0xF000)  # c first
    d.offer(2, 0x0001)  # then a
    d.offer(3, 0x4000)  # then b
    out = d.poll()
    assert list(out) == [A, B, C]
    assert [out[c].entry_ids.tolist() for c in out] == [[2], [3], [1]]


def test_a_crash_drops_its_unpolled_rows_and_redelivers_them_flagged() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0x0002)
    d.remove_consumer(*A, crash=True)
    out = d.poll()
    assert list(out) == [B]
    assert out[B].entry_ids.tolist() == [1, 2] and out[B].redelivered.tolist() == [True, True]


def test_ack_of_an_int64_column_and_of_other_columns_agree() -> None:
    for make in (
        lambda ids: np.asarray(ids, dtype=np.int64),
        lambda ids: list(ids),
        lambda ids: np.asarray(ids, dtype=np.int32),
        lambda ids: np.asarray(ids * 2, dtype=np.int64)[::2],  # not contiguous
    ):
        d = dispatcher(2, A)
        for i in range(6):
            d.offer(i, 0x0001 + i)
        d.poll()
        assert d.ack(*A, make([0, 2, 4])) == 3
        assert d.pending_entries == 3
        assert d.ack(*A, make([])) == 0


def test_a_failing_column_ack_changes_nothing_and_names_the_id() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0xF000)
    d.poll()
    with pytest.raises(KeyError, match="2"):
        d.ack(*A, np.array([1, 2], dtype=np.int64))
    with pytest.raises(KeyError, match="outside the entry id range"):
        d.ack(*A, np.array([1, -5], dtype=np.int64))
    with pytest.raises(ValueError, match="twice|duplicate|same id"):
        d.ack(*A, np.array([1, 1], dtype=np.int64))
    assert d.pending_entries == 2
    assert d.ack(*A, np.array([1], dtype=np.int64)) == 1


def test_a_leaving_consumer_acking_its_last_entry_by_column_is_forgotten() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.poll()
    d.remove_consumer(*A)
    assert d.leaving == (A,)
    assert d.ack(*A, np.array([1], dtype=np.int64)) == 1
    assert d.leaving == ()
    with pytest.raises(KeyError, match="not connected"):
        d.poll(*A)


def test_joins_and_leaves_among_many_consumers_report_the_moves_of_the_formula() -> None:
    n = 1000
    d = Dispatcher(bc.Buckets.equal_width(n))
    members = [(f"c{i:03d}", i) for i in range(0, 60, 2)]
    for m in members:
        d.add_consumer(*m)
    for joiner in [("c017", 17), ("a", 5), ("zz", 99)]:
        before = d.owners()
        moves = d.add_consumer(*joiner)
        after = d.owners()
        expected = [b for b in range(n) if before[b] != after[b]]
        assert [b for mv in moves for b in mv.buckets] == expected
        for mv in moves:
            assert all(before[b] == mv.old_owner and after[b] == mv.new_owner for b in mv.buckets)
    before = d.owners()
    moves = d.remove_consumer("c017", 17)
    after = d.owners()
    assert [b for mv in moves for b in mv.buckets] == [b for b in range(n) if before[b] != after[b]]
