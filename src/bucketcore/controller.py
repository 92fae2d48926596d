"""The controller's segment assignment for one Stream subscription (docs/design.md, "Controller assignment").

"Segments first, buckets absorb the surplus": while consumers do not outnumber the assignable
segments every segment has exactly one owner, which consumes it whole (Exclusive). Surplus
consumers join segments as extra sharers, at most one sharer per bucket; a shared segment is
consumed Key_Shared and every sharer is handed the segment's *full* boundary list (the broker,
not the controller, spreads buckets over sharers: docs/design.md, "Dispatch"). Consumers beyond the total bucket
capacity stay idle.

This is control-plane logic run once per membership or layout change, so it is plain Python; the
output is immutable value objects that compare and hash by content, so a leader and its
successor can be checked to agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .layout import SEALED, Segment, TopicLayout
from .validation import MAX_HASH, check_hash, check_int, is_int

__all__ = [
    "AssignedSegment",
    "Assignment",
    "assignable_segments",
    "compute_assignment",
]


class BucketRanges(tuple[tuple[int, int], ...]):
    """A boundary list as inclusive ``(start, end)`` pairs: an immutable, hashable tuple that also
    equals a list of the same pairs, so ``bucket_ranges == buckets.ranges`` (a list) holds as
    docs/design.md ("Controller assignment") states it."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return tuple.__eq__(self, tuple(other))
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


