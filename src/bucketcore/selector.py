"""The bucket spread of one shared segment: which sharer owns which bucket (docs/design.md, "Dispatch").

:class:`EntryBucketSelector` keeps the live membership of one shared segment and spreads its
buckets deterministically over the sharers (consumers sorted by ``(name, id)``, consumer ``j`` of
``k`` owns buckets ``[j*N//k, (j+1)*N//k)``); membership changes report the buckets that moved
(:class:`BucketMove`). It refuses a boundary list a broker cannot dispatch by (bucket 0 must hold
its canonical hash 1) and checks the list each sharer declares.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from _bucketcore import _dispatch

from .buckets import Buckets
from .errors import StaleLayoutError
from .validation import UINT64_MAX, check_hash, is_int

__all__ = ["Consumer", "BucketsLike", "BucketMove", "BucketMoves", "EntryBucketSelector"]

Consumer = tuple[str, int]
BucketsLike = Buckets | Sequence[int]


@dataclass(frozen=True, slots=True)
class BucketMove:
    """Buckets that changed owner in one membership change.

    ``buckets`` is a contiguous ``range`` of bucket indexes; ``old_owner`` / ``new_owner`` are
    ``(name, consumer_id)`` or ``None`` (no consumer before / after: the first join, the last
    leave). A membership change returns these, sorted by first bucket, as a :class:`BucketMoves`;
    buckets whose owner did not change do not appear.
    """

    buckets: range
    old_owner: Consumer | None
    new_owner: Consumer | None


# The moves of one membership change: a compiled immutable sequence of BucketMove that behaves as
# their tuple and builds each BucketMove when it is read.
BucketMoves = _dispatch.BucketMoves
_dispatch.set_move_type(BucketMove)


def _as_buckets(buckets: Any, name: str = "buckets") -> Buckets:
    if isinstance(buckets, Buckets):
        return buckets
    if isinstance(buckets, (list, tuple)):
        return Buckets(tuple(buckets))
    raise TypeError(f"{name} must be a Buckets or a sequence of split hashes, not {type(buckets).__name__}")


def _check_consumer(name: Any, consumer_id: Any) -> Consumer:
    if not isinstance(name, str):
        raise TypeError(f"consumer name must be a str, not {type(name).__name__}")
    if not is_int(consumer_id):
        raise TypeError(f"consumer_id must be an int, not {type(consumer_id).__name__}")
    # the protocol's consumer_id is a uint64 (CommandSubscribe and every consumer command)
    if not 0 <= consumer_id <= UINT64_MAX:
        raise ValueError(f"consumer_id must be 0..2**64-1 (a uint64 on the wire), not {int(consumer_id)}")
    return (name, int(consumer_id))


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
            start, end = (check_hash(v, f"declared range {i} bound") for v in rng)
            if start != expected or end < start:
                raise StaleLayoutError(
                    f"declared ranges do not tile 0x0000..0xFFFF: range {i} is "
                    f"({start:#06x}, {end:#06x}), expected it to start at {expected:#06x}"
                )
            if i:
                splits.append(start)
            expected = end + 1
        if expected != 0x10000:
            raise StaleLayoutError(f"declared ranges do not tile 0x0000..0xFFFF: they end at {expected - 1:#06x}")
        return tuple(splits)
    return tuple(check_hash(v, f"declared split {i}") for i, v in enumerate(items))


class EntryBucketSelector(_dispatch.SelectorBase):
    """Live sharers of one segment and the bucket -> consumer spread of docs/design.md ("Dispatch").

    Consumers are kept sorted by ``(name, consumer_id)``; consumer ``j`` of ``k`` owns buckets
    ``[j*N//k, (j+1)*N//k)``. With more consumers than buckets, ``k - N`` of them own an empty
    range (they stay idle: owners are capped by ``N``); which ones follows from the formula.

    :func:`route_entries` updates three counters here: ``routed_entries``, ``straddling_entries``
    (stamps crossing a boundary of this list, routed whole by ``hash_min``) and
    ``malformed_entries`` (marked, never routed). Not thread-safe: one selector per segment,
    mutated by one thread (routing may run concurrently: each membership builds new tables, and
    the members and their spread are replaced together). :meth:`owner_of` is a C method of the
    compiled base (:class:`_bucketcore._dispatch.SelectorBase`).

    Parameters
    ----------
    buckets : Buckets or sequence of int
        The segment's boundary list (a Buckets or its split hashes).

    Raises
    ------
    TypeError
        ``buckets`` is neither a Buckets nor a sequence.
    InvalidBoundaryError
        Invalid splits, or a first split of 1: bucket 0 could not hold its canonical hash 1, so the
        list cannot be dispatched (the reference dispatcher refuses it too).
    """

    def __init__(self, buckets: BucketsLike) -> None:
        self._buckets = _as_buckets(buckets)
        # as the reference dispatcher: bucket 0 must hold its canonical hash 1
        self._buckets.check_dispatchable("the segment's boundary list")
        self._n = int(self._buckets.count)
        self._table = self._buckets.lookup_table()  # built once per boundary list, kept by it
        self._set_spread(())  # the spread of no consumer: every bucket unowned
        self.routed_entries = 0
        self.straddling_entries = 0
        self.malformed_entries = 0

    @property
    def buckets(self) -> Buckets:
        """The segment's boundary list."""
        return self._buckets

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        """Members sorted by ``(name, consumer_id)``; route slots index this tuple."""
        return self._consumers

    @property
    def owner_slots(self) -> np.ndarray:
        """Read-only ``np.int32`` array: per bucket, the owner's index in :attr:`consumers`, or -1."""
        return self._owner

    def _change(self, consumers: tuple[Consumer, ...], index: int, joined: bool) -> BucketMoves:
        """Take the membership ``consumers``: the old one with the consumer at ``index`` of the
        new one added (``joined``) or at ``index`` of the old one removed."""
        old_consumers = self._consumers
        self._set_spread(consumers)
        # codes into the larger of the two memberships (the other one lacks one consumer)
        if joined:
            everyone = consumers
            old_code = _dispatch.slot_codes(len(old_consumers), index)
            new_code = _dispatch.slot_codes(len(consumers), len(consumers))
        else:
            everyone = old_consumers
            old_code = _dispatch.slot_codes(len(old_consumers), len(old_consumers))
            new_code = _dispatch.slot_codes(len(consumers), index)
        # computed from the two spreads' slot boundaries: the cost grows with the consumers, not the buckets
        return _dispatch.spread_moves(everyone, self._n, old_code, new_code)

    def add_consumer(self, name: str, consumer_id: int, *, declared: Any = None) -> BucketMoves:
        """Add a sharer.

        Parameters
        ----------
        name : str
        consumer_id : int
            0..2**64-1 (a uint64 on the wire).
        declared : Buckets, sequence of int or sequence of (start, end), optional
            The boundary list the sharer subscribed with; checked by :meth:`validate` before anything
            changes.

        Returns
        -------
        BucketMoves
            The buckets that changed owner, by first bucket (a sequence of BucketMove).

        Raises
        ------
        TypeError
            A name that is not a str or an id that is not an int.
        ValueError
            The id is outside the uint64 range, or the consumer is already a member.
        StaleLayoutError, InvalidBoundaryError
            As :meth:`validate`.
        """
        consumer = _check_consumer(name, consumer_id)
        members = self._consumers
        i = bisect.bisect_left(members, consumer)
        if i < len(members) and members[i] == consumer:
            raise ValueError(f"consumer {consumer!r} is already a member")
        if declared is not None:
            self.validate(declared)
        return self._change(members[:i] + (consumer,) + members[i:], i, True)

    def remove_consumer(self, name: str, consumer_id: int) -> BucketMoves:
        """Remove a sharer.

        Parameters
        ----------
        name : str
        consumer_id : int

        Returns
        -------
        BucketMoves
            The buckets that changed owner, by first bucket (a sequence of BucketMove).

        Raises
        ------
        TypeError, ValueError
            As :meth:`add_consumer` for the name and id.
        KeyError
            The consumer is not a member.
        """
        consumer = _check_consumer(name, consumer_id)
        members = self._consumers
        i = bisect.bisect_left(members, consumer)
        if i == len(members) or members[i] != consumer:
            raise KeyError(f"consumer {consumer!r} is not a member")
        return self._change(members[:i] + members[i + 1 :], i, False)

    def buckets_of(self, name: str, consumer_id: int) -> range:
        """The contiguous range of buckets a member owns (empty for an idle one).

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
            As :meth:`add_consumer` for the name and id.
        KeyError
            The consumer is not a member.
        """
        consumer = _check_consumer(name, consumer_id)
        members = self._consumers  # one membership, whatever another thread changes meanwhile
        j = bisect.bisect_left(members, consumer)
        if j == len(members) or members[j] != consumer:
            raise KeyError(f"consumer {consumer!r} is not a member")
        k = len(members)
        return range(j * self._n // k, (j + 1) * self._n // k)

    def _owner_of_general(self, hash: Any) -> Consumer | None:
        """``owner_of`` of a hash the compiled path does not take: a numpy integer, or the error."""
        owner, members = self._spread
        slot = int(owner[self._table[check_hash(hash, "hash")]])
        return None if slot < 0 else members[slot]

    def owners(self) -> list[Consumer | None]:
        """Per bucket, its owner.

        Returns
        -------
        list of (str, int) or None
            One item per bucket: ``(name, consumer_id)`` or None.
        """
        owner, members = self._spread
        return [None if s < 0 else members[s] for s in owner.tolist()]

    def validate(self, declared_splits: Any) -> None:
        """Check that a sharer declared exactly this segment's boundary list.

        Parameters
        ----------
        declared_splits : Buckets, sequence of int or sequence of (start, end)
            A :class:`Buckets`, the split hashes, or the inclusive ``(start, end)`` ranges a sharer
            sends (its ``bucket_ranges``). An empty list means one bucket.

        Raises
        ------
        TypeError
            ``declared_splits`` is none of these forms.
        ValueError
            A split or range bound outside 0..0xFFFF.
        InvalidBoundaryError
            The declared list's first split is 1 (bucket 0 cannot hold its canonical hash 1).
        StaleLayoutError
            The declared list differs from the segment's (the message names the first difference), or
            its ranges do not tile 0x0000..0xFFFF.
        """
        declared = _declared_splits(declared_splits)
        if declared and declared[0] == 1:
            Buckets(declared).check_dispatchable("the declared boundary list")
        ours = tuple(self._buckets.splits)
        if declared == ours:
            return
        if len(declared) != len(ours):
            raise StaleLayoutError(
                f"declared boundary list has {len(declared) + 1} buckets, the segment has {len(ours) + 1}"
            )
        i = next(i for i, (a, b) in enumerate(zip(declared, ours, strict=False)) if a != b)
        raise StaleLayoutError(
            f"declared split {i} (start of bucket {i + 1}) is {declared[i]:#06x}; the segment's is {ours[i]:#06x}"
        )

    def __repr__(self) -> str:
        return f"EntryBucketSelector(buckets={self._n}, consumers={len(self._consumers)})"
