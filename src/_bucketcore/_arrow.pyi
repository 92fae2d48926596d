"""Type stub of _arrow.pyx: the Arrow C data / C stream interfaces (PyCapsules), key columns in and
numpy columns out. Called by bucketcore.arrow, which picks the column and checks its type first."""

from typing import Any

import numpy as np

from ._hashing import KeyColumn

def capsule_name(obj: object) -> str | None: ...

class ImportedSchema:
    """An ArrowSchema moved out of its producer's capsule, released once when this is freed."""

    def format(self, child: int = -1) -> tuple[bytes, bytes | None]: ...
    def child_names(self) -> list[str]: ...

class ImportedArray:
    """An ArrowArray moved out of its producer's capsule or stream, released once when freed."""

    @property
    def released(self) -> bool: ...

class DictionaryHashes:
    """A dictionary's values and their hashes (computed once)."""

    @property
    def raw(self) -> np.ndarray: ...
    @property
    def has_key(self) -> np.ndarray: ...

class Export:
    """Numpy columns to export as one Arrow struct array."""

def import_array(schema_capsule: object, array_capsule: object) -> tuple[ImportedSchema, ImportedArray]: ...
def import_stream(stream_capsule: object) -> tuple[ImportedSchema, list[ImportedArray]]: ...
def chunk_length(schema: ImportedSchema, owner: ImportedArray, child: int) -> int: ...
def arrow_c_column(
    schema: ImportedSchema,
    owner: ImportedArray,
    child: int,
    lo: int,
    hi: int,
    shared: dict[Any, Any] | None = None,
) -> KeyColumn: ...
def make_export(columns: list[tuple[str, str, np.ndarray]], length: int) -> Export: ...
def export_array(e: Export) -> tuple[object, object]: ...
def export_stream(e: Export) -> object: ...
