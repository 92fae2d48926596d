"""The producer's results: :class:`Entry` (one stamped entry) and :class:`EntryTable` (entries as
columns), as :func:`bucketcore.bucket_entries` and :class:`bucketcore.EntryBucketBatcher` return them.

``Entry`` is an extension type of its own kernel (_entry), whose fields the batcher's kernel fills
directly for the entries it emits; its message positions become a numpy array when
``message_indices`` is first read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import overload

import numpy as np

from _bucketcore._entry import Entry

from .arrow import ArrowColumns

__all__ = ["Entry", "EntryTable"]


class EntryTable(ArrowColumns):
    """Columnar result of :func:`bucket_entries`: one row per entry, in emission order.

    Indexing gives :class:`Entry` views (``table[i]``, ``table[a:b]``, iteration); ``len`` is the
    number of entries.

    Parameters
    ----------
    segment_id : numpy.ndarray of int64
    bucket : numpy.ndarray of int32
    hash_min, hash_max : numpy.ndarray of uint16
        Each entry's stamp.
    start, count, nbytes : numpy.ndarray of int64
        Entry ``i``'s messages are ``order[start[i]:start[i] + count[i]]``; ``nbytes`` is 0
        without sizes.
    order : numpy.ndarray of int64
        Message indices, entry after entry, in send order inside each.
    next_round_robin : int
        Where the keyless round-robin continues in a following call.

    The columns are made read-only.
    """

    __slots__ = (
        "segment_id",
        "bucket",
        "hash_min",
        "hash_max",
        "start",
        "count",
        "nbytes",
        "order",
        "next_round_robin",
    )

    def __init__(
        self,
        segment_id: np.ndarray,
        bucket: np.ndarray,
        hash_min: np.ndarray,
        hash_max: np.ndarray,
        start: np.ndarray,
        count: np.ndarray,
        nbytes: np.ndarray,
        order: np.ndarray,
        next_round_robin: int = 0,
    ) -> None:
        self.segment_id = _frozen(segment_id)
        self.bucket = _frozen(bucket)
        self.hash_min = _frozen(hash_min)
        self.hash_max = _frozen(hash_max)
        self.start = _frozen(start)
        self.count = _frozen(count)
        self.nbytes = _frozen(nbytes)
        self.order = _frozen(order)
        self.next_round_robin = next_round_robin

    @classmethod
    def _of_frozen(
        cls,
        segment_id: np.ndarray,
        bucket: np.ndarray,
        hash_min: np.ndarray,
        hash_max: np.ndarray,
        start: np.ndarray,
        count: np.ndarray,
        nbytes: np.ndarray,
        order: np.ndarray,
        next_round_robin: int = 0,
    ) -> EntryTable:
        """A table of columns a kernel made read-only already (the columns are kept as given)."""
        table = cls.__new__(cls)
        table.segment_id = segment_id
        table.bucket = bucket
        table.hash_min = hash_min
        table.hash_max = hash_max
        table.start = start
        table.count = count
        table.nbytes = nbytes
        table.order = order
        table.next_round_robin = next_round_robin
        return table

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def _entry(self, i: int) -> Entry:
        s = int(self.start[i])
        return Entry(
            int(self.segment_id[i]),
            int(self.bucket[i]),
            int(self.hash_min[i]),
            int(self.hash_max[i]),
            self.order[s : s + int(self.count[i])],
            int(self.nbytes[i]),
        )

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        n = len(self)
        if isinstance(index, slice):
            return [self._entry(i) for i in range(*index.indices(n))]
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"EntryTable indices must be integers or slices, not {type(index).__name__}")
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"entry index {i} out of range for {n} entries")
        return self._entry(i % n if n else i)

    def __iter__(self) -> Iterator[Entry]:
        for i in range(len(self)):
            yield self._entry(i)

    def as_dict(self) -> dict[str, np.ndarray]:
        """The numpy columns by name.

        Returns
        -------
        dict of str to numpy.ndarray
            The per-entry columns and ``order``.
        """
        return {
            name: getattr(self, name)
            for name in ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes", "order")
        }

    def __repr__(self) -> str:
        return f"EntryTable(entries={len(self)}, messages={self.order.shape[0]})"

    def _arrow_columns(self) -> list[tuple[str, np.ndarray]]:
        """The per-entry columns ``segment_id`` (int64), ``bucket`` (int32), ``hash_min``,
        ``hash_max`` (uint16), ``start``, ``count``, ``nbytes`` (int64), as the numpy arrays
        themselves; ``order`` (one value per message) is not a per-entry column and stays with
        the table."""
        return [
            (name, getattr(self, name))
            for name in ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes")
        ]


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr
