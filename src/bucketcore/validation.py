"""The argument checks every public bucketcore function uses, declared once.

Each check takes the value and the argument's name, returns the value normalised (numpy scalars
become Python ints, columns become contiguous numpy arrays of the dtype the kernels take) and
raises with a message that names the argument, the rule it broke and, for a column, the index of
the first bad element:

* a value of the wrong type is a :class:`TypeError` (bools are never ints, floats never ints);
* a value of the right type outside its bounds is a :class:`ValueError`.

Nothing here coerces silently: a bool among ints, a float column where ints are expected or an
Arrow null are refused, never read as 0/1 or NaN. This module is a leaf: it imports only numpy.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from _bucketcore._status import OPTIONS

__all__ = [
    "MAX_HASH",
    "MAX_RAW_HASH",
    "INT64_MAX",
    "UINT64_MAX",
    "is_int",
    "describe",
    "index_label",
    "check_int",
    "check_bool",
    "check_hash",
    "check_choice",
    "plain_ints",
    "refuse_arrow_nulls",
    "first_outside",
    "hash_column",
    "hash_out_of_range",
    "u16_hash_column",
    "int_column",
    "bool_column",
]

MAX_HASH = 0xFFFF  #: largest 16-bit (segment or bucket) hash
MAX_RAW_HASH = 0xFFFFFFFF  #: largest raw 32-bit Murmur3 hash
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

# Integer dtypes the kernels take without a copy; other integer dtypes are converted.
_KERNEL_DTYPES = tuple(
    np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64)
)


def is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """Whether ``value`` is an int or a numpy integer, and not a bool.

    Parameters
    ----------
    value : object
        Anything.

    Returns
    -------
    bool
        True for ``int`` and ``np.integer`` values; False for bools (``True`` is not the
        integer 1 here), floats and everything else.
    """
    if type(value) is int:  # the common case, without the slower isinstance checks
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def describe(value: object) -> str:
    """``<type> <value>`` for error messages; a numpy scalar shows its Python value.

    Parameters
    ----------
    value : object
        The offending value.

    Returns
    -------
    str
        For example ``"float 7.0"`` for ``np.float64(7.0)`` or ``"str 'x'"``.
    """
    shown = value.item() if isinstance(value, np.generic) else value
    return f"{type(value).__name__} {shown!r}"


def index_label(index: int, shape: tuple[int, ...]) -> object:
    """A flat index as messages name it: the int itself in 1-D, its tuple of indexes in N-D.

    Parameters
    ----------
    index : int
        Position in the flattened (C-order) column.
    shape : tuple of int
        Shape of the column as the caller passed it.

    Returns
    -------
    int or tuple of int
    """
    return index if len(shape) <= 1 else tuple(int(i) for i in np.unravel_index(index, shape))


def check_int(value: object, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """Validate one integer argument.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        The argument's name, used in the message.
    lo, hi : int, optional
        Inclusive bounds; None means unbounded on that side.

    Returns
    -------
    int
        ``value`` as a Python int.

    Raises
    ------
    TypeError
        ``value`` is not an int (bools and floats included), naming ``name``.
    ValueError
        ``value`` is below ``lo`` or above ``hi``, naming ``name`` and the bound.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int, not {describe(value)}")
    number = int(value)  # type: ignore[call-overload]
    if lo is not None and number < lo:
        raise ValueError(f"{name} must be >= {lo}, not {number}")
    if hi is not None and number > hi:
        raise ValueError(f"{name} must be <= {hi}, not {number}")
    return number


def check_hash(value: object, name: str) -> int:
    """Validate one 16-bit hash (a segment hash, bucket hash or stamp bound): an int in 0..0xFFFF.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an int.
    ValueError
        ``value`` is outside 0..0xFFFF; the message names ``name`` and the value.
    """
    if not is_int(value):
        raise TypeError(f"{name} must be an int in 0..0xFFFF, not {describe(value)}")
    number = int(value)  # type: ignore[call-overload]
    if not 0 <= number <= MAX_HASH:
        raise ValueError(f"{name} {number} is outside 0..0xFFFF")
    return number


