"""Type stub of _wire.pyx: stamped entries on Pulsar's wire (wire.h)."""

from typing import Any

import numpy as np

FIELD_HASH_MIN: int
FIELD_HASH_MAX: int
STATUS_TEXT: dict[int, str]

def set_crc(address: int, value: Any) -> None: ...
def crc_is_native() -> bool: ...
def set_errors(key_encoding_error: type[Exception], wire_format_error: type[Exception]) -> None: ...
def encode_entries(
    entries: list[Any],
    producer_name: str,
    publish_time: int,
    keys: Any,
    properties: Any,
    sequence_ids: Any,
    sequence_base: int,
    stamp: bool,
    into: bytearray | None = None,
    size_hint: int = 0,
) -> tuple[bytes | bytearray, np.ndarray]: ...
def read_stamp(metadata: Any) -> tuple[int, int] | None: ...
def read_stamps(
    buf: Any, offsets: np.ndarray, hash_min: np.ndarray, hash_max: np.ndarray, stamped: np.ndarray
) -> tuple[int, int, int, str]: ...
def decode_entry(data: Any, verify: bool) -> tuple[dict[Any, Any], list[dict[str, Any]], bool]: ...
