"""Type stub of _hashing.pyx: Murmur3 hashing kernels over key columns. Called by bucketcore.hashing,
which validates input first. Statuses returned are bc_status values (_bucketcore._status) as ints."""

from typing import Any, Self

import numpy as np
import numpy.typing as npt

PATHS: dict[str, int]

def build_has_simd() -> bool: ...
def cpu_has_simd() -> bool: ...
def resolved_path() -> str: ...
def set_path(name: str) -> None: ...
def hash_one(key: object, replace: bool) -> tuple[int, int]: ...

AUTO_THREADS_MIN_KEYS: int

class HashColumns:
    """The four read-only columns of hashed keys: the base of bucketcore.hashing.KeyHashes."""

    def __init__(self, raw: Any, segment_hash: Any, bucket_hash: Any, has_key: Any) -> None: ...
    @property
    def raw(self) -> Any: ...
    @property
    def segment_hash(self) -> Any: ...
    @property
    def bucket_hash(self) -> Any: ...
    @property
    def has_key(self) -> Any: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: Any) -> Self: ...

def short_murmur3_32(keys: Any, errors: Any, threads: Any, column: Any) -> Any:
    """bucketcore.murmur3_32 of a str/bytes key or a short list or 1-D array; None: declined."""

def short_hash_keys(cls: type[HashColumns], keys: Any, errors: Any, threads: Any, column: Any) -> Any:
    """bucketcore.hash_keys of what short_murmur3_32 takes, as a cls; None: declined."""

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
