"""Topic layouts: a scalable topic's segments at one epoch, routing, and transitions
(docs/design.md, "Segments, layouts and routing").

:class:`TopicLayout` holds the segments of one epoch, checks that the active ranges tile the
ring, routes key hashes to active segments (keyed by segment hash, keyless round-robin, or v4
legacy ``signSafeMod``) and produces its successors (split, merge, rebucket), and plans its
own boundary lists from a histogram of its traffic (:meth:`TopicLayout.rebalanced`). The routing
loops run in the compiled kernels of :mod:`_bucketcore._layout`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from _bucketcore import _layout

from .buckets import MAX_BUCKETS, MAX_BUCKETS_PER_SEGMENT, Buckets
from .errors import InvalidLayoutError
from .hash_histogram import BucketHistogram
from .hashing import KeyHashes, hash_keys
from .segments import ACTIVE, SEALED, Segment, _layout_error
from .validation import check_int, describe, is_int

__all__ = ["TopicLayout"]

_LAYOUT_FIELDS = frozenset(("epoch", "topic", "segments"))


def _parse_topic(topic: object) -> tuple[str, str, str]:
    """``<scheme>://<tenant>/<namespace>/<name>`` → (tenant, namespace, name)."""
    if not isinstance(topic, str):
        raise InvalidLayoutError(f"topic must be a str like 'persistent://tenant/ns/topic', not {describe(topic)}")
    scheme, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or not scheme or len(parts) != 3 or not all(parts):
        raise InvalidLayoutError(f"topic {topic!r} is not of the form '<scheme>://<tenant>/<namespace>/<topic>'")
    return parts[0], parts[1], parts[2]


