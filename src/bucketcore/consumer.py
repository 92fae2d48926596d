"""The Stream consumer's client-side rules for entry-bucketing (docs/design.md, "Consumer rules").

:class:`StreamConsumerState` is a pure state machine: it performs no I/O. The client feeds it the
controller's assignments, the deliveries it hands the application and the application's acks; it
answers with the commands to carry out, in order:

- :class:`Subscribe` — open the per-segment consumer: Exclusive for a sole owner, Key_Shared
  STICKY with the entry-bucket dispatch flag and exactly the assigned boundary list when shared;
- :class:`Drain` — stop handing the application messages of that segment (mode flip or removal);
- :class:`Close` — close the per-segment consumer; only ever emitted once the application has
  acked every message it was delivered on that segment (the state never acks on its behalf);
- :class:`CumulativeAck` / :class:`IndividualAck` — the acks to send to the broker.

A drain finishes when the last outstanding delivery of its segment is acked, so the caller learns
it from the return value of :meth:`StreamConsumerState.acked` or
:meth:`StreamConsumerState.ack_cumulative`: the acks come first, then the follow-up ``Close``
(and, for a mode flip, the ``Subscribe`` in the new mode). :attr:`StreamConsumerState.draining`
lists the drains still waiting.

Message ids are positions that compare in segment order: an ``int`` (an offset) or a tuple of
ints such as ``(ledger_id, entry_id, batch_index)``; numpy integers are accepted and stored as
``int``. All ids of one subscription must have the same shape (int, or tuples of one length).
Not thread-safe: guard it with the client's lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from _bucketcore._consumer import ConsumerCore, SegmentTrack, bind

from .controller import AssignedSegment, Assignment, BucketRanges
from .errors import ConsumerStateError, StaleLayoutError
from .validation import check_int, is_int

__all__ = [
    "ConsumerStateError",
    "Subscribe",
    "Drain",
    "Close",
    "CumulativeAck",
    "IndividualAck",
    "Action",
    "Ack",
    "Command",
    "MessageId",
    "StreamConsumerState",
]

MessageId = int | tuple[int, ...]
SubscriptionType = Literal["Exclusive", "Key_Shared"]
DrainReason = Literal["mode_flip", "removed"]

EXCLUSIVE: SubscriptionType = "Exclusive"
KEY_SHARED: SubscriptionType = "Key_Shared"


def _check_segment_id(segment_id: object, what: str = "segment_id") -> int:
    if type(segment_id) is int and segment_id >= 0:  # fast path: delivered/acked run per message
        return segment_id
    return check_int(segment_id, what, lo=0)


def _check_message_id(message_id: object, what: str) -> tuple[MessageId, int]:
    """Validate a position; returns it normalised (numpy ints → int) and its shape (0 = int, k = tuple length)."""
    if type(message_id) is int:
        return message_id, 0
    if is_int(message_id):
        return int(message_id), 0
    if isinstance(message_id, tuple) and message_id:
        for index, part in enumerate(message_id):
            if not is_int(part):
                raise TypeError(
                    f"{what} {message_id!r}: part {index} must be an int, not {type(part).__name__} {part!r}"
                )
        return tuple(int(part) for part in message_id), len(message_id)
    raise TypeError(
        f"{what} must be an int or a non-empty tuple of ints such as (ledger, entry, batch), "
        f"not {type(message_id).__name__} {message_id!r}"
    )


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Open the per-segment consumer in the mode the assignment selects.

    Exclusive: ``hash_ranges`` empty, no Key_Shared mode, flag off. Key_Shared: ``key_shared_mode``
    "STICKY", ``entry_bucket_dispatch`` True (KeySharedMeta.entryBucketDispatch) and
    ``hash_ranges`` exactly the assigned boundary list (KeySharedMeta.hashRanges).
    """

    segment_id: int
    segment_topic: str
    subscription_type: SubscriptionType
    hash_ranges: BucketRanges = BucketRanges()
    key_shared_mode: Literal["STICKY"] | None = None
    entry_bucket_dispatch: bool = False

    def __post_init__(self) -> None:
        if self.subscription_type == EXCLUSIVE:
            if self.hash_ranges or self.key_shared_mode is not None or self.entry_bucket_dispatch:
                raise ValueError(
                    f"segment {self.segment_id}: an Exclusive subscribe carries no hash ranges, mode or flag"
                )
        elif self.subscription_type == KEY_SHARED:
            if not self.hash_ranges or self.key_shared_mode != "STICKY" or self.entry_bucket_dispatch is not True:
                raise ValueError(
                    f"segment {self.segment_id}: a Key_Shared subscribe must be STICKY with the entry-bucket flag "
                    "and the non-empty boundary list"
                )
        else:
            raise ValueError(f"subscription_type must be 'Exclusive' or 'Key_Shared', got {self.subscription_type!r}")

    @classmethod
    def for_segment(cls, segment: AssignedSegment) -> Subscribe:
        """The subscribe an assigned segment calls for (its ``bucket_ranges`` pick the mode).

        Parameters
        ----------
        segment : AssignedSegment

        Returns
        -------
        Subscribe
            Exclusive for empty ``bucket_ranges``; Key_Shared STICKY with the entry-bucket flag and
            exactly those ranges otherwise.
        """
        if segment.bucket_ranges:
            return cls(segment.segment_id, segment.segment_topic, KEY_SHARED, segment.bucket_ranges, "STICKY", True)
        return cls(segment.segment_id, segment.segment_topic, EXCLUSIVE)

    @property
    def shared(self) -> bool:
        """Whether this is a Key_Shared (shared by bucket) subscribe."""
        return self.subscription_type == KEY_SHARED


