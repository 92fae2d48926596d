"""Type stub of _entry.pyx: ``Entry``, the stamped entry of bucketcore.entries."""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

class Entry:
    """One stamped entry: a batch of messages of one (segment, bucket), in send order."""

    segment_id: int
    bucket: int
    hash_min: int
    hash_max: int
    nbytes: int
    payloads: list[Any] | None
    def __init__(
        self,
        segment_id: int,
        bucket: int,
        hash_min: int,
        hash_max: int,
        message_indices: npt.NDArray[np.integer[Any]] | Sequence[int],
        nbytes: int,
        payloads: list[Any] | None = None,
    ) -> None: ...
    @property
    def message_indices(self) -> npt.NDArray[np.int64]:
        """The entry's message positions (int64), in send order."""
    @message_indices.setter
    def message_indices(self, value: npt.NDArray[np.integer[Any]] | Sequence[int]) -> None: ...
    @property
    def count(self) -> int:
        """Number of messages in the entry."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
