"""The Arrow PyCapsule interface, in and out, without importing pyarrow.

In: any object with ``__arrow_c_stream__`` or ``__arrow_c_array__`` (pyarrow, polars, duckdb,
nanoarrow, arro3, pandas' Arrow-backed columns ...), a raw ``arrow_array_stream`` capsule, or a
``(arrow_schema, arrow_array)`` capsule pair becomes :class:`ArrowKeys`: the producer's chunks,
read in place by the hashing kernels and released (each producer release callback called once)
when the last reader is gone. A table (a struct array or stream: a record batch, a data frame, a
query result) gives one of its columns, picked by ``column=``.

Out: :func:`export_array` / :func:`export_stream` hand numpy columns to any Arrow consumer as one
struct array (a record batch) without copying them; each exported column keeps its numpy array
alive until the consumer releases it.
"""

from __future__ import annotations

import abc
import itertools
from typing import Any

import numpy as np

from _bucketcore import _arrow, _keycolumns

__all__ = ["ArrowKeys", "ArrowColumns", "is_arrow_producer", "import_keys", "export_array", "export_stream"]

_EXPORT_FORMATS = {
    np.dtype(np.uint32): "I",
    np.dtype(np.uint16): "S",
    np.dtype(np.uint8): "C",
    np.dtype(np.int32): "i",
    np.dtype(np.int64): "l",
}


def _capsule_pair(obj: object) -> bool:
    return (
        isinstance(obj, tuple)
        and len(obj) == 2
        and _arrow.capsule_name(obj[0]) == "arrow_schema"
        and _arrow.capsule_name(obj[1]) == "arrow_array"
    )


def is_arrow_producer(obj: object) -> bool:
    """Whether ``obj`` is read through the Arrow C interfaces: it has ``__arrow_c_stream__`` or
    ``__arrow_c_array__``, or is an ``arrow_array_stream`` capsule or an (arrow_schema,
    arrow_array) capsule pair.

    Parameters
    ----------
    obj : object
        Any key input.

    Returns
    -------
    bool
    """
    return (
        hasattr(obj, "__arrow_c_stream__")
        or hasattr(obj, "__arrow_c_array__")
        or _arrow.capsule_name(obj) == "arrow_array_stream"
        or _capsule_pair(obj)
    )


class ArrowKeys:
    """A key column imported through the Arrow C interfaces: its chunks, read in place.

    The producer's arrays are released (their release callbacks called once) when this and every
    KeyColumn made from it are gone.

    Parameters
    ----------
    schema : _arrow.ImportedSchema
        The schema of every chunk.
    arrays : list of _arrow.ImportedArray
        The chunks.
    child : int
        The column of a struct (table) schema, or -1 for a plain array.
    label : str
        How messages name the column.
    """

    __slots__ = ("schema", "arrays", "child", "lengths", "starts", "length", "label", "dictionaries")

    def __init__(self, schema: Any, arrays: list[Any], child: int, label: str) -> None:
        self.schema = schema
        self.arrays = arrays
        self.child = child
        self.label = label
        self.lengths = [int(_arrow.chunk_length(schema, a, child)) for a in arrays]
        self.starts = [0, *itertools.accumulate(self.lengths)]
        self.length = self.starts[-1]
        self.dictionaries: dict[Any, Any] = {}  # one dictionary shared by several chunks is hashed once

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"ArrowKeys({self.label}, chunks={len(self.arrays)}, n={self.length})"

    def parts(self, start: int, stop: int) -> list[tuple[_keycolumns.KeyColumn, int, int, int]]:
        """Keys [start, stop) as (KeyColumn, 0, its length, position of its first key), one per
        chunk they touch. Each call makes KeyColumns of its own.

        Parameters
        ----------
        start, stop : int
            The range of keys, 0 <= start <= stop <= len(self).

        Returns
        -------
        list of tuple
            (KeyColumn, first key, end key, position of the first key in the column).

        Raises
        ------
        ValueError, TypeError
            A malformed chunk (see :func:`import_keys`).
        """
        parts = []
        for array, lo, hi in zip(self.arrays, self.starts, self.starts[1:]):
            a, b = max(lo, start), min(hi, stop)
            if a >= b:
                continue
            column = _arrow.arrow_c_column(self.schema, array, self.child, a - lo, b - lo, self.dictionaries)
            parts.append((column, 0, b - a, a))
        return parts


