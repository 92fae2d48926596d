"""Type stub of _entry_routing.pyx: the entry routing kernels. Statuses returned are bc_status values
(_bucketcore._status) as ints."""

import numpy as np
import numpy.typing as npt

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
