"""Broker side of entry-bucketing: whole entries to the consumers that own their buckets (DESIGN.md §3.5).

Three layers, each usable alone:

* :class:`EntryBucketSelector` — the live membership of one shared segment and the deterministic
  spread of its buckets over the sharers (consumers sorted by ``(name, id)``, consumer ``j`` of
  ``k`` owns buckets ``[j*N//k, (j+1)*N//k)``). Membership changes report the buckets that moved.
* :func:`route_entries` / :func:`fits_one_bucket` / :func:`sticky_hashes` — vectorised, GIL-free
  routing of entry columns (no Python object per entry).
* :class:`Dispatcher` — the stateful dispatcher of one shared segment: delivers committed entries
  in offset order, tracks what each consumer holds unacknowledged, and drains a bucket before it
  flows to a new owner, so per-key order survives joins, clean leaves and crashes.

Consumers are identified by ``(name, consumer_id)`` tuples everywhere (``Consumer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from _bucketcore import _dispatch
from .errors import MalformedStampError, StaleLayoutError
from .status import Status, check_status
from .hashing import MAX_HASH, KeyHashes, plain_ints
from .layout import Buckets, _is_int

__all__ = [
    "Consumer",
    "NO_CONSUMER",
    "MALFORMED",
    "MalformedStampError",
    "BucketMove",
    "EntryBucketSelector",
    "route_entries",
    "fits_one_bucket",
    "sticky_hashes",
    "Deliveries",
    "ConsumerStats",
    "BucketStats",
    "Dispatcher",
]

Consumer = tuple[str, int]
BucketsLike = Union[Buckets, Sequence[int]]

#: Slot of an entry no consumer can take (the segment has no sharer right now).
NO_CONSUMER: int = _dispatch.NO_CONSUMER
#: Slot of an entry whose stamp is malformed, with ``malformed="mark"``.
MALFORMED: int = _dispatch.MALFORMED

_INT64_MAX = np.iinfo(np.int64).max
_UINT64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class BucketMove:
    """Buckets that changed owner in one membership change.

    ``buckets`` is a contiguous ``range`` of bucket indexes; ``old_owner`` / ``new_owner`` are
    ``(name, consumer_id)`` or ``None`` (no consumer before / after: the first join, the last
    leave). A membership change returns a tuple of these sorted by first bucket; buckets whose
    owner did not change do not appear.
    """

    buckets: range
    old_owner: Consumer | None
    new_owner: Consumer | None


# ---------------------------------------------------------------------------------------------
# Edge validation helpers


def _as_buckets(buckets: Any, name: str = "buckets") -> Buckets:
    if isinstance(buckets, Buckets):
        return buckets
    if isinstance(buckets, (list, tuple)):
        return Buckets(tuple(buckets))
    raise TypeError(f"{name} must be a Buckets or a sequence of split hashes, not {type(buckets).__name__}")


def _check_consumer(name: Any, consumer_id: Any) -> Consumer:
    if not isinstance(name, str):
        raise TypeError(f"consumer name must be a str, not {type(name).__name__}")
    if not _is_int(consumer_id):
        raise TypeError(f"consumer_id must be an int, not {type(consumer_id).__name__}")
    # the protocol's consumer_id is a uint64 (CommandSubscribe and every consumer command)
    if not 0 <= consumer_id <= _UINT64_MAX:
        raise ValueError(f"consumer_id must be 0..2**64-1 (a uint64 on the wire), not {int(consumer_id)}")
    return (name, int(consumer_id))


def _check_hash(value: Any, name: str) -> int:
    if not _is_int(value):
        raise TypeError(f"{name} must be an int bucket hash, not {type(value).__name__}")
    value = int(value)
    if not 0 <= value <= MAX_HASH:
        raise ValueError(f"{name} {value} is outside 0..0xFFFF")
    return value


def _int_column(values: Any, name: str) -> np.ndarray:
    """A 1-D integer column (bools, floats and objects refused)."""
    if isinstance(values, (list, tuple)):
        # numpy reads [5, True] as [5, 1]: a bool among ints would be silently taken as 0/1.
        kinds = set(map(type, values))  # one C-level pass; the index is looked for only on error
        if bool in kinds or np.bool_ in kinds:
            i = next(i for i, v in enumerate(values) if isinstance(v, (bool, np.bool_)))
            raise TypeError(f"{name} at index {i} is a bool ({values[i]!r}), not an int")
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D column, not an array of shape {arr.shape}")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "ui":
        if arr.size == 0 and arr.dtype.kind == "f":
            return arr.astype(np.int64)  # np.asarray([]) is float64: an empty list is fine
        if isinstance(values, (list, tuple)):
            # name the item numpy could not hold as an integer: another type, or beyond 64 bits
            for i, v in enumerate(values):
                if not isinstance(v, (int, np.integer)):
                    raise TypeError(f"{name} at index {i} is {type(v).__name__} {v!r}, not an int")
                if not -(1 << 63) <= v < (1 << 64):
                    raise ValueError(f"{name} at index {i} is {v}, beyond 64-bit integers")
        raise TypeError(f"{name} must hold integers, not values of dtype {arr.dtype}")
    return arr


def _out_of_range(arr: np.ndarray, hi: int) -> np.ndarray | None:
    """Mask of values outside 0..hi, or None when every value fits (the common case)."""
    if arr.size == 0:
        return None
    if arr.dtype.kind == "u" and np.iinfo(arr.dtype).max <= hi:
        return None
    if int(arr.min()) >= 0 and int(arr.max()) <= hi:
        return None
    return (arr < 0) | (arr > hi)


def _stamp_column(values: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(original column, contiguous uint16 copy/view, out-of-range mask or None)."""
    arr = _int_column(values, name)
    flagged = _out_of_range(arr, MAX_HASH)
    if arr.dtype == np.uint16:
        return arr, np.ascontiguousarray(arr), None
    return arr, arr.astype(np.uint16), flagged


