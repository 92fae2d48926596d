"""One segment's histogram is its 65,536-bin count as numpy sees it (docs/design.md, the
``bucket_histogram`` contract: ``np.asarray(h[sid]).shape == (65536,)``), read-only."""

from __future__ import annotations

import mmh3
import numpy as np
import pytest

import bucketcore as bc


def histogram_of(keys: list[str]) -> bc.HashHistogram:
    layout = bc.TopicLayout(1, [bc.Segment(0, 0x0000, 0xFFFF)], topic="persistent://t/ns/h")
    return bc.bucket_histogram(keys, layout)[0]


def test_np_asarray_gives_the_65536_bins_counted_by_bucket_hash() -> None:
    keys = [f"user-{i}" for i in range(5000)]
    h = histogram_of(keys)
    bins = np.asarray(h)
    assert bins.shape == (65536,) and bins.dtype == np.int64
    expected = np.bincount([mmh3.hash(k, signed=False) & 0xFFFF for k in keys], minlength=65536)
    np.testing.assert_array_equal(bins, expected)
    assert len(h) == 65536
    assert h[int(np.argmax(expected))] == expected.max()
    np.testing.assert_array_equal(h[10:20], expected[10:20])
    assert sum(h) == len(keys) == h.total


def test_the_bins_cannot_be_changed_through_the_array() -> None:
    h = histogram_of(["a", "b"])
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(h)[0] = 7
    with pytest.raises(TypeError):
        h[0] = 7  # type: ignore[index]
    copied = np.array(h, dtype=np.float64)
    copied[0] = 7.0  # a copy is the caller's own
    assert np.asarray(h)[0] != 7


def test_a_copy_free_read_in_another_dtype_is_refused_by_name() -> None:
    h = histogram_of(["a"])
    with pytest.raises(ValueError, match="int64 bins cannot be read as float64 without a copy"):
        np.asarray(h, dtype=np.float64, copy=False)
