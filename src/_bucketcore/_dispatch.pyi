"""Type stub of the broker dispatch kernels (see _dispatch.pyx)."""

import numpy as np
import numpy.typing as npt

STATUS_OK: int
STATUS_OUT_OF_RANGE: int
STATUS_MIN_ABOVE_MAX: int
NO_CONSUMER: int
MALFORMED: int

def route(
    table: npt.NDArray[np.uint16],
    owner: npt.NDArray[np.int32] | None,
    hash_min: npt.NDArray[np.uint16],
    hash_max: npt.NDArray[np.uint16] | None,
    stamped: npt.NDArray[np.uint8] | None,
    key_hash: npt.NDArray[np.uint32] | None,
    flagged: npt.NDArray[np.uint8] | None,
    slot_out: npt.NDArray[np.int32] | None,
    bucket_out: npt.NDArray[np.int32] | None,
    hash_out: npt.NDArray[np.uint16] | None,
    mark: bool,
) -> tuple[int, int, int, int]: ...
def fits(
    splits: npt.NDArray[np.uint16],
    table: npt.NDArray[np.uint16] | None,
    hash_min: npt.NDArray[np.uint16],
    hash_max: npt.NDArray[np.uint16],
    flagged: npt.NDArray[np.uint8] | None,
    out: npt.NDArray[np.uint8],
) -> tuple[int, int]: ...
def spread(owner: npt.NDArray[np.int32], consumers: int) -> None: ...
