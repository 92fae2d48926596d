"""bucketcore.pulsar_router against the real pulsar-client.

Messages are real ``pulsar.Message`` objects: built with the client's ``_pulsar.MessageBuilder``
and wrapped with ``pulsar.Message._wrap``, exactly what ``Client.create_producer`` does before it
calls a ``message_router``. A producer itself cannot be created without a broker, so the router is
installed on a real ``_pulsar.ProducerConfiguration`` the way ``create_producer`` installs it, and
called directly.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.pulsar_router import LayoutPartitionRouter, Murmur3PartitionRouter, message_key, producer_options

try:
    import _pulsar
    import pulsar
except ImportError:  # the tests marked `needs_pulsar` skip; the duck-typed ones below still run
    pulsar = _pulsar = None

needs_pulsar = pytest.mark.skipif(
    pulsar is None, reason="pulsar-client (the pulsar / test extra) is not installed: no real pulsar.Message"
)


class DuckMessage:
    """The interface the routers read of a pulsar.Message (used where pulsar-client is absent)."""

    def __init__(self, partition_key: str = "", ordering_key: str | bytes = "") -> None:
        self._pk, self._ok = partition_key, ordering_key

    def partition_key(self) -> str:
        return self._pk

    def ordering_key(self) -> str | bytes:
        return self._ok


def message(partition_key: str | None = None, ordering_key: str | bytes | None = None) -> pulsar.Message:
    if pulsar is None:
        pytest.skip("pulsar-client (the pulsar / test extra) is not installed: no real pulsar.Message")
    builder = _pulsar.MessageBuilder().content(b"payload")
    if partition_key is not None:
        builder.partition_key(partition_key)
    if ordering_key is not None:
        builder.ordering_key(ordering_key)
    return pulsar.Message._wrap(builder.build())


def java_partition(key: str | bytes, n: int) -> int:
    """Java's signSafeMod(Murmur3_32Hash.makeHash(key), n), from mmh3 (an independent Murmur3)."""
    mmh3 = pytest.importorskip("mmh3", reason="mmh3 (the test extra) is the independent Murmur3")
    data = key.encode("utf-8") if isinstance(key, str) else key
    h = mmh3.hash(data, 0, signed=False) & 0x7FFFFFFF
    m = h % n
    return m + n if m < 0 else m


def legacy_layout(n: int, order: list[int] | None = None) -> bc.TopicLayout:
    """n legacy segments tiling the ring, given in `order` (layout order = partition order)."""
    width = 0x10000 // n
    segs = [
        bc.Segment(
            i,
            i * width,
            (i + 1) * width - 1 if i < n - 1 else 0xFFFF,
            legacy_topic_name=f"persistent://t/ns/x-partition-{i}",
        )
        for i in range(n)
    ]
    return bc.TopicLayout(1, [segs[i] for i in (order or range(n))])


def test_keyed_messages_go_where_java_murmur3_routing_sends_them():
    router = Murmur3PartitionRouter()
    # docs/design.md vectors: "key-1" -> 0x98b115a0, "ключ" -> 0x9a592042 (raw); Java masks bit 31
    assert router(message("key-1"), 7) == (0x98B115A0 & 0x7FFFFFFF) % 7
    assert router(message("ключ"), 13) == (0x9A592042 & 0x7FFFFFFF) % 13
    for i in range(500):
        key = f"user-{i}"
        for n in (1, 2, 3, 16, 100):
            assert router(message(key), n) == java_partition(key, n)


def test_the_ordering_key_takes_precedence_over_the_partition_key():
    router = Murmur3PartitionRouter()
    for i in range(200):
        m = message(partition_key=f"pk-{i}", ordering_key=f"ok-{i}")
        assert message_key(m) == f"ok-{i}"
        assert router(m, 31) == java_partition(f"ok-{i}", 31)
    assert message_key(message(partition_key="only")) == "only"


def test_keyless_and_empty_keys_go_round_robin_from_start():
    router = Murmur3PartitionRouter(start=2)
    got = [router(message(), 4) for _ in range(6)] + [router(message(partition_key=""), 4)]
    assert got == [2, 3, 0, 1, 2, 3, 0]


