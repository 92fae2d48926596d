"""Type stub of _hashing.pyx: Murmur3 hashing kernels over key columns described by _keycolumns. Called by
bucketcore.hashing, which validates input first. Statuses returned are bc_status values (_bucketcore._status)
as ints."""

from collections.abc import Callable
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from _bucketcore._keycolumns import KeyColumn

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

def murmur3_32(keys: Any, *, errors: Any = "strict", threads: Any = None, column: Any = None) -> Any:
    """bucketcore.murmur3_32's short path (a str/bytes key, a short list or 1-D array); None: declined."""

def hash_keys(
    cls: type[HashColumns], keys: Any, *, errors: Any = "strict", threads: Any = None, column: Any = None
) -> Any:
    """bucketcore.hash_keys' short path (what murmur3_32 here takes), as a cls; None: declined."""

def short_then(short_path: Callable[..., Any], general: Callable[..., Any], bound: object = None) -> Callable[..., Any]:
    """``short_path([bound,] *args, **kwargs)`` unless it returns None, then ``general(*args, **kwargs)``."""

def short_then_function(
    short_path: Callable[..., Any], general: Callable[..., Any], bound: object, name: str, module: str, doc: str
) -> Callable[..., Any]:
    """short_then's call as a builtin function named name, of module, with doc (opened by a text signature)."""

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
