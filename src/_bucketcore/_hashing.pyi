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

PATHS: dict[str, int]

def cpu_has_simd() -> bool: ...
def get_path() -> str: ...
def resolved_path() -> str: ...
def set_path(name: str) -> None: ...
def hash_one(key: str | bytes, replace: bool) -> tuple[int, int]: ...
def hash_objects(
    seq: list[Any] | tuple[Any, ...] | npt.NDArray[np.object_],
    raw: npt.NDArray[np.uint32],
    segment_hash: npt.NDArray[np.uint16] | None,
    bucket_hash: npt.NDArray[np.uint16] | None,
    has_key: npt.NDArray[np.bool_] | None,
    replace: bool,
    allow_none: bool,
    start: int = 0,
    stop: int = -1,
) -> tuple[int, int]: ...
def hash_fixed(
    arr: npt.NDArray[np.str_] | npt.NDArray[np.bytes_],
    raw: npt.NDArray[np.uint32],
    segment_hash: npt.NDArray[np.uint16] | None,
    bucket_hash: npt.NDArray[np.uint16] | None,
    has_key: npt.NDArray[np.bool_] | None,
    replace: bool,
) -> tuple[int, int]: ...
def hash_arrow(
    offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8] | None,
    validity: npt.NDArray[np.uint8] | None,
    array_offset: int,
    length: int,
    raw: npt.NDArray[np.uint32],
    segment_hash: npt.NDArray[np.uint16] | None,
    bucket_hash: npt.NDArray[np.uint16] | None,
    has_key: npt.NDArray[np.bool_] | None,
    out_base: int,
    allow_none: bool,
) -> tuple[int, int]: ...
def split_raw(
    raw: npt.NDArray[np.uint32], segment_hash: npt.NDArray[np.uint16], bucket_hash: npt.NDArray[np.uint16]
) -> None: ...