def _pick_column(names: list[str], column: str | int | None, what: str) -> int:
    if column is None:
        if len(names) == 1:
            return 0
        raise ValueError(
            f"keys ({what}) is a table of {len(names)} columns {names}: pass column= (a name or an index) "
            "to pick the key column"
        )
    if isinstance(column, bool) or not isinstance(column, (str, int, np.integer)):
        raise TypeError(f"column must be a column name (str) or index (int), not {type(column).__name__}")
    if isinstance(column, str):
        found = [i for i, name in enumerate(names) if name == column]
        if not found:
            raise ValueError(f"column {column!r} is not a column of the keys' table; its columns are {names}")
        if len(found) > 1:
            raise ValueError(f"column {column!r} names {len(found)} columns of the keys' table {names}; pass its index")
        return found[0]
    if not 0 <= int(column) < len(names):
        raise ValueError(f"column index {int(column)} is out of range for a table of {len(names)} columns {names}")
    return int(column)


def _arrow_backed_pandas(obj: Any) -> Any:
    """The pyarrow ChunkedArray a pandas Series or Index backed by Arrow (``string[pyarrow]``,
    ``pd.ArrowDtype``) holds, or None for anything else. pandas' own ``__arrow_c_stream__`` reaches
    the same chunks through ``pyarrow.array(series)``, whose conversion checks cost more per call
    than hashing a hundred thousand keys; the array's ``__arrow_array__`` hands them over as they are."""
    module = type(obj).__module__
    if module != "pandas" and not module.startswith("pandas."):
        return None
    if getattr(getattr(obj, "dtype", None), "storage", None) != "pyarrow":
        return None
    to_arrow = getattr(getattr(obj, "array", None), "__arrow_array__", None)
    return None if to_arrow is None else to_arrow()


def import_keys(obj: Any, column: str | int | None = None) -> ArrowKeys:
    """Import a key column (or a table's column) through the Arrow C interfaces.

    A stream (``__arrow_c_stream__``) is read to its end and released at once; its batches stay
    until the returned :class:`ArrowKeys` is gone.

    Parameters
    ----------
    obj : object
        An Arrow PyCapsule producer, an ``arrow_array_stream`` capsule or an (arrow_schema,
        arrow_array) capsule pair.
    column : str, int or None
        For a table (a struct schema): the column's name or index; may be left out when the table
        has one column. Must be left out for a plain column.

    Returns
    -------
    ArrowKeys

    Raises
    ------
    TypeError
        A column of a type that is not a key type (string, large_string, binary, large_binary,
        string_view, binary_view, null, or a dictionary of one of these with integer indexes).
    ValueError
        A missing or unknown ``column=``, a consumed capsule, or a malformed array structure.
    RuntimeError
        The stream producer reported a failure.
    """
    chunks = _arrow_backed_pandas(obj) if column is None else None
    if chunks is not None and hasattr(chunks, "__arrow_c_stream__"):
        schema, arrays = _arrow.import_stream(chunks.__arrow_c_stream__())
    elif _arrow.capsule_name(obj) == "arrow_array_stream":
        schema, arrays = _arrow.import_stream(obj)
    elif _capsule_pair(obj):
        schema, array = _arrow.import_array(*obj)
        arrays = [array]
    elif hasattr(obj, "__arrow_c_stream__"):
        schema, arrays = _arrow.import_stream(obj.__arrow_c_stream__())
    elif hasattr(obj, "__arrow_c_array__"):
        schema, array = _arrow.import_array(*obj.__arrow_c_array__())
        arrays = [array]
    else:
        raise TypeError(f"{type(obj).__name__} does not export the Arrow PyCapsule interface")
    fmt, _ = schema.format()
    what = f"a {type(obj).__name__}" if not isinstance(obj, tuple) else "an Arrow struct array"
    if fmt == b"+s":
        names = schema.child_names()
        child = _pick_column(names, column, what)
        label = f"column {names[child]!r}"
    else:
        if column is not None:
            raise ValueError(f"column={column!r} picks a column of a table, but keys ({what}) is a single column")
        child, label = -1, "keys"
    keys = ArrowKeys(schema, arrays, child, label)
    _check_format(schema, child, label)  # before any hashing, also for a stream of no batches
    return keys