@dataclass(frozen=True, slots=True)
class Drain:
    """Stop handing the application messages of this segment; a Close follows once all are acked."""

    segment_id: int
    reason: DrainReason


@dataclass(frozen=True, slots=True)
class Close:
    """Close the per-segment consumer: everything it delivered has been acked by the application."""

    segment_id: int


@dataclass(frozen=True, slots=True)
class CumulativeAck:
    """Ack everything up to and including ``message_id`` on an Exclusive segment."""

    segment_id: int
    message_id: MessageId


@dataclass(frozen=True, slots=True)
class IndividualAck:
    """Ack exactly these delivered messages (ascending); the only ack a Key_Shared segment allows."""

    segment_id: int
    message_ids: tuple[MessageId, ...]


Action = Subscribe | Drain | Close
Ack = CumulativeAck | IndividualAck
Command = Subscribe | Drain | Close | CumulativeAck | IndividualAck

# Commands of one call come out drains first, then closes, then subscribes (a stable sort, so one
# segment's Drain → Close → Subscribe keep their order): segments given away are released first.
_ACTION_RANK = {Drain: 0, Close: 1, Subscribe: 2}


bind(IndividualAck)


def _in_order(actions: list[Action]) -> list[Action]:
    return sorted(actions, key=lambda action: _ACTION_RANK[type(action)])


def _track(assigned: AssignedSegment) -> SegmentTrack:
    """A new open per-segment consumer for an assigned segment."""
    return SegmentTrack(assigned, Subscribe.for_segment(assigned))


def _check_shape(sub: SegmentTrack, shape: int, message_id: MessageId, what: str) -> None:
    """Refuse an id whose shape differs from the ids already delivered on ``sub``."""
    if sub.id_shape is not None and shape != sub.id_shape:
        expected = "an int" if sub.id_shape == 0 else f"a tuple of {sub.id_shape} ints"
        raise TypeError(
            f"{what} {message_id!r} on segment {sub.assigned.segment_id} must be {expected} like the "
            "ids already delivered there (ids of one segment must compare with each other)"
        )