def check_bool(value: object, name: str) -> bool:
    """Validate a flag: a ``bool`` (or ``np.bool_``), never an int or another truthy value.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        ``value`` is not a bool.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {describe(value)}")
    return bool(value)


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """Validate a string option against its allowed values.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        The argument's name, used in the message.
    choices : tuple of str
        The allowed values.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        ``value`` is not one of ``choices``; the message lists them.
    """
    if not isinstance(value, str) or value not in choices:
        allowed = " or ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be {allowed}, not {value!r}")
    return value


def check_option(value: object, name: str) -> int:
    """The kernels' code of a string option: its index among the values ``OPTIONS[name]`` declares
    (options.h, the one table of them: ``errors`` "strict" 0 / "replace" 1, ``policy`` "shared" 0
    / "per_bucket" 1). The kernels' fast paths match a value against the same table in C
    (bc_option_code) and leave any other to this.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        The option: a key of ``OPTIONS``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``value`` is not one of the option's values; the message lists them.
    """
    values = OPTIONS[name]
    return values.index(check_choice(value, name, values))


def plain_ints(values: list[Any] | tuple[Any, ...]) -> np.ndarray | None:
    """A list of plain ints as ``np.int64`` in one C-level pass, or None.

    Parameters
    ----------
    values : list or tuple
        The items.

    Returns
    -------
    numpy.ndarray or None
        None when some item is not an ``int`` (a bool, a numpy scalar, anything else) or does
        not fit int64: the caller then walks the items one by one to name the bad one.
    """
    if not set(map(type, values)) <= {int}:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return None


def refuse_arrow_nulls(values: Any, name: str) -> None:
    """Refuse an Arrow integer column holding a null (numpy would read it as a float NaN).

    Parameters
    ----------
    values : Any
        A column; only pyarrow arrays are inspected (pyarrow is never imported here).
    name : str
        The column's name, used in the message.

    Raises
    ------
    ValueError
        The column holds a null; the message names the index of the first one.
    """
    module = type(values).__module__
    if (module == "pyarrow" or module.startswith("pyarrow.")) and values.null_count:
        index = int(np.flatnonzero(np.asarray(values.is_null()))[0])
        raise ValueError(f"{name} at index {index} is null; expected an integer")


def first_outside(arr: np.ndarray, lo: int, hi: int) -> int | None:
    """Flat index of the first value of an integer array outside ``lo..hi``, or None.

    Parameters
    ----------
    arr : numpy.ndarray
        An integer array of any shape.
    lo, hi : int
        Inclusive bounds.

    Returns
    -------
    int or None
        None when every value fits (checked by min/max first: the common case allocates no mask).
    """
    if arr.size == 0:
        return None
    info = np.iinfo(arr.dtype)
    if info.min >= lo and info.max <= hi:
        return None
    if int(arr.min()) >= lo and int(arr.max()) <= hi:
        return None
    flat = arr.reshape(-1)
    return int(np.argmax((flat < lo) | (flat > hi)))


def hash_column(values: Any, name: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """A column of 16-bit hashes as a flat contiguous integer array the kernels take, and its shape.

    Integer dtypes only: no bools, no floats, no Arrow nulls. A Python list or tuple is checked
    here, ranges included (the result is ``np.uint16``); an array's values are *not* range-checked
    (the kernels check them in their lookup pass and report the first bad index; use
    :func:`u16_hash_column` for a checked copy).

    Parameters
    ----------
    values : list, tuple, numpy.ndarray or array-like
        The hashes, of any shape.
    name : str
        What one element is called in messages (e.g. ``"bucket hash"``).

    Returns
    -------
    flat : numpy.ndarray
        1-D contiguous array of an integer dtype the kernels take.
    shape : tuple of int
        The column's shape as given.

    Raises
    ------
    TypeError
        An element (of a list) is not an int, or the array's dtype is not an integer dtype.
    ValueError
        An element of a list is outside 0..0xFFFF (named with its index), or an Arrow null.
    """
    if isinstance(values, (list, tuple)):
        ints = plain_ints(values)  # the common list: ranges checked vectorised
        if ints is not None:
            bad = first_outside(ints, 0, MAX_HASH)
            if bad is not None:
                raise ValueError(f"{name} {int(ints[bad])} at index {bad} is outside 0..0xFFFF")
            return ints.astype(np.uint16), (len(values),)
        for i, item in enumerate(values):
            if not is_int(item):
                raise TypeError(f"{name} at index {i} is {describe(item)}; expected an int in 0..0xFFFF")
            if not 0 <= int(item) <= MAX_HASH:
                raise ValueError(f"{name} {int(item)} at index {i} is outside 0..0xFFFF")
        return np.array(values, dtype=np.uint16), (len(values),)
    refuse_arrow_nulls(values, name)
    arr = np.asarray(values)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} values must be integers in 0..0xFFFF, not an array of dtype {arr.dtype}")
    if arr.dtype not in _KERNEL_DTYPES:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype not in _KERNEL_DTYPES:  # e.g. a platform long long that is not int64
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr).reshape(-1), arr.shape


def hash_out_of_range(name: str, flat: np.ndarray, index: int, shape: tuple[int, ...]) -> ValueError:
    """The error for element ``index`` of a hash column lying outside 0..0xFFFF.

    Parameters
    ----------
    name : str
        What one element is called in messages.
    flat : numpy.ndarray
        The flat column (as :func:`hash_column` returned it).
    index : int
        Flat index of the bad element (as a kernel reported it).
    shape : tuple of int
        The column's shape as given, to name the index in N-D.

    Returns
    -------
    ValueError
        To be raised by the caller.
    """
    return ValueError(f"{name} {int(flat[index])} at index {index_label(index, shape)} is outside 0..0xFFFF")


def u16_hash_column(values: Any, name: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Like :func:`hash_column`, every value range-checked, as a flat ``np.uint16`` array.

    Parameters
    ----------
    values : array-like
        The hashes, of any shape.
    name : str
        What one element is called in messages.

    Returns
    -------
    flat : numpy.ndarray
        1-D contiguous ``np.uint16`` copy or view.
    shape : tuple of int

    Raises
    ------
    TypeError
        As :func:`hash_column`.
    ValueError
        An element is outside 0..0xFFFF, named with its index.
    """
    flat, shape = hash_column(values, name)
    if flat.dtype != np.uint16:
        bad = first_outside(flat, 0, MAX_HASH)
        if bad is not None:
            raise hash_out_of_range(name, flat, bad, shape)
    return flat.astype(np.uint16, copy=False), shape


