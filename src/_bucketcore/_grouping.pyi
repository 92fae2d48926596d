"""Type stub of _grouping.pyx: the batch state machine and one-stream grouping."""

from enum import IntEnum

import numpy as np
import numpy.typing as npt

# The per-entry columns (seg, bucket, hash_min, hash_max, start, count, nbytes) and the message
# order, as group_entries, fused_entries, hashed_entries and ScanStage.finish return them.
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

class Policy(IntEnum):
    """Batching policy: the limits apply to a segment's shared window or to each bucket."""

    POLICY_SHARED = 0
    POLICY_PER_BUCKET = 1

class WholeStream:
    """The batch state of whole streams over one list of segments, built once and reused."""

    def __init__(
        self, bucket_offsets: npt.NDArray[np.int64], policy: int, max_messages: int, max_bytes: int, n: int
    ) -> None: ...
    @property
    def segment_count(self) -> int: ...
    def name_segments(self, segment_ids: npt.NDArray[np.int64]) -> None: ...
    def restart(self, policy: int, max_messages: int, max_bytes: int, n: int) -> None: ...

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
    stream: WholeStream | None = None,
) -> tuple[int, int, _Columns | None]: ...
