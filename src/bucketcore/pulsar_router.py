"""Message routers for the Apache Pulsar Python client (``pulsar-client``, the ``pulsar`` extra).

A router is the callable ``create_producer(..., message_routing_mode=PartitionsRoutingMode.
CustomPartition, message_router=router)`` takes: called with each ``pulsar.Message`` and the topic's
partition count, it returns the partition to send to.

- :class:`Murmur3PartitionRouter` routes exactly as Java's partitioned producers do with
  ``HashingScheme.Murmur3_32Hash``: a keyed message goes to
  ``signSafeMod(murmur3_32(key) & 0x7FFFFFFF, n)``, its ordering key taking precedence over its
  partition key; keyless messages go round-robin.
- :class:`LayoutPartitionRouter` routes by an all-legacy :class:`~bucketcore.TopicLayout` (a v4
  partitioned topic seen as segments): partition ``k`` is the layout's ``k``-th legacy segment in
  layout order, and the rule is the layout's own (:meth:`TopicLayout.route_index`). For such a
  layout both routers agree on every keyed message.

The Python client cannot tell an empty key from a missing one (``Message.partition_key()`` returns
``""`` for both): an empty key is treated as no key. Neither router imports ``pulsar``; they take
any object with ``partition_key()`` and ``ordering_key()`` methods.
"""

from __future__ import annotations

import abc
import itertools
import threading
from typing import Any

from .errors import InvalidLayoutError, KeyEncodingError, StaleLayoutError
from .hashing import hash_keys, murmur3_32
from .layout import TopicLayout
from .validation import check_int, is_int

__all__ = ["Murmur3PartitionRouter", "LayoutPartitionRouter", "message_key", "producer_options"]


def message_key(message: Any) -> str | bytes | None:
    """The key a message is routed by: its ordering key, else its partition key, else None.

    Parameters
    ----------
    message : pulsar.Message or alike
        Anything with ``ordering_key()`` and ``partition_key()`` methods returning str, bytes
        or None (``""`` counts as absent).

    Returns
    -------
    str, bytes or None

    Raises
    ------
    KeyEncodingError
        The client could not return the ordering key (``pulsar.Message.ordering_key()`` decodes
        it as UTF-8, and an ordering key of other bytes fails there).
    TypeError
        A key of another type.
    """
    try:
        key = message.ordering_key()
    except UnicodeDecodeError as exc:
        raise KeyEncodingError(
            f"the message's ordering key is not UTF-8, so the client cannot hand it over: {exc}"
        ) from None
    if not key:
        key = message.partition_key()
    if not key:
        return None
    if not isinstance(key, (str, bytes)):
        raise TypeError(f"a message key must be str or bytes, not {type(key).__name__}")
    return key


def _check_start(start: Any) -> int:
    if not is_int(start) or int(start) < 0:
        raise ValueError(f"start must be an int >= 0, not {start!r}")
    return int(start)


class _MessageRouter(abc.ABC):
    """What both routers share: a ``pulsar.Message`` is routed by the partition of its key."""

    __slots__ = ()

    @abc.abstractmethod
    def partition_of(self, key: str | bytes | None, num_partitions: int) -> int:
        """The partition of one key (None: the next keyless position)."""

    def __call__(self, message: Any, num_partitions: int) -> int:
        """Route one ``pulsar.Message`` (see :meth:`partition_of`; its key by :func:`message_key`).

        Parameters
        ----------
        message : pulsar.Message or alike
        num_partitions : int

        Returns
        -------
        int
            The partition.

        Raises
        ------
        StaleLayoutError, TypeError, ValueError, KeyEncodingError
            As the router's :meth:`partition_of` (StaleLayoutError: :class:`LayoutPartitionRouter`
            only) and :func:`message_key`.
        """
        return self.partition_of(message_key(message), num_partitions)