def int_column(values: Any, name: str, *, size: int | None = None) -> np.ndarray:
    """A 1-D integer column; bools, floats and objects refused (an empty list is an empty column).

    Parameters
    ----------
    values : list, tuple or array-like
        The column.
    name : str
        The column's name, used in messages.
    size : int, optional
        The number of items the column must have.

    Returns
    -------
    numpy.ndarray
        The column as a 1-D integer array (its own integer dtype; ``np.int64`` when empty).

    Raises
    ------
    TypeError
        An element is a bool or not an int (named with its index), or the dtype is not integer.
    ValueError
        The column is not 1-D, has the wrong size, or a Python int does not fit 64 bits.
    """
    if isinstance(values, (list, tuple)):
        # numpy reads [5, True] as [5, 1]: a bool among ints would be silently taken as 0/1.
        kinds = set(map(type, values))  # one C-level pass; the index is looked for only on error
        if bool in kinds or np.bool_ in kinds:
            i = next(i for i, v in enumerate(values) if isinstance(v, (bool, np.bool_)))
            raise TypeError(f"{name} at index {i} is a bool ({values[i]!r}), not an int")
    refuse_arrow_nulls(values, name)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D column, not an array of shape {arr.shape}")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "ui":
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)  # np.asarray([]) is float64: an empty list is fine
        else:
            if isinstance(values, (list, tuple)):
                # name the item numpy could not hold as an integer: another type, or beyond 64 bits
                for i, v in enumerate(values):
                    if not isinstance(v, (int, np.integer)):
                        raise TypeError(f"{name} at index {i} is {type(v).__name__} {v!r}, not an int")
                    if not -(1 << 63) <= v <= UINT64_MAX:
                        raise ValueError(f"{name} at index {i} is {v}, beyond 64-bit integers")
            raise TypeError(f"{name} must hold integers, not values of dtype {arr.dtype}")
    if size is not None and arr.size != size:
        raise ValueError(f"{name} has {arr.size} items; expected {size}")
    return arr


def bool_column(values: Any, name: str, size: int) -> np.ndarray:
    """A 1-D bool column of ``size`` items, as a contiguous ``np.uint8`` view (what kernels take).

    Parameters
    ----------
    values : array-like
        The column; its dtype must be bool (0/1 ints are refused).
    name : str
        The column's name, used in messages.
    size : int
        The number of items the column must have.

    Returns
    -------
    numpy.ndarray
        ``np.uint8`` view, 1 where True.

    Raises
    ------
    TypeError
        The dtype is not bool.
    ValueError
        The column is not 1-D or does not have ``size`` items.
    """
    arr = np.asarray(values)
    if arr.size == 0 and not isinstance(values, np.ndarray):
        # an empty list has no dtype of its own (numpy calls it float64): it is an empty column
        arr = np.zeros(arr.shape, dtype=np.bool_)
    if arr.dtype != np.bool_:
        raise TypeError(f"{name} must be a bool column, not values of dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size != size:
        raise ValueError(f"{name} must be a 1-D column of {size} items, not shape {arr.shape}")
    return np.ascontiguousarray(arr).view(np.uint8)
