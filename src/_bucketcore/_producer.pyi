"""Type stub of _producer.pyx: hash, route and group a key stream a chunk at a time."""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from _bucketcore._grouping import WholeStream, _Columns
from _bucketcore._hashing import KeyColumn
from _bucketcore._routing import Router

class KeyChunks:
    """Reads a KeyColumn a chunk at a time (its methods are C-level only)."""

    def __init__(self, longest: int) -> None: ...

def route_keys(
    router: Router,
    col: KeyColumn,
    lo: int,
    hi: int,
    replace: bool,
    global_bucket: npt.NDArray[np.int32],
    bucket_hash: npt.NDArray[np.uint16],
) -> tuple[int, int]: ...
def place_keyless(router: Router, global_bucket: npt.NDArray[np.int32], round_robin: int) -> int: ...
def fused_entries(
    columns: list[KeyColumn],
    sizes: npt.NDArray[np.int64] | None,
    stream: WholeStream,
    policy: int,
    max_messages: int,
    max_bytes: int,
    replace: bool,
    router: Router,
    round_robin: int,
) -> tuple[int, int, _Columns | None, int]: ...
def hashed_entries(
    segment_hash: npt.NDArray[np.uint16],
    bucket_hash: npt.NDArray[np.uint16],
    has_key: npt.NDArray[np.uint8],
    sizes: npt.NDArray[np.int64] | None,
    stream: WholeStream,
    policy: int,
    max_messages: int,
    max_bytes: int,
    router: Router,
    round_robin: int,
) -> tuple[_Columns, int]: ...

class ShortEntries:
    """bucket_entries' path for its common call (a list of keys, plain options), one per plan."""

    def __init__(
        self,
        router: Router,
        streams: list[WholeStream],
        bucket_offsets: npt.NDArray[np.int64],
        segment_ids: npt.NDArray[np.int64],
        make_table: Callable[..., Any],
        longest: int,
        kept: int,
    ) -> None: ...
    def entries(
        self,
        keys: object,
        max_messages: object,
        max_bytes: object,
        policy: object,
        encrypted: object,
        round_robin: object,
        errors: object,
    ) -> Any: ...

def bucket_index(
    seg: npt.NDArray[np.int32] | None,
    bucket_hash: npt.NDArray[np.uint16],
    splits: npt.NDArray[np.uint16],
    split_offsets: npt.NDArray[np.int64],
    out: npt.NDArray[np.int32],
    tables: Sequence[npt.NDArray[np.uint16]] | None = None,
) -> None: ...