def _bool_column(values: Any, name: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype != np.bool_:
        raise TypeError(f"{name} must be a bool column, not values of dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} must be a 1-D column of {n} items, not shape {arr.shape}")
    return np.ascontiguousarray(arr).view(np.uint8)


def _key_hash_column(values: Any, n: int | None = None) -> np.ndarray:
    if isinstance(values, KeyHashes):
        values = values.raw
    arr = _int_column(values, "key_hash")
    if n is not None and arr.size != n:
        raise ValueError(f"key_hash has {arr.size} items; expected {n}")
    bad = _out_of_range(arr, 0xFFFFFFFF)
    if bad is not None:
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"key_hash at index {i} is {int(arr[i])}, outside 0..0xFFFFFFFF")
    return np.ascontiguousarray(arr, dtype=np.uint32)


@dataclass
class _RouteInput:
    n: int
    hash_min: np.ndarray  # original, for messages
    hash_max: np.ndarray | None
    lo: np.ndarray  # uint16
    hi: np.ndarray | None
    stamped: np.ndarray | None  # uint8
    key_hash: np.ndarray | None  # uint32
    flagged: np.ndarray | None  # uint8


def _route_input(hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any) -> _RouteInput:
    if hash_min is None:
        # No stamp at all: every entry routes by its key hash.
        if key_hash is None:
            raise TypeError("pass hash_min (stamped entries) or key_hash (unstamped entries)")
        if stamped is not None or hash_max is not None:
            raise TypeError("stamped and hash_max need hash_min")
        keys_only = _key_hash_column(key_hash)
        n = keys_only.size
        zeros = np.zeros(n, dtype=np.uint16)
        return _RouteInput(n, zeros, None, zeros, None, np.zeros(n, dtype=np.uint8), keys_only, None)
    original, lo, flagged = _stamp_column(hash_min, "hash_min")
    n = lo.size
    hi: np.ndarray | None = None
    original_max: np.ndarray | None = None
    if hash_max is not None:
        original_max, hi, flagged_max = _stamp_column(hash_max, "hash_max")
        if hi.size != n:
            raise ValueError(f"hash_max has {hi.size} items; hash_min has {n}")
        if flagged_max is not None:
            flagged = flagged_max if flagged is None else flagged | flagged_max
    st: np.ndarray | None = None
    kh: np.ndarray | None = None
    if stamped is not None:
        st = _bool_column(stamped, "stamped", n)
        if key_hash is None:
            if n and not st.all():
                i = int(np.flatnonzero(st == 0)[0])
                raise ValueError(f"entry at index {i} is unstamped and no key_hash was given")
            st = None  # every entry is stamped after all
        else:
            kh = _key_hash_column(key_hash, n)
    elif key_hash is not None:
        raise TypeError(
            "key_hash routes only unstamped entries: pass stamped= (a bool column) to say which "
            "entries carry a stamp"
        )
    return _RouteInput(n, original, original_max, lo, hi, st, kh,
                       None if flagged is None else np.ascontiguousarray(flagged, dtype=np.uint8))


def _raise_malformed(status: int, index: int, inp: _RouteInput) -> None:
    check_status(status, index, hash_min=inp.hash_min, hash_max=inp.hash_max)


