"""The one status vocabulary: status.h's codes, their Python names, and check_status's errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import bucketcore as bc
from _bucketcore import _hashing
from bucketcore.status import Status, check_status

HEADER = Path(__file__).resolve().parents[2] / "src" / "_bucketcore" / "status.h"


def test_python_names_every_code_of_the_header_with_its_value() -> None:
    if not HEADER.exists():
        pytest.skip(f"the kernel header is not in this checkout ({HEADER}): run from the source tree")
    declared = dict(re.findall(r"\b(BC_(?:OK|ERR_\w+))\s*=\s*(\d+)", HEADER.read_text()))
    assert declared, "no codes parsed from status.h"
    assert {m.name: m.value for m in Status} == {name: int(v) for name, v in declared.items()}


def test_kernels_return_plain_ints() -> None:
    status, value = _hashing.hash_one("abc", False)
    assert type(status) is int and status == Status.BC_OK
    assert value == bc.murmur3_32("abc")


def test_ok_raises_nothing_and_every_failure_raises_a_bucketcore_or_builtin_error() -> None:
    check_status(Status.BC_OK, -1)
    column = np.array([7, -1], dtype=np.int64)
    cases = {
        Status.BC_ERR_NOMEM: (MemoryError, {}),
        Status.BC_ERR_KEY_TYPE: (TypeError, {"keys": ["a", 1.5]}),
        Status.BC_ERR_KEY_NONE: (TypeError, {"keys": ["a", None]}),
        Status.BC_ERR_SURROGATE: (bc.KeyEncodingError, {"keys": ["a", "\ud800"]}),
        Status.BC_ERR_SEGMENT_INDEX: (ValueError, {"segments": column}),
        Status.BC_ERR_NEGATIVE_SIZE: (ValueError, {"sizes": column}),
        Status.BC_ERR_STAMP_ORDER: (bc.MalformedStampError, {"hash_min": [0, 9], "hash_max": [0, 3]}),
        Status.BC_ERR_ACK_OTHER: (KeyError, {"entry": 5, "consumer": ("a", 1), "holder": ("b", 2)}),
        Status.BC_ERR_ACK_DUPLICATE: (ValueError, {"entry": 5}),
    }
    for status, (error, context) in cases.items():
        with pytest.raises(error) as raised:
            check_status(status, 1, **context)
        if error is not MemoryError:
            assert "1" in str(raised.value) or "5" in str(raised.value), (status, raised.value)
