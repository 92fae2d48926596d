"""Type stub of _hashing.pyx: Murmur3 hashing kernels over key columns. Called by bucketcore.hashing,
which validates input first. Statuses returned are bc_status values (_bucketcore._status) as ints."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

PATHS: dict[str, int]

def build_has_simd() -> bool: ...
def cpu_has_simd() -> bool: ...
def resolved_path() -> str: ...
def set_path(name: str) -> None: ...
def hash_one(key: object, replace: bool) -> tuple[int, int]: ...
def install_general_paths(
    murmur3_32: Callable[[Any, str, int | None, str | int | None], Any],
    hash_keys: Callable[[Any, str, int | None, str | int | None], Any],
    key_hashes: type,
    one_thread: int,
) -> None: ...
def murmur3_32(
    keys: Any, *, errors: str = "strict", threads: int | None = None, column: str | int | None = None
) -> Any:
    """Raw Murmur3_32 of a key (an int) or of a key column (uint32 array); see bucketcore.murmur3_32."""

def hash_keys(keys: Any, *, errors: str = "strict", threads: int | None = None, column: str | int | None = None) -> Any:
    """Raw, segment and bucket hashes and has_key of a key or key column (a KeyHashes); see bucketcore.hash_keys."""

class KeyColumn:
    """A key column read a chunk at a time as C key descriptors (zero copy)."""

    @property
    def length(self) -> int: ...
    @property
    def needs_gil(self) -> bool: ...

def objects_column(seq: list[Any] | tuple[Any, ...] | npt.NDArray[np.object_]) -> KeyColumn: ...
def array_column(arr: npt.NDArray[Any]) -> tuple[int, KeyColumn | None]: ...
def arrow_column(
    offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
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
def described_keys(
    col: KeyColumn, pos: int, m: int
) -> tuple[int, int, list[bytes | str | None], tuple[int, int] | None]: ...
def split_raw(
    raw: npt.NDArray[np.uint32], segment_hash: npt.NDArray[np.uint16], bucket_hash: npt.NDArray[np.uint16]
) -> None: ...
