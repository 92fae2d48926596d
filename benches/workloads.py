"""The benchmark workloads now live in :mod:`bucketcore.harness.workloads` (one copy, shared by
``bucketcore bench`` and these scripts); this name stays for scripts that import ``workloads``
from the benches folder."""

from bucketcore.harness.workloads import (  # noqa: F401
    WORKLOADS,
    short_keys,
    tiled_layout,
    uuid_keys,
    zipf_keys,
)
