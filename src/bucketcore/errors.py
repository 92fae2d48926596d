"""The errors bucketcore raises on purpose; every one subclasses :class:`BucketcoreError`."""

from __future__ import annotations

__all__ = [
    "BucketcoreError",
    "KeyEncodingError",
    "InvalidBoundaryError",
    "InvalidLayoutError",
    "StaleLayoutError",
]


class BucketcoreError(Exception):
    """Base of every error bucketcore raises on purpose."""


class KeyEncodingError(BucketcoreError, ValueError):
    """A str key cannot be encoded as UTF-8 (it holds a surrogate code point); names the key's index."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class InvalidBoundaryError(BucketcoreError, ValueError):
    """A boundary list (splits) is not strictly ascending integers in 1..0xFFFF."""


class InvalidLayoutError(BucketcoreError, ValueError):
    """A topic layout is inconsistent: active ranges do not tile the ring, unknown ids, ..."""


class StaleLayoutError(BucketcoreError, ValueError):
    """A sharer declared a boundary list different from the segment's."""
