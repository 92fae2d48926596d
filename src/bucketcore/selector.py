"""The bucket spread of one shared segment: which sharer owns which bucket (docs/design.md, "Dispatch").

:class:`EntryBucketSelector` keeps the live membership of one shared segment and spreads its
buckets deterministically over the sharers (consumers sorted by ``(name, id)``, consumer ``j`` of
``k`` owns buckets ``[j*N//k, (j+1)*N//k)``); membership changes report the buckets that moved
(:class:`BucketMove`). It refuses a boundary list a broker cannot dispatch by (bucket 0 must hold
its canonical hash 1) and checks the list each sharer declares.
"""

from __future__ import annotations

import bisect
import functools
import operator
import sys
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, SupportsIndex, overload

import numpy as np

from _bucketcore import _dispatcher, _selector

from .buckets import Buckets
from .errors import StaleLayoutError
from .validation import UINT64_MAX, check_hash, is_int

__all__ = ["Consumer", "BucketsLike", "BucketMove", "BucketMoves", "NO_MOVES", "EntryBucketSelector"]

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


class BucketMoves:
    """The buckets that changed owner in one membership change: an immutable sequence of
    :class:`BucketMove`, sorted by first bucket.

    It behaves as the tuple of those moves: ``len()``, indexing (negative too), slices (a
    ``BucketMoves``), iteration, ``in``, ``index``, ``count``, ``==`` / ``<`` against a tuple of
    BucketMove or another ``BucketMoves``, ``hash``, ``+`` / ``*`` (giving tuples), its ``repr`` and
    pickling. The moves are held as the kernel's columns; each ``BucketMove`` is built when read,
    so a membership change costs in proportion to the runs of moved buckets, not to Python
    objects. Bulk users read the columns :attr:`starts`, :attr:`stops`, :attr:`old_owners` and
    :attr:`new_owners` instead.

    Parameters
    ----------
    moves : iterable of BucketMove, optional
        The moves, each over a non-empty ``range`` of buckets with step 1 within 0..65536.

    Raises
    ------
    TypeError
        ``moves`` is not iterable, or an item is not a BucketMove or its ``buckets`` is not a range
        (naming the item's index).
    ValueError
        An item's range is empty, has a step other than 1 or lies outside 0..65536 (naming the index).
    """

    __slots__ = ("_starts", "_stops", "_old", "_new", "_owners", "_items")

    def __init__(self, moves: Iterable[BucketMove] = ()) -> None:
        if hasattr(self, "_owners"):
            raise TypeError("a BucketMoves cannot change once built")
        try:
            items = list(moves)
        except TypeError:
            raise TypeError(f"moves must be an iterable of BucketMove, not {type(moves).__name__}") from None
        rows: list[tuple[int, int, int, int]] = []
        owners: list[Consumer] = []
        for i, m in enumerate(items):
            if type(m) is not BucketMove:
                raise TypeError(f"move {i} is a {type(m).__name__}, not a BucketMove")
            bk = m.buckets
            if type(bk) is not range:
                raise TypeError(f"move {i}: buckets is a {type(bk).__name__}, not a range")
            if bk.step != 1 or not 0 <= bk.start < bk.stop <= 65536:
                raise ValueError(f"move {i}: buckets {bk!r} is not a non-empty range of step 1 within 0..65536")
            rows.append((bk.start, bk.stop, _owner_code(owners, m.old_owner), _owner_code(owners, m.new_owner)))
        columns = np.array(rows, dtype=np.int32).reshape(len(rows), 4).T
        self._fill(*columns, tuple(owners))

    def _fill(self, starts: np.ndarray, stops: np.ndarray, old: np.ndarray, new: np.ndarray, owners: tuple) -> None:
        self._starts, self._stops, self._old, self._new = starts, stops, old, new
        self._items: tuple[BucketMove, ...] | None = None
        self._owners = owners  # set last: the moves are built

    @classmethod
    def _of_columns(
        cls, starts: np.ndarray, stops: np.ndarray, old: np.ndarray, new: np.ndarray, owners: tuple
    ) -> BucketMoves:
        """Moves from the kernel's columns (codes index ``owners``, -1 for none)."""
        out = cls.__new__(cls)
        out._fill(starts, stops, old, new, owners)
        return out

    def _owner(self, code: int) -> Consumer | None:
        return None if code < 0 else self._owners[code]

    def _as_tuple(self) -> tuple[BucketMove, ...]:
        if self._items is None:
            owner = self._owner
            self._items = tuple(
                BucketMove(range(s, e), owner(o), owner(w))
                for s, e, o, w in zip(
                    self._starts.tolist(), self._stops.tolist(), self._old.tolist(), self._new.tolist(), strict=True
                )
            )
        return self._items

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: SupportsIndex) -> BucketMove: ...
    @overload
    def __getitem__(self, index: slice) -> BucketMoves: ...
    def __getitem__(self, index: SupportsIndex | slice) -> BucketMove | BucketMoves:
        if isinstance(index, slice):
            return BucketMoves._of_columns(
                self._starts[index].copy(),
                self._stops[index].copy(),
                self._old[index].copy(),
                self._new[index].copy(),
                self._owners,
            )
        try:
            i = operator.index(index)
        except TypeError:
            raise TypeError(f"BucketMoves indices must be integers or slices, not {type(index).__name__}") from None
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("BucketMoves index out of range")
        return self._as_tuple()[i]

    def __iter__(self) -> Iterator[BucketMove]:
        return iter(self._as_tuple())

    def __reversed__(self) -> Iterator[BucketMove]:
        return reversed(self._as_tuple())

    def __contains__(self, value: object) -> bool:
        return value in self._as_tuple()

    def index(self, value: object, start: SupportsIndex = 0, stop: SupportsIndex | None = None) -> int:
        """The index of the first move equal to ``value`` in ``[start, stop)``, as ``tuple.index``.

        Raises
        ------
        ValueError
            No move equals ``value``.
        """
        try:
            return self._as_tuple().index(value, start, sys.maxsize if stop is None else stop)
        except ValueError:
            raise ValueError("BucketMoves.index(x): x not in BucketMoves") from None

    def count(self, value: object) -> int:
        """How many moves equal ``value``, as ``tuple.count``."""
        return self._as_tuple().count(value)

    @staticmethod
    def _other(other: object) -> tuple[BucketMove, ...] | None:
        if isinstance(other, BucketMoves):
            return other._as_tuple()
        return other if isinstance(other, tuple) else None

    def __eq__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else (len(them) == len(self) and self._as_tuple() == them)

    def __ne__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else not (len(them) == len(self) and self._as_tuple() == them)

    def __lt__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else self._as_tuple() < them

    def __le__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else self._as_tuple() <= them

    def __gt__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else self._as_tuple() > them

    def __ge__(self, other: object) -> bool:
        them = self._other(other)
        return NotImplemented if them is None else self._as_tuple() >= them

    def __hash__(self) -> int:
        return hash(self._as_tuple())

    def __add__(self, other: object) -> tuple[BucketMove, ...]:
        them = self._other(other)
        return NotImplemented if them is None else self._as_tuple() + them

    def __radd__(self, other: object) -> tuple[BucketMove, ...]:
        return NotImplemented if not isinstance(other, tuple) else other + self._as_tuple()

    def __mul__(self, count: SupportsIndex) -> tuple[BucketMove, ...]:
        try:
            return self._as_tuple() * operator.index(count)
        except TypeError:
            return NotImplemented

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return repr(self._as_tuple())

    def __reduce__(self) -> tuple[type[BucketMoves], tuple[tuple[BucketMove, ...]]]:
        return BucketMoves, (self._as_tuple(),)

    @property
    def starts(self) -> np.ndarray:
        """Each move's first bucket (``np.int32``, a new array on every read)."""
        return self._starts.copy()

    @property
    def stops(self) -> np.ndarray:
        """Each move's end: one past its last bucket (``np.int32``, a new array on every read)."""
        return self._stops.copy()

    @property
    def old_owners(self) -> tuple[Consumer | None, ...]:
        """Each move's owner before the change: ``(name, consumer_id)`` or None (a tuple)."""
        return tuple(self._owner(c) for c in self._old.tolist())

    @property
    def new_owners(self) -> tuple[Consumer | None, ...]:
        """Each move's owner after the change: ``(name, consumer_id)`` or None (a tuple)."""
        return tuple(self._owner(c) for c in self._new.tolist())


