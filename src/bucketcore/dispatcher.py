"""The stateful broker dispatcher of one shared segment (docs/design.md, "Dispatch").

:class:`Dispatcher` delivers committed entries in offset order, each whole to the owner of its
bucket, tracks what each consumer holds unacknowledged, and drains a bucket before it flows to a
new owner, so per-key order survives joins, clean leaves and crashes. Per-entry and per-bucket
state, and the members, live in the compiled :class:`_bucketcore._dispatcher.DispatchCore` that
a Dispatcher holds and calls down into; the spread and the general call paths live here.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from _bucketcore import _dispatcher, _entry_routing, _selector

from .buckets import Buckets
from .entry_routing import _raise_malformed, _route_input
from .hashing import KeyHashes
from .selector import NO_MOVES, BucketMoves, BucketsLike, Consumer, EntryBucketSelector, _check_consumer, _fast_then
from .status import Status, check_status
from .validation import INT64_MAX, describe, first_outside, int_column, is_int, plain_ints

__all__ = ["Deliveries", "ConsumerStats", "BucketStats", "Dispatcher"]


# What a consumer is to be sent (entry ids, sticky hashes, redelivered flags): a compiled type
# whose columns are built on first access.
Deliveries = _dispatcher.Deliveries


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


def _plain_scalar(value: Any) -> Any:
    """A numpy integer or bool scalar as the Python int or bool the compiled path takes (anything
    else as is)."""
    if isinstance(value, np.bool_):
        return bool(value)
    return int(value) if is_int(value) else value


def _negative_entry_id(index: int, value: int) -> ValueError:
    return ValueError(f"entry id at index {index} is {value}; entry ids are >= 0")


def _entry_id_too_large(index: int, value: int) -> ValueError:
    return ValueError(f"entry id at index {index} is {value}, above the int64 range")


def _entry_id_column(values: Any, name: str = "entry_ids") -> np.ndarray:
    if is_int(values):
        values = [values]
    ids = int_column(values, name)
    if ids.dtype == np.uint64 and ids.size and int(ids.max()) > INT64_MAX:
        i = int(np.argmax(ids > INT64_MAX))
        raise _entry_id_too_large(i, int(ids[i]))
    return np.ascontiguousarray(ids, dtype=np.int64)


class Dispatcher:
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
    lock). ``offer`` of one entry, ``ack`` and ``poll`` call the compiled core's one-call paths
    (:class:`_bucketcore._dispatcher.DispatchCore`) and take the general paths here for other
    call shapes. Each call into the compiled core is atomic (a critical section on a free-threaded
    interpreter), so unsynchronised use never corrupts the per-entry state; the membership steps
    kept here in Python (joins and leaves, which change the spread) are not.

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
        # Per-entry and per-bucket state and the members live in the compiled core; the spread here.
        self._core = _dispatcher.DispatchCore(self._selector._table, self._n)
        # The hot calls: this instance's offer, ack and poll are the core's fast path, called with
        # no Python frame, and behind it (when it returns None) this class's method of the same
        # name, the general path, which takes every call shape and raises every error. They hold
        # the dispatcher through a weak proxy, so it makes no reference cycle with them.
        me = weakref.proxy(self)
        self.offer = _fast_then(self._core.offer_fast, Dispatcher.offer, me)  # type: ignore[method-assign]
        self.ack = _fast_then(self._core.ack_fast, Dispatcher.ack, me)  # type: ignore[method-assign]
        self.poll = _fast_then(self._core.poll_fast, Dispatcher.poll, me)  # type: ignore[method-assign]
        # the consumer key of each active member, in the selector's (sorted) order
        self._slot_keys = np.empty(0, dtype=np.int32)

    @property
    def offered_entries(self) -> int:
        """Entries offered so far."""
        return int(self._core.offered_entries)

    @property
    def straddling_entries(self) -> int:
        """Offered stamped entries whose stamp crosses a boundary of the list (routed whole)."""
        return int(self._core.straddling_entries)

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
        return tuple(sorted(c for c, m in self._core.members().items() if m.leaving))

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
            return {c: self._stats_of(m, paused_mask) for c, m in sorted(self._core.members().items())}
        return self._stats_of(self._member(name, consumer_id), self._paused_mask())

    def _stats_of(self, m: _dispatcher.Member, paused_mask: np.ndarray) -> ConsumerStats:
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

    def _member(self, name: Any, consumer_id: Any) -> _dispatcher.Member:
        consumer = _check_consumer(name, consumer_id)
        m = self._core.member(consumer)
        if m is None:
            raise KeyError(f"consumer {consumer!r} is not connected to this dispatcher")
        return m

    def _pending_of(self, m: _dispatcher.Member) -> int:
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
        existing = self._core.member(consumer)
        if existing is not None:
            if existing.leaving:
                raise ValueError(
                    f"consumer {consumer!r} left and still holds {self._pending_of(existing)} unacked "
                    "entries: let it ack them, or remove it with crash=True, before it rejoins"
                )
            raise ValueError(f"consumer {consumer!r} is already a member")
        moves = self._selector.add_consumer(name, consumer_id, declared=declared)
        m = self._core.join(consumer)
        old_keys = self._slot_keys
        index = bisect.bisect_left(self._selector.consumers, consumer)
        self._slot_keys = _selector.codes_with(old_keys, index, m.key)
        self._core.apply_spread(old_keys, self._slot_keys)
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
            moves: BucketMoves = NO_MOVES
        else:
            index = bisect.bisect_left(self._selector.consumers, m.consumer)
            moves = self._selector.remove_consumer(name, consumer_id)
            old_keys = self._slot_keys
            self._slot_keys = _selector.codes_without(old_keys, index)
            self._core.apply_spread(old_keys, self._slot_keys)
        self._core.leave(m, crash)
        return moves

    # -- entries, acks, delivery --------------------------------------------------------------

    def offer(
        self,
        entry_ids: Any,
        hash_min: Any = None,
        *,
        hash_max: Any = None,
        key_hash: Any = None,
        stamped: Any = None,
        message_count: Any = None,
    ) -> int:
        """Take committed entries, in offset order.

        One entry may be given as scalars. A bad argument is an error and changes nothing.

        Parameters
        ----------
        entry_ids : int or array-like of int
            Ledger entry ids / offsets (0..2**63-1), strictly increasing within the call and above
            every id offered before.
        hash_min, hash_max, key_hash, stamped
            Stamp and key columns as in :func:`route_entries` (``hash_max`` optional: validates
            stamps and counts ``straddling_entries``).
        message_count : int or array-like of int, optional
            Messages per entry (>= 1, default 1), for the message counters.

        Returns
        -------
        int
            How many of the entries went straight to an outbox (the rest queue).

        Raises
        ------
        TypeError, ValueError, MalformedStampError
            As :func:`route_entries` for the stamp and key columns; also ids that are negative,
            above int64, not increasing or not after the last offered id, a ``message_count``
            below 1, and columns whose lengths differ from ``entry_ids`` (each naming the index).
        """
        # The general path: an instance's offer tries the core's one-entry path first (__init__).
        # Here one entry of numpy scalars goes to that path as Python scalars; any other single
        # entry, and every failing one, becomes columns of one item, so that the column rules below
        # name what is wrong.
        if type(entry_ids) is int or is_int(entry_ids):
            args = (entry_ids, hash_min, hash_max, key_hash, stamped, message_count)
            plain = [_plain_scalar(v) for v in args]
            if any(p is not v for p, v in zip(plain, args, strict=True)):  # some were numpy scalars
                first, lo, hi, key, flag, msgs = plain
                now = self._core.offer_fast(first, lo, hash_max=hi, key_hash=key, stamped=flag, message_count=msgs)
                if now is not None:
                    return int(now)
            stamp = [v for v in (hash_min, hash_max) if v is not None]
            if stamp and (stamped is None or bool(stamped)) and all(is_int(v) for v in stamp):
                if any(not -INT64_MAX - 1 <= v <= INT64_MAX for v in stamp):  # beyond a column's 64 bits
                    lo = int(stamp[0])
                    check_status(Status.BC_ERR_STAMP_RANGE, 0, hash_min=(lo,), hash_max=(int(stamp[-1]),))
            # one entry the compiled path refused: as columns of one item
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
                raise ValueError(f"entry id at index 0 is {int(ids[0])}, not after the last offered id {last}")
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
                raise ValueError(f"message_count at index {i} is {int(msgs[i])}; an entry holds >= 1 message")
            if msgs.dtype == np.uint64 and n and int(msgs.max()) > INT64_MAX:
                raise ValueError("message_count above the int64 range")
            msgs = msgs.astype(np.int64, copy=False)
        bucket = np.empty(n, dtype=np.int32)
        hashes = np.empty(n, dtype=np.uint16)
        status, index, straddling, _ = _entry_routing.route(
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
        return int(self._core.offer_routed(ids, bucket, hashes, np.ascontiguousarray(msgs, dtype=np.int64), straddling))

    def ack(self, name: str, consumer_id: int, entry_ids: Any) -> int:
        """Individual acks from a consumer. Acking the last entry a consumer held of a moved bucket unpauses it.

        Every id must be pending on that consumer (delivered to it, not yet acked); otherwise
        nothing is acked.

        Parameters
        ----------
        name : str
        consumer_id : int
        entry_ids : int or array-like of int

        Returns
        -------
        int
            How many entries were acked.

        Raises
        ------
        TypeError
            A bad name or id, or ``entry_ids`` that is neither an int nor a column of ints.
        ValueError
            The same id twice in the call.
        KeyError
            The consumer is not connected, or an id is not pending on it (unknown, already acked,
            queued, held by another consumer, or outside 0..2**63-1), naming the id.
        """
        # The general path (an instance's ack tries the core's first, see __init__): every shape,
        # and every failing ack, whose errors name the consumer and the id.
        m = self._member(name, consumer_id)
        if is_int(entry_ids):
            if not 0 <= entry_ids <= INT64_MAX:
                self._not_an_entry(m, 0, int(entry_ids))
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
        status, index, detail = self._core.ack_keyed(m, ids)
        if status != Status.BC_OK:
            holder = self._core.consumer_of_key(detail) if status == Status.BC_ERR_ACK_OTHER else None
            check_status(status, index, entry=int(ids[index]), consumer=m.consumer, holder=holder)
        return int(ids.size)

    @staticmethod
    def _not_an_entry(m: _dispatcher.Member, index: int, entry: int) -> None:
        raise KeyError(
            f"entry {entry} (index {index}) is not pending on consumer {m.consumer!r}: "
            "outside the entry id range 0..2**63-1"
        )

    def poll(self, name: str | None = None, consumer_id: int | None = None) -> Any:
        """Empty the outboxes.

        Costs in proportion to what is delivered (and to the consumers given entries since the
        last poll), never to the number of consumers or buckets; a poll that delivers nothing
        allocates nothing.

        Parameters
        ----------
        name : str, optional
        consumer_id : int, optional
            Both, for one consumer's outbox; neither, for every consumer's.

        Returns
        -------
        Deliveries or dict
            One consumer's :class:`Deliveries`, or ``{consumer: Deliveries}`` of every consumer
            with something to send, sorted by consumer. Nothing to send gives shared, unchangeable
            results: the empty ``NO_DELIVERIES`` and the empty dict ``NOTHING_POLLED`` (copy it,
            ``dict(result)``, to get one of your own).

        Raises
        ------
        TypeError, ValueError
            A bad name or id.
        KeyError
            The consumer is not connected.
        """
        # The general path (an instance's poll tries the core's first, see __init__): any other
        # form of a connected consumer, or the error.
        if name is None and consumer_id is None:
            return self._core.poll_fast()
        return self._core.poll_fast(*self._member(name, consumer_id).consumer)

    def __repr__(self) -> str:
        pending, queued = self._core.totals()
        return (
            f"Dispatcher(buckets={self._n}, consumers={len(self.consumers)}, "
            f"leaving={len(self.leaving)}, pending={pending}, queued={queued})"
        )