@needs_pulsar
def test_a_non_utf8_ordering_key_is_refused_clearly():
    m = message(ordering_key=b"\xff\x00")
    with pytest.raises(bc.KeyEncodingError, match="ordering key is not UTF-8"):
        Murmur3PartitionRouter()(m, 3)


def test_bad_partition_counts_are_refused():
    router = Murmur3PartitionRouter()
    with pytest.raises(ValueError, match="num_partitions must be >= 1, not 0"):
        router(message("k"), 0)
    with pytest.raises(TypeError, match="num_partitions must be an int"):
        router(message("k"), 2.0)


@needs_pulsar
def test_the_router_installs_on_a_real_client_configuration():
    client = pulsar.Client("pulsar://localhost:6650")
    try:
        router = Murmur3PartitionRouter()
        options = producer_options(router)
        assert options["message_routing_mode"] == pulsar.PartitionsRoutingMode.CustomPartition
        conf = _pulsar.ProducerConfiguration()
        conf.partitions_routing_mode(options["message_routing_mode"])
        conf.message_router(lambda msg, n: int(router(pulsar.Message._wrap(msg), n)))
        assert conf.partitions_routing_mode() == pulsar.PartitionsRoutingMode.CustomPartition
    finally:
        client.close()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    keys=st.lists(st.one_of(st.text(min_size=1, max_size=10), st.binary(min_size=1, max_size=10)), max_size=30),
    data=st.data(),
)
def test_a_legacy_layout_routes_like_java_in_layout_order(n, keys, data):
    order = data.draw(st.permutations(list(range(n))))
    layout = legacy_layout(n, order)
    router = LayoutPartitionRouter(layout)
    assert router.num_partitions == n
    for key in keys:
        assert router.partition_of(key, n) == java_partition(key, n)
    for key in keys:
        if isinstance(key, str):
            assert router(message(key), n) == java_partition(key, n)


def test_a_layout_router_sends_keyless_messages_round_robin_in_layout_order():
    router = LayoutPartitionRouter(legacy_layout(3, [2, 0, 1]), start=1)
    assert [router(message(), 3) for _ in range(5)] == [1, 2, 0, 1, 2]


def test_a_layout_router_refuses_range_layouts_and_stale_partition_counts():
    ranged = bc.TopicLayout(1, [bc.Segment(0, 0, 0x7FFF), bc.Segment(1, 0x8000, 0xFFFF)])
    with pytest.raises(bc.InvalidLayoutError, match="all-legacy layout"):
        LayoutPartitionRouter(ranged)
    router = LayoutPartitionRouter(legacy_layout(4))
    with pytest.raises(bc.StaleLayoutError, match="the topic has 5 partitions and the layout"):
        router(message("k"), 5)
    with pytest.raises(TypeError, match="layout must be a TopicLayout"):
        LayoutPartitionRouter("layout")


def test_keyless_round_robin_is_shared_safely_by_threads():
    for router in (Murmur3PartitionRouter(), LayoutPartitionRouter(legacy_layout(4))):
        counts: Counter[int] = Counter()
        lock = threading.Lock()

        def send(router=router, counts=counts, lock=lock) -> None:
            got = [router.partition_of(None, 4) for _ in range(200)]
            with lock:
                counts.update(got)

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert counts == {0: 200, 1: 200, 2: 200, 3: 200}


def test_objects_with_the_message_interface_route_the_same_without_pulsar_client():
    """Duck-typed messages (the interface only, no pulsar-client needed), bytes ordering keys included."""
    m3, layout = Murmur3PartitionRouter(), LayoutPartitionRouter(legacy_layout(5, [4, 2, 0, 1, 3]))
    for i in range(100):
        for msg, key in (
            (DuckMessage(partition_key=f"pk-{i}"), f"pk-{i}"),
            (DuckMessage(partition_key="p", ordering_key=f"ok-{i}".encode()), f"ok-{i}".encode()),
        ):
            assert message_key(msg) == key
            assert m3(msg, 5) == layout(msg, 5) == java_partition(key, 5)
    assert message_key(DuckMessage()) is None
    with pytest.raises(TypeError, match="a message key must be str or bytes, not int"):
        m3(DuckMessage(partition_key=5), 3)
