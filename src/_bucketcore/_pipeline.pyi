"""Type stub of _pipeline.pyx: the multi-thread hashing stages and the two-thread ``bucket_entries`` pipeline."""

from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from _bucketcore._grouping import _Columns
from _bucketcore._hashing import KeyColumn
from _bucketcore._routing import Router

_T_co = TypeVar("_T_co", covariant=True)

class _Task(Protocol[_T_co]):
    """What a pool's submit returns (bucketcore.workers.Task)."""

    def result(self) -> _T_co: ...

class BlockStage:
    """Threads over buffer columns: each calls take, which hashes blocks of keys by ticket."""

    def __init__(
        self,
        cols: list[KeyColumn],
        raw: npt.NDArray[np.uint32],
        segment_hash: npt.NDArray[np.uint16] | None,
        bucket_hash: npt.NDArray[np.uint16] | None,
        has_key: npt.NDArray[np.bool_] | npt.NDArray[np.uint8] | None,
        replace: bool,
        allow_none: bool,
        block: int,
    ) -> None: ...
    def take(self) -> tuple[int, int]: ...

class HashStage:
    """Two threads over an object column: run_calling_thread (calling thread) and run (a worker)."""

    def __init__(
        self,
        col: KeyColumn,
        raw: npt.NDArray[np.uint32],
        segment_hash: npt.NDArray[np.uint16] | None,
        bucket_hash: npt.NDArray[np.uint16] | None,
        has_key: npt.NDArray[np.bool_] | npt.NDArray[np.uint8] | None,
        replace: bool,
        allow_none: bool,
        start: int,
        stop: int,
        block: int = ...,
    ) -> None: ...
    def run_calling_thread(self) -> tuple[int, int]: ...
    def run_with(
        self, submit: Callable[[Callable[[], tuple[int, int]]], _Task[tuple[int, int]]]
    ) -> tuple[int, int]: ...
    def abandon(self) -> None: ...
    def run(self) -> tuple[int, int]: ...

STEP_CODES: dict[str, int]

class ScanStage:
    """The two-thread pipeline: feed publishes the stream a step at a time, run finishes and groups it."""

    def __init__(
        self,
        router: Router,
        bucket_offsets: npt.NDArray[np.int64],
        policy: int,
        max_messages: int,
        max_bytes: int,
        sizes: npt.NDArray[np.int64] | None,
        n: int,
        round_robin: int,
        step: int,
        levels: bytes | None = None,
    ) -> None: ...
    def feed(self, columns: list[KeyColumn], replace: bool) -> tuple[int, int]: ...
    def feed_with(
        self, submit: Callable[[Callable[[], int]], _Task[int]], columns: list[KeyColumn], replace: bool
    ) -> tuple[int, int]: ...
    def abandon(self) -> None: ...
    def run(self) -> int: ...
    def finish(self) -> tuple[_Columns, int]: ...