class Murmur3PartitionRouter(_MessageRouter):
    """Java's ``Murmur3_32Hash`` partition routing, as a ``message_router`` for pulsar-client.

    Parameters
    ----------
    start : int
        Position of the first keyless message in the round-robin (Java starts at a random one).

    Notes
    -----
    Calls from several threads are safe: the round-robin position is one atomic counter.
    """

    __slots__ = ("_next",)

    def __init__(self, *, start: int = 0) -> None:
        self._next = itertools.count(_check_start(start))

    def partition_of(self, key: str | bytes | None, num_partitions: int) -> int:
        """The partition of one key (None: the next keyless position).

        Parameters
        ----------
        key : str, bytes or None
            A str is hashed as its UTF-8 bytes, bytes as given.
        num_partitions : int
            The topic's partition count (>= 1).

        Returns
        -------
        int
            ``signSafeMod(murmur3_32(key) & 0x7FFFFFFF, num_partitions)``, or the round-robin
            position for None.

        Raises
        ------
        TypeError, ValueError
            A key of another type, or a partition count below 1.
        KeyEncodingError
            A str key holding a surrogate.
        """
        n = check_int(num_partitions, "num_partitions", lo=1)
        if key is None:
            return next(self._next) % n
        # the masked hash is never negative: signSafeMod is the plain remainder
        return (murmur3_32(key) & 0x7FFFFFFF) % n


class LayoutPartitionRouter(_MessageRouter):
    """A ``message_router`` routing by an all-legacy :class:`~bucketcore.TopicLayout`.

    Partition ``k`` is the ``k``-th active (legacy) segment in layout order. Each message is routed
    by :meth:`TopicLayout.route_index`, keyless ones at the router's round-robin position.

    Parameters
    ----------
    layout : TopicLayout
        A layout whose active segments are all legacy (:attr:`TopicLayout.is_legacy`).
    start : int
        Position of the first keyless message in the round-robin.

    Raises
    ------
    InvalidLayoutError
        A layout with a non-legacy active segment (its routing is by ranges, not partitions).
    TypeError
        ``layout`` is not a TopicLayout.
    """

    __slots__ = ("layout", "_partition_of_active", "_keyless", "_next", "_lock")

    def __init__(self, layout: TopicLayout, *, start: int = 0) -> None:
        if not isinstance(layout, TopicLayout):
            raise TypeError(f"layout must be a TopicLayout, not {type(layout).__name__}")
        if not layout.is_legacy:
            raise InvalidLayoutError(
                "a partition router needs an all-legacy layout (every active segment a v4 partition); "
                "this layout routes by hash ranges"
            )
        self.layout = layout
        active_ids = [s.segment_id for s in layout.active_segments]
        in_layout_order = [s.segment_id for s in layout.segments if s.segment_id in set(active_ids)]
        # route_index answers with a position in active_segments; the partition is the position
        # of that segment in layout order
        self._partition_of_active = [in_layout_order.index(sid) for sid in active_ids]
        self._keyless = hash_keys([None])
        self._next = _check_start(start)
        self._lock = threading.Lock()

    @property
    def num_partitions(self) -> int:
        """The layout's partition (legacy segment) count."""
        return len(self._partition_of_active)

    def partition_of(self, key: str | bytes | None, num_partitions: int) -> int:
        """The partition of one key (None: the next keyless position).

        Parameters
        ----------
        key : str, bytes or None
        num_partitions : int
            The topic's partition count; it must be the layout's.

        Returns
        -------
        int

        Raises
        ------
        StaleLayoutError
            The topic has another partition count than the layout has legacy segments.
        TypeError, ValueError, KeyEncodingError
            A bad key or partition count.
        """
        n = check_int(num_partitions, "num_partitions", lo=1)
        if n != len(self._partition_of_active):
            raise StaleLayoutError(
                f"the topic has {n} partitions and the layout (epoch {self.layout.epoch}) "
                f"{len(self._partition_of_active)} legacy segments: the layout is stale"
            )
        if key is None:
            with self._lock:
                rotation = self._next
                self._next = rotation + 1
            index, _ = self.layout.route_index(self._keyless, round_robin=rotation)
            index = int(index[0])
        else:
            index, _ = self.layout.route_index(key)
        return self._partition_of_active[index]


def producer_options(router: Murmur3PartitionRouter | LayoutPartitionRouter) -> dict[str, Any]:
    """The ``create_producer`` keyword arguments that install a router.

    Parameters
    ----------
    router : Murmur3PartitionRouter or LayoutPartitionRouter

    Returns
    -------
    dict
        ``{"message_routing_mode": PartitionsRoutingMode.CustomPartition, "message_router": router}``.

    Raises
    ------
    ImportError
        pulsar-client is not installed (``pip install bucketcore[pulsar]``).
    """
    try:
        import pulsar
    except ImportError as exc:
        raise ImportError("producer_options needs pulsar-client: pip install 'bucketcore[pulsar]'") from exc
    return {"message_routing_mode": pulsar.PartitionsRoutingMode.CustomPartition, "message_router": router}
