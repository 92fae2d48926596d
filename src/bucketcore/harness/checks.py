"""The end-to-end checks of ``bucketcore simulate``, vectorised over a consumer-side record.

The simulated consumers record what they were handed, what they processed and what they acked,
each as entries' message indices stamped with one global event clock (a total order consistent
with cause and effect in the simulation). From that record:

* **per-key order**: take each message's *first* processing; per key, in clock order, the send
  sequence numbers must never go down. A message processed before an earlier message of its key
  is one violation.
* **lost**: a produced message that no consumer ever acked.
* **duplicated after ack**: a message acked more than once, or handed to a consumer again after
  its first ack. (A crash redelivery of a message nobody acked is not a duplicate: the protocol
  promises at-least-once delivery up to the ack.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CheckResult", "EventLog", "run_checks"]


class EventLog:
    """Append-only record of message events: ``add(messages, clock)`` per entry, columns at the end."""

    __slots__ = ("_clocks", "_counts", "_messages")

    def __init__(self) -> None:
        self._messages: list[np.ndarray] = []
        self._clocks: list[int] = []
        self._counts: list[int] = []

    def add(self, messages: np.ndarray, clock: int) -> None:
        """Record that the messages of one entry had this event at ``clock``.

        Parameters
        ----------
        messages : numpy.ndarray
            Message indices (int64), in the entry's order.
        clock : int
            The global event clock.
        """
        self._messages.append(messages)
        self._clocks.append(clock)
        self._counts.append(int(messages.size))

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(message index, clock) per message event, in record order (int64 both)."""
        if not self._messages:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        messages = np.concatenate(self._messages).astype(np.int64, copy=False)
        clocks = np.repeat(np.asarray(self._clocks, dtype=np.int64), np.asarray(self._counts, dtype=np.int64))
        return messages, clocks

    def __len__(self) -> int:
        return len(self._counts)


@dataclass(frozen=True)
class CheckResult:
    """What the checks found.

    Attributes
    ----------
    consumed : int
        Distinct messages acked.
    lost : int
        Produced messages never acked.
    duplicated_after_ack : int
        Messages acked twice or handed out again after their first ack.
    order_violations : int
        Keyed messages first processed before an earlier message of the same key.
    first_lost : int
        Index of the first lost message (-1: none), for the report.
    first_violation : int
        Index of the first message processed out of order (-1: none).
    first_duplicate : int
        Index of the first duplicated message (-1: none).
    """

    consumed: int
    lost: int
    duplicated_after_ack: int
    order_violations: int
    first_lost: int
    first_violation: int
    first_duplicate: int

    @property
    def ok(self) -> bool:
        """True when every check passed (all three counts are 0)."""
        return self.lost == 0 and self.duplicated_after_ack == 0 and self.order_violations == 0


def _first(mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else -1


def run_checks(
    produced: int, key_ids: np.ndarray, key_seq: np.ndarray, delivered: EventLog, processed: EventLog, acked: EventLog
) -> CheckResult:
    """Run the three checks over a simulation's record.

    Parameters
    ----------
    produced : int
        Messages produced (indices 0..produced-1).
    key_ids : numpy.ndarray
        Per message, its key's id (-1: keyless, outside the order check).
    key_seq : numpy.ndarray
        Per message, its position among its key's messages in send order.
    delivered, processed, acked : EventLog
        The consumer-side record.

    Returns
    -------
    CheckResult
    """
    ack_msgs, ack_clock = acked.columns()
    ack_count = np.bincount(ack_msgs, minlength=produced)[:produced] if ack_msgs.size else np.zeros(produced, np.int64)
    acked_mask = ack_count > 0
    consumed = int(np.count_nonzero(acked_mask))
    lost_mask = ~acked_mask

    first_ack = np.full(produced, np.iinfo(np.int64).max, dtype=np.int64)
    if ack_msgs.size:
        np.minimum.at(first_ack, ack_msgs, ack_clock)
    dup_mask = ack_count > 1
    del_msgs, del_clock = delivered.columns()
    if del_msgs.size:
        late = del_clock > first_ack[del_msgs]
        dup_mask[del_msgs[late]] = True

    proc_msgs, _ = processed.columns()  # record order is clock order
    violations = 0
    first_violation = -1
    if proc_msgs.size:
        uniq, first_pos = np.unique(proc_msgs, return_index=True)
        keyed = key_ids[uniq] >= 0
        uniq, first_pos = uniq[keyed], first_pos[keyed]
        keys = key_ids[uniq]
        order = np.lexsort((first_pos, keys))
        k_sorted, s_sorted = keys[order], key_seq[uniq][order]
        back = (k_sorted[1:] == k_sorted[:-1]) & (s_sorted[1:] < s_sorted[:-1])
        violations = int(np.count_nonzero(back))
        if violations:
            first_violation = int(uniq[order][1:][back].min())
    return CheckResult(
        consumed=consumed,
        lost=int(np.count_nonzero(lost_mask)),
        duplicated_after_ack=int(np.count_nonzero(dup_mask)),
        order_violations=violations,
        first_lost=_first(lost_mask),
        first_violation=first_violation,
        first_duplicate=_first(dup_mask),
    )
