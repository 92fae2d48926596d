"""Type stub of _batcher.pyx: the streaming ``Grouper`` behind ``EntryBucketBatcher``."""

from typing import Any

import numpy as np
import numpy.typing as npt

class Grouper:
    """Streaming batch state over a fixed list of segments; buffers the pending messages' positions."""

    def __init__(
        self, bucket_offsets: npt.NDArray[np.int64], policy: int, max_messages: int, max_bytes: int
    ) -> None: ...
    def set_routing(
        self,
        starts: npt.NDArray[np.uint16],
        legacy_order: npt.NDArray[np.int32] | None,
        splits: npt.NDArray[np.uint16],
        split_offsets: npt.NDArray[np.int64],
    ) -> None: ...
    def add_key(self, key: object, size: int, replace: bool, round_robin: int) -> tuple[int, bool, int, int]: ...
    @property
    def position(self) -> int: ...
    @property
    def open_batches(self) -> int: ...
    @property
    def emitted(self) -> int: ...
    @property
    def pending(self) -> int: ...
    def scan(
        self,
        seg: npt.NDArray[np.int32] | None,
        bucket: npt.NDArray[np.int32],
        bucket_hash: npt.NDArray[np.uint16],
        sizes: npt.NDArray[np.int64] | None,
    ) -> tuple[int, int]: ...
    def finish(self) -> None: ...
    def drain(
        self,
    ) -> tuple[
        npt.NDArray[np.int32],  # seg
        npt.NDArray[np.int32],  # bucket
        npt.NDArray[np.uint16],  # hash_min
        npt.NDArray[np.uint16],  # hash_max
        npt.NDArray[np.int64],  # start
        npt.NDArray[np.int64],  # count
        npt.NDArray[np.int64],  # nbytes
        npt.NDArray[np.int64],  # take
        npt.NDArray[np.int64],  # keep
        npt.NDArray[np.int64],  # index
    ]: ...

def payload_sizes(payloads: list[Any] | tuple[Any, ...], out: npt.NDArray[np.int64]) -> int: ...

class BatcherLock:
    """A mutex whose uncontended acquire is one C call; a context manager."""

    def __enter__(self) -> BatcherLock: ...
    def __exit__(self, *exc_info: object) -> bool: ...

class BatcherCore:
    """The per-send half of EntryBucketBatcher."""

    _grouper: Grouper
    _open: list[list[Any] | None]
    _lock: BatcherLock
    _round_robin: int
    _replace: bool
    def add(self, key: Any, payload: Any) -> list[Any]:
        """Add one message; the entries that became ready (often none)."""
    def _add_checked(self, key: Any, payload: Any) -> list[Any]: ...
    def _drain(self) -> list[Any]: ...
