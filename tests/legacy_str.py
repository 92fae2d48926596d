"""A legacy str (Python < 3.12): made by the deprecated PyUnicode_FromUnicode(NULL, n), it is
not ready (no canonical form yet) until something holding the GIL readies it."""

from __future__ import annotations

import ctypes
import warnings

TEXT = "legacy-key"


def legacy_str() -> str:
    """A not yet ready str holding TEXT (only before Python 3.12)."""
    make = ctypes.pythonapi.PyUnicode_FromUnicode
    make.restype = ctypes.py_object
    make.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    wide = ctypes.pythonapi.PyUnicode_AsUnicode
    wide.restype = ctypes.c_void_p
    wide.argtypes = [ctypes.py_object]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s = make(None, len(TEXT))
        ctypes.memmove(wide(s), TEXT.encode("utf-32-le"), 4 * len(TEXT))
    # PyASCIIObject.state follows refcount, type, length and hash; "ready" is its bit 7
    state = ctypes.c_uint8.from_address(id(s) + 4 * ctypes.sizeof(ctypes.c_void_p))
    assert not state.value & 0x80, "the str is expected not to be ready yet"
    return s