def _normalise_bucket_ranges(value: object, segment_id: int) -> BucketRanges:
    """Check that ``value`` is empty or a full boundary list as inclusive ranges tiling 0..0xFFFF."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"bucket_ranges of segment {segment_id} must be a sequence of (start, end) pairs, "
            f"not {type(value).__name__}"
        )
    ranges: list[tuple[int, int]] = []
    expected_start = 0
    for index, pair in enumerate(value):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"bucket_ranges[{index}] of segment {segment_id} must be a (start, end) pair, got {pair!r}")
        start = check_hash(pair[0], f"bucket_ranges[{index}] start of segment {segment_id}")
        end = check_hash(pair[1], f"bucket_ranges[{index}] end of segment {segment_id}")
        if start != expected_start or end < start:
            raise ValueError(
                f"bucket_ranges of segment {segment_id} must be the full boundary list: contiguous "
                f"inclusive ranges tiling 0x0000..0xFFFF; range {index} is ({start}, {end}) but "
                f"should start at {expected_start} and end at or after its start"
            )
        ranges.append((start, end))
        expected_start = end + 1
    if ranges and expected_start != MAX_HASH + 1:
        raise ValueError(
            f"bucket_ranges of segment {segment_id} must tile 0x0000..0xFFFF; they end at {expected_start - 1:#06x}"
        )
    return BucketRanges(ranges)


@dataclass(frozen=True, order=True)
class AssignedSegment:
    """One segment in a consumer's assignment (the Stream assignment's ScalableAssignedSegment).

    ``bucket_ranges`` selects the attach mode: empty means the consumer is the sole owner and
    subscribes Exclusive; non-empty means the segment is shared by bucket and the consumer
    subscribes Key_Shared sticky with the entry-bucket flag, declaring exactly these ranges,
    which are the segment's full boundary list (identical for every sharer). Any sequence of
    pairs is accepted and stored as a tuple of ``(start, end)`` tuples.

    Parameters
    ----------
    segment_id : int
        >= 0.
    hash_start, hash_end : int
        The segment's inclusive range, 0..0xFFFF.
    segment_topic : str
        The segment's topic name (non-empty).
    bucket_ranges : sequence of (int, int), optional
        Empty, or the full boundary list as inclusive ranges tiling 0x0000..0xFFFF.

    Raises
    ------
    TypeError
        A field of the wrong type.
    ValueError
        A value out of range, ``hash_start > hash_end``, or ranges that do not tile the ring.
    """

    segment_id: int
    hash_start: int
    hash_end: int
    segment_topic: str
    bucket_ranges: BucketRanges = BucketRanges()

    def __post_init__(self) -> None:
        # numpy integers are stored as int so equal assignments also print and hash alike
        object.__setattr__(self, "segment_id", check_int(self.segment_id, "segment_id", lo=0))
        object.__setattr__(self, "hash_start", check_hash(self.hash_start, f"hash_start of segment {self.segment_id}"))
        object.__setattr__(self, "hash_end", check_hash(self.hash_end, f"hash_end of segment {self.segment_id}"))
        if self.hash_start > self.hash_end:
            raise ValueError(
                f"segment {self.segment_id}: hash_start {self.hash_start:#06x} is above hash_end {self.hash_end:#06x}"
            )
        if not isinstance(self.segment_topic, str) or not self.segment_topic:
            raise TypeError(
                f"segment_topic of segment {self.segment_id} must be a non-empty str, got {self.segment_topic!r}"
            )
        object.__setattr__(self, "bucket_ranges", _normalise_bucket_ranges(self.bucket_ranges, self.segment_id))

    @property
    def shared(self) -> bool:
        """True when the segment is shared by bucket (Key_Shared), False for a sole owner (Exclusive)."""
        return bool(self.bucket_ranges)

    @property
    def splits(self) -> tuple[int, ...]:
        """The boundary list as splits (start hashes of buckets 1..N-1); () for an Exclusive owner."""
        return tuple(start for start, _ in self.bucket_ranges[1:])


@dataclass(frozen=True, order=True)
class Assignment:
    """What the controller hands one consumer: the layout epoch and its segments (maybe none: idle).

    Immutable, hashable and ordered by content. ``segments`` are in assignment order (by
    ``(hash_start, hash_end, segment_id)`` when made by :func:`compute_assignment`); any sequence
    is accepted and stored as a tuple.

    Parameters
    ----------
    layout_epoch : int
        >= 0.
    segments : sequence of AssignedSegment, optional

    Raises
    ------
    TypeError
        A non-int epoch, or an item that is not an AssignedSegment.
    ValueError
        A negative epoch, or a segment assigned twice.
    """

    layout_epoch: int
    segments: tuple[AssignedSegment, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "layout_epoch", check_int(self.layout_epoch, "layout_epoch", lo=0))
        if isinstance(self.segments, (str, bytes)) or not isinstance(self.segments, Iterable):
            raise TypeError(f"segments must be a sequence of AssignedSegment, not {type(self.segments).__name__}")
        segments = tuple(self.segments)
        seen: set[int] = set()
        for index, segment in enumerate(segments):
            if not isinstance(segment, AssignedSegment):
                raise TypeError(f"segments[{index}] must be an AssignedSegment, not {type(segment).__name__}")
            if segment.segment_id in seen:
                raise ValueError(f"segments[{index}]: segment {segment.segment_id} is assigned twice")
            seen.add(segment.segment_id)
        object.__setattr__(self, "segments", segments)

    @property
    def idle(self) -> bool:
        """True when the consumer was given nothing (surplus beyond the total bucket capacity)."""
        return not self.segments

    @property
    def segment_ids(self) -> tuple[int, ...]:
        """Ids of the assigned segments, in assignment order."""
        return tuple(segment.segment_id for segment in self.segments)

    def segment(self, segment_id: int) -> AssignedSegment:
        """The assigned segment with this id.

        Parameters
        ----------
        segment_id : int

        Returns
        -------
        AssignedSegment

        Raises
        ------
        KeyError
            The segment is not in this assignment (the message lists the ones that are).
        """
        for segment in self.segments:
            if segment.segment_id == segment_id:
                return segment
        raise KeyError(f"segment {segment_id} is not in this assignment (segments {list(self.segment_ids)})")


_T = TypeVar("_T")


def _trusted(cls: type[_T], **fields: object) -> _T:
    """Build a frozen value from fields already validated (a TopicLayout validated its segments),
    skipping ``__post_init__``, whose checks would only repeat the layout's."""
    value = object.__new__(cls)
    for name, field_value in fields.items():
        object.__setattr__(value, name, field_value)
    return value