def _declared_splits(declared: Any) -> tuple[int, ...]:
    """Normalise a declared boundary list: Buckets, split hashes, or inclusive (start, end) ranges."""
    if isinstance(declared, Buckets):
        return tuple(declared.splits)
    if isinstance(declared, np.ndarray):
        declared = declared.tolist()
    if not isinstance(declared, (list, tuple)):
        raise TypeError(
            f"declared boundary list must be a Buckets, split hashes or (start, end) ranges, "
            f"not {type(declared).__name__}"
        )
    items = list(declared)
    if items and all(isinstance(x, (tuple, list)) for x in items):
        # Ranges, as a sharer declares them (KeySharedMeta.hashRanges / bucket_ranges).
        splits = []
        expected = 0
        for i, rng in enumerate(items):
            if len(rng) != 2:
                raise StaleLayoutError(f"declared range {i} is {rng!r}, not a (start, end) pair")
            start, end = (_check_hash(v, f"declared range {i} bound") for v in rng)
            if start != expected or end < start:
                raise StaleLayoutError(
                    f"declared ranges do not tile 0x0000..0xFFFF: range {i} is "
                    f"({start:#06x}, {end:#06x}), expected it to start at {expected:#06x}"
                )
            if i:
                splits.append(start)
            expected = end + 1
        if expected != 0x10000:
            raise StaleLayoutError(
                f"declared ranges do not tile 0x0000..0xFFFF: they end at {expected - 1:#06x}"
            )
        return tuple(splits)
    return tuple(_check_hash(v, f"declared split {i}") for i, v in enumerate(items))


# ---------------------------------------------------------------------------------------------
# Selector


