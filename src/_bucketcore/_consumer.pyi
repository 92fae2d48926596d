"""Type stub of _consumer.pyx: the Stream consumer state's per-message calls in C."""

from typing import Any

def bind(individual_ack: type) -> None:
    """Give the kernel the command class ``acked`` returns."""

class SegmentTrack:
    """One open per-segment consumer: assignment, subscribe, drain reason, unacked ids."""

    assigned: Any
    subscribe: Any
    drain_reason: str | None
    id_shape: int | None
    def __init__(self, assigned: Any, subscribe: Any) -> None: ...
    def __len__(self) -> int: ...
    def add(self, message_id: object) -> bool:
        """Track a delivered id; False for a redelivery of a tracked one."""
    def remove(self, message_id: object) -> bool:
        """Untrack an acked id; False if it was not tracked."""
    def take_upto(self, position: object) -> list[Any]:
        """Untrack and return (ascending) the tracked ids at or before ``position``."""
    def ascending(self) -> list[Any]:
        """The tracked ids, ascending."""

class ConsumerCore:
    """The per-message half of the Stream consumer's state."""

    _open: dict[int, SegmentTrack]
    def delivered(self, segment_id: int, message_id: object) -> bool:
        """Record that the application was handed ``message_id`` of ``segment_id``."""
    def acked(self, segment_id: int, message_id: object) -> list[Any]:
        """The application acked one delivered message: the IndividualAck, then any follow-ups."""
    def _delivered_checked(self, segment_id: object, message_id: object) -> bool: ...
    def _acked_checked(self, segment_id: object, message_id: object) -> list[Any]: ...
    def _finish_drain(self, segment_id: int) -> list[Any]: ...
