"""Segments: one inclusive range of segment hashes with its boundary list, state and lineage
(docs/design.md, "Segments, layouts and routing").

:class:`Segment` is an immutable, validated value; :class:`bucketcore.TopicLayout`
(:mod:`bucketcore.topic_layout`) holds the segments of one epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .buckets import Buckets
from .errors import InvalidBoundaryError, InvalidLayoutError
from .validation import describe, is_int

__all__ = ["ACTIVE", "SEALED", "MAX_SEGMENT_ID", "Segment"]

# segment ids are Java longs in Pulsar, and np.int64 in route() and EntryTable.segment_id
MAX_SEGMENT_ID = 2**63 - 1
ACTIVE = "active"
SEALED = "sealed"
_STATES = (ACTIVE, SEALED)


def _layout_error(segment_id: object, message: str) -> InvalidLayoutError:
    return InvalidLayoutError(f"segment {segment_id}: {message}")


def _id_tuple(values: Any, field: str, segment_id: object) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise _layout_error(segment_id, f"{field} must be a tuple of segment ids, not {describe(values)}")
    ids = tuple(values)
    for i, value in enumerate(ids):
        if not is_int(value) or int(value) < 0:
            raise _layout_error(segment_id, f"{field}[{i}] is {describe(value)}; segment ids are ints >= 0")
        if int(value) > MAX_SEGMENT_ID:
            raise _layout_error(segment_id, f"{field}[{i}] is {int(value)}, above 2**63-1 (segment ids are 64-bit)")
    ids = tuple(int(v) for v in ids)
    if len(set(ids)) != len(ids):
        raise _layout_error(segment_id, f"{field} {ids} lists a segment twice")
    if segment_id in ids:
        raise _layout_error(segment_id, f"{field} {ids} includes the segment itself")
    return ids


@dataclass(frozen=True)
class Segment:
    """One segment of a scalable topic: an inclusive range of segment hashes and its buckets.

    Parameters
    ----------
    segment_id : int
        0..2**63-1 (a Java long in Pulsar).
    hash_start, hash_end : int
        Inclusive range of segment hashes, 0..0xFFFF, ``hash_start <= hash_end``.
    buckets : Buckets, optional
        The segment's boundary list (default one bucket).
    state : {"active", "sealed"}, optional
    parent_ids, child_ids : tuple of int, optional
        Lineage; an active segment has no children.
    legacy_topic_name : str or None, optional
        The v4 partition this segment adopts, if any.

    Raises
    ------
    InvalidLayoutError
        A field of the wrong type or out of range, ``hash_start > hash_end``, an unknown state,
        a repeated or self-referencing id, or children on an active segment (naming the segment).
    """

    segment_id: int
    hash_start: int
    hash_end: int
    buckets: Buckets = Buckets()
    state: str = ACTIVE
    parent_ids: tuple[int, ...] = ()
    legacy_topic_name: str | None = None
    child_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        sid = self.segment_id
        if not is_int(sid) or int(sid) < 0:
            raise InvalidLayoutError(f"segment_id must be an int >= 0, not {describe(sid)}")
        if int(sid) > MAX_SEGMENT_ID:
            raise InvalidLayoutError(f"segment_id {int(sid)} is above 2**63-1 (segment ids are 64-bit)")
        sid = int(sid)
        object.__setattr__(self, "segment_id", sid)
        for field in ("hash_start", "hash_end"):
            value = getattr(self, field)
            if not is_int(value):
                raise _layout_error(sid, f"{field} must be an int in 0..0xFFFF, not {describe(value)}")
            if not 0 <= int(value) <= 0xFFFF:
                raise _layout_error(sid, f"{field} {int(value)} is outside 0..0xFFFF")
            object.__setattr__(self, field, int(value))
        if self.hash_start > self.hash_end:
            raise _layout_error(sid, f"hash_start 0x{self.hash_start:04x} is after hash_end 0x{self.hash_end:04x}")
        if not isinstance(self.buckets, Buckets):
            raise _layout_error(sid, f"buckets must be a Buckets, not {describe(self.buckets)}")
        if self.state not in _STATES:
            raise _layout_error(sid, f"state must be 'active' or 'sealed', not {self.state!r}")
        object.__setattr__(self, "parent_ids", _id_tuple(self.parent_ids, "parent_ids", sid))
        object.__setattr__(self, "child_ids", _id_tuple(self.child_ids, "child_ids", sid))
        if self.state == ACTIVE and self.child_ids:
            raise _layout_error(sid, f"an active segment has no children, but child_ids is {self.child_ids}")
        name = self.legacy_topic_name
        if name is not None and (not isinstance(name, str) or not name):
            raise _layout_error(sid, f"legacy_topic_name must be a non-empty str or None, not {describe(name)}")

    @property
    def is_active(self) -> bool:
        """Whether the segment takes writes (state ``"active"``)."""
        return self.state == ACTIVE

    @property
    def is_legacy(self) -> bool:
        """A v4 partition adopted as a segment (routed by signSafeMod when all active ones are)."""
        return self.legacy_topic_name is not None

    def to_dict(self) -> dict[str, Any]:
        """The segment as a plain JSON-friendly dict (ints, str, lists).

        Returns
        -------
        dict
            Keys ``segment_id, hash_start, hash_end, splits, state, parent_ids, child_ids,
            legacy_topic_name``.
        """
        return {
            "segment_id": self.segment_id,
            "hash_start": self.hash_start,
            "hash_end": self.hash_end,
            "splits": list(self.buckets.splits),
            "state": self.state,
            "parent_ids": list(self.parent_ids),
            "child_ids": list(self.child_ids),
            "legacy_topic_name": self.legacy_topic_name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segment:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        data : Mapping
            ``segment_id``, ``hash_start`` and ``hash_end`` are required; ``splits``, ``state``, the
            id lists and the legacy name are optional.

        Returns
        -------
        Segment

        Raises
        ------
        InvalidLayoutError
            Not a mapping, a missing or unknown field, or an invalid value (naming the segment).
        InvalidBoundaryError
            Invalid ``splits`` (naming the segment).
        """
        if not isinstance(data, Mapping):
            raise InvalidLayoutError(f"a segment must be a mapping, not {describe(data)}")
        sid = data.get("segment_id", "?")
        missing = [k for k in ("segment_id", "hash_start", "hash_end") if k not in data]
        if missing:
            raise InvalidLayoutError(f"segment {sid}: missing field(s) {', '.join(missing)}")
        unknown = sorted(str(k) for k in data if k not in _SEGMENT_FIELDS)
        if unknown:
            raise InvalidLayoutError(f"segment {sid}: unknown field(s) {', '.join(unknown)}")
        try:
            buckets = Buckets(data.get("splits", ()))
        except InvalidBoundaryError as err:
            raise InvalidBoundaryError(f"segment {sid}: {err}") from err
        return cls(
            data["segment_id"],
            data["hash_start"],
            data["hash_end"],
            buckets,
            data.get("state", ACTIVE),
            data.get("parent_ids", ()),
            data.get("legacy_topic_name"),
            data.get("child_ids", ()),
        )


_SEGMENT_FIELDS = frozenset(
    ("segment_id", "hash_start", "hash_end", "splits", "state", "parent_ids", "child_ids", "legacy_topic_name")
)
