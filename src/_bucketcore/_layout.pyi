"""Bucket and segment lookup kernels (compiled). Called by bucketcore.layout, which validates input first."""

from enum import IntEnum
from typing import overload

import numpy as np
import numpy.typing as npt

class LookupMethod(IntEnum):
    """How bucket_of maps hashes to buckets (its ``method`` argument)."""

    METHOD_CONST = 0
    METHOD_COMPARE = 1
    METHOD_SEARCH = 2
    METHOD_TABLE = 3

_Hashes = (
    npt.NDArray[np.uint8]
    | npt.NDArray[np.uint16]
    | npt.NDArray[np.uint32]
    | npt.NDArray[np.uint64]
    | npt.NDArray[np.int8]
    | npt.NDArray[np.int16]
    | npt.NDArray[np.int32]
    | npt.NDArray[np.int64]
)

def build_table(splits: npt.NDArray[np.uint16], table: npt.NDArray[np.uint16]) -> None: ...
def bucket_of(
    splits: npt.NDArray[np.uint16],
    hashes: _Hashes,
    out: npt.NDArray[np.int32],
    table: npt.NDArray[np.uint16] | None,
    method: int,
) -> int: ...
def route_keyed(
    starts: npt.NDArray[np.uint16],
    segment_hash: npt.NDArray[np.uint16],
    has_key: npt.NDArray[np.uint8],
    out: npt.NDArray[np.int32],
    table: npt.NDArray[np.uint16] | None,
    round_robin: int,
    n_active: int,
) -> int: ...
def route_legacy(
    raw: npt.NDArray[np.uint32],
    has_key: npt.NDArray[np.uint8],
    out: npt.NDArray[np.int32],
    legacy_to_active: npt.NDArray[np.int32],
    round_robin: int,
) -> int: ...
@overload
def greedy_groups(
    prefix: npt.NDArray[np.int64], limit: int, max_groups: int, starts: npt.NDArray[np.int64] | None
) -> int: ...
@overload
def greedy_groups(
    prefix: npt.NDArray[np.float64], limit: float, max_groups: int, starts: npt.NDArray[np.int64] | None
) -> int: ...
def weighted_histogram(
    hashes: npt.NDArray[np.uint16], weights: npt.NDArray[np.int64], bins: npt.NDArray[np.int64]
) -> int: ...
def weighted_histogram_f64(
    hashes: npt.NDArray[np.uint16], weights: npt.NDArray[np.float64], bins: npt.NDArray[np.float64]
) -> int: ...
def histogram(hashes: npt.NDArray[np.uint16], bins: npt.NDArray[np.int64]) -> None: ...
def gather_ids(index: npt.NDArray[np.int32], ids: npt.NDArray[np.int64], out: npt.NDArray[np.int64]) -> None: ...
