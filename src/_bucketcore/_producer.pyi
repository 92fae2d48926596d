"""Type stub of the producer kernels (bucket lookup, batch grouping and stamping)."""

from typing import Sequence

import numpy as np
import numpy.typing as npt

from _bucketcore._hashing import KeyColumn

POLICY_SHARED: int
POLICY_PER_BUCKET: int
ROUTE_ONE: int
ROUTE_TABLE: int
ROUTE_LEGACY: int

# the per-entry columns and the message order, as group_entries returns them
_Columns = tuple[
    npt.NDArray[np.int32],
    npt.NDArray[np.int32],
    npt.NDArray[np.uint16],
    npt.NDArray[np.uint16],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
]

def bucket_index(
    seg: npt.NDArray[np.int32] | None,
    bucket_hash: npt.NDArray[np.uint16],
    splits: npt.NDArray[np.uint16],
    split_offsets: npt.NDArray[np.int64],
    out: npt.NDArray[np.int32],
    tables: Sequence[npt.NDArray[np.uint16]] | None = None,
) -> None: ...

class Grouper:
    def __init__(
        self,
        bucket_offsets: npt.NDArray[np.int64],
        policy: int,
        max_messages: int,
        max_bytes: int,
        buffered: bool = True,
    ) -> None: ...
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
    ) -> bool: ...
    def set_routing(
        self,
        starts: npt.NDArray[np.uint16],
        legacy_order: npt.NDArray[np.int32] | None,
        splits: npt.NDArray[np.uint16],
        split_offsets: npt.NDArray[np.int64],
    ) -> None: ...
    def add_key(
        self, key: str | bytes | None, size: int, replace: bool, round_robin: int
    ) -> tuple[int, bool, int, int]: ...
    def finish(self) -> None: ...
    def drain(
        self,
    ) -> tuple[
        npt.NDArray[np.int32],
        npt.NDArray[np.int32],
        npt.NDArray[np.uint16],
        npt.NDArray[np.uint16],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
    ]: ...

def group_entries(
    seg: npt.NDArray[np.int32] | None,
    bucket: npt.NDArray[np.int32],
    bucket_hash: npt.NDArray[np.uint16],
    sizes: npt.NDArray[np.int64] | None,
    bucket_offsets: npt.NDArray[np.int64],
    policy: int,
    max_messages: int,
    max_bytes: int,
    global_index: bool = False,
) -> _Columns: ...

def payload_sizes(payloads: Sequence[object], out: npt.NDArray[np.int64]) -> int: ...


class Router:
    def __init__(
        self,
        route_mode: int,
        segment_table: npt.NDArray[np.uint16] | None,
        rotation: npt.NDArray[np.int32],
        bucket_tables: list[npt.NDArray[np.uint16]],
    ) -> None: ...

def route_keys(
    router: Router,
    col: KeyColumn,
    lo: int,
    hi: int,
    replace: bool,
    gidx: npt.NDArray[np.int32],
    bucket_hash: npt.NDArray[np.uint16],
) -> tuple[int, int]: ...
def place_keyless(router: Router, gidx: npt.NDArray[np.int32], round_robin: int) -> int: ...
def fused_entries(
    columns: list[KeyColumn],
    sizes: npt.NDArray[np.int64] | None,
    bucket_offsets: npt.NDArray[np.int64],
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
    bucket_offsets: npt.NDArray[np.int64],
    policy: int,
    max_messages: int,
    max_bytes: int,
    router: Router,
    round_robin: int,
) -> tuple[_Columns, int]: ...

STEP_CODES: dict[str, int]

class ScanStage:
    """The two-thread pipeline: feed hashes (and partly routes), run routes the rest and groups."""

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
    def run(self) -> int: ...
    def finish(self) -> tuple[_Columns, int]: ...
