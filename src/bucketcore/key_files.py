"""Key files: one key per line, the format ``bucketcore hash``, ``bucketcore plan`` and
:func:`bucketcore.dask.read_keys` read.

Each line's bytes without its line ending (``\\n`` or ``\\r\\n``) are one key, hashed as given (a
UTF-8 text line hashes as that string). Read in blocks, so memory stays bounded on any file size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

__all__ = ["key_blocks"]


def key_blocks(stream: IO[bytes], block: int) -> Iterator[list[bytes]]:
    """Lines of a binary stream, without their line endings, in lists of at most ``block``.

    Parameters
    ----------
    stream : binary file
    block : int

    Yields
    ------
    list of bytes
    """
    keys: list[bytes] = []
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        keys.append(line)
        if len(keys) >= block:
            yield keys
            keys = []
    if keys:
        yield keys