def _check_layout(layout: object) -> TopicLayout:
    if not isinstance(layout, TopicLayout):
        raise TypeError(f"layout must be a bucketcore.TopicLayout, not {type(layout).__name__}")
    return layout


def _check_consumer_names(consumer_names: object) -> list[str]:
    if isinstance(consumer_names, (str, bytes)):
        # A lone str is iterable; treating it as one name per character would be a silent surprise.
        raise TypeError(f"consumer_names must be a collection of str, not a single {type(consumer_names).__name__}")
    if not isinstance(consumer_names, Iterable):
        raise TypeError(f"consumer_names must be a collection of str, not {type(consumer_names).__name__}")
    names: list[str] = []
    seen: set[str] = set()
    for index, name in enumerate(consumer_names):
        if not isinstance(name, str):
            raise TypeError(f"consumer_names[{index}] must be a str, not {type(name).__name__} {name!r}")
        if name in seen:
            raise ValueError(
                f"consumer_names[{index}]: consumer name {name!r} appears more than once; names identify "
                "consumers in the assignment and must be unique"
            )
        seen.add(name)
        names.append(name)
    names.sort()
    return names


def _check_drained(drained: object, layout: TopicLayout) -> frozenset[int]:
    """The drained ids as a frozenset, each a sealed segment of the layout or an id it still names.

    A segment that was drained and then garbage-collected is gone from ``layout.segments`` but
    its successors keep naming it in their ``parent_ids`` (and its sealed siblings' parents in
    ``child_ids``), so such an id is accepted; an id the layout does not know at all is a
    mistake (a segment of another topic, a typo) and is refused.
    """
    if isinstance(drained, (str, bytes)) or not isinstance(drained, Iterable):
        raise TypeError(f"drained must be a collection of segment ids, not {type(drained).__name__}")
    ids: set[int] = set()
    present = {segment.segment_id: segment for segment in layout.segments}
    named: set[int] | None = None
    for raw_id in drained:
        if not is_int(raw_id):
            raise TypeError(f"drained contains {raw_id!r} ({type(raw_id).__name__}); segment ids are ints")
        segment_id = int(raw_id)
        segment = present.get(segment_id)
        if segment is None:
            if named is None:
                named = {i for s in layout.segments for i in (*s.parent_ids, *s.child_ids)}
            if segment_id not in named:
                raise ValueError(
                    f"drained contains segment {segment_id}, which layout epoch {layout.epoch} neither holds "
                    "nor names as a parent or child"
                )
        elif segment.state != SEALED:
            # an ACTIVE segment cannot have been drained: it still takes writes
            raise ValueError(
                f"drained contains segment {segment_id}, which is {segment.state}: only sealed segments can be drained"
            )
        ids.add(segment_id)
    return frozenset(ids)


def assignable_segments(layout: TopicLayout, drained: Iterable[int] = frozenset()) -> tuple[Segment, ...]:
    """The segments a subscription may be assigned, in assignment order (docs/design.md, "Controller assignment").

    A segment is assignable once every parent still present in the layout is drained, so a
    key's older messages in the parent are consumed before its newer ones in the child (also
    for a sealed child of a sealed parent: a split chain needs it as much). A sealed segment
    stays assignable while it is not drained (its backlog is replayed); once drained it retires
    and is assigned to nobody, so consumers move to its successors instead of sitting on a dead
    segment, as the reference ``SubscriptionCoordinator`` does.

    Parameters
    ----------
    layout : TopicLayout
        The topic's current layout.
    drained : iterable of int, optional
        Ids of the sealed segments this subscription has consumed to the end.

    Returns
    -------
    tuple of Segment
        Sorted by ``(hash_start, hash_end, segment_id)``.

    Raises
    ------
    TypeError
        ``layout`` is not a TopicLayout, or ``drained`` is not a collection of ints.
    ValueError
        ``drained`` names an active segment, or an id the layout neither holds nor names.
    """
    layout = _check_layout(layout)
    drained_ids = _check_drained(drained, layout)
    present = {segment.segment_id for segment in layout.segments}
    chosen = [
        segment
        for segment in layout.segments
        if segment.segment_id not in drained_ids
        and all(parent in drained_ids for parent in segment.parent_ids if parent in present)
    ]
    chosen.sort(key=lambda s: (s.hash_start, s.hash_end, s.segment_id))
    return tuple(chosen)


