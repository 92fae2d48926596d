"""Step 1 of the data flow: keys to Murmur3 hashes (docs/design.md, "Hashing").

Validates and classifies the key column here, then hands its buffers to the compiled kernel
in :mod:`_bucketcore._hashing`, which hashes with the GIL released and builds no object per key.
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import sys
from collections.abc import Callable
from typing import Any, Union

import numpy as np

from _bucketcore import _hashing, _keycolumns, _pipeline

from . import arrow as _arrow_io
from .arrow import ArrowColumns, ArrowKeys
from .status import Status, check_status
from .validation import MAX_HASH, check_option, index_label, is_int, plain_ints, refuse_arrow_nulls
from .workers import WorkerPool
from .workers import shared_pool as _workers_pool

__all__ = [
    "KeyHashes",
    "murmur3_32",
    "hash_keys",
    "split_hash",
    "MAX_HASH",
    "set_kernel_path",
    "kernel_path",
    "select_column",
]


_ARROW_KEY_TYPES = ("string", "large_string", "binary", "large_binary")

KeyInput = Union[str, bytes, "list[str | bytes | None]", "tuple[str | bytes | None, ...]", np.ndarray, Any]


class KeyHashes(_hashing.HashColumns, ArrowColumns):
    """Hashes of a key column, as :func:`hash_keys` returns them.

    A keyless message (a missing key: ``None``, NaN, ``pandas.NA``, an Arrow null, a missing
    StringDType item) has ``has_key=False`` and every hash 0.
    :func:`bucket_entries` reads ``segment_hash`` (routing), ``bucket_hash`` (lookup and stamp)
    and ``has_key`` of a ``KeyHashes`` it is given; ``raw`` only for an all-legacy layout.

    Attributes
    ----------
    raw : numpy.ndarray of uint32
        The raw Murmur3_32 hash of each key (a numpy scalar for a single key).
    segment_hash : numpy.ndarray of uint16
        ``raw >> 16``: what routes a message to its segment.
    bucket_hash : numpy.ndarray of uint16
        ``raw & 0xFFFF``: what selects its bucket and stamps its entry.
    has_key : numpy.ndarray of bool
        False for a keyless message.

    Built as ``KeyHashes(raw, segment_hash, bucket_hash, has_key)``; the fields are read-only.
    """

    __slots__ = ()

    def _arrow_columns(self) -> list[tuple[str, np.ndarray]]:
        """``raw`` (uint32), ``segment_hash`` and ``bucket_hash`` (uint16) as the numpy arrays
        themselves, ``has_key`` (bool, bit-packed as Arrow stores booleans); an N-D ``KeyHashes``
        is exported flat (C order)."""
        return [
            (name, np.atleast_1d(getattr(self, name)).reshape(-1))
            for name in ("raw", "segment_hash", "bucket_hash", "has_key")
        ]


def set_kernel_path(path: str) -> None:
    """Force the Murmur3 path of every kernel.

    Results are bit-identical on every path; this exists to prove it and to measure each one.
    The environment variable ``BUCKETCORE_HASH_PATH`` sets it at import.

    Parameters
    ----------
    path : str
        "auto" (the best this CPU has), "scalar", "interleaved" (4 keys in lockstep) or "simd"
        (two 8-lane AVX2 chains).

    Raises
    ------
    ValueError
        An unknown path, or "simd" where this build or this CPU has no AVX2 path.
    """
    _hashing.set_path(path)


def kernel_path() -> str:
    """The Murmur3 path kernels take now.

    Returns
    -------
    str
        The forced path, or the best for this CPU when none is forced.
    """
    return _hashing.resolved_path()


def replaces_surrogates(errors: str) -> bool:
    """Whether an ``errors=`` argument asks to replace surrogates ("replace") or to refuse them
    ("strict"): the kernels' replace flag (validation.check_option).

    Raises
    ------
    ValueError
        ``errors`` is neither "strict" nor "replace".
    """
    return bool(check_option(errors, "errors"))


def _is_arrow(obj: object) -> bool:
    # pyarrow stays optional: recognise its objects by module name, never import it here
    module = type(obj).__module__
    return module == "pyarrow" or module.startswith("pyarrow.")


_PYARROW_KEY_CLASSES = ("StringArray", "LargeStringArray", "BinaryArray", "LargeBinaryArray", "ChunkedArray")


def _is_pyarrow_keys(obj: Any) -> bool:
    """A pyarrow Array/ChunkedArray of a plain key type, read through pyarrow's buffers; every
    other pyarrow object (views, dictionaries, tables) goes through the Arrow C interfaces."""
    if not _is_arrow(obj) or type(obj).__name__ not in _PYARROW_KEY_CLASSES:
        return False
    return str(obj.type) in _ARROW_KEY_TYPES


def _is_chunked(source: object) -> bool:
    """A classified source read chunk by chunk (pyarrow keys or ArrowKeys)."""
    return isinstance(source, ArrowKeys) or _is_arrow(source)


def _is_frame(obj: object) -> bool:
    """A pandas DataFrame (selected by label, so its numpy columns stay numpy)."""
    module = type(obj).__module__
    return (module == "pandas" or module.startswith("pandas.")) and type(obj).__name__ == "DataFrame"


def select_column(keys: Any, column: str | int | None) -> Any:
    """The key column ``column=`` picks: the input ``bucket_entries`` and :func:`hash_keys` read.

    Parameters
    ----------
    keys : key input
        A key column, or a table: a pandas DataFrame, or any Arrow PyCapsule producer of a struct
        (pyarrow Table / RecordBatch, polars DataFrame, a duckdb relation or result, ...).
    column : str, int or None
        The column's name or index. None: ``keys`` as it is (a one-column table gives its column
        when it is classified).

    Returns
    -------
    key input
        ``keys`` itself for ``column=None``; otherwise the picked column (a pandas Series, or an
        imported :class:`~bucketcore.arrow.ArrowKeys`).

    Raises
    ------
    ValueError
        ``column`` is not a column of the table (the message names its columns), or ``keys`` is
        not a table.
    TypeError
        ``column`` is neither a str nor an int.
    """
    if column is None:
        return keys
    if not isinstance(column, str) and not is_int(column):
        raise TypeError(f"column must be a column name (str) or index (int), not {type(column).__name__}")
    if _is_frame(keys):
        names = [str(c) for c in keys.columns]
        if isinstance(column, str):
            if column not in keys.columns:
                raise ValueError(f"column {column!r} is not a column of the keys' DataFrame; its columns are {names}")
            picked = keys[column]
            if not hasattr(picked, "dtype"):
                raise ValueError(f"column {column!r} names several columns of the keys' DataFrame {names}")
            return picked
        if not 0 <= int(column) < len(names):
            raise ValueError(f"column index {int(column)} is out of range for a DataFrame of columns {names}")
        return keys.iloc[:, int(column)]
    if isinstance(keys, ArrowKeys) or not _arrow_io.is_arrow_producer(keys):
        raise ValueError(
            f"column={column!r} picks a column of a table (a DataFrame, a record batch, an Arrow table or "
            f"stream), but keys of type {type(keys).__name__} is not one"
        )
    return _arrow_io.import_keys(keys, column)


def _arrow_chunks(keys: Any) -> tuple[list[Any], int]:
    import pyarrow as pa

    if isinstance(keys, pa.ChunkedArray):
        chunks = list(keys.chunks)
    elif isinstance(keys, pa.Array):
        chunks = [keys]
    else:
        raise TypeError(f"keys of type {type(keys).__name__} are not a pyarrow Array or ChunkedArray")
    if str(keys.type) not in _ARROW_KEY_TYPES:
        raise TypeError(
            f"pyarrow array of type {keys.type} is not a key column; "
            "expected string, large_string, binary or large_binary"
        )
    return chunks, len(keys)


def _pyarrow_columns(keys: Any) -> list[_keycolumns.KeyColumn]:
    """One KeyColumn per non-empty Arrow chunk, over its buffers (zero copy)."""
    chunks, _ = _arrow_chunks(keys)
    wide = str(keys.type).startswith("large_")
    columns = []
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        validity, offsets, data = chunk.buffers()
        bits = np.frombuffer(validity, dtype=np.uint8) if validity is not None and chunk.null_count else None
        columns.append(
            _keycolumns.arrow_column(
                np.frombuffer(offsets, dtype=np.int64 if wide else np.int32),
                None if data is None else np.frombuffer(data, dtype=np.uint8),
                bits,
                chunk.offset,
                len(chunk),
            )
        )
    return columns


def classify_keys(keys: Any) -> tuple[tuple[int, ...], Any]:
    """Validate a key column: (its shape, the source the kernels read: list/tuple, pyarrow keys,
    ArrowKeys (any Arrow PyCapsule producer, imported), or a flat ndarray of dtype U, S, O or
    StringDType). For the kernels of other steps too (with key_columns). A table must have one
    column here; :func:`select_column` picks one of several."""
    if isinstance(keys, ArrowKeys):
        return (keys.length,), keys
    if isinstance(keys, list) or (isinstance(keys, tuple) and not _arrow_io.is_arrow_producer(keys)):
        return (len(keys),), keys
    if _is_pyarrow_keys(keys):
        return (_arrow_chunks(keys)[1],), keys
    if _is_frame(keys):
        if len(keys.columns) != 1:
            raise ValueError(
                f"keys is a DataFrame of {len(keys.columns)} columns {[str(c) for c in keys.columns]}: "
                "pass column= (a name or an index) to pick the key column"
            )
        keys = keys.iloc[:, 0]
    if not isinstance(keys, np.ndarray):
        # a pandas Series (or similar) of a numpy dtype is read as its numpy array (zero copy for
        # object, U, S and StringDType); Arrow-backed columns and other producers through Arrow
        numpy_backed = isinstance(getattr(keys, "dtype", None), np.dtype) and hasattr(keys, "__array__")
        if not numpy_backed and _arrow_io.is_arrow_producer(keys):
            try:
                imported = _arrow_io.import_keys(keys)
            except ImportError:
                # a producer that exports through pyarrow (pandas' python-backed strings) while
                # pyarrow is missing: its numpy view still has the keys
                if not hasattr(keys, "__array__"):
                    raise
            else:
                return (imported.length,), imported
        if isinstance(keys, (str, bytes)) or not hasattr(keys, "__array__"):
            raise TypeError(
                f"keys must be str, bytes, a list or tuple of keys, a numpy array of dtype U, S, object or "
                f"StringDType, or a column exporting the Arrow PyCapsule interface (__arrow_c_stream__ / "
                f"__arrow_c_array__: pyarrow, polars, duckdb, nanoarrow, arro3, pandas), not {type(keys).__name__}"
            )
        keys = np.asarray(keys)
    if keys.dtype.kind not in "USOT":
        raise TypeError(
            f"numpy array of dtype {keys.dtype} is not a key column; expected dtype U, S, object or StringDType"
        )
    if keys.dtype.kind == "U" and not keys.dtype.isnative:
        # the kernels read UCS4 code points in native order: a byte-swapped array would hash garbage
        keys = keys.astype(keys.dtype.newbyteorder("="))
    return keys.shape, keys.reshape(-1)


def key_columns(source: Any) -> list[_keycolumns.KeyColumn]:
    """The kernels' KeyColumns over a classified source, in order (Arrow: one per chunk)."""
    if isinstance(source, ArrowKeys):
        return [column for column, *_ in source.parts(0, source.length)]
    if _is_arrow(source):
        return _pyarrow_columns(source)
    if isinstance(source, (list, tuple)):
        return [_keycolumns.objects_column(source)]
    status, column = _keycolumns.array_column(source)
    if status:  # BC_OK is 0: the error path only
        check_status(status, 0, keys=source, shape=source.shape)
    return [column]