_KEY_FORMATS = {b"u", b"U", b"z", b"Z", b"vu", b"vz", b"n"}
# Arrow format strings as type names, for messages
_TYPE_NAMES = {
    b"n": "null",
    b"b": "bool",
    b"c": "int8",
    b"C": "uint8",
    b"s": "int16",
    b"S": "uint16",
    b"i": "int32",
    b"I": "uint32",
    b"l": "int64",
    b"L": "uint64",
    b"e": "float16",
    b"f": "float32",
    b"g": "float64",
    b"u": "string",
    b"U": "large_string",
    b"z": "binary",
    b"Z": "large_binary",
    b"vu": "string_view",
    b"vz": "binary_view",
    b"+s": "struct",
    b"+l": "list",
    b"+L": "large_list",
    b"tdD": "date32",
}


def _type_name(fmt: bytes) -> str:
    name = _TYPE_NAMES.get(fmt)
    text = fmt.decode("utf-8", "replace")
    return f"{name} (format {text!r})" if name else f"format {text!r}"


def _check_format(schema: Any, child: int, label: str) -> None:
    fmt, value = schema.format(child)
    if (fmt if value is None else value) not in _KEY_FORMATS:
        shown = _type_name(fmt) if value is None else f"dictionary of {_type_name(value)}"
        raise TypeError(
            f"Arrow {label} of type {shown} is not a key column; expected string, large_string, binary, "
            "large_binary, string_view, binary_view, null, or a dictionary of one of these"
        )


def _columns(columns: list[tuple[str, np.ndarray]]) -> tuple[list[tuple[str, str, np.ndarray]], int]:
    length = None
    out = []
    for name, values in columns:
        arr = np.ascontiguousarray(values).reshape(-1)
        if length is None:
            length = arr.shape[0]
        elif arr.shape[0] != length:
            raise ValueError(f"column {name!r} has {arr.shape[0]} values where the others have {length}")
        if arr.dtype == np.bool_:
            out.append((name, "b", np.packbits(arr, bitorder="little")))
            continue
        fmt = _EXPORT_FORMATS.get(arr.dtype)
        if fmt is None:
            raise TypeError(f"column {name!r} of dtype {arr.dtype} has no Arrow export here")
        out.append((name, fmt, arr))
    return out, length or 0


def export_array(columns: list[tuple[str, np.ndarray]]) -> tuple[object, object]:
    """The ``__arrow_c_array__`` of numpy columns: one struct array, a column per child.

    Parameters
    ----------
    columns : list of (str, numpy.ndarray)
        Names and 1-D columns of one length: uint8/16/32, int32/64 (exported in place when
        C-contiguous) or bool (bit-packed, 1 bit per value).

    Returns
    -------
    tuple
        (arrow_schema capsule, arrow_array capsule).

    Raises
    ------
    ValueError, TypeError
        Columns of different lengths, or a dtype with no export.
    """
    cols, length = _columns(columns)
    return _arrow.export_array(_arrow.make_export(cols, length))


def export_stream(columns: list[tuple[str, np.ndarray]]) -> object:
    """The ``__arrow_c_stream__`` of numpy columns: a stream of one struct array (a record batch).

    Parameters
    ----------
    columns : list of (str, numpy.ndarray)
        As :func:`export_array`.

    Returns
    -------
    object
        An arrow_array_stream capsule.

    Raises
    ------
    ValueError, TypeError
        As :func:`export_array`.
    """
    cols, length = _columns(columns)
    return _arrow.export_stream(_arrow.make_export(cols, length))


class ArrowColumns(abc.ABC):
    """Base of the results that hand their numpy columns to Arrow consumers (the PyCapsule interface).

    A subclass names its columns in :meth:`_arrow_columns`; both exports read them from there and
    go through :func:`export_array` / :func:`export_stream`, so the columns are exported without a
    copy and stay alive until the consumer releases them.
    """

    __slots__ = ()

    @abc.abstractmethod
    def _arrow_columns(self) -> list[tuple[str, np.ndarray]]:
        """The exported columns: (name, 1-D numpy array of one length), in column order."""

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        """Export the columns as one Arrow struct array (the Arrow PyCapsule interface).

        Parameters
        ----------
        requested_schema : object, optional
            A consumer's requested schema; the columns are exported as they are.

        Returns
        -------
        tuple
            (arrow_schema capsule, arrow_array capsule).
        """
        return export_array(self._arrow_columns())

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """Export the columns as an Arrow stream of one record batch (the Arrow PyCapsule interface).

        Parameters
        ----------
        requested_schema : object, optional
            A consumer's requested schema; the columns are exported as they are.

        Returns
        -------
        object
            An arrow_array_stream capsule; the columns as in :meth:`__arrow_c_array__`.
        """
        return export_stream(self._arrow_columns())
