"""murmur3_32 / hash_keys over arbitrary keys, checked against mmh3 over the same bytes.

Each input is one call: a scalar key, or a column (list, tuple, numpy object/U/S array) of keys of
every kind (str with surrogates, bytes, bytearray, memoryview, subclasses, None, NaN, values that
are not keys), under errors="strict", "replace" or a bad value, on one or more threads. A hashable
column must equal mmh3 key by key (``errors="replace"``: over Java's UTF-8 bytes); a column with a
bad key must raise the error of that key's kind naming an offending index.
"""

from __future__ import annotations

import sys
from typing import Any

import mmh3
import numpy as np
from support import Divergence, consume_key, expect, expected_of, instrumented, main, named_index

with instrumented():
    import bucketcore as bc


def _oracle(data: bytes) -> int:
    return mmh3.hash(data, 0, signed=False)


def _column(fdp: Any, keys: list[Any]) -> Any:
    """The keys as one of the column kinds bucketcore takes (numpy kinds only where they hold them)."""
    form = fdp.ConsumeIntInRange(0, 4)
    if form == 1:
        return tuple(keys)
    if form == 2:
        arr = np.empty(len(keys), dtype=object)
        arr[:] = keys
        return arr
    if form == 3 and keys and all(type(k) is str for k in keys):
        arr = np.array(keys, dtype=np.str_)
        return arr.reshape(2, -1) if arr.size % 2 == 0 and arr.size and fdp.ConsumeBool() else arr
    if form == 4 and keys and all(type(k) is bytes for k in keys):
        return np.array(keys, dtype=np.bytes_)
    return keys


def _items(column: Any) -> list[Any]:
    """The keys as bucketcore sees them (numpy's U and S items drop their trailing NULs)."""
    if isinstance(column, np.ndarray):
        return column.reshape(-1).tolist()
    return list(column)


def _check_error(
    err: Exception, expected: list[tuple[Any, ...]], errors: str, keyless_ok: bool, shape: tuple[int, ...] | None
) -> None:
    """An error for a column: the kind must be that of the key at the named index."""
    if errors not in ("strict", "replace"):
        expect(type(err) is ValueError and "errors must be" in str(err), f"bad errors={errors!r} gave {err!r}")
        return
    index = named_index(err, shape)
    expect(index is not None and index < len(expected), f"{type(err).__name__} names no key index: {err}")
    kind = expected[index][0]
    if isinstance(err, bc.KeyEncodingError):
        expect(kind == "encoding", f"KeyEncodingError for key {index} ({kind}): {err}")
    elif isinstance(err, TypeError):
        expect(kind == "type" or (kind == "keyless" and not keyless_ok), f"TypeError for key {index} ({kind}): {err}")
    elif isinstance(err, ValueError):
        expect(kind == "value", f"ValueError for key {index} ({kind}): {err}")
    else:
        raise Divergence(f"unexpected {type(err).__name__} for key {index}: {err}")


def _check_column(column: Any, errors: str, threads: int | None) -> None:
    items = _items(column)
    expected = [expected_of(k, errors) for k in items]
    # hash_keys: missing keys are keyless; murmur3_32: they are an error like a wrong type
    for keyless_ok, fn in ((True, bc.hash_keys), (False, bc.murmur3_32)):
        bad = [
            i
            for i, e in enumerate(expected)
            if e[0] in ("type", "encoding", "value") or (e[0] == "keyless" and not keyless_ok)
        ]
        try:
            result = fn(column, errors=errors, threads=threads)
        except (TypeError, ValueError) as err:
            expect(bad or errors not in ("strict", "replace"), f"{fn.__name__} refused good keys: {err!r}")
            _check_error(err, expected, errors, keyless_ok, getattr(column, "shape", None))
            continue
        expect(not bad and errors in ("strict", "replace"), f"{fn.__name__} accepted bad key(s) at {bad[:5]}")
        raw = (result.raw if keyless_ok else result).reshape(-1).tolist()
        want = [_oracle(e[1]) if e[0] == "hash" else 0 for e in expected]
        if raw != want:
            raise Divergence(f"{fn.__name__} differs from mmh3 at {_first_diff(raw, want)}: {items!r}")
        if keyless_ok:
            expect(result.has_key.reshape(-1).tolist() == [e[0] == "hash" for e in expected], "has_key differs")
            expect(result.segment_hash.reshape(-1).tolist() == [h >> 16 for h in want], "segment_hash differs")
            expect(result.bucket_hash.reshape(-1).tolist() == [h & 0xFFFF for h in want], "bucket_hash differs")


def _first_diff(got: list[int], want: list[int]) -> int:
    return next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))


def _check_scalar(key: Any, errors: str) -> None:
    (kind, *data) = expected_of(key, errors)
    try:
        got = bc.murmur3_32(key, errors=errors)
    except (TypeError, ValueError) as err:
        if errors not in ("strict", "replace"):
            expect("errors must be" in str(err), f"bad errors={errors!r} gave {err!r}")
        elif isinstance(err, bc.KeyEncodingError):
            expect(kind == "encoding", f"KeyEncodingError for a {kind} key {key!r}")
        else:
            expect(kind != "hash", f"murmur3_32 refused the key {key!r}: {err!r}")
        return
    expect(errors in ("strict", "replace"), f"bad errors={errors!r} accepted")
    expect(kind == "hash", f"murmur3_32 hashed a {kind} key {key!r}")
    expect(got == _oracle(data[0]), f"murmur3_32({key!r}) = {got:#x}, mmh3 {_oracle(data[0]):#x}")


def test_one_input(data: bytes) -> None:
    """One call of murmur3_32 / hash_keys on keys built from ``data``, checked against mmh3."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    errors = fdp.PickValueInList(["strict", "strict", "replace", "replace", "ignore"])
    if fdp.ConsumeIntInRange(0, 3) == 0:
        key = consume_key(fdp, max_len=200)
        if isinstance(key, (str, bytes)):
            _check_scalar(key, errors)
        return
    odd = fdp.ConsumeIntInRange(0, 3) == 0  # most columns hold only keys
    n = fdp.ConsumeIntInRange(0, 40)
    keys = [consume_key(fdp, odd_kinds=odd) for _ in range(n)]
    threads = fdp.PickValueInList([None, None, 1, 2, 3])
    _check_column(_column(fdp, keys), errors, threads)


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