# Below this many keys a second thread costs more than it saves (the kernel's short path hashes
# shorter columns itself, so the number is declared there).
AUTO_THREADS_MIN_KEYS = _hashing.AUTO_THREADS_MIN_KEYS
# Keys per block that the threads hashing a column take in turn (BlockStage, HashStage): small
# enough that a slowed thread takes fewer, large enough that taking one costs nothing in comparison.
HASH_BLOCK = 1 << 14
# Blocks per thread that run_parts cuts a range into: fine enough that a slowed thread costs
# little, coarse enough that taking one does not.
PART_BLOCKS = 4
_CPUS = os.cpu_count() or 1


def is_buffer_source(source: Any) -> bool:
    """Whether a classified source is read without the GIL (Arrow, numpy S/U/StringDType)."""
    return _is_chunked(source) or (isinstance(source, np.ndarray) and source.dtype.kind in "SUT")


def column_parts(source: Any, start: int, stop: int) -> list[tuple[_keycolumns.KeyColumn, int, int, int]]:
    """Keys [start, stop) of a classified source as (KeyColumn, first key, end key, position of
    the first key in the source). Each call makes KeyColumns of its own (they keep per-chunk
    state), so threads may read disjoint parts of one source at once."""
    if isinstance(source, ArrowKeys):
        return source.parts(start, stop)
    if _is_arrow(source):
        parts = []
        out = start
        for column in _pyarrow_columns(source.slice(start, stop - start)):
            parts.append((column, 0, column.length, out))
            out += column.length
        return parts
    [column] = key_columns(source)
    return [(column, start, stop, start)]


