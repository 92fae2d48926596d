"""Type stub of _routing.pyx: the Router holding a producer target's routing tables (route.h's rule).

The route modes are the anonymous ``cpdef enum`` of _routing.pxd, so they are plain module-level ints.
"""

import numpy as np
import numpy.typing as npt

BC_ROUTE_ONE: int
BC_ROUTE_RANGE: int
BC_ROUTE_LEGACY: int

class Router:
    """How hashed keys reach their global bucket index for one producer target."""

    def __init__(
        self,
        route_mode: int,
        segment_table: npt.NDArray[np.uint16] | None,
        rotation: npt.NDArray[np.int32],
        bucket_tables: list[npt.NDArray[np.uint16]],
    ) -> None: ...
    @property
    def mode(self) -> int: ...
