"""A hand-built Arrow C data / C stream producer (ctypes), shared by the tests of the Arrow import
(tests/hashing), the fuzz regressions, the free-threading hammer and fuzz/fuzz_arrow.py.

It hands over exactly the structures a test describes, malformed ones too, and counts every
release callback, so a test can check that every struct it produced is released exactly once by
bucketcore, also when bucketcore refuses it.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------------------------
# a hand-built producer


class ArrowSchema(ctypes.Structure):
    pass


class ArrowArray(ctypes.Structure):
    pass


class ArrowArrayStream(ctypes.Structure):
    pass


SCHEMA_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
ARRAY_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))
GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream), ctypes.POINTER(ArrowSchema))
GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream), ctypes.POINTER(ArrowArray))
GET_LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ArrowArrayStream))
STREAM_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArrayStream))

ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", SCHEMA_RELEASE),
    ("private_data", ctypes.c_void_p),
]
ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", ARRAY_RELEASE),
    ("private_data", ctypes.c_void_p),
]
ArrowArrayStream._fields_ = [
    ("get_schema", GET_SCHEMA),
    ("get_next", GET_NEXT),
    ("get_last_error", GET_LAST_ERROR),
    ("release", STREAM_RELEASE),
    ("private_data", ctypes.c_void_p),
]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def offsets_array(values: list[bytes | None], wide: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(offsets, data, validity bitmap or None) of a string/binary array of these values."""
    lengths = [0 if v is None else len(v) for v in values]
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64 if wide else np.int32)
    data = np.frombuffer(b"".join(v for v in values if v is not None) or b"\0", dtype=np.uint8).copy()
    bits = None
    if any(v is None for v in values):
        bits = np.packbits([v is not None for v in values], bitorder="little")
    return offsets, data, bits


def view_array(values: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(views, one data buffer, validity bitmap or None) of a string_view array: values of at most
    12 bytes inline, longer ones back to back in the data buffer."""
    views = np.zeros((len(values), 16), dtype=np.uint8)
    data = bytearray()
    for i, v in enumerate(values):
        v = v or b""
        views[i, 0:4] = np.frombuffer(np.int32(len(v)).tobytes(), dtype=np.uint8)
        if len(v) <= 12:
            views[i, 4 : 4 + len(v)] = np.frombuffer(v, dtype=np.uint8)
        else:
            views[i, 4:8] = np.frombuffer(v[:4], dtype=np.uint8)
            views[i, 8:12] = np.frombuffer(np.int32(0).tobytes(), dtype=np.uint8)
            views[i, 12:16] = np.frombuffer(np.int32(len(data)).tobytes(), dtype=np.uint8)
            data += v
    bits = None
    if any(v is None for v in values):
        bits = np.packbits([v is not None for v in values], bitorder="little")
    return views.reshape(-1), np.frombuffer(bytes(data) or b"\0", dtype=np.uint8).copy(), bits


class Producer:
    """Builds Arrow C structs from numpy buffers and counts their release callbacks by kind
    ("schema", "array", "stream"); every struct and buffer stays alive as long as this does."""

    def __init__(self) -> None:
        self.released: Counter[str] = Counter()
        self._keep: list[Any] = []
        self._schema_release = SCHEMA_RELEASE(self._release_schema)
        self._array_release = ARRAY_RELEASE(self._release_array)
        self._stream_release = STREAM_RELEASE(self._release_stream)

    def _release_schema(self, schema: Any) -> None:
        self.released["schema"] += 1
        schema.contents.release = SCHEMA_RELEASE()

    def _release_array(self, array: Any) -> None:
        self.released["array"] += 1
        array.contents.release = ARRAY_RELEASE()

    def _release_stream(self, stream: Any) -> None:
        self.released["stream"] += 1
        stream.contents.release = STREAM_RELEASE()

    def _link(self, struct: Any, kind: Any, children: list[Any], dictionary: Any) -> None:
        """Point a schema's or array's ``children`` and ``dictionary`` at other structs of its kind."""
        struct.n_children = len(children)
        if children:
            ptrs = (ctypes.POINTER(kind) * len(children))(*[ctypes.pointer(c) for c in children])
            self._keep.append(ptrs)
            struct.children = ptrs
        if dictionary is not None:
            struct.dictionary = ctypes.pointer(dictionary)

    def schema(
        self, fmt: str, name: str = "", children: list[ArrowSchema] | None = None, dictionary: ArrowSchema | None = None
    ) -> ArrowSchema:
        """A schema; children and dictionary are released with it (one count for the parent)."""
        s = ArrowSchema()
        s.format = fmt.encode()
        s.name = name.encode()
        s.flags = 2
        children = children or []
        self._link(s, ArrowSchema, children, dictionary)
        s.release = self._schema_release
        self._keep.append((s, children, dictionary))
        return s

    def array(
        self,
        length: int,
        buffers: list[np.ndarray | None],
        *,
        offset: int = 0,
        null_count: int = 0,
        children: list[ArrowArray] | None = None,
        dictionary: ArrowArray | None = None,
    ) -> ArrowArray:
        """An array over numpy buffers (None: a NULL buffer pointer)."""
        a = ArrowArray()
        a.length = length
        a.offset = offset
        a.null_count = null_count
        a.n_buffers = len(buffers)
        pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[None if b is None else b.ctypes.data for b in buffers])
        a.buffers = pointers
        children = children or []
        self._link(a, ArrowArray, children, dictionary)
        a.release = self._array_release
        self._keep.append((a, pointers, buffers, children, dictionary))
        return a

    def pair(self, schema: ArrowSchema, array: ArrowArray) -> tuple[object, object]:
        """An (arrow_schema, arrow_array) capsule pair over the structs (no capsule destructor:
        the consumer moves the structs out and releases them)."""
        return (
            _capsule_new(ctypes.addressof(schema), b"arrow_schema", None),
            _capsule_new(ctypes.addressof(array), b"arrow_array", None),
        )

    def stream(self, make_schema: Any, arrays: list[ArrowArray], fail_at: int | None = None) -> object:
        """An arrow_array_stream capsule giving ``arrays`` in turn (make_schema() for each
        get_schema call); with fail_at, get_next fails (EIO, "boom") instead of giving that batch."""
        position = [0]

        def get_schema(stream: Any, out: Any) -> int:
            ctypes.memmove(out, ctypes.addressof(make_schema()), ctypes.sizeof(ArrowSchema))
            return 0

        def get_next(stream: Any, out: Any) -> int:
            i = position[0]
            if fail_at is not None and i == fail_at:
                return 5
            if i >= len(arrays):
                ctypes.memset(out, 0, ctypes.sizeof(ArrowArray))
                return 0
            ctypes.memmove(out, ctypes.addressof(arrays[i]), ctypes.sizeof(ArrowArray))
            arrays[i].release = ARRAY_RELEASE()  # moved to the consumer
            position[0] += 1
            return 0

        message = ctypes.create_string_buffer(b"boom")

        def last_error(stream: Any) -> int:
            return ctypes.addressof(message)

        st = ArrowArrayStream()
        callbacks = (GET_SCHEMA(get_schema), GET_NEXT(get_next), GET_LAST_ERROR(last_error))
        st.get_schema, st.get_next, st.get_last_error = callbacks
        st.release = self._stream_release
        self._keep.append((st, callbacks, message))
        return _capsule_new(ctypes.addressof(st), b"arrow_array_stream", None)
