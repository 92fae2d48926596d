"""Keys of every kind a list may mix, shared by the hashing and the producer tests of the short-list
paths (both check them against their general path on the same keys)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bucketcore.harness.workloads import uuid_keys


def mixed_keys(n: int, seed: int) -> list[Any]:
    """UUID strings with some bytes and keyless (None) keys mixed in."""
    rng = np.random.default_rng(seed)
    keys: list[Any] = list(uuid_keys(n, seed=seed)) if n else []
    for i in rng.choice(n, size=n // 5, replace=False) if n else []:
        keys[i] = None if i % 2 else keys[i].encode()
    return keys