def threads_for(threads: int | None, n: int, buffers: bool) -> int:
    """How many threads share a column of n keys (``threads=None``: automatic). Python objects
    run on two at most (blocks taken in turn for hashing, a pipeline for bucket_entries)."""
    if threads is None:
        if buffers:
            return max(1, min(_CPUS, n // AUTO_THREADS_MIN_KEYS))
        # Python objects: the calling thread keeps the GIL so no Python code runs, and one worker
        # reads its share without it (more threads would only wait for the same GIL).
        return 2 if _CPUS >= 2 and n >= AUTO_THREADS_MIN_KEYS else 1
    if not is_int(threads):
        raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    return max(1, min(int(threads), n))


def objects_on_one_thread() -> int:
    """How long a column of Python objects (list, tuple, object array) must be for
    ``threads=None`` to use a second thread: shorter ones run on one (:func:`threads_for`)."""
    return AUTO_THREADS_MIN_KEYS if _CPUS >= 2 else sys.maxsize


def shared_pool() -> WorkerPool:
    """The worker threads every kernel shares (bucketcore.workers: safe to interrupt anywhere)."""
    return _workers_pool()


def run_parts(run: Callable[[int, int], tuple[int, int]], n: int, threads: int) -> tuple[int, int]:
    """Run the kernel over [0, n) on `threads` threads; the first failure by index wins.

    The range is cut into PART_BLOCKS blocks per thread, which the threads take in turn, so a
    thread the machine slows down (a busy core, a VM's vCPU held back) takes fewer of them
    instead of the others waiting for its fixed share. No block is taken once one failed: every
    block before it was taken already, so the first failure is still found.
    """
    if threads <= 1:
        return run(0, n)
    nblocks = min(n, threads * PART_BLOCKS)
    bounds = [n * b // nblocks for b in range(nblocks + 1)]
    taken = itertools.count()  # next() on it is atomic under the GIL
    results: dict[int, tuple[int, int]] = {}
    failed: list[int] = []

    def take_blocks() -> None:
        while not failed:
            b = next(taken)
            if b >= nblocks:
                return
            results[b] = status_index = run(bounds[b], bounds[b + 1])
            if status_index[0] != Status.BC_OK:
                failed.append(b)

    # the calling thread takes blocks too: one thread fewer to wake and wait for
    others = [shared_pool().submit(take_blocks) for _ in range(threads - 1)]
    try:
        take_blocks()
    finally:
        for other in others:
            other.result()
    for b in sorted(results):
        if results[b][0] != Status.BC_OK:
            return results[b]
    return Status.BC_OK, -1


def _part(column: np.ndarray | None, start: int, stop: int) -> np.ndarray | None:
    return None if column is None else column[start:stop]


def _hash_all(source: Any, n: int, outputs: tuple[Any, ...], replace: bool, allow_none: bool) -> tuple[int, int]:
    """Hash the n keys of a classified source on this thread into outputs (raw, segment_hash,
    bucket_hash, has_key; None: not wanted); (status, index of the first bad key)."""
    if not _is_chunked(source):
        # one column over the whole source: no views to cut (a short call's usual case)
        [column] = key_columns(source)
        return _hashing.hash_column(column, *outputs, replace, allow_none, 0, n)
    for column, lo, hi, out in column_parts(source, 0, n):
        end = out + hi - lo
        status, index = _hashing.hash_column(
            column, *(_part(o, out, end) for o in outputs), replace, allow_none, lo, hi
        )
        if status != Status.BC_OK:
            return status, out + index - lo
    return Status.BC_OK, -1


def _hash_pipeline(source: Any, n: int, outputs: tuple[Any, ...], replace: bool, allow_none: bool) -> tuple[int, int]:
    """Python objects on two threads (HashStage): blocks taken in turn, the GIL kept here."""
    for column, lo, hi, out in column_parts(source, 0, n):
        end = out + hi - lo
        stage = _pipeline.HashStage(
            column, *(_part(o, out, end) for o in outputs), replace, allow_none, lo, hi, HASH_BLOCK
        )
        status, index = stage.run_with(shared_pool().submit)  # releases the worker on any exception
        if status != Status.BC_OK:
            return status, out + index - lo
    return Status.BC_OK, -1


def _hash_blocks(
    source: Any, n: int, parts: int, outputs: tuple[Any, ...], replace: bool, allow_none: bool
) -> tuple[int, int]:
    """Arrow / numpy keys on `parts` threads (BlockStage), the GIL released throughout."""
    stage = _pipeline.BlockStage(
        [column for column, *_ in column_parts(source, 0, n)], *outputs, replace, allow_none, HASH_BLOCK
    )
    others = [shared_pool().submit(stage.take) for _ in range(parts - 1)]
    results = []  # bound before the try: an interrupt at its first bytecode reaches the caller as itself
    try:
        results.append(stage.take())
    finally:
        results += [other.result() for other in others]
    return min(results, key=lambda r: (r[0] == Status.BC_OK, r[1]))


def _hash_column(keys: Any, errors: str, allow_none: bool, split: bool, threads: int | None):
    """Hash a key column; returns (shape, raw, segment_hash, bucket_hash, has_key)."""
    replace = replaces_surrogates(errors)
    shape, source = classify_keys(keys)
    if isinstance(source, ArrowKeys):
        keys = source  # messages name positions in the column, not in the producer object
    n = math.prod(shape)
    buffers = is_buffer_source(source)
    parts = threads_for(threads, n, buffers)
    raw = np.empty(n, dtype=np.uint32)
    segment_hash = np.empty(n, dtype=np.uint16) if split else None
    bucket_hash = np.empty(n, dtype=np.uint16) if split else None
    has_key = np.empty(n, dtype=np.bool_) if split else None
    outputs = (raw, segment_hash, bucket_hash, has_key)
    if n:
        if parts > 1 and not buffers:
            status, index = _hash_pipeline(source, n, outputs, replace, allow_none)
        elif parts > 1:
            status, index = _hash_blocks(source, n, parts, outputs, replace, allow_none)
        else:
            status, index = _hash_all(source, n, outputs, replace, allow_none)
        if status:
            check_status(status, index, keys=keys, shape=shape, allow_none=allow_none)
    return shape, raw, segment_hash, bucket_hash, has_key


def _hash_scalar(key: str | bytes, errors: str) -> int:
    status, value = _hashing.hash_one(key, replaces_surrogates(errors))
    if status:
        check_status(status, 0, keys=[key], allow_none=False)
    return value


def murmur3_32(
    keys: KeyInput, *, errors: str = "strict", threads: int | None = None, column: str | int | None = None
) -> Any:
    """Raw (unmasked) Murmur3_32, seed 0, of each key's UTF-8 bytes.

    Parameters
    ----------
    keys : str, bytes or a key column
        A single key, or a list/tuple of str/bytes/bytearray/memoryview, a numpy array of dtype
        U, S, object or StringDType, or any column exporting the Arrow PyCapsule interface
        (``__arrow_c_stream__`` / ``__arrow_c_array__``: pyarrow, polars, duckdb, nanoarrow,
        arro3, pandas' Arrow-backed columns; string, binary, their large and view layouts,
        dictionary-encoded), read in place; or a table of such columns with ``column=``.
    errors : {"strict", "replace"}
        What a str with an unpaired surrogate does: raise, or encode each as ``?`` like Java's
        ``String.getBytes(UTF_8)``.
    threads : int or None
        How many threads share a large column (None: Arrow and numpy keys one thread per core
        from ``AUTO_THREADS_MIN_KEYS`` keys each; Python objects two from that many). Python
        objects take two threads at most; the calling thread keeps the GIL until the worker is
        done, so nothing can change them. The result never depends on it.
    column : str, int or None
        For a table (pandas or polars DataFrame, pyarrow Table or RecordBatch, a duckdb result,
        any Arrow struct stream): the key column's name or index. A one-column table needs none.

    Returns
    -------
    int or numpy.ndarray of uint32
        A Python int for a single key; an array of the column's shape otherwise.

    Raises
    ------
    TypeError
        A key that is not str or bytes (a missing key has no hash here: use :func:`hash_keys`),
        naming its index; or an input that is not a key column.
    KeyEncodingError
        A str with a surrogate under ``errors="strict"``, naming its index.
    ValueError
        A bad ``errors``, ``threads`` or ``column``, a key too long to hash, or a malformed
        Arrow array (offsets, views or dictionary indexes out of range), naming the index.

    Notes
    -----
    A single str or bytes key is hashed by one C call (an ASCII str straight from its
    characters, bytes from its buffer), and so is a list or a 1-D numpy array of keys too short
    for a second thread (with ``threads=None`` and no ``column``): the kernel's short path, tried
    first (see the end of this module); everything else takes the column path, here.
    """
    if column is None and isinstance(keys, (str, bytes)):
        return _hash_scalar(keys, errors)
    keys = select_column(keys, column)
    if isinstance(keys, (str, bytes)):
        return _hash_scalar(keys, errors)
    shape, raw, *_ = _hash_column(keys, errors, allow_none=False, split=False, threads=threads)
    return raw if len(shape) == 1 else raw.reshape(shape)


def hash_keys(
    keys: KeyInput, *, errors: str = "strict", threads: int | None = None, column: str | int | None = None
) -> KeyHashes:
    """Raw hash plus its segment (high 16 bits) and bucket (low 16 bits) halves, and ``has_key``.

    Parameters
    ----------
    keys : str, bytes or a key column
        As :func:`murmur3_32` takes them; missing keys are keyless (``has_key=False``, every
        hash 0): ``None``, a float NaN, ``pandas.NA``, Arrow nulls (also a null dictionary
        value), a StringDType's missing items.
    errors : {"strict", "replace"}
        As in :func:`murmur3_32`.
    threads : int or None
        As in :func:`murmur3_32`.
    column : str, int or None
        As in :func:`murmur3_32`.

    Returns
    -------
    KeyHashes
        Arrays of the column's shape, or numpy scalars for a single key.

    Raises
    ------
    TypeError, KeyEncodingError, ValueError
        As :func:`murmur3_32`, except that missing keys are accepted.
    """
    if column is not None or not isinstance(keys, (str, bytes)):
        keys = select_column(keys, column)
    if isinstance(keys, (str, bytes)):
        h = _hash_scalar(keys, errors)
        return KeyHashes(np.uint32(h), np.uint16(h >> 16), np.uint16(h & 0xFFFF), np.bool_(True))
    shape, raw, segment_hash, bucket_hash, has_key = _hash_column(
        keys, errors, allow_none=True, split=True, threads=threads
    )
    if len(shape) == 1:
        return KeyHashes(raw, segment_hash, bucket_hash, has_key)
    return KeyHashes(
        raw.reshape(shape), segment_hash.reshape(shape), bucket_hash.reshape(shape), has_key.reshape(shape)
    )


def _short_then(short: Callable[..., Any], general: Callable[..., Any], bound: object = None) -> Callable[..., Any]:
    """general as a builtin function that tries the kernel's short path first (_hashing's
    short_then_function): general's name, module and docstring, and its signature (as the text
    signature builtins carry, which has no annotations)."""
    signature = inspect.signature(general)
    plain = signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=signature.empty,
    )
    doc = f"{general.__name__}{plain}\n--\n\n{general.__doc__ or ''}"
    return _hashing.short_then_function(short, general, bound, general.__name__, general.__module__, doc)


# The public functions: the kernel's short path tried first, in C (a single str or bytes key, a
# list or 1-D numpy array of keys too short for a second thread, with plain options), then, when it
# declines (returns None), the general path above with the same arguments. Composed here, so the
# kernel holds nothing of this module; named, documented and pickled as the general functions.
murmur3_32 = _short_then(_hashing.murmur3_32, murmur3_32)
hash_keys = _short_then(_hashing.hash_keys, hash_keys, KeyHashes)


def _path_from_environment() -> None:
    path = os.environ.get("BUCKETCORE_HASH_PATH", "auto")
    try:
        _hashing.set_path(path)
    except ValueError as exc:
        raise ValueError(f"environment variable BUCKETCORE_HASH_PATH: {exc}") from None


_path_from_environment()


def _list_of_hashes(raw: list[Any] | tuple[Any, ...]) -> np.ndarray:
    """A (nested) list of 32-bit hashes as np.uint32, checked item by item: numpy would turn
    bools into ints and an empty list into float64, and name no index for a bad item."""
    ints = plain_ints(raw)  # the common flat list: ranges checked vectorised
    if ints is not None:
        bad = (ints < 0) | (ints > 0xFFFFFFFF)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"hash {int(ints[i])} at index {i} is outside 0..0xFFFFFFFF")
        return ints.astype(np.uint32)
    items = np.array(raw, dtype=object)  # the items as they are, in the list's shape
    flat = items.reshape(-1)
    for i, item in enumerate(flat):
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise TypeError(
                f"hash at index {index_label(i, items.shape)} is {type(item).__name__} {item!r}; "
                "split_hash takes ints in 0..0xFFFFFFFF"
            )
        if not 0 <= int(item) <= 0xFFFFFFFF:
            raise ValueError(f"hash {int(item)} at index {index_label(i, items.shape)} is outside 0..0xFFFFFFFF")
    return np.array([int(item) for item in flat], dtype=np.uint32).reshape(items.shape)


def split_hash(raw: Any) -> tuple[Any, Any]:
    """``(raw >> 16, raw & 0xFFFF)``: the segment hash and the bucket hash, vectorised.

    Parameters
    ----------
    raw : int, list or integer array
        32-bit raw hashes (0..0xFFFFFFFF).

    Returns
    -------
    tuple
        A pair of ints for an int; two ``np.uint16`` arrays of the input's shape otherwise.

    Raises
    ------
    TypeError
        A bool, a non-integer item or array dtype, naming the index.
    ValueError
        A value outside 0..0xFFFFFFFF or an Arrow null, naming the index.
    """
    if isinstance(raw, (bool, np.bool_)):
        raise TypeError("split_hash takes a 32-bit hash, not a bool")
    if isinstance(raw, (int, np.integer)):
        value = int(raw)
        if not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"hash {value} is outside 0..0xFFFFFFFF")
        return value >> 16, value & 0xFFFF
    refuse_arrow_nulls(raw, "hash")
    arr = _list_of_hashes(raw) if isinstance(raw, (list, tuple)) else np.asarray(raw)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"split_hash takes integer hashes, not an array of dtype {arr.dtype}")
    if arr.dtype != np.uint32:
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF):
            bad = int(np.flatnonzero((arr.reshape(-1) < 0) | (arr.reshape(-1) > 0xFFFFFFFF))[0])
            raise ValueError(f"hash at index {index_label(bad, arr.shape)} is outside 0..0xFFFFFFFF")
        arr = arr.astype(np.uint32)
    flat = np.ascontiguousarray(arr).reshape(-1)
    segment_hash = np.empty(flat.size, dtype=np.uint16)
    bucket_hash = np.empty(flat.size, dtype=np.uint16)
    _hashing.split_raw(flat, segment_hash, bucket_hash)
    return segment_hash.reshape(arr.shape), bucket_hash.reshape(arr.shape)
