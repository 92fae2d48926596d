"""A Dispatcher's offer, ack and poll are the compiled core's fast path with the class's general
method behind it (``_dispatcher.fast_then``): what a caller sees of them is the general method's
(name, docstring, signature), every call shape reaches the same result either way, and they make
no reference cycle with the dispatcher."""

from __future__ import annotations

import gc
import inspect
import weakref

import numpy as np
import pytest

import bucketcore as bc
from _bucketcore import _dispatcher

BUCKETS = bc.Buckets.equal_width(8)


@pytest.mark.parametrize("name", ["offer", "ack", "poll"])
def test_the_hot_calls_show_the_general_method(name: str) -> None:
    d = bc.Dispatcher(BUCKETS)
    call, method = getattr(d, name), getattr(bc.Dispatcher, name)
    assert type(call) is type(_dispatcher.fast_then(len, len))
    assert call.__name__ == name and call.__doc__ == method.__doc__
    assert inspect.signature(call) == inspect.signature(method.__get__(d))


def test_a_dispatcher_is_freed_without_the_cycle_collector() -> None:
    gc.disable()
    try:
        d = bc.Dispatcher(BUCKETS)
        alive = weakref.ref(d)
        del d
        assert alive() is None
    finally:
        gc.enable()


def test_the_general_methods_alone_give_what_the_fast_paths_give() -> None:
    fast, general = bc.Dispatcher(BUCKETS), bc.Dispatcher(BUCKETS)
    for d in (fast, general):
        d.add_consumer("a", 1)
        d.add_consumer("b", 2)
    calls = [("offer", (0, 5), {}), ("offer", (1,), {"hash_min": 0x9000, "message_count": 3})]
    calls += [("offer", (2, None), {"key_hash": 0x12345}), ("offer", (np.int64(3), 7), {})]
    for name, args, kwargs in calls:
        assert getattr(fast, name)(*args, **kwargs) == getattr(bc.Dispatcher, name)(general, *args, **kwargs)
    got = fast.poll()
    assert {c: b.entry_ids.tolist() for c, b in got.items()} == {
        c: b.entry_ids.tolist() for c, b in bc.Dispatcher.poll(general).items()
    }
    for (name, cid), batch in got.items():
        assert fast.ack(name, cid, batch.entry_ids) == bc.Dispatcher.ack(general, name, cid, batch.entry_ids)
    assert fast.consumer_stats() == general.consumer_stats()
    with pytest.raises(KeyError):
        bc.Dispatcher.ack(general, "a", 1, 0)
    with pytest.raises(KeyError):
        fast.ack("a", 1, 0)


def test_owner_of_is_the_cores_then_the_selectors() -> None:
    s = bc.EntryBucketSelector(BUCKETS)
    assert s.owner_of(5) is None and bc.EntryBucketSelector.owner_of(s, 5) is None  # no sharer yet
    s.add_consumer("a", 1)
    s.add_consumer("b", 2)
    assert inspect.signature(s.owner_of) == inspect.signature(bc.EntryBucketSelector.owner_of.__get__(s))
    for h in (0, 5, 0x8000, 0xFFFF, np.uint16(0x9000), np.int64(3)):
        assert s.owner_of(h) == bc.EntryBucketSelector.owner_of(s, h) is not None
    for bad, exc in ((-1, ValueError), (0x10000, ValueError), (2**70, ValueError), (1.0, TypeError)):
        with pytest.raises(exc):
            s.owner_of(bad)
    alive = weakref.ref(s)
    gc.disable()
    try:
        del s
        assert alive() is None
    finally:
        gc.enable()