class EntryBucketSelector:
    """Live sharers of one segment and the bucket → consumer spread of DESIGN.md §3.5.

    Consumers are kept sorted by ``(name, consumer_id)``; consumer ``j`` of ``k`` owns buckets
    ``[j*N//k, (j+1)*N//k)``. With more consumers than buckets, ``k - N`` of them own an empty
    range (they stay idle: owners are capped by ``N``); which ones follows from the formula.

    :func:`route_entries` updates three counters here: ``routed_entries``, ``straddling_entries``
    (stamps crossing a boundary of this list, routed whole by ``hash_min``) and
    ``malformed_entries`` (marked, never routed). Not thread-safe: one selector per segment,
    mutated by one thread (routing may run concurrently: each membership builds new tables).
    """

    def __init__(self, buckets: BucketsLike) -> None:
        self._buckets = _as_buckets(buckets)
        self._n = int(self._buckets.count)
        self._table = self._buckets.lookup_table()  # built once per boundary list, kept by it
        self._consumers: tuple[Consumer, ...] = ()
        self._owner = self._spread(0)
        self.routed_entries = 0
        self.straddling_entries = 0
        self.malformed_entries = 0

    def _spread(self, k: int) -> np.ndarray:
        owner = np.empty(self._n, dtype=np.int32)
        _dispatch.spread(owner, k)
        owner.flags.writeable = False
        return owner

    @property
    def buckets(self) -> Buckets:
        return self._buckets

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Members sorted by ``(name, consumer_id)``; route slots index this tuple."""
        return self._consumers

    @property
    def owner_slots(self) -> np.ndarray:
        """Read-only ``np.int32`` array: per bucket, the owner's index in :attr:`consumers`, or -1."""
        return self._owner

    def _change(self, consumers: tuple[Consumer, ...]) -> tuple[BucketMove, ...]:
        old_consumers, old_owner = self._consumers, self._owner
        new_owner = self._spread(len(consumers))
        self._consumers, self._owner = consumers, new_owner
        return _moves(old_consumers, old_owner, consumers, new_owner)

    def add_consumer(self, name: str, consumer_id: int, *, declared: Any = None) -> tuple[BucketMove, ...]:
        """Add a sharer; returns the buckets that moved (see :class:`BucketMove`).

        ``declared``: the boundary list the sharer subscribed with, checked by :meth:`validate`
        before anything changes. A consumer already present is a ``ValueError``.
        """
        consumer = _check_consumer(name, consumer_id)
        if consumer in self._consumers:
            raise ValueError(f"consumer {consumer!r} is already a member")
        if declared is not None:
            self.validate(declared)
        return self._change(tuple(sorted(self._consumers + (consumer,))))

    def remove_consumer(self, name: str, consumer_id: int) -> tuple[BucketMove, ...]:
        """Remove a sharer; returns the buckets that moved. An unknown consumer is a ``KeyError``."""
        consumer = _check_consumer(name, consumer_id)
        if consumer not in self._consumers:
            raise KeyError(f"consumer {consumer!r} is not a member")
        return self._change(tuple(c for c in self._consumers if c != consumer))

    def buckets_of(self, name: str, consumer_id: int) -> range:
        """The contiguous range of buckets a member owns (empty for an idle one)."""
        consumer = _check_consumer(name, consumer_id)
        try:
            j = self._consumers.index(consumer)
        except ValueError:
            raise KeyError(f"consumer {consumer!r} is not a member") from None
        k = len(self._consumers)
        return range(j * self._n // k, (j + 1) * self._n // k)

    def owner_of(self, hash: int) -> Consumer | None:
        """Owner of the bucket containing bucket hash ``hash`` (0..0xFFFF), or None."""
        slot = int(self._owner[self._table[_check_hash(hash, "hash")]])
        return None if slot < 0 else self._consumers[slot]

    def owners(self) -> list[Consumer | None]:
        """Per bucket, its owner or None."""
        return [None if s < 0 else self._consumers[s] for s in self._owner.tolist()]

    def validate(self, declared_splits: Any) -> None:
        """Raise :class:`StaleLayoutError` unless a sharer declared exactly this boundary list.

        ``declared_splits``: a :class:`Buckets`, the split hashes, or the inclusive ``(start, end)``
        ranges a sharer sends (its ``bucket_ranges``). An empty list means one bucket.
        """
        declared = _declared_splits(declared_splits)
        ours = tuple(self._buckets.splits)
        if declared == ours:
            return
        if len(declared) != len(ours):
            raise StaleLayoutError(
                f"declared boundary list has {len(declared) + 1} buckets, the segment has {len(ours) + 1}"
            )
        i = next(i for i, (a, b) in enumerate(zip(declared, ours)) if a != b)
        raise StaleLayoutError(
            f"declared split {i} (start of bucket {i + 1}) is {declared[i]:#06x}; "
            f"the segment's is {ours[i]:#06x}"
        )

    def __repr__(self) -> str:
        return f"EntryBucketSelector(buckets={self._n}, consumers={len(self._consumers)})"


def _moves(old_consumers: tuple[Consumer, ...], old_owner: np.ndarray,
           new_consumers: tuple[Consumer, ...], new_owner: np.ndarray) -> tuple[BucketMove, ...]:
    everyone = sorted(set(old_consumers) | set(new_consumers))
    code = {c: i for i, c in enumerate(everyone)}
    # Slot -1 indexes the appended -1: "no owner".
    old_codes = np.array([code[c] for c in old_consumers] + [-1], dtype=np.int64)[old_owner]
    new_codes = np.array([code[c] for c in new_consumers] + [-1], dtype=np.int64)[new_owner]
    changed = old_codes != new_codes
    if not changed.any():
        return ()
    pair = (old_codes + 1) * (len(everyone) + 1) + (new_codes + 1)
    pair = np.where(changed, pair, -1)
    starts = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
    ends = np.append(starts[1:], pair.size)
    moves = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if pair[s] < 0:
            continue
        o, nw = int(old_codes[s]), int(new_codes[s])
        moves.append(BucketMove(range(s, e), None if o < 0 else everyone[o], None if nw < 0 else everyone[nw]))
    return tuple(moves)


# ---------------------------------------------------------------------------------------------
# Vectorised routing


def route_entries(selector: EntryBucketSelector, hash_min: Any, *, key_hash: Any = None,
                  stamped: Any = None, hash_max: Any = None, malformed: str = "raise") -> np.ndarray:
    """Route entries whole: an ``np.int32`` array of indexes into ``selector.consumers``.

    * ``hash_min``: the stamps' minimum bucket hash (an integer column). A stamped entry routes by
      the bucket of ``hash_min``. ``None``: no entry is stamped.
    * ``stamped``: bool column; where False the entry routes by the bucket of ``key_hash & 0xFFFF``
      (the bucket the producer would have stamped) and its ``hash_min`` is ignored. ``None``:
      every entry is stamped (or none, when ``hash_min`` is None).
    * ``key_hash``: the message key's Murmur3 hash (raw 32-bit, or just the low 16 bits), or a
      :class:`KeyHashes`; required when some entry is unstamped.
    * ``hash_max``: optional. Checked (``hash_min <= hash_max``) and used to count entries whose
      stamp crosses a boundary of the selector's list into ``selector.straddling_entries`` —
      they still route whole by ``hash_min``.

    -1 (:data:`NO_CONSUMER`) where no consumer owns the bucket. A malformed stamp (a value outside
    0..0xFFFF, or ``hash_min > hash_max``) raises :class:`MalformedStampError` naming the entry's
    index, before anything is counted; with ``malformed="mark"`` it gets slot -2 (:data:`MALFORMED`)
    instead, is counted in ``selector.malformed_entries``, and the rest route normally.
    """
    if not isinstance(selector, EntryBucketSelector):
        raise TypeError(f"selector must be an EntryBucketSelector, not {type(selector).__name__}")
    if malformed not in ("raise", "mark"):
        raise ValueError(f"malformed must be 'raise' or 'mark', not {malformed!r}")
    inp = _route_input(hash_min, hash_max, key_hash, stamped)
    out = np.empty(inp.n, dtype=np.int32)
    status, index, straddling, bad = _dispatch.route(
        selector._table, selector._owner, inp.lo, inp.hi, inp.stamped, inp.key_hash, inp.flagged,
        out, None, None, malformed == "mark",
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, inp)
    selector.routed_entries += inp.n - bad
    selector.straddling_entries += straddling
    selector.malformed_entries += bad
    return out


_ZERO_TABLE = np.zeros(65536, dtype=np.uint16)
_ZERO_TABLE.flags.writeable = False


def sticky_hashes(hash_min: Any, *, key_hash: Any = None, stamped: Any = None) -> np.ndarray:
    """The hash a broker records for each entry (``np.uint16``): the stamp's ``hash_min`` or the
    key's low 16 bits, with 0 nudged to 1 (a Pulsar broker reads 0 as "no hash").

    This is the hash exposed to pending-ack and redelivery bookkeeping; routing itself uses the
    bucket of the un-nudged value (see :func:`route_entries`). Arguments as in route_entries.
    """
    inp = _route_input(hash_min, None, key_hash, stamped)
    out = np.empty(inp.n, dtype=np.uint16)
    status, index, _, _ = _dispatch.route(
        _ZERO_TABLE, None, inp.lo, None, inp.stamped, inp.key_hash, inp.flagged, None, None, out, False
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, inp)
    return out


# Below this many entries fits_one_bucket searches per entry instead of building a table.
_TABLE_THRESHOLD = 8192


def fits_one_bucket(buckets: BucketsLike, hash_min: Any, hash_max: Any) -> np.ndarray:
    """Per stamped entry, whether ``[hash_min, hash_max]`` lies inside one bucket of ``buckets``.

    Such an entry still routes whole under that boundary list (geo-replication into another
    layout, a rebucketed successor). A bool array; a malformed stamp raises
    :class:`MalformedStampError` naming its index.
    """
    buckets = _as_buckets(buckets)
    original_min, lo, flagged = _stamp_column(hash_min, "hash_min")
    original_max, hi, flagged_max = _stamp_column(hash_max, "hash_max")
    if hi.size != lo.size:
        raise ValueError(f"hash_max has {hi.size} items; hash_min has {lo.size}")
    if flagged_max is not None:
        flagged = flagged_max if flagged is None else flagged | flagged_max
    out = np.empty(lo.size, dtype=np.bool_)
    table = buckets.lookup_table() if lo.size >= _TABLE_THRESHOLD else None
    status, index = _dispatch.fits(
        buckets.splits_array, table, lo, hi,
        None if flagged is None else np.ascontiguousarray(flagged, dtype=np.uint8), out.view(np.uint8),
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, _RouteInput(lo.size, original_min, original_max, lo, hi,
                                                    None, None, None))
    return out


# ---------------------------------------------------------------------------------------------
# Stateful dispatcher


@dataclass(frozen=True, eq=False)
class Deliveries:
    """What a consumer is to be sent, in order: ``entry_ids`` (``np.int64``), ``hashes`` (the
    entries' sticky hashes, ``np.uint16``, 0 nudged to 1) and ``redelivered`` (``np.bool_``: a
    redelivery after its previous holder crashed)."""

    entry_ids: np.ndarray
    hashes: np.ndarray
    redelivered: np.ndarray

    def __len__(self) -> int:
        return int(self.entry_ids.size)


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


class _Member:
    __slots__ = ("key", "consumer", "leaving")

    def __init__(self, key: int, consumer: Consumer) -> None:
        self.key = key
        self.consumer = consumer
        self.leaving = False


def _paused(owner: np.ndarray, holder: np.ndarray) -> np.ndarray:
    """Per bucket: owned, but another consumer still holds unacknowledged entries of it."""
    return (owner >= 0) & (holder >= 0) & (holder != owner)


def _one(value: Any) -> Any:
    if isinstance(value, KeyHashes):
        value = value.raw
    return None if value is None else (value if np.ndim(value) else [value])


def _entry_id_column(values: Any, name: str = "entry_ids") -> np.ndarray:
    if _is_int(values):
        values = [values]
    ids = _int_column(values, name)
    if ids.dtype == np.uint64 and ids.size and int(ids.max()) > _INT64_MAX:
        i = int(np.argmax(ids > _INT64_MAX))
        raise ValueError(f"entry id at index {i} is {int(ids[i])}, above the int64 range")
    return np.ascontiguousarray(ids, dtype=np.int64)


class Dispatcher:
    """Stateful broker dispatcher of one shared segment (DESIGN.md §3.5).

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

    Not thread-safe: one dispatcher per segment, driven by one thread (or under one lock).
    """

    def __init__(self, buckets: BucketsLike) -> None:
        self._selector = EntryBucketSelector(buckets)
        self._n = self._selector._n
        # Per-entry and per-bucket state lives in the compiled core; names and membership here.
        self._core = _dispatch.DispatchCore(self._selector._table, self._n)
        self._members: dict[Consumer, _Member] = {}
        self._by_key: dict[int, _Member] = {}
        self._next_key = 0
        self._last_id: int | None = None
        self.offered_entries = 0
        self.straddling_entries = 0

    # -- views --------------------------------------------------------------------------------

    @property
    def buckets(self) -> Buckets:
        return self._selector.buckets

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Active members sorted by ``(name, consumer_id)`` (the spread's order)."""
        return self._selector.consumers

    @property
    def leaving(self) -> tuple[Consumer, ...]:
        """Consumers that left cleanly and still hold unacknowledged entries."""
        return tuple(sorted(c for c, m in self._members.items() if m.leaving))

    def owners(self) -> list[Consumer | None]:
        return self._selector.owners()

    def buckets_of(self, name: str, consumer_id: int) -> range:
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
        """Buckets withheld from their owner right now (``np.int32`` bucket indexes)."""
        return np.flatnonzero(self._paused_mask()).astype(np.int32)

    def bucket_stats(self) -> BucketStats:
        owner, holder, delivered, pending, queued = self._core.bucket_columns()
        return BucketStats(self._selector.owner_slots.copy(), delivered, pending, queued, _paused(owner, holder))

    def consumer_stats(self, name: str | None = None, consumer_id: int | None = None) -> Any:
        """Counters of one consumer (:class:`ConsumerStats`), or of all of them (a dict) when
        called without arguments."""
        if name is None and consumer_id is None:
            paused_mask = self._paused_mask()  # once for every consumer
            return {c: self._stats_of(m, paused_mask) for c, m in sorted(self._members.items())}
        return self._stats_of(self._member(name, consumer_id), self._paused_mask())

    def _stats_of(self, m: _Member, paused_mask: np.ndarray) -> ConsumerStats:
        delivered, messages, redelivered, acked, pending, pending_messages = self._core.key_stats(m.key)
        if m.leaving:
            owned = range(0)
            paused = 0
        else:
            owned = self._selector.buckets_of(*m.consumer)
            paused = int(np.count_nonzero(paused_mask[owned.start:owned.stop]))
        return ConsumerStats(m.consumer, "leaving" if m.leaving else "active", owned, delivered,
                             messages, redelivered, acked, pending, pending_messages, paused)

    def _member(self, name: Any, consumer_id: Any) -> _Member:
        consumer = _check_consumer(name, consumer_id)
        m = self._members.get(consumer)
        if m is None:
            raise KeyError(f"consumer {consumer!r} is not connected to this dispatcher")
        return m

    def _pending_of(self, m: _Member) -> int:
        _, _, _, _, pending, _ = self._core.key_stats(m.key)
        return int(pending)

    # -- membership ---------------------------------------------------------------------------

    def add_consumer(self, name: str, consumer_id: int, *, declared: Any = None) -> tuple[BucketMove, ...]:
        """A sharer joins; returns the buckets that moved. Buckets it takes over stay paused until
        their previous holder has acked (or crashed). ``declared``: its boundary list, validated
        (``StaleLayoutError`` on mismatch). Re-adding a connected consumer (active, or leaving with
        unacked entries) is a ``ValueError``."""
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
        m = _Member(self._next_key, consumer)
        self._next_key += 1
        self._core.add_key(m.key)
        self._members[consumer] = m
        self._by_key[m.key] = m
        self._refresh_owners()
        return moves

    def remove_consumer(self, name: str, consumer_id: int, *, crash: bool = False) -> tuple[BucketMove, ...]:
        """A sharer leaves; returns the buckets that moved.

        Clean leave: it keeps its unacked entries (and may ack them); the buckets it held stay
        paused for their new owners until it has. ``crash=True``: its unacked entries are
        redelivered to the new owners first, in order. A consumer that already left cleanly may be
        removed again with ``crash=True`` (it disconnected before acking); without, ``ValueError``.
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
            moves: tuple[BucketMove, ...] = ()
        else:
            moves = self._selector.remove_consumer(name, consumer_id)
            self._refresh_owners()
        if crash:
            self._core.requeue(m.key)
            self._forget(m)
        else:
            m.leaving = True
            if self._pending_of(m) == 0:
                self._forget(m)
        return moves

    def _forget(self, m: _Member) -> None:
        self._core.take_outbox_of(m.key)  # nothing left to send to a consumer that is gone
        del self._members[m.consumer]
        del self._by_key[m.key]

    def _refresh_owners(self) -> None:
        keys = np.array([self._members[c].key for c in self._selector.consumers] + [-1], dtype=np.int32)
        self._core.set_owners(np.ascontiguousarray(keys[self._selector.owner_slots]))

    # -- entries, acks, delivery --------------------------------------------------------------

    def offer(self, entry_ids: Any, hash_min: Any = None, *, hash_max: Any = None, key_hash: Any = None,
              stamped: Any = None, message_count: Any = None) -> int:
        """Take committed entries, in offset order; returns how many went straight to an outbox.

        ``entry_ids``: ledger entry ids / offsets (ints >= 0), strictly increasing within the call
        and above every id offered before. Stamp and key columns as in :func:`route_entries`
        (``hash_max`` optional: validates stamps and counts ``straddling_entries``).
        ``message_count``: messages per entry (ints >= 1, default 1), for the message counters.
        One entry may be given as scalars. A bad column is an error and changes nothing.
        """
        if (type(entry_ids) is int and type(hash_min) is int and hash_max is None and key_hash is None
                and stamped is None and message_count is None and 0 <= hash_min <= MAX_HASH
                and 0 <= entry_ids <= _INT64_MAX and (self._last_id is None or entry_ids > self._last_id)):
            # The hottest call shape (one well-formed stamped entry): no column, no other checks.
            self._last_id = entry_ids
            self.offered_entries += 1
            return int(self._core.offer_stamped(entry_ids, hash_min))
        if _is_int(entry_ids):
            delivered = self._offer_scalar(entry_ids, hash_min, hash_max, key_hash, stamped, message_count)
            if delivered is not None:
                return delivered
            # One entry given as scalars: make every given column one item long.
            entry_ids, hash_min, hash_max, key_hash, stamped, message_count = (
                [entry_ids], _one(hash_min), _one(hash_max), _one(key_hash), _one(stamped),
                _one(message_count))
        ids = _entry_id_column(entry_ids)
        n = ids.size
        if n:
            if int(ids.min()) < 0:
                i = int(np.argmax(ids < 0))
                raise ValueError(f"entry id at index {i} is {int(ids[i])}; entry ids are >= 0")
            steps = np.diff(ids)
            if steps.size and int(steps.min()) <= 0:
                i = int(np.argmax(steps <= 0)) + 1
                raise ValueError(
                    f"entry ids must increase (offset order): index {i} is {int(ids[i])} after {int(ids[i - 1])}"
                )
            if self._last_id is not None and int(ids[0]) <= self._last_id:
                raise ValueError(
                    f"entry id at index 0 is {int(ids[0])}, not after the last offered id {self._last_id}"
                )
        inp = _route_input(hash_min, hash_max, key_hash, stamped)
        if inp.n != n:
            raise ValueError(f"the stamp/key columns have {inp.n} items; entry_ids has {n}")
        if message_count is None:
            msgs = np.ones(n, dtype=np.int64)
        else:
            msgs = _int_column(message_count, "message_count")
            if msgs.size != n:
                raise ValueError(f"message_count has {msgs.size} items; entry_ids has {n}")
            if n and int(msgs.min()) < 1:
                i = int(np.argmax(msgs < 1))
                raise ValueError(f"message_count at index {i} is {int(msgs[i])}; an entry holds >= 1 message")
            if msgs.dtype == np.uint64 and n and int(msgs.max()) > _INT64_MAX:
                raise ValueError("message_count above the int64 range")
            msgs = msgs.astype(np.int64, copy=False)
        bucket = np.empty(n, dtype=np.int32)
        hashes = np.empty(n, dtype=np.uint16)
        status, index, straddling, _ = _dispatch.route(
            self._selector._table, None, inp.lo, inp.hi, inp.stamped, inp.key_hash, inp.flagged,
            None, bucket, hashes, False,
        )
        if status != Status.BC_OK:
            _raise_malformed(status, index, inp)
        if n == 0:
            return 0
        # Validated: from here on nothing can fail half-way.
        self._last_id = int(ids[-1])
        self.offered_entries += n
        self.straddling_entries += straddling
        return int(self._core.offer(ids, bucket, hashes, np.ascontiguousarray(msgs, dtype=np.int64)))

    def ack(self, name: str, consumer_id: int, entry_ids: Any) -> int:
        """Individual acks from a consumer (one id or a column); returns how many were acked.

        Every id must be pending on that consumer (delivered to it, not yet acked), else a
        ``KeyError`` (not pending on it: unknown, already acked, queued, or held by another
        consumer) or ``ValueError`` (the same id twice in the call) naming the id, and nothing is
        acked. Acking the last entry a consumer held of a moved bucket unpauses that bucket.
        """
        m = self._members.get((name, consumer_id)) if type(name) is str and type(consumer_id) is int else None
        if m is None:
            m = self._member(name, consumer_id)
        if _is_int(entry_ids) and 0 <= entry_ids <= _INT64_MAX:
            entry = int(entry_ids)
            status = self._core.ack_one(m.key, entry)
            if status != Status.BC_OK:
                holder = self._core.entry_holder(entry)
                check_status(status, 0, entry=entry, consumer=m.consumer,
                             holder=self._by_key[holder].consumer if status == Status.BC_ERR_ACK_OTHER else None)
            if m.leaving and self._pending_of(m) == 0:
                self._forget(m)
            return 1
        if _is_int(entry_ids):
            entry_ids = [int(entry_ids)]
        elif np.ndim(entry_ids) == 0:
            raise TypeError(f"entry_ids must be an int or a column of ints, not {type(entry_ids).__name__}")
        if isinstance(entry_ids, (list, tuple)):
            plain = plain_ints(entry_ids)  # the common list: no item loop (negatives caught below)
            if plain is None:
                # Python ints beyond int64 would make an object column: they are simply not pending.
                for i, v in enumerate(entry_ids):
                    if _is_int(v) and not 0 <= v <= _INT64_MAX:
                        self._not_an_entry(m, i, int(v))
            else:
                entry_ids = plain
        raw = _int_column(entry_ids, "entry_ids")  # TypeError / ValueError name a bad dtype or shape
        bad = _out_of_range(raw, _INT64_MAX)
        if bad is not None:
            i = int(np.flatnonzero(bad)[0])
            self._not_an_entry(m, i, int(raw[i]))
        ids = np.ascontiguousarray(raw, dtype=np.int64)
        if ids.size == 0:
            return 0
        status, index, detail = self._core.ack(m.key, ids)
        if status != Status.BC_OK:
            holder = self._by_key[detail].consumer if status == Status.BC_ERR_ACK_OTHER else None
            check_status(status, index, entry=int(ids[index]), consumer=m.consumer, holder=holder)
        if m.leaving and self._pending_of(m) == 0:
            self._forget(m)
        return int(ids.size)

    @staticmethod
    def _not_an_entry(m: _Member, index: int, entry: int) -> None:
        raise KeyError(f"entry {entry} (index {index}) is not pending on consumer {m.consumer!r}: "
                       "outside the entry id range 0..2**63-1")

    def _offer_scalar(self, entry_id: Any, hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any,
                      message_count: Any) -> int | None:
        """``offer`` of one entry given as plain scalars, without building columns; None when some
        argument is not a plain scalar (the column path handles it). Same checks, same errors."""
        for v in (hash_min, hash_max, key_hash, message_count):
            if v is not None and not _is_int(v):
                return None
        if stamped is not None and not isinstance(stamped, (bool, np.bool_)):
            return None
        entry = int(entry_id)
        if not 0 <= entry <= _INT64_MAX:
            raise ValueError(f"entry id at index 0 is {entry}; entry ids are >= 0 and fit in int64")
        if self._last_id is not None and entry <= self._last_id:
            raise ValueError(f"entry id at index 0 is {entry}, not after the last offered id {self._last_id}")
        if hash_min is None:
            if key_hash is None:
                raise TypeError("pass hash_min (stamped entries) or key_hash (unstamped entries)")
            if stamped is not None or hash_max is not None:
                raise TypeError("stamped and hash_max need hash_min")
            is_stamped = False
        elif stamped is None:
            if key_hash is not None:
                raise TypeError(
                    "key_hash routes only unstamped entries: pass stamped= (a bool column) to say which "
                    "entries carry a stamp"
                )
            is_stamped = True
        else:
            is_stamped = bool(stamped)
            if not is_stamped and key_hash is None:
                raise ValueError("entry at index 0 is unstamped and no key_hash was given")
        if key_hash is not None and not 0 <= int(key_hash) <= 0xFFFFFFFF:
            raise ValueError(f"key_hash at index 0 is {int(key_hash)}, outside 0..0xFFFFFFFF")
        msgs = 1 if message_count is None else int(message_count)
        if msgs < 1:
            raise ValueError(f"message_count at index 0 is {msgs}; an entry holds >= 1 message")
        if msgs > _INT64_MAX:
            raise ValueError("message_count above the int64 range")
        table = self._selector._table
        straddling = 0
        if is_stamped:
            h = int(hash_min)
            if not 0 <= h <= MAX_HASH:
                raise MalformedStampError(
                    f"entry at index 0 has a malformed stamp: hash_min={h} is outside 0..0xFFFF", 0)
            if hash_max is not None:
                hi = int(hash_max)
                if not 0 <= hi <= MAX_HASH:
                    raise MalformedStampError(
                        f"entry at index 0 has a malformed stamp: hash_max={hi} is outside 0..0xFFFF", 0)
                if h > hi:
                    raise MalformedStampError(
                        f"entry at index 0 has a malformed stamp: hash_min={h:#06x} > hash_max={hi:#06x}", 0)
                straddling = int(table[hi] != table[h])
        else:
            h = int(key_hash) & 0xFFFF
        self._last_id = entry
        self.offered_entries += 1
        self.straddling_entries += straddling
        return int(self._core.offer_one(entry, int(table[h]), h if h else 1, msgs))

    def poll(self, name: str | None = None, consumer_id: int | None = None) -> Any:
        """Empty the outboxes: with no arguments a dict ``{consumer: Deliveries}`` of every
        consumer with something to send; for one consumer its :class:`Deliveries` (maybe empty)."""
        if name is not None or consumer_id is not None:
            m = self._member(name, consumer_id)
            return Deliveries(*self._core.take_outbox_of(m.key))
        keys, entry_ids, hashes, redelivered = self._core.take_outbox()
        if keys.size == 0:
            return {}
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        cuts = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
        out = {}
        for group in np.split(order, cuts):
            consumer = self._by_key[int(keys[group[0]])].consumer
            out[consumer] = Deliveries(entry_ids[group], hashes[group], redelivered[group])
        return dict(sorted(out.items()))

    def __repr__(self) -> str:
        pending, queued = self._core.totals()
        return (f"Dispatcher(buckets={self._n}, consumers={len(self.consumers)}, "
                f"leaving={len(self.leaving)}, pending={pending}, queued={queued})")
