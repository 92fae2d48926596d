"""The stateful broker dispatcher of one shared segment (docs/design.md, "Dispatch").

:class:`Dispatcher` delivers committed entries in offset order, each whole to the owner of its
bucket, tracks what each consumer holds unacknowledged, and drains a bucket before it flows to a
new owner, so per-key order survives joins, clean leaves and crashes. Per-entry and per-bucket
state lives in the compiled :class:`_bucketcore._dispatch.DispatchCore`; names and membership
live here.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from _bucketcore import _dispatch

from .buckets import Buckets
from .entry_routing import (
    _check_route_arguments,
    _key_hash_outside,
    _raise_malformed,
    _route_input,
    _unstamped_without_key_hash,
)
from .hashing import KeyHashes
from .selector import BucketMoves, BucketsLike, Consumer, EntryBucketSelector, _check_consumer
from .status import Status, check_status
from .validation import (
    INT64_MAX,
    MAX_HASH,
    MAX_RAW_HASH,
    describe,
    first_outside,
    int_column,
    is_int,
    plain_ints,
)

__all__ = ["Deliveries", "ConsumerStats", "BucketStats", "Dispatcher"]


# What a consumer is to be sent (entry ids, sticky hashes, redelivered flags): a compiled type
# whose columns are built on first access.
Deliveries = _dispatch.Deliveries


@dataclass(frozen=True)
class ConsumerStats:
    """Counters of one consumer. ``state`` is ``"active"`` (a member) or ``"leaving"`` (left
    cleanly, still holding unacknowledged entries it may ack). ``paused_buckets``: owned buckets
    withheld while another consumer drains them."""

    consumer: Consumer
    state: str
    owned_buckets: range
    delivered_entries: int
    delivered_messages: int
    redelivered_entries: int
    acked_entries: int
    pending_entries: int
    pending_messages: int
    paused_buckets: int


@dataclass(frozen=True, eq=False)
class BucketStats:
    """Per-bucket counters as columns (index = bucket): ``owner`` (index into the dispatcher's
    ``consumers``, -1 for none), ``delivered`` entries (redeliveries included), ``pending``
    (delivered, unacknowledged), ``queued`` (waiting: paused, unowned, or crash redeliveries),
    ``paused`` (withheld from its owner until another consumer acks or crashes)."""

    owner: np.ndarray
    delivered: np.ndarray
    pending: np.ndarray
    queued: np.ndarray
    paused: np.ndarray


def _paused(owner: np.ndarray, holder: np.ndarray) -> np.ndarray:
    """Per bucket: owned, but another consumer still holds unacknowledged entries of it."""
    return (owner >= 0) & (holder >= 0) & (holder != owner)


def _one_item(value: Any) -> Any:
    """A scalar argument of a one-entry call as a column of one item (a column or None as is)."""
    if isinstance(value, KeyHashes):
        value = value.raw
    return None if value is None else (value if np.ndim(value) else [value])


def _one_entry(hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any, message_count: Any) -> bool:
    """Whether the arguments of a one-entry ``offer`` are all scalars (or absent)."""
    return (
        (hash_min is None or type(hash_min) is int or is_int(hash_min))
        and (hash_max is None or is_int(hash_max))
        and (key_hash is None or is_int(key_hash))
        and (message_count is None or is_int(message_count))
        and (stamped is None or isinstance(stamped, (bool, np.bool_)))
    )


def _negative_entry_id(index: int, value: int) -> ValueError:
    return ValueError(f"entry id at index {index} is {value}; entry ids are >= 0")


def _entry_id_too_large(index: int, value: int) -> ValueError:
    return ValueError(f"entry id at index {index} is {value}, above the int64 range")


def _entry_id_not_after(value: int, last: int) -> ValueError:
    return ValueError(f"entry id at index 0 is {value}, not after the last offered id {last}")


def _message_count_below_one(index: int, value: int) -> ValueError:
    return ValueError(f"message_count at index {index} is {value}; an entry holds >= 1 message")


def _message_count_too_large() -> ValueError:
    return ValueError("message_count above the int64 range")


def _entry_id_column(values: Any, name: str = "entry_ids") -> np.ndarray:
    if is_int(values):
        values = [values]
    ids = int_column(values, name)
    if ids.dtype == np.uint64 and ids.size and int(ids.max()) > INT64_MAX:
        i = int(np.argmax(ids > INT64_MAX))
        raise _entry_id_too_large(i, int(ids[i]))
    return np.ascontiguousarray(ids, dtype=np.int64)


class Dispatcher(_dispatch.DispatcherBase):
    """Stateful broker dispatcher of one shared segment (docs/design.md, "Dispatch").

    Drive it with committed entries in offset order and with acks; every call that can make
    entries deliverable puts them in the consumers' outboxes, which :meth:`poll` empties::

        d = Dispatcher(buckets)
        d.add_consumer("a", 1); d.add_consumer("b", 2)
        d.offer(entry_ids, hash_min=stamps_min, hash_max=stamps_max, message_count=counts)
        for consumer, batch in d.poll().items(): send(consumer, batch.entry_ids)
        d.ack("a", 1, acked_ids)          # individual acks, one id or a column
        d.remove_consumer("b", 2, crash=True)

    Rules:

    * Each entry goes whole to the owner of its bucket (stamped: bucket of ``hash_min``;
      unstamped: of the key's low-16 hash). Per bucket, entries are delivered in offset order.
    * At most one consumer holds a bucket's unacknowledged entries at a time. When a bucket moves
      (join, leave, crash), it is *paused*: withheld from its new owner while the previous holder
      still has entries of it unacknowledged; its new entries queue, in order. When the holder has
      acked them all, the queue flows to the new owner in order.
    * Clean leave (``remove_consumer``): the consumer gets nothing new, keeps its pending entries
      and may still ack them (state ``"leaving"``); it is forgotten when it holds nothing. Crash
      (``crash=True``, also for a leaving consumer): its unacked entries — including ones still in
      its outbox — go back to the front of their buckets' queues and are redelivered to the new
      owners first, in order, flagged ``redelivered``.
    * With no consumer at all, entries queue (nothing is lost) until one joins.
    * Acks are strict: acking an entry that is not pending on that consumer is an error naming it.

    Not thread-safe as a whole: one dispatcher per segment, driven by one thread (or under one
    lock). ``offer`` of one entry, ``ack`` and ``poll`` are C methods of the compiled base
    (:class:`_bucketcore._dispatch.DispatcherBase`); other call shapes take the general paths here.
    Each C method, and each call into the compiled core, is atomic (a critical section on a
    free-threaded interpreter), so unsynchronised use never corrupts the per-entry state; the
    membership steps kept here in Python (joins, leaves, forgetting a consumer that left) are not.

    Membership changes return :class:`BucketMoves` (a sequence of :class:`BucketMove` that behaves
    as their tuple); a poll that delivers nothing returns a shared, unchangeable empty result.

    Parameters
    ----------
    buckets : Buckets or sequence of int
        The segment's boundary list.

    Raises
    ------
    TypeError, InvalidBoundaryError
        As :class:`EntryBucketSelector` (a list whose bucket 0 cannot hold its canonical hash 1
        is refused).
    """

    def __init__(self, buckets: BucketsLike) -> None:
        self._selector = EntryBucketSelector(buckets)
        self._n = self._selector._n
        # Per-entry and per-bucket state lives in the compiled core; names and membership here.
        super().__init__(_dispatch.DispatchCore(self._selector._table, self._n))
        self._members: dict[Consumer, _dispatch.Member] = {}
        self._next_key = 0
        # the consumer key of each active member, in the selector's (sorted) order
        self._slot_keys = np.empty(0, dtype=np.int32)

    # -- views --------------------------------------------------------------------------------

    @property
    def buckets(self) -> Buckets:
        """The segment's boundary list."""
        return self._selector.buckets

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Active members sorted by ``(name, consumer_id)`` (the spread's order)."""
        return self._selector.consumers

    @property
    def leaving(self) -> tuple[Consumer, ...]:
        """Consumers that left cleanly and still hold unacknowledged entries."""
        members = self._members.copy()  # a copy: another thread may join or leave meanwhile
        return tuple(sorted(c for c, m in members.items() if m.leaving))

    def owners(self) -> list[Consumer | None]:
        """Per bucket, its owner (see :meth:`EntryBucketSelector.owners`).

        Returns
        -------
        list of (str, int) or None
        """
        return self._selector.owners()

    def buckets_of(self, name: str, consumer_id: int) -> range:
        """The contiguous range of buckets an active member owns (see :meth:`EntryBucketSelector.buckets_of`).

        Parameters
        ----------
        name : str
        consumer_id : int

        Returns
        -------
        range

        Raises
        ------
        TypeError, ValueError
            A name that is not a str or an id that is not a uint64.
        KeyError
            The consumer is not an active member.
        """
        return self._selector.buckets_of(name, consumer_id)

    @property
    def pending_entries(self) -> int:
        """Entries delivered and not yet acked, over every consumer."""
        return int(self._core.totals()[0])

    @property
    def queued_entries(self) -> int:
        """Entries waiting: paused or unowned buckets, crash redeliveries."""
        return int(self._core.totals()[1])

    def _paused_mask(self) -> np.ndarray:
        return _paused(*self._core.bucket_columns()[:2])

    def paused_buckets(self) -> np.ndarray:
        """Buckets withheld from their owner right now (another consumer still holds unacked entries).

        Returns
        -------
        numpy.ndarray
            ``np.int32`` bucket indexes, ascending.
        """
        return np.flatnonzero(self._paused_mask()).astype(np.int32)

    def bucket_stats(self) -> BucketStats:
        """Per-bucket counters as columns.

        Returns
        -------
        BucketStats
        """
        owner, holder, delivered, pending, queued = self._core.bucket_columns()
        return BucketStats(self._selector.owner_slots.copy(), delivered, pending, queued, _paused(owner, holder))

    def consumer_stats(self, name: str | None = None, consumer_id: int | None = None) -> Any:
        """Counters of one consumer, or of every connected one.

        Parameters
        ----------
        name : str, optional
        consumer_id : int, optional
            Both, for one consumer; neither, for all.

        Returns
        -------
        ConsumerStats or dict
            One consumer's :class:`ConsumerStats`, or ``{consumer: ConsumerStats}`` sorted by consumer.

        Raises
        ------
        TypeError, ValueError
            A name that is not a str or an id that is not a uint64.
        KeyError
            The consumer is not connected (an active member, or leaving with unacked entries).
        """
        if name is None and consumer_id is None:
            paused_mask = self._paused_mask()  # once for every consumer
            return {c: self._stats_of(m, paused_mask) for c, m in sorted(self._members.copy().items())}
        return self._stats_of(self._member(name, consumer_id), self._paused_mask())

    def _stats_of(self, m: _dispatch.Member, paused_mask: np.ndarray) -> ConsumerStats:
        delivered, messages, redelivered, acked, pending, pending_messages = self._core.key_stats(m.key)
        if m.leaving:
            owned = range(0)
            paused = 0
        else:
            owned = self._selector.buckets_of(*m.consumer)
            paused = int(np.count_nonzero(paused_mask[owned.start : owned.stop]))
        return ConsumerStats(
            m.consumer,
            "leaving" if m.leaving else "active",
            owned,
            delivered,
            messages,
            redelivered,
            acked,
            pending,
            pending_messages,
            paused,
        )

    def _member(self, name: Any, consumer_id: Any) -> _dispatch.Member:
        consumer = _check_consumer(name, consumer_id)
        m = self._members.get(consumer)
        if m is None:
            raise KeyError(f"consumer {consumer!r} is not connected to this dispatcher")
        return m

    def _pending_of(self, m: _dispatch.Member) -> int:
        _, _, _, _, pending, _ = self._core.key_stats(m.key)
        return int(pending)

    # -- membership ---------------------------------------------------------------------------

    def add_consumer(self, name: str, consumer_id: int, *, declared: Any = None) -> BucketMoves:
        """A sharer joins. Buckets it takes over stay paused until their previous holder has acked (or crashed).

        Parameters
        ----------
        name : str
        consumer_id : int
            0..2**64-1.
        declared : Buckets, sequence of int or sequence of (start, end), optional
            The sharer's declared boundary list, checked by :meth:`EntryBucketSelector.validate`.

        Returns
        -------
        BucketMoves
            The buckets that moved, by first bucket (a sequence of BucketMove).

        Raises
        ------
        TypeError, ValueError
            A bad name or id; or the consumer is connected already (active, or leaving with unacked
            entries).
        StaleLayoutError, InvalidBoundaryError
            ``declared`` differs from the segment's list, or cannot be dispatched.
        """
        consumer = _check_consumer(name, consumer_id)
        existing = self._members.get(consumer)
        if existing is not None:
            if existing.leaving:
                raise ValueError(
                    f"consumer {consumer!r} left and still holds {self._pending_of(existing)} unacked "
                    "entries: let it ack them, or remove it with crash=True, before it rejoins"
                )
            raise ValueError(f"consumer {consumer!r} is already a member")
        moves = self._selector.add_consumer(name, consumer_id, declared=declared)
        m = _dispatch.Member(self._next_key, consumer)
        self._next_key += 1
        self._core.add_key(m.key)
        self._members[consumer] = m
        self._register(m)
        old_keys = self._slot_keys
        self._slot_keys = _dispatch.codes_with(old_keys, bisect.bisect_left(self._selector.consumers, consumer), m.key)
        self._apply_spread(old_keys, self._slot_keys)
        return moves

    def remove_consumer(self, name: str, consumer_id: int, *, crash: bool = False) -> BucketMoves:
        """A sharer leaves.

        Clean leave: it keeps its unacked entries (and may ack them); the buckets it held stay paused
        for their new owners until it has. ``crash=True``: its unacked entries are redelivered to the
        new owners first, in order. A consumer that already left cleanly may be removed again with
        ``crash=True`` (it disconnected before acking).

        Parameters
        ----------
        name : str
        consumer_id : int
        crash : bool, optional
            The consumer disconnected without acking (default False: a clean leave).

        Returns
        -------
        BucketMoves
            The buckets that moved, by first bucket (a sequence of BucketMove; empty for a second,
            crash removal of a leaving consumer).

        Raises
        ------
        TypeError
            A bad name or id, or ``crash`` is not a bool.
        ValueError
            The consumer already left and ``crash`` is False.
        KeyError
            The consumer is not connected.
        """
        if not isinstance(crash, bool):
            raise TypeError(f"crash must be a bool, not {type(crash).__name__}")
        m = self._member(name, consumer_id)
        if m.leaving:
            if not crash:
                raise ValueError(
                    f"consumer {m.consumer!r} already left; pass crash=True to redeliver its "
                    f"{self._pending_of(m)} unacked entries"
                )
            moves: BucketMoves = _dispatch.NO_MOVES
        else:
            index = bisect.bisect_left(self._selector.consumers, m.consumer)
            moves = self._selector.remove_consumer(name, consumer_id)
            old_keys = self._slot_keys
            self._slot_keys = _dispatch.codes_without(old_keys, index)
            self._apply_spread(old_keys, self._slot_keys)
        if crash:
            self._core.requeue(m.key)
            self._forget(m)
        else:
            m.leaving = True
            if self._pending_of(m) == 0:
                self._forget(m)
        return moves

    def _forget(self, m: _dispatch.Member) -> None:
        self._core.take_outbox_of(m.key)  # nothing left to send to a consumer that is gone
        del self._members[m.consumer]
        self._unregister(m)

    # -- entries, acks, delivery --------------------------------------------------------------

    def _offer_general(
        self, entry_ids: Any, hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any, message_count: Any
    ) -> int:
        """``offer`` of every shape the compiled one-entry path does not take (see ``offer``)."""
        if type(entry_ids) is int or is_int(entry_ids):
            if _one_entry(hash_min, hash_max, key_hash, stamped, message_count):
                return self._offer_one(entry_ids, hash_min, hash_max, key_hash, stamped, message_count)
            # one entry whose other arguments are not all scalars: as columns of one item
            entry_ids, hash_min, hash_max, key_hash, stamped, message_count = (
                [entry_ids],
                _one_item(hash_min),
                _one_item(hash_max),
                _one_item(key_hash),
                _one_item(stamped),
                _one_item(message_count),
            )
        elif np.ndim(entry_ids) == 0:  # a scalar that is not an int (a bool, a float, None, a str)
            raise TypeError(f"entry_ids must be an int or a column of ints, not {describe(entry_ids)}")
        ids = _entry_id_column(entry_ids)
        n = ids.size
        if n:
            if int(ids.min()) < 0:
                i = int(np.argmax(ids < 0))
                raise _negative_entry_id(i, int(ids[i]))
            steps = np.diff(ids)
            if steps.size and int(steps.min()) <= 0:
                i = int(np.argmax(steps <= 0)) + 1
                raise ValueError(
                    f"entry ids must increase (offset order): index {i} is {int(ids[i])} after {int(ids[i - 1])}"
                )
            last = self._core.last_id
            if last >= 0 and int(ids[0]) <= last:
                raise _entry_id_not_after(int(ids[0]), last)
        inp = _route_input(hash_min, hash_max, key_hash, stamped)
        if inp.n != n:
            raise ValueError(f"the stamp/key columns have {inp.n} items; entry_ids has {n}")
        if message_count is None:
            msgs = np.ones(n, dtype=np.int64)
        else:
            msgs = int_column(message_count, "message_count")
            if msgs.size != n:
                raise ValueError(f"message_count has {msgs.size} items; entry_ids has {n}")
            if n and int(msgs.min()) < 1:
                i = int(np.argmax(msgs < 1))
                raise _message_count_below_one(i, int(msgs[i]))
            if msgs.dtype == np.uint64 and n and int(msgs.max()) > INT64_MAX:
                raise _message_count_too_large()
            msgs = msgs.astype(np.int64, copy=False)
        bucket = np.empty(n, dtype=np.int32)
        hashes = np.empty(n, dtype=np.uint16)
        status, index, straddling, _ = _dispatch.route(
            self._selector._table,
            None,
            inp.lo,
            inp.hi,
            inp.stamped,
            inp.key_hash,
            inp.flagged,
            None,
            bucket,
            hashes,
            False,
        )
        if status != Status.BC_OK:
            _raise_malformed(status, index, inp)
        if n == 0:
            return 0
        # Validated: from here on nothing can fail half-way.
        self.offered_entries += n
        self.straddling_entries += straddling
        return int(self._core.offer_routed(ids, bucket, hashes, np.ascontiguousarray(msgs, dtype=np.int64)))

    def _ack_general(self, name: Any, consumer_id: Any, entry_ids: Any) -> int:
        """``ack`` of every shape the compiled path does not take, and every failing ack (see
        ``ack``): the errors name the consumer and the id."""
        m = self._member(name, consumer_id)
        acked = self._core.ack_array(m.key, entry_ids)  # an int64 column, checked and acked in one call
        if acked >= 0:
            if m.leaving and self._pending_of(m) == 0:
                self._forget(m)
            return int(acked)
        if is_int(entry_ids) and 0 <= entry_ids <= INT64_MAX:
            entry = int(entry_ids)
            status = self._core.ack_one(m.key, entry)
            if status != Status.BC_OK:
                holder_key = self._core.entry_holder(entry)
                check_status(
                    status,
                    0,
                    entry=entry,
                    consumer=m.consumer,  # type: ignore[arg-type]  # a (name, id) pair, shown with repr
                    holder=self._by_key[holder_key].consumer if status == Status.BC_ERR_ACK_OTHER else None,  # type: ignore[arg-type]
                )
            if m.leaving and self._pending_of(m) == 0:
                self._forget(m)
            return 1
        if is_int(entry_ids):
            entry_ids = [int(entry_ids)]
        elif np.ndim(entry_ids) == 0:
            raise TypeError(f"entry_ids must be an int or a column of ints, not {type(entry_ids).__name__}")
        if isinstance(entry_ids, (list, tuple)):
            plain = plain_ints(entry_ids)  # the common list: no item loop (negatives caught below)
            if plain is None:
                # Python ints beyond int64 would make an object column: they are simply not pending.
                for i, v in enumerate(entry_ids):
                    if is_int(v) and not 0 <= v <= INT64_MAX:
                        self._not_an_entry(m, i, int(v))
            else:
                entry_ids = plain
        raw = int_column(entry_ids, "entry_ids")  # TypeError / ValueError name a bad dtype or shape
        bad = first_outside(raw, 0, INT64_MAX)
        if bad is not None:
            self._not_an_entry(m, bad, int(raw[bad]))
        ids = np.ascontiguousarray(raw, dtype=np.int64)
        if ids.size == 0:
            return 0
        status, index, detail = self._core.ack_keyed(m.key, ids)
        if status != Status.BC_OK:
            holder = self._by_key[detail].consumer if status == Status.BC_ERR_ACK_OTHER else None
            check_status(status, index, entry=int(ids[index]), consumer=m.consumer, holder=holder)  # type: ignore[arg-type]
        if m.leaving and self._pending_of(m) == 0:
            self._forget(m)
        return int(ids.size)

    @staticmethod
    def _not_an_entry(m: _dispatch.Member, index: int, entry: int) -> None:
        raise KeyError(
            f"entry {entry} (index {index}) is not pending on consumer {m.consumer!r}: "
            "outside the entry id range 0..2**63-1"
        )

    def _offer_one(
        self, entry_id: Any, hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any, message_count: Any
    ) -> int:
        """``offer`` of one entry given as scalars: the rules of the column path (the same helpers
        raise the same errors), without building a column per argument."""
        entry = entry_id if type(entry_id) is int else int(entry_id)
        if not 0 <= entry <= INT64_MAX:
            raise _negative_entry_id(0, entry) if entry < 0 else _entry_id_too_large(0, entry)
        last = self._core.last_id
        if last >= 0 and entry <= last:
            raise _entry_id_not_after(entry, last)
        if hash_min is not None and stamped is None and key_hash is None:
            is_stamped = True  # a stamped entry, nothing else to route by
        else:
            _check_route_arguments(hash_min, hash_max, key_hash, stamped)
            is_stamped = hash_min is not None and (stamped is None or bool(stamped))
            if key_hash is not None:
                if not 0 <= key_hash <= MAX_RAW_HASH:
                    raise _key_hash_outside(0, int(key_hash))
            elif not is_stamped:
                raise _unstamped_without_key_hash(0)
        msgs = 1
        if message_count is not None:
            msgs = int(message_count)
            if msgs < 1:
                raise _message_count_below_one(0, msgs)
            if msgs > INT64_MAX:
                raise _message_count_too_large()
        straddling = False
        if is_stamped:
            h = hash_min if type(hash_min) is int else int(hash_min)
            hi = h if hash_max is None else int(hash_max)
            if not (0 <= h <= MAX_HASH and 0 <= hi <= MAX_HASH):
                check_status(Status.BC_ERR_STAMP_RANGE, 0, hash_min=(h,), hash_max=(hi,))
            if h > hi:
                check_status(Status.BC_ERR_STAMP_ORDER, 0, hash_min=(h,), hash_max=(hi,))
            if hi != h:
                table = self._selector._table
                straddling = bool(table[hi] != table[h])
        else:
            h = int(key_hash) & 0xFFFF
        self.offered_entries += 1
        if straddling:
            self.straddling_entries += 1
        return int(self._core.offer_one(entry, int(self._selector._table[h]), h if h else 1, msgs))

    def __repr__(self) -> str:
        pending, queued = self._core.totals()
        return (
            f"Dispatcher(buckets={self._n}, consumers={len(self.consumers)}, "
            f"leaving={len(self.leaving)}, pending={pending}, queued={queued})"
        )
