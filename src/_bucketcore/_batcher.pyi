"""Type stub of _batcher.pyx: ``BatcherCore`` (the state behind ``EntryBucketBatcher``) and ``Entry``."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from _bucketcore._routing import Router

class NoEntries(list[Any]):
    """The shared empty result of a call that emitted nothing; every change raises TypeError."""

NO_ENTRIES: NoEntries

class Entry:
    """One stamped entry: a batch of messages of one (segment, bucket), in send order."""

    segment_id: int
    bucket: int
    hash_min: int
    hash_max: int
    nbytes: int
    payloads: list[Any] | None
    def __init__(
        self,
        segment_id: int,
        bucket: int,
        hash_min: int,
        hash_max: int,
        message_indices: npt.NDArray[np.integer[Any]] | Sequence[int],
        nbytes: int,
        payloads: list[Any] | None = None,
    ) -> None: ...
    @property
    def message_indices(self) -> npt.NDArray[np.int64]:
        """The entry's message positions (int64), in send order."""
    @message_indices.setter
    def message_indices(self, value: npt.NDArray[np.integer[Any]] | Sequence[int]) -> None: ...
    @property
    def count(self) -> int:
        """Number of messages in the entry."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

class BatcherCore:
    """The state of an EntryBucketBatcher; ``_setup`` builds it once."""

    def _setup(
        self,
        bucket_offsets: npt.NDArray[np.int64],
        policy: int,
        max_messages: int,
        max_bytes: int,
        router: Router,
        segment_ids: npt.NDArray[np.int64],
        round_robin: int,
        replace: bool,
    ) -> None: ...
    def add(self, key: Any, payload: Any) -> list[Entry]:
        """Add one message; the entries that became ready (the shared empty result when none did)."""
    def add_many(self, keys: Any, payloads: Sequence[Any]) -> list[Entry]:
        """Add a batch of sends in one kernel call."""
    def _add_many_keys(self, keys: Any, payloads: Sequence[Any]) -> list[Entry]: ...
    def _add_columns(
        self,
        keys: Any,
        columns: list[Any],
        n: int,
        payloads: list[Any] | tuple[Any, ...],
        hashes: tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], npt.NDArray[np.uint16], npt.NDArray[np.uint8]]
        | None,
    ) -> list[Entry]: ...
    def flush(self) -> list[Entry]:
        """Emit every open batch, ordered by first message."""
    def _refuse(self, keys: Any, status: int, index: int) -> None: ...
    @property
    def round_robin(self) -> int: ...
    @property
    def pending(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def open_batches(self) -> int: ...
