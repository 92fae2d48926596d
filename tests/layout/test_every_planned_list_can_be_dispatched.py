"""Every planner's boundary list can be dispatched (docs/design.md, "Boundary lists"): bucket 0
keeps the hashes 0 and 1 however heavy hash 0 is, so no list has its first split at 1.

Keyless messages all carry bucket hash 0; with enough buckets an unconstrained balance would give
hash 0 a bucket of its own, ``[0, 0]``, which a broker refuses (bucket 0's canonical hash is 1).
The sweep runs each planner — ``Buckets.balanced``, ``TopicLayout.rebalanced`` from a histogram,
``bucketcore plan`` and ``bucketcore tune`` — on samples with 5 % keyless messages, N up to 1024.
"""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest

import bucketcore as bc

SWEEP = (1, 2, 3, 16, 31, 32, 33, 64, 100, 128, 256, 500, 512, 1000, 1024)


def keyless_heavy_hashes(seed: int, size: int = 40_000, keyless: float = 0.05) -> np.ndarray:
    """Bucket hashes of a sample where ``keyless`` of the messages have no key (hash 0)."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 0x10000, size)
    hashes[: int(size * keyless)] = 0
    return hashes


@pytest.mark.parametrize("n", SWEEP)
def test_a_balanced_list_keeps_hashes_0_and_1_in_bucket_0(n: int) -> None:
    hashes = keyless_heavy_hashes(n)
    buckets = bc.Buckets.balanced(hashes, n)
    assert buckets.count == n
    assert buckets.dispatchable, buckets.splits[:4]
    assert not buckets.splits or buckets.splits[0] >= 2
    bc.EntryBucketSelector(buckets)  # the broker side takes it
    if bc.Buckets.equal_width(n).dispatchable:
        assert buckets.load(hashes).max <= bc.Buckets.equal_width(n).load(hashes).max


def test_balancing_is_exact_under_the_rule_on_small_cases() -> None:
    """Against an exhaustive search over every dispatchable list of a tiny sample's distinct hashes."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        hashes = np.concatenate([np.zeros(rng.integers(1, 30), dtype=np.int64), rng.integers(0, 12, 40)])
        n = int(rng.integers(2, 5))
        got = bc.Buckets.balanced(hashes, n).load(hashes).max
        counts = np.bincount(hashes, minlength=12)
        best = None
        # splits among 2..12 (bucket 0 keeps 0 and 1), n - 1 of them, ascending
        for splits in combinations(range(2, 13), n - 1):
            edges = (0, *splits, 13)
            heaviest = max(int(counts[a:b].sum()) for a, b in zip(edges[:-1], edges[1:]))
            best = heaviest if best is None else min(best, heaviest)
        assert got == best, (hashes.tolist(), n, got, best)


def test_65536_buckets_cannot_be_balanced_and_65535_can() -> None:
    with pytest.raises(bc.InvalidBoundaryError, match="at most 65535 buckets"):
        bc.Buckets.balanced(keyless_heavy_hashes(1), 65536)
    assert bc.Buckets.balanced(keyless_heavy_hashes(1), 65535).splits == tuple(range(2, 65536))


@pytest.mark.parametrize("n", SWEEP)
def test_a_layout_rebalanced_from_a_histogram_can_be_dispatched(n: int) -> None:
    layout = bc.TopicLayout(
        1, [bc.Segment(0, 0x0000, 0x7FFF), bc.Segment(1, 0x8000, 0xFFFF)], topic="persistent://t/ns/planned"
    )
    rng = np.random.default_rng(n)
    keys: list[str | None] = [f"user-{i}" for i in rng.integers(0, 10**6, 20_000)]
    keys[:1000] = [None] * 1000  # 5 % keyless
    planned = layout.rebalanced(bc.bucket_histogram(keys, layout), n)
    for segment in planned.active_segments:
        assert segment.buckets.count == n
        assert segment.buckets.dispatchable, (segment.segment_id, segment.buckets.splits[:4])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bucketcore", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_tune_runs_on_its_defaults() -> None:
    """`bucketcore tune` with no argument (N up to 64 and 5 % keyless messages by default)."""
    result = run_cli("tune", "--messages", "100000")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("n", (32, 256, 1024))
def test_plan_on_a_keyless_heavy_key_file_gives_dispatchable_lists(n: int, tmp_path) -> None:
    keys = tmp_path / "keys.txt"
    rng = np.random.default_rng(n)
    lines = [f"user-{i}" for i in rng.integers(0, 10**6, 20_000)] + [""] * 1000  # empty line: keyless
    keys.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "layout.json"
    result = run_cli("plan", str(keys), "--segments", "2", "--buckets", str(n), "--output", str(out))
    assert result.returncode == 0, result.stderr
    planned = json.loads(out.read_text(encoding="utf-8"))
    splits_lists = [segment["splits"] for segment in planned["segments"]]
    assert splits_lists
    for splits in splits_lists:
        assert len(splits) == n - 1
        assert not splits or splits[0] >= 2, splits[:4]