class TopicLayout:
    """The segments of one scalable topic at one epoch; immutable.

    The active segments' ranges tile 0x0000..0xFFFF exactly. Routing and transitions are methods;
    every transition returns a new layout with ``epoch + 1``.

    Parameters
    ----------
    epoch : int
        >= 0; a layout update with an epoch <= the applied one is ignored by its consumers.
    segments : iterable of Segment
        Every segment the topic still has (active and sealed), in any order.
    topic : str, optional
        ``<scheme>://<tenant>/<namespace>/<topic>``.

    Raises
    ------
    InvalidLayoutError
        An invalid epoch or topic, a non-Segment, a duplicate id, lineage that disagrees with the
        segments present, or active ranges with a gap or overlap (the first one is named).
    """

    __slots__ = (
        "_epoch",
        "_topic",
        "_names",
        "_segments",
        "_active",
        "_by_id",
        "_starts",
        "_active_ids",
        "_legacy",
        "_hash",
    )

    _epoch: int
    _topic: str
    _names: tuple[str, str, str]
    _segments: tuple[Segment, ...]
    _active: tuple[Segment, ...]
    _by_id: dict[int, Segment]
    _starts: Buckets  # the active segments' starts after the first: routing is bucket_of over them
    _active_ids: np.ndarray
    _legacy: np.ndarray | None
    _hash: int

    def __init__(self, epoch: int, segments: Iterable[Segment], topic: str = "persistent://t/ns/topic") -> None:
        if not is_int(epoch) or int(epoch) < 0:
            raise InvalidLayoutError(f"epoch must be an int >= 0, not {describe(epoch)}")
        names = _parse_topic(topic)
        if isinstance(segments, (str, bytes, Mapping)) or not isinstance(segments, Iterable):
            raise InvalidLayoutError(f"segments must be an iterable of Segment, not {describe(segments)}")
        segs = tuple(segments)
        by_id: dict[int, Segment] = {}
        for position, seg in enumerate(segs):
            if not isinstance(seg, Segment):
                raise InvalidLayoutError(f"segments[{position}] is {describe(seg)}, not a Segment")
            if seg.segment_id in by_id:
                first = next(i for i, s in enumerate(segs) if s.segment_id == seg.segment_id)
                raise InvalidLayoutError(
                    f"duplicate segment id {seg.segment_id} at segments[{first}] and segments[{position}]"
                )
            by_id[seg.segment_id] = seg
        _check_lineage(segs, by_id)
        active = tuple(sorted((s for s in segs if s.state == ACTIVE), key=lambda s: s.hash_start))
        _check_tiling(active)
        put = object.__setattr__
        put(self, "_epoch", int(epoch))
        put(self, "_topic", topic)
        put(self, "_names", names)
        put(self, "_segments", segs)
        put(self, "_active", active)
        put(self, "_by_id", by_id)
        put(self, "_starts", Buckets(s.hash_start for s in active[1:]))
        ids = np.array([s.segment_id for s in active], dtype=np.int64)
        ids.flags.writeable = False
        put(self, "_active_ids", ids)
        legacy = None
        if all(s.legacy_topic_name is not None for s in active):
            index_of = {s.segment_id: i for i, s in enumerate(active)}
            legacy = np.array([index_of[s.segment_id] for s in segs if s.state == ACTIVE], dtype=np.int32)
            legacy.flags.writeable = False
        put(self, "_legacy", legacy)
        put(self, "_hash", hash((int(epoch), topic, segs)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TopicLayout is immutable; transitions return a new layout")

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicLayout, (self._epoch, self._segments, self._topic))

    # --- properties ---------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The layout's epoch (transitions add 1)."""
        return self._epoch

    @property
    def topic(self) -> str:
        """The topic name, ``<scheme>://<tenant>/<namespace>/<topic>``."""
        return self._topic

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment, in the order given."""
        return self._segments

    @property
    def active_segments(self) -> tuple[Segment, ...]:
        """The active segments sorted by hash_start (route_index indexes into this tuple)."""
        return self._active

    @property
    def active_segment_ids(self) -> np.ndarray:
        """segment_id of each active segment, in active_segments order (read-only np.int64)."""
        return self._active_ids

    @property
    def is_legacy(self) -> bool:
        """Every active segment is a legacy (v4 partition) segment: routing uses signSafeMod."""
        return self._legacy is not None

    def segment(self, segment_id: int) -> Segment:
        """The segment with this id.

        Parameters
        ----------
        segment_id : int

        Returns
        -------
        Segment

        Raises
        ------
        TypeError
            ``segment_id`` is not an int.
        KeyError
            The layout has no such segment.
        """
        if not is_int(segment_id):
            raise TypeError(f"segment_id must be an int, not {describe(segment_id)}")
        try:
            return self._by_id[int(segment_id)]
        except KeyError:
            raise KeyError(f"no segment {int(segment_id)} in layout epoch {self._epoch} of {self._topic}") from None

    def segment_topic(self, segment_id: int) -> str:
        """The segment's topic name: ``segment://<tenant>/<ns>/<topic>/<%04x start>-<%04x end>-<segment_id>``.

        Parameters
        ----------
        segment_id : int

        Returns
        -------
        str

        Raises
        ------
        TypeError, KeyError
            As :meth:`segment`.
        """
        seg = self.segment(segment_id)
        tenant, namespace, name = self._names
        return f"segment://{tenant}/{namespace}/{name}/{seg.hash_start:04x}-{seg.hash_end:04x}-{seg.segment_id}"

    def is_newer_than(self, other: TopicLayout) -> bool:
        """Whether this layout's epoch is greater than ``other``'s (an update with epoch <= applied is ignored).

        Parameters
        ----------
        other : TopicLayout

        Returns
        -------
        bool

        Raises
        ------
        TypeError
            ``other`` is not a TopicLayout.
        """
        if not isinstance(other, TopicLayout):
            raise TypeError(f"can only compare with a TopicLayout, not {type(other).__name__}")
        return self._epoch > other._epoch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicLayout):
            return NotImplemented
        return (self._epoch, self._topic, self._segments) == (other._epoch, other._topic, other._segments)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        sealed = len(self._segments) - len(self._active)
        ranges = ", ".join(f"{s.segment_id}:{s.hash_start:04x}-{s.hash_end:04x}" for s in self._active[:8])
        if len(self._active) > 8:
            ranges += ", ..."
        legacy = ", legacy" if self.is_legacy else ""
        return f"TopicLayout(epoch={self._epoch}, topic={self._topic!r}, active=[{ranges}], sealed={sealed}{legacy})"

    # --- routing ------------------------------------------------------------------------------

    def route_index(self, key_hashes: Any, *, round_robin: int = 0) -> tuple[Any, int]:
        """Index into :attr:`active_segments` of every message, and the next round-robin position.

        Keyed messages go by ``segment_hash`` to the active range containing it (all-legacy layout:
        ``signSafeMod(raw & 0x7FFFFFFF, n)`` over the legacy segments in layout order); the i-th
        keyless message goes to position ``(round_robin + i) % n`` (of the legacy order for a legacy
        layout).

        Parameters
        ----------
        key_hashes : KeyHashes or keys
            A :class:`KeyHashes`, or any key input of :func:`bucketcore.hash_keys`. Of a KeyHashes,
            only ``segment_hash`` and ``has_key`` are read (and ``raw`` for an all-legacy layout); they
            are trusted to agree with each other, as :func:`bucketcore.hash_keys` makes them.
        round_robin : int, optional
            Position of the first keyless message in the rotation (>= 0).

        Returns
        -------
        index : int or numpy.ndarray
            ``np.int32`` array of the keys' shape; an int for a single key.
        next_round_robin : int
            The position for the next keyless message.

        Raises
        ------
        TypeError
            Keys of a type :func:`hash_keys` refuses, KeyHashes columns of the wrong dtypes, or a
            non-int ``round_robin``.
        ValueError
            KeyHashes columns of different shapes, or a negative ``round_robin``.
        KeyEncodingError
            A str key that is not valid UTF-8.
        """
        kh = key_hashes if isinstance(key_hashes, KeyHashes) else hash_keys(key_hashes)
        rotation = check_int(round_robin, "round_robin", lo=0)
        raw, segment_hash, has_key, shape = _key_columns(kh)
        out = np.empty(raw.size, dtype=np.int32)
        if self._legacy is not None:
            parts = self._legacy.size
            next_rotation = _layout.route_legacy(raw, has_key, out, self._legacy, rotation % parts)
        else:
            n_active = len(self._active)
            table = None
            if self._starts.table_pays_off(raw.size):
                table = self.segment_table()
            next_rotation = _layout.route_keyed(
                self._starts.splits_array, segment_hash, has_key, out, table, rotation % n_active, n_active
            )
        if shape == ():
            return int(out[0]), int(next_rotation)
        return out.reshape(shape), int(next_rotation)

    def route(self, key_hashes: Any, *, round_robin: int = 0) -> Any:
        """segment_id of every message: :meth:`route_index` mapped through :attr:`active_segment_ids`.

        Parameters
        ----------
        key_hashes : KeyHashes or keys
            As :meth:`route_index`.
        round_robin : int, optional
            As :meth:`route_index` (use it to get the next position back).

        Returns
        -------
        int or numpy.ndarray
            ``np.int64`` array of the keys' shape; an int for a single key.

        Raises
        ------
        TypeError, ValueError, KeyEncodingError
            As :meth:`route_index`.
        """
        index, _ = self.route_index(key_hashes, round_robin=round_robin)
        if isinstance(index, int):
            return int(self._active_ids[index])
        flat = index.reshape(-1)
        ids = np.empty(flat.size, dtype=np.int64)
        _layout.gather_ids(flat, self._active_ids, ids)
        return ids.reshape(index.shape)

    def segment_table(self) -> np.ndarray:
        """The 64 Ki table of keyed routing: index into :attr:`active_segments` by segment hash.

        Returns
        -------
        numpy.ndarray
            Read-only ``np.uint16`` (the lookup table of the active starts' boundary list, built once).
        """
        return self._starts.lookup_table()

    # --- transitions --------------------------------------------------------------------------

    def _active_segment(self, segment_id: int, action: str) -> Segment:
        seg = self.segment(segment_id)
        if seg.state != ACTIVE:
            raise InvalidLayoutError(f"cannot {action} segment {seg.segment_id}: it is sealed")
        return seg

    def _next_id(self) -> int:
        # above every id the layout still names: a garbage-collected parent or child keeps its id
        named = (i for s in self._segments for i in (s.segment_id, *s.parent_ids, *s.child_ids))
        return max(named) + 1

    def _successor(self, sealed: dict[int, Segment], children: list[Segment]) -> TopicLayout:
        segments = [sealed.get(s.segment_id, s) for s in self._segments] + children
        return TopicLayout(self._epoch + 1, segments, self._topic)

    def split(self, segment_id: int, *, max_buckets: int = MAX_BUCKETS_PER_SEGMENT) -> TopicLayout:
        """Seal an active segment and replace it by two children at its range midpoint.

        Parameters
        ----------
        segment_id : int
            The active segment to split.
        max_buckets : int, default 1024
            Ceiling on a segment's bucket count (the reference broker's default). Each child gets
            ``min(max(1, N // 2), max_buckets)`` equal-width buckets.

        Returns
        -------
        TopicLayout
            The successor layout (epoch + 1): the segment sealed, its lower child
            ``[start, mid]`` with id ``max_id + 1`` and its upper child ``[mid + 1, end]`` with
            ``max_id + 2`` active.

        Raises
        ------
        KeyError
            No segment has this id.
        InvalidLayoutError
            The segment is sealed, or its range is a single hash.
        TypeError, ValueError
            ``max_buckets`` is not an int in 1..65536.
        """
        ceiling = _check_ceiling(max_buckets)
        seg = self._active_segment(segment_id, "split")
        if seg.hash_start == seg.hash_end:
            raise InvalidLayoutError(
                f"cannot split segment {seg.segment_id}: its range 0x{seg.hash_start:04x} is a single hash"
            )
        mid = seg.hash_start + (seg.hash_end - seg.hash_start) // 2
        low_id = self._next_id()
        buckets = Buckets.equal_width(min(max(1, seg.buckets.count // 2), ceiling))
        low = Segment(low_id, seg.hash_start, mid, buckets, ACTIVE, (seg.segment_id,))
        high = Segment(low_id + 1, mid + 1, seg.hash_end, buckets, ACTIVE, (seg.segment_id,))
        parent = Segment(
            seg.segment_id,
            seg.hash_start,
            seg.hash_end,
            seg.buckets,
            SEALED,
            seg.parent_ids,
            seg.legacy_topic_name,
            (low_id, low_id + 1),
        )
        return self._successor({seg.segment_id: parent}, [low, high])

    def merge(self, id_a: int, id_b: int, *, max_buckets: int = MAX_BUCKETS_PER_SEGMENT) -> TopicLayout:
        """Seal two adjacent active segments and replace them by one child over both ranges.

        Parameters
        ----------
        id_a, id_b : int
            The two active segments, in either order; their ranges must be adjacent.
        max_buckets : int, default 1024
            Ceiling on a segment's bucket count (the reference broker's default). The child gets
            ``min(N_a + N_b, max_buckets)`` equal-width buckets: a merge is clamped to the
            ceiling, as the reference clamps it.

        Returns
        -------
        TopicLayout
            The successor layout (epoch + 1); the child has id ``max_id + 1`` and its parents in
            hash order.

        Raises
        ------
        KeyError
            No segment has one of the ids.
        InvalidLayoutError
            A segment is sealed, the two are the same segment, or their ranges are not adjacent.
        TypeError, ValueError
            ``max_buckets`` is not an int in 1..65536.
        """
        ceiling = _check_ceiling(max_buckets)
        a = self._active_segment(id_a, "merge")
        b = self._active_segment(id_b, "merge")
        if a.segment_id == b.segment_id:
            raise InvalidLayoutError(f"cannot merge segment {a.segment_id} with itself")
        low, high = (a, b) if a.hash_start < b.hash_start else (b, a)
        if low.hash_end + 1 != high.hash_start:
            raise InvalidLayoutError(
                f"cannot merge segments {low.segment_id} (0x{low.hash_start:04x}-0x{low.hash_end:04x}) and "
                f"{high.segment_id} (0x{high.hash_start:04x}-0x{high.hash_end:04x}): they are not adjacent"
            )
        count = min(low.buckets.count + high.buckets.count, ceiling)
        child_id = self._next_id()
        child = Segment(
            child_id,
            low.hash_start,
            high.hash_end,
            Buckets.equal_width(count),
            ACTIVE,
            (low.segment_id, high.segment_id),
        )
        sealed = {
            s.segment_id: Segment(
                s.segment_id,
                s.hash_start,
                s.hash_end,
                s.buckets,
                SEALED,
                s.parent_ids,
                s.legacy_topic_name,
                (child_id,),
            )
            for s in (low, high)
        }
        return self._successor(sealed, [child])

    def rebucket(self, segment_id: int, buckets: Buckets, *, max_buckets: int = MAX_BUCKETS_PER_SEGMENT) -> TopicLayout:
        """Rebucket rollover: seal the segment and add a successor with the same range and ``buckets``.

        Parameters
        ----------
        segment_id : int
            The active segment to rebucket.
        buckets : Buckets
            The successor's boundary list; it must differ from the segment's.
        max_buckets : int, default 1024
            Ceiling on a segment's bucket count (the reference broker's default).

        Returns
        -------
        TopicLayout
            The successor layout (epoch + 1); the successor has id ``max_id + 1``.

        Raises
        ------
        KeyError
            No segment has this id.
        TypeError
            ``buckets`` is not a :class:`Buckets`, or ``max_buckets`` not an int.
        InvalidLayoutError
            The segment is sealed; ``buckets`` equals its current list ("unchanged bucketing",
            as the reference refuses it); or ``buckets`` has more than ``max_buckets`` buckets
            (the reference clamps its own computed counts; a list the caller built is refused
            rather than silently replaced by another).
        ValueError
            ``max_buckets`` is outside 1..65536.
        """
        ceiling = _check_ceiling(max_buckets)
        seg = self._active_segment(segment_id, "rebucket")
        if not isinstance(buckets, Buckets):
            raise TypeError(f"buckets must be a Buckets, not {describe(buckets)}")
        if buckets == seg.buckets:
            raise InvalidLayoutError(
                f"cannot rebucket segment {seg.segment_id}: unchanged bucketing (it already has {buckets!r})"
            )
        if buckets.count > ceiling:
            raise InvalidLayoutError(
                f"cannot rebucket segment {seg.segment_id} to {buckets.count} buckets: above the ceiling of "
                f"{ceiling} buckets per segment (pass max_buckets= to raise it)"
            )
        child_id = self._next_id()
        child = Segment(child_id, seg.hash_start, seg.hash_end, buckets, ACTIVE, (seg.segment_id,))
        parent = Segment(
            seg.segment_id,
            seg.hash_start,
            seg.hash_end,
            seg.buckets,
            SEALED,
            seg.parent_ids,
            seg.legacy_topic_name,
            (child_id,),
        )
        return self._successor({seg.segment_id: parent}, [child])

    # --- planning -----------------------------------------------------------------------------

    def rebalanced(self, histogram: BucketHistogram, n: int) -> TopicLayout:
        """This layout with every active segment's boundary list balanced for ``histogram``.

        Each active segment gets ``Buckets.balanced(histogram[segment_id], n)`` (for a segment
        nothing reached, that of an empty sample: ``equal_width(n)`` up to 32768 buckets). A plan,
        not a transition: the epoch, topic, sealed segments and every other field stay as they
        are, as ``bucketcore plan`` writes them; a controller rolls a segment over to its planned
        list with :meth:`rebucket`.

        Parameters
        ----------
        histogram : BucketHistogram
            Of this layout's traffic (:func:`bucketcore.bucket_histogram`, same active segments).
        n : int
            Buckets per active segment, 1..65535.

        Returns
        -------
        TopicLayout

        Raises
        ------
        TypeError
            ``histogram`` is not a BucketHistogram.
        InvalidLayoutError
            The layout's active segments are not the histogram's.
        InvalidBoundaryError
            ``n`` outside 1..65535.
        """
        if not isinstance(histogram, BucketHistogram):
            raise TypeError(f"histogram must be a BucketHistogram, not {describe(histogram)}")
        ids = tuple(s.segment_id for s in self._active)
        if ids != histogram.segment_ids:
            raise InvalidLayoutError(
                f"the layout's active segments {list(ids[:8])} are not the histogram's "
                f"{list(histogram.segment_ids[:8])}"
            )
        planned = {sid: Buckets.balanced(histogram[sid], n) for sid in ids}
        segments = [
            dataclasses.replace(s, buckets=planned[s.segment_id]) if s.segment_id in planned else s
            for s in self._segments
        ]
        return TopicLayout(self._epoch, segments, self._topic)

    # --- conversions --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The layout as a plain JSON-friendly dict.

        Returns
        -------
        dict
            ``{"epoch", "topic", "segments": [segment dicts]}``.
        """
        return {"epoch": self._epoch, "topic": self._topic, "segments": [s.to_dict() for s in self._segments]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopicLayout:
        """Inverse of :meth:`to_dict` (``topic`` optional); validated like the constructor.

        Parameters
        ----------
        data : Mapping

        Returns
        -------
        TopicLayout

        Raises
        ------
        InvalidLayoutError, InvalidBoundaryError
            As the constructor and :meth:`Segment.from_dict`, or a missing or unknown field.
        """
        if not isinstance(data, Mapping):
            raise InvalidLayoutError(f"a layout must be a mapping, not {describe(data)}")
        missing = [k for k in ("epoch", "segments") if k not in data]
        if missing:
            raise InvalidLayoutError(f"layout: missing field(s) {', '.join(missing)}")
        unknown = sorted(str(k) for k in data if k not in _LAYOUT_FIELDS)
        if unknown:
            raise InvalidLayoutError(f"layout: unknown field(s) {', '.join(unknown)}")
        raw_segments = data["segments"]
        if isinstance(raw_segments, (str, bytes, Mapping)) or not isinstance(raw_segments, Iterable):
            raise InvalidLayoutError(
                f"layout: segments must be a list of segment mappings, not {describe(raw_segments)}"
            )
        segments = [Segment.from_dict(s) for s in raw_segments]
        return cls(data["epoch"], segments, data.get("topic", "persistent://t/ns/topic"))


def _check_ceiling(max_buckets: object) -> int:
    return check_int(max_buckets, "max_buckets", lo=1, hi=MAX_BUCKETS)


def _check_lineage(segs: tuple[Segment, ...], by_id: dict[int, Segment]) -> None:
    """Parent and child ids that name a segment present in the layout must agree with it.

    Ids of segments no longer in the layout are allowed: a drained sealed segment is
    garbage-collected while its successors keep naming it (docs/design.md ("Controller assignment"), "parents present in
    the layout").
    """
    for seg in segs:
        sid = seg.segment_id
        for parent_id in seg.parent_ids:
            parent = by_id.get(parent_id)
            if parent is None:
                continue
            if parent.state != SEALED:
                raise _layout_error(
                    sid, f"parent {parent_id} is {parent.state}: a segment is sealed when its successors are created"
                )
            if parent.child_ids and sid not in parent.child_ids:
                raise _layout_error(
                    sid, f"parent {parent_id} lists child_ids {parent.child_ids}, which do not include {sid}"
                )
        for child_id in seg.child_ids:
            child = by_id.get(child_id)
            if child is not None and sid not in child.parent_ids:
                raise _layout_error(
                    sid, f"child {child_id} lists parent_ids {child.parent_ids}, which do not include {sid}"
                )


def _check_tiling(active: tuple[Segment, ...]) -> None:
    """Active ranges (sorted by start) must tile 0x0000..0xFFFF: report the first gap or overlap."""
    if not active:
        raise InvalidLayoutError("the layout has no active segment: the active ranges must tile 0x0000..0xFFFF")
    expected = 0
    previous: Segment | None = None
    for seg in active:
        if seg.hash_start > expected:
            after = f" after segment {previous.segment_id}" if previous else ""
            raise InvalidLayoutError(
                f"gap 0x{expected:04x}-0x{seg.hash_start - 1:04x}{after} before segment {seg.segment_id}: "
                "the active ranges must tile 0x0000..0xFFFF"
            )
        if seg.hash_start < expected:
            assert previous is not None
            raise InvalidLayoutError(
                f"overlap 0x{seg.hash_start:04x}-0x{min(expected - 1, seg.hash_end):04x} between active segments "
                f"{previous.segment_id} (0x{previous.hash_start:04x}-0x{previous.hash_end:04x}) and "
                f"{seg.segment_id} (0x{seg.hash_start:04x}-0x{seg.hash_end:04x})"
            )
        expected = seg.hash_end + 1
        previous = seg
    if expected <= 0xFFFF:
        assert previous is not None
        raise InvalidLayoutError(
            f"gap 0x{expected:04x}-0xffff after segment {previous.segment_id}: "
            "the active ranges must tile 0x0000..0xFFFF"
        )


def _key_columns(kh: KeyHashes) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """Flat contiguous (raw u32, segment_hash u16, has_key as u8) of a KeyHashes, and its shape."""
    raw = np.asarray(kh.raw)
    segment_hash = np.asarray(kh.segment_hash)
    has_key = np.asarray(kh.has_key)
    shape = raw.shape
    if segment_hash.shape != shape or has_key.shape != shape:
        raise ValueError(
            f"KeyHashes columns disagree in shape: raw {shape}, segment_hash {segment_hash.shape}, "
            f"has_key {has_key.shape}"
        )
    if raw.dtype != np.uint32 or segment_hash.dtype != np.uint16 or has_key.dtype != np.bool_:
        raise TypeError(
            "KeyHashes columns must be raw uint32, segment_hash uint16 and has_key bool (as hash_keys makes "
            f"them), not {raw.dtype}, {segment_hash.dtype}, {has_key.dtype}"
        )
    return (
        np.ascontiguousarray(raw).reshape(-1),
        np.ascontiguousarray(segment_hash).reshape(-1),
        np.ascontiguousarray(has_key).reshape(-1).view(np.uint8),
        shape,
    )