def _owner_code(owners: list[Consumer], owner: Consumer | None) -> int:
    """-1 for no owner, else the index of ``owner`` appended to ``owners``."""
    if owner is None:
        return -1
    owners.append(owner)
    return len(owners) - 1


#: The result of every membership change that moves nothing.
NO_MOVES = BucketMoves()


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


def _fast_then(fast: Callable[..., Any], method: Callable[..., Any], owner: Any) -> Any:
    """``method`` of ``owner`` with a core's fast path in front of it (``_dispatcher.fast_then``:
    the fast path's result unless it is None, else the method's), carrying the method's name,
    docstring and signature."""
    general = types.MethodType(method, owner)
    return functools.update_wrapper(_dispatcher.fast_then(fast, general), general)


class EntryBucketSelector:
    """Live sharers of one segment and the bucket -> consumer spread of docs/design.md ("Dispatch").

    Consumers are kept sorted by ``(name, consumer_id)``; consumer ``j`` of ``k`` owns buckets
    ``[j*N//k, (j+1)*N//k)``. With more consumers than buckets, ``k - N`` of them own an empty
    range (they stay idle: owners are capped by ``N``); which ones follows from the formula.

    :func:`route_entries` updates three counters here: ``routed_entries``, ``straddling_entries``
    (stamps crossing a boundary of this list, routed whole by ``hash_min``) and
    ``malformed_entries`` (marked, never routed). Not thread-safe: one selector per segment,
    mutated by one thread (routing may run concurrently: each membership builds new tables, and
    the members and their spread are replaced together, in the compiled
    :class:`_bucketcore._selector.SelectorCore` this selector holds and calls).

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
        # the table, the owner slots and the members, replaced together (starts with no consumer)
        self._core = _selector.SelectorCore(self._table)
        # owner_of is the core's, called with no Python frame, with this class's method behind it
        # for every other hash (and for none owned); held through a weak proxy, so no cycle
        self.owner_of = _fast_then(self._core.owner_of, EntryBucketSelector.owner_of, weakref.proxy(self))  # type: ignore[method-assign]
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
        return self._core.consumers

    @property
    def _owner(self) -> np.ndarray:
        return self._core.owner

    @property
    def owner_slots(self) -> np.ndarray:
        """Read-only ``np.int32`` array: per bucket, the owner's index in :attr:`consumers`, or -1."""
        return self._owner

    def _change(self, consumers: tuple[Consumer, ...], index: int, joined: bool) -> BucketMoves:
        """Take the membership ``consumers``: the old one with the consumer at ``index`` of the
        new one added (``joined``) or at ``index`` of the old one removed."""
        old_consumers = self._core.consumers
        self._core.set_spread(consumers)
        # codes into the larger of the two memberships (the other one lacks one consumer)
        if joined:
            everyone = consumers
            old_code = _selector.slot_codes(len(old_consumers), index)
            new_code = _selector.slot_codes(len(consumers), len(consumers))
        else:
            everyone = old_consumers
            old_code = _selector.slot_codes(len(old_consumers), len(old_consumers))
            new_code = _selector.slot_codes(len(consumers), index)
        # computed from the two spreads' slot boundaries: the cost grows with the consumers, not the buckets
        starts, stops, old, new = _selector.spread_moves(len(everyone), self._n, old_code, new_code)
        return BucketMoves._of_columns(starts, stops, old, new, everyone) if len(starts) else NO_MOVES

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
        members = self._core.consumers
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
        members = self._core.consumers
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
        members = self._core.consumers  # one membership, whatever another thread changes meanwhile
        j = bisect.bisect_left(members, consumer)
        if j == len(members) or members[j] != consumer:
            raise KeyError(f"consumer {consumer!r} is not a member")
        k = len(members)
        return range(j * self._n // k, (j + 1) * self._n // k)

    def owner_of(self, hash: int) -> Consumer | None:
        """Owner of the bucket containing a bucket hash.

        Parameters
        ----------
        hash : int
            A bucket hash, 0..0xFFFF.

        Returns
        -------
        tuple of (str, int) or None
            ``(name, consumer_id)``, or None while the segment has no sharer.

        Raises
        ------
        TypeError
            ``hash`` is not an int.
        ValueError
            ``hash`` is outside 0..0xFFFF.
        """
        # The general path (an instance's owner_of asks the core first, see __init__).
        return self._core.owner_of(check_hash(hash, "hash"))  # the one rule: an int in 0..0xFFFF, or its error

    def owners(self) -> list[Consumer | None]:
        """Per bucket, its owner.

        Returns
        -------
        list of (str, int) or None
            One item per bucket: ``(name, consumer_id)`` or None.
        """
        owner, members = self._core.spread
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
        return f"EntryBucketSelector(buckets={self._n}, consumers={len(self._core.consumers)})"
