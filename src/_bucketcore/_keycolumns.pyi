"""Type stub of _keycolumns.pyx: the one description of a key input (its kind, layout and buffers) as
a KeyColumn, read a chunk at a time as C key descriptors by the hashing kernels. Statuses returned are
bc_status values (_bucketcore._status) as ints."""

from typing import Any

import numpy as np
import numpy.typing as npt

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
def described_keys(
    col: KeyColumn, pos: int, m: int
) -> tuple[int, int, list[bytes | str | None], tuple[int, int] | None]: ...
