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

E_QUEUED: int
E_PENDING: int
E_ACKED: int
ACK_OK: int
ACK_UNKNOWN: int
ACK_ALREADY: int
ACK_QUEUED: int
ACK_OTHER: int
ACK_DUPLICATE: int
K_DELIVERED: int
K_DELIVERED_MESSAGES: int
K_REDELIVERED: int
K_ACKED: int
K_PENDING: int
K_PENDING_MESSAGES: int

class DispatchCore:
    n_buckets: int
    base: int
    end: int
    ob_len: int
    def __init__(self, table: npt.NDArray[np.uint16], n_buckets: int) -> None: ...
    def release_all(self) -> None: ...
    def add_key(self, key: int) -> None: ...
    def set_owners(self, owner_key: npt.NDArray[np.int32]) -> None: ...
    def requeue(self, key: int) -> int: ...
    def offer(
        self,
        ids: npt.NDArray[np.int64],
        bucket: npt.NDArray[np.int32],
        hashes: npt.NDArray[np.uint16],
        msgs: npt.NDArray[np.int64],
    ) -> int: ...
    def offer_stamped(self, entry_id: int, hash_min: int) -> bool: ...
    def offer_one(self, entry_id: int, bucket: int, hash: int, msgs: int) -> bool: ...
    def ack(self, key: int, ids: npt.NDArray[np.int64]) -> tuple[int, int, int]: ...
    def ack_one(self, key: int, entry_id: int) -> int: ...
    def take_outbox(
        self,
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.uint16], npt.NDArray[np.bool_]]: ...
    def take_outbox_of(
        self, key: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint16], npt.NDArray[np.bool_]]: ...
    def key_stats(self, key: int) -> tuple[int, int, int, int, int, int]: ...
    def bucket_columns(
        self,
    ) -> tuple[
        npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
    ]: ...
    def totals(self) -> tuple[int, int]: ...
    def entry_holder(self, entry_id: int) -> int: ...
