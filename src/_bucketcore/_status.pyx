# cython: language_level=3
"""The kernels' status codes (status.h) as Python values: the IntEnum ``bc_status``.

Kernels return statuses as plain ints (cheap on every call); ``bc_status(code)`` names one.
"""

from enum import IntEnum

bc_status = IntEnum(
    "bc_status",
    [
        ("BC_OK", BC_OK),
        ("BC_ERR_NOMEM", BC_ERR_NOMEM),
        ("BC_ERR_KEY_TYPE", BC_ERR_KEY_TYPE),
        ("BC_ERR_KEY_NONE", BC_ERR_KEY_NONE),
        ("BC_ERR_SURROGATE", BC_ERR_SURROGATE),
        ("BC_ERR_KEY_TOO_LONG", BC_ERR_KEY_TOO_LONG),
        ("BC_ERR_LIST_CHANGED", BC_ERR_LIST_CHANGED),
        ("BC_ERR_ARROW_OFFSETS", BC_ERR_ARROW_OFFSETS),
        ("BC_ERR_NEEDS_GIL", BC_ERR_NEEDS_GIL),
        ("BC_ERR_SEGMENT_INDEX", BC_ERR_SEGMENT_INDEX),
        ("BC_ERR_BUCKET_INDEX", BC_ERR_BUCKET_INDEX),
        ("BC_ERR_GLOBAL_INDEX", BC_ERR_GLOBAL_INDEX),
        ("BC_ERR_NEGATIVE_SIZE", BC_ERR_NEGATIVE_SIZE),
        ("BC_ERR_STAMP_RANGE", BC_ERR_STAMP_RANGE),
        ("BC_ERR_STAMP_ORDER", BC_ERR_STAMP_ORDER),
        ("BC_ERR_ACK_UNKNOWN", BC_ERR_ACK_UNKNOWN),
        ("BC_ERR_ACK_ALREADY", BC_ERR_ACK_ALREADY),
        ("BC_ERR_ACK_QUEUED", BC_ERR_ACK_QUEUED),
        ("BC_ERR_ACK_OTHER", BC_ERR_ACK_OTHER),
        ("BC_ERR_ACK_DUPLICATE", BC_ERR_ACK_DUPLICATE),
        ("BC_ERR_ARROW_VIEW", BC_ERR_ARROW_VIEW),
        ("BC_ERR_DICT_INDEX", BC_ERR_DICT_INDEX),
        ("BC_ERR_KEY_BUFFER", BC_ERR_KEY_BUFFER),
        ("BC_ERR_NPSTRING", BC_ERR_NPSTRING),
    ],
)
