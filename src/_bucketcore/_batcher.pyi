"""Type stub of _batcher.pyx: ``BatcherCore``, the state behind ``EntryBucketBatcher``."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from _bucketcore._entry import Entry
from _bucketcore._routing import Router

class NoEntries(list[Any]):
    """The shared empty result of a call that emitted nothing; every change raises TypeError."""

NO_ENTRIES: NoEntries

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
