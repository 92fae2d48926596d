"""Murmur3 hashing kernels (compiled). Called by bucketcore.hashing, which validates input first."""

from typing import Any

import numpy as np
import numpy.typing as npt

STATUS_OK: int
STATUS_BAD_TYPE: int
STATUS_NONE: int
STATUS_SURROGATE: int
STATUS_CHANGED: int
STATUS_TOO_LONG: int
STATUS_BAD_OFFSETS: int
STATUS_NEEDS_GIL: int

PATHS: dict[str, int]

def cpu_has_simd() -> bool: ...
def resolved_path() -> str: ...
def set_path(name: str) -> None: ...
def hash_one(key: str | bytes, replace: bool) -> tuple[int, int]: ...
class KeyColumn:
    """A key column read a chunk at a time as C key descriptors (zero copy)."""

    @property
    def length(self) -> int: ...
    @property
    def needs_gil(self) -> bool: ...
    @property
    def plain(self) -> bool: ...

def objects_column(seq: list[Any] | tuple[Any, ...] | npt.NDArray[np.object_]) -> KeyColumn: ...
def fixed_column(arr: npt.NDArray[np.str_] | npt.NDArray[np.bytes_]) -> tuple[int, KeyColumn | None]: ...
def arrow_column(
    offsets: npt.NDArray[Any],  # int32 or int64
    data: npt.NDArray[np.uint8] | None,
    validity: npt.NDArray[np.uint8] | None,
    array_offset: int,
    length: int,
) -> KeyColumn: ...
def hash_column(
    col: KeyColumn,
    raw: npt.NDArray[np.uint32],
    segment_hash: npt.NDArray[np.uint16] | None,
    bucket_hash: npt.NDArray[np.uint16] | None,
    has_key: npt.NDArray[np.bool_] | npt.NDArray[np.uint8] | None,
    replace: bool,
    allow_none: bool,
    start: int = 0,
    stop: int = -1,
) -> tuple[int, int]: ...
def split_raw(
    raw: npt.NDArray[np.uint32], segment_hash: npt.NDArray[np.uint16], bucket_hash: npt.NDArray[np.uint16]
) -> None: ...

class BlockStage:
    """Threads over buffer columns: each calls take, which hashes blocks of keys in turn."""

    def __init__(
        self,
        cols: list[KeyColumn],
        raw: npt.NDArray[np.uint32],
        segment_hash: npt.NDArray[np.uint16] | None,
        bucket_hash: npt.NDArray[np.uint16] | None,
        has_key: npt.NDArray[np.bool_] | None,
        replace: bool,
        allow_none: bool,
        block: int,
    ) -> None: ...
    def take(self) -> tuple[int, int]: ...

class HashStage:
    """Two threads over an object column taking blocks by ticket: first (calling thread) / run (worker)."""

    def __init__(
        self,
        col: KeyColumn,
        raw: npt.NDArray[np.uint32],
        segment_hash: npt.NDArray[np.uint16] | None,
        bucket_hash: npt.NDArray[np.uint16] | None,
        has_key: npt.NDArray[np.bool_] | None,
        replace: bool,
        allow_none: bool,
        start: int,
        stop: int,
        block: int = ...,
    ) -> None: ...
    def first(self) -> tuple[int, int]: ...
    def run(self) -> tuple[int, int]: ...