def compute_assignment(
    layout: TopicLayout,
    consumer_names: Iterable[str],
    *,
    drained: Iterable[int] = frozenset(),
) -> dict[str, Assignment]:
    """Assign the layout's assignable segments to the named consumers of one subscription.

    Deterministic: the output depends only on the layout's content, the set of names and the set
    of drained ids, never on their order (leader failover must agree). The assignable segments are
    those of :func:`assignable_segments` (a drained sealed segment retires; a child waits for its
    parents), sorted by ``(hash_start, hash_end, segment_id)``.

    - consumers <= segments: segment ``i`` goes whole to consumer ``i % k`` (sorted by name);
      every ``bucket_ranges`` is empty (Exclusive).
    - consumers > segments: consumer ``i`` first owns segment ``i``; each surplus consumer, in
      name order, joins the next segment (sorted order, cycling from the first) that has fewer
      owners than buckets; once every segment is at capacity the rest stay idle. A segment with
      two or more owners is shared: each owner gets its full boundary list as ``bucket_ranges``.

    Parameters
    ----------
    layout : TopicLayout
    consumer_names : iterable of str
        The subscription's consumers; unique names.
    drained : iterable of int, optional
        Ids of the sealed segments this subscription has consumed to the end (ids of drained
        segments garbage-collected from the layout, which it still names, are accepted).

    Returns
    -------
    dict of str to Assignment
        One :class:`Assignment` per name (an empty one for an idle consumer), ordered by name.

    Raises
    ------
    TypeError
        ``layout`` is not a TopicLayout, a name is not a str (or a single str was passed), or
        ``drained`` is not a collection of ints.
    ValueError
        A duplicate name; ``drained`` names an active segment or an id the layout neither holds
        nor names.
    """
    layout = _check_layout(layout)
    names = _check_consumer_names(consumer_names)
    segments = assignable_segments(layout, drained)

    owners: list[list[str]] = [[] for _ in segments]
    if len(names) <= len(segments):
        if names:
            for index in range(len(segments)):
                owners[index].append(names[index % len(names)])
    else:
        for index in range(len(segments)):
            owners[index].append(names[index])
        capacity = [segment.buckets.count for segment in segments]
        cursor = 0
        for name in names[len(segments) :]:
            for step in range(len(segments)):
                index = (cursor + step) % len(segments)
                if len(owners[index]) < capacity[index]:
                    owners[index].append(name)
                    cursor = index + 1
                    break
            else:
                break  # every segment is at capacity: this consumer and the rest stay idle

    assigned: dict[str, list[AssignedSegment]] = {name: [] for name in names}
    for segment, segment_owners in zip(segments, owners, strict=False):
        ranges = BucketRanges(segment.buckets.ranges if len(segment_owners) > 1 else ())
        view = _trusted(
            AssignedSegment,
            segment_id=segment.segment_id,
            hash_start=segment.hash_start,
            hash_end=segment.hash_end,
            segment_topic=layout.segment_topic(segment.segment_id),
            bucket_ranges=ranges,
        )
        for name in segment_owners:
            assigned[name].append(view)
    epoch = layout.epoch
    return {name: _trusted(Assignment, layout_epoch=epoch, segments=tuple(views)) for name, views in assigned.items()}