class StreamConsumerState(ConsumerCore):
    """Client-side state of one Stream consumer: assignment reconciliation, drains and ack translation.

    Epochs: an assignment whose ``layout_epoch`` is lower than the last applied one is stale (a
    deposed controller) and ignored. An assignment with the *same* epoch is applied: the layout
    epoch does not change when consumers join or leave or a parent finishes draining, so the
    controller legitimately sends new content at the same epoch. Applying is a diff against what
    is open, so re-applying an unchanged assignment returns no command and disturbs nothing.

    A drain, once started, runs to its Close; the assignment current at that moment decides
    whether the segment is subscribed again and in which mode (a segment that flips back while
    draining is re-subscribed, never resumed mid-drain: simpler, and order-safe).
    """

    def __init__(self) -> None:
        self._epoch: int | None = None
        self._assignment: Assignment | None = None
        self._desired: dict[int, AssignedSegment] = {}
        self._open: dict[int, SegmentTrack] = {}

    # -- introspection -------------------------------------------------------------------------
    @property
    def epoch(self) -> int | None:
        """The layout epoch of the last applied assignment (None before the first)."""
        return self._epoch

    @property
    def assignment(self) -> Assignment | None:
        """The last applied assignment (None before the first)."""
        return self._assignment

    @property
    def subscriptions(self) -> dict[int, Subscribe]:
        """Open per-segment consumers (draining ones included) by segment id."""
        return {segment_id: sub.subscribe for segment_id, sub in sorted(self._open.items())}

    @property
    def draining(self) -> dict[int, DrainReason]:
        """Segments whose drain waits for application acks, with the reason."""
        return {
            segment_id: sub.drain_reason
            for segment_id, sub in sorted(self._open.items())
            if sub.drain_reason is not None
        }

    def unacked(self, segment_id: int) -> tuple[MessageId, ...]:
        """Delivered-but-unacked message ids of an open segment, ascending.

        Parameters
        ----------
        segment_id : int

        Returns
        -------
        tuple of MessageId

        Raises
        ------
        TypeError, ValueError
            ``segment_id`` is not an int >= 0.
        ConsumerStateError
            The segment has no open subscription.
        """
        return tuple(self._subscription(_check_segment_id(segment_id), "unacked").ascending())

    # -- assignment ----------------------------------------------------------------------------
    def apply(self, assignment: Assignment) -> list[Action]:
        """Reconcile with a new assignment.

        Parameters
        ----------
        assignment : Assignment

        Returns
        -------
        list of Subscribe, Drain or Close
            The commands to carry out, drains first, then closes, then subscribes; empty for a stale
            (older-epoch) or unchanged assignment.

        Raises
        ------
        TypeError
            ``assignment`` is not an Assignment.
        StaleLayoutError
            An open segment is assigned with another range, topic or boundary list (a segment never
            changes them); nothing is applied.
        """
        if not isinstance(assignment, Assignment):
            raise TypeError(f"assignment must be a bucketcore Assignment, not {type(assignment).__name__}")
        if self._epoch is not None and assignment.layout_epoch < self._epoch:
            return []
        # Validate everything before changing anything.
        for segment in assignment.segments:
            sub = self._open.get(segment.segment_id)
            if sub is not None:
                self._check_same_segment(sub.assigned, segment)
        self._epoch = assignment.layout_epoch
        self._assignment = assignment
        self._desired = {segment.segment_id: segment for segment in assignment.segments}

        actions: list[Action] = []
        for segment_id in sorted(self._open.keys() | self._desired.keys()):
            actions.extend(self._reconcile(segment_id))
        return _in_order(actions)

    @staticmethod
    def _check_same_segment(held: AssignedSegment, new: AssignedSegment) -> None:
        # A segment's range, topic and boundary list are immutable for its life (new boundaries
        # arrive only as a successor segment), so any difference means a stale or corrupt layout.
        if (held.hash_start, held.hash_end, held.segment_topic) != (new.hash_start, new.hash_end, new.segment_topic):
            raise StaleLayoutError(
                f"segment {new.segment_id} is assigned as [{new.hash_start:#06x}, {new.hash_end:#06x}] "
                f"{new.segment_topic!r} but is open as [{held.hash_start:#06x}, {held.hash_end:#06x}] "
                f"{held.segment_topic!r}; a segment's range and topic never change"
            )
        if held.bucket_ranges and new.bucket_ranges and held.bucket_ranges != new.bucket_ranges:
            raise StaleLayoutError(
                f"segment {new.segment_id} is assigned boundary list {list(new.splits)} but is shared with "
                f"{list(held.splits)}; a boundary list is immutable (rebucketing creates a successor segment)"
            )

    def _reconcile(self, segment_id: int) -> list[Action]:
        sub = self._open.get(segment_id)
        wanted = self._desired.get(segment_id)
        if sub is None:
            if wanted is None:
                return []
            sub = _track(wanted)
            self._open[segment_id] = sub
            return [sub.subscribe]
        if sub.drain_reason is not None:
            return []  # its completion subscribes per the then-current assignment
        if wanted is not None and Subscribe.for_segment(wanted) == sub.subscribe:
            return []  # unchanged: never disturb the segment
        sub.drain_reason = "removed" if wanted is None else "mode_flip"
        return [Drain(segment_id, sub.drain_reason), *self._finish_drain(segment_id)]

    def _finish_drain(self, segment_id: int) -> list[Action]:
        sub = self._open[segment_id]
        if sub.drain_reason is None or len(sub):
            return []
        del self._open[segment_id]
        actions: list[Action] = [Close(segment_id)]
        wanted = self._desired.get(segment_id)
        if wanted is not None:
            reopened = _track(wanted)
            self._open[segment_id] = reopened
            actions.append(reopened.subscribe)
        return actions

    # -- deliveries and acks -------------------------------------------------------------------
    def _subscription(self, segment_id: int, what: str) -> SegmentTrack:
        sub = self._open.get(segment_id)
        if sub is None:
            raise ConsumerStateError(
                f"{what}: segment {segment_id} has no open subscription in this consumer (open: {sorted(self._open)})"
            )
        return sub

    # ``delivered`` and ``acked`` (documented on ConsumerCore) run in the kernel for an int segment
    # id and an int or tuple-of-ints id of the segment's shape on an open segment; every other
    # call lands here, which validates, normalises (numpy ints) and raises.
    def _delivered_checked(self, segment_id: object, message_id: object) -> bool:
        segment_id = _check_segment_id(segment_id)
        message_id, shape = _check_message_id(message_id, "message_id")
        sub = self._subscription(segment_id, "delivered")
        if sub.drain_reason is not None:
            raise ConsumerStateError(
                f"delivered: segment {segment_id} is draining ({sub.drain_reason}); the client must stop "
                f"handing the application its messages after Drain (got {message_id!r})"
            )
        _check_shape(sub, shape, message_id, "message_id")
        sub.id_shape = shape
        return sub.add(message_id)

    def _acked_checked(self, segment_id: object, message_id: object) -> list[Command]:
        segment_id = _check_segment_id(segment_id)
        message_id, shape = _check_message_id(message_id, "message_id")
        sub = self._subscription(segment_id, "acked")
        _check_shape(sub, shape, message_id, "message_id")
        if not sub.remove(message_id):
            raise ConsumerStateError(
                f"acked: message {message_id!r} on segment {segment_id} was not delivered or is already acked"
            )
        return [IndividualAck(segment_id, (message_id,)), *self._finish_drain(segment_id)]

    def ack_cumulative(self, position_vector: Mapping[int, MessageId]) -> list[Command]:
        """The application acked everything up to a position per segment (the Stream position vector).

        Per open segment, the delivered-but-unacked ids at or before the position are acked:
        Exclusive -> one CumulativeAck at the greatest of them (Exclusive delivers in position order,
        so it covers only delivered messages); Key_Shared -> one IndividualAck of exactly those ids.
        Segments with nothing to ack send nothing. Positions for segments with no open subscription are
        ignored: a segment is closed only once all its deliveries were acked, so nothing of it can be
        outstanding.

        Parameters
        ----------
        position_vector : Mapping of int to MessageId
            Per segment id, the position acked up to (inclusive).

        Returns
        -------
        list of commands
            The acks, then the Close / Subscribe follow-ups of drains this completed.

        Raises
        ------
        TypeError
            ``position_vector`` is not a mapping, or a key or position of the wrong type.
        ValueError
            A negative segment id.
        ConsumerStateError
            A position whose shape differs from the subscription's ids.
        """
        if not isinstance(position_vector, Mapping):
            raise TypeError(
                f"position_vector must be a mapping of segment id to position, not {type(position_vector).__name__}"
            )
        positions: list[tuple[int, MessageId]] = []
        for raw_id, raw_position in position_vector.items():
            segment_id = _check_segment_id(raw_id, "position_vector key")
            position, shape = _check_message_id(raw_position, f"position for segment {segment_id}")
            sub = self._open.get(segment_id)
            if sub is not None:
                _check_shape(sub, shape, position, "position")
                positions.append((segment_id, position))
        positions.sort()

        commands: list[Command] = []
        touched: list[int] = []
        for segment_id, position in positions:
            sub = self._open[segment_id]
            taken = sub.take_upto(position)
            if not taken:
                continue
            if sub.subscribe.shared:
                commands.append(IndividualAck(segment_id, tuple(taken)))
            else:
                commands.append(CumulativeAck(segment_id, taken[-1]))
            touched.append(segment_id)
        follow_ups: list[Action] = []
        for segment_id in touched:
            follow_ups.extend(self._finish_drain(segment_id))
        commands.extend(_in_order(follow_ups))
        return commands

    def __repr__(self) -> str:
        return f"StreamConsumerState(epoch={self._epoch}, open={sorted(self._open)}, draining={sorted(self.draining)})"
