"""The benchmark workloads of DESIGN.md §5, generated deterministically."""

from __future__ import annotations

import uuid

import numpy as np

import bucketcore as bc


def uuid_keys(n: int, seed: int = 1) -> list[str]:
    """n distinct UUID strings (36 bytes each)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 1 << 63, size=(n, 2), dtype=np.int64)
    return [str(uuid.UUID(int=(int(a) << 64) | int(b))) for a, b in words]


def short_keys(n: int) -> list[str]:
    """``user-<i>``: short keys of 6 to 12 bytes."""
    return [f"user-{i}" for i in range(n)]


def zipf_keys(n: int, a: float = 1.2, seed: int = 2) -> list[str]:
    """Keys drawn from a Zipf distribution over ``user-<rank>``: a few hot keys, a long tail."""
    ranks = np.random.default_rng(seed).zipf(a, size=n)
    return [f"user-{r}" for r in ranks.tolist()]


def tiled_layout(segments: int, buckets: int = 1, legacy: bool = False) -> bc.TopicLayout:
    """``segments`` active segments over equal hash ranges, each with ``buckets`` equal-width
    buckets; ``legacy``: every segment is an adopted v4 partition (signSafeMod routing)."""
    bounds = [i * 0x10000 // segments for i in range(segments + 1)]
    return bc.TopicLayout(1, [
        bc.Segment(i, a, b - 1, bc.Buckets.equal_width(buckets),
                   legacy_topic_name=f"persistent://t/ns/t-partition-{i}" if legacy else None)
        for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
    ])


WORKLOADS = {"uuid": uuid_keys, "short": short_keys, "zipf": zipf_keys}


def cpu_check() -> str:
    """Each CPU's speed on a fixed job (murmur3_32 over 4 Ki in-cache UUIDs, one thread, in
    ns/key): printed before and after a comparison, it shows whether the host held a vCPU back
    during the run."""
    from timing import cpu_speeds

    probe = np.array(uuid_keys(4096, seed=9), dtype="S36")
    speeds = cpu_speeds(lambda: [bc.murmur3_32(probe, threads=1) for _ in range(50)], 4096 * 50)
    return f"per-CPU check (murmur3_32, 4 Ki in-cache UUIDs, ns/key): {speeds}" if speeds else ""
