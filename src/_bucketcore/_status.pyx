# cython: language_level=3
"""The kernels' status codes (status.h) as Python values: the IntEnum ``bc_status``; and the values
of their string options (options.h) as ``OPTIONS``.

Kernels return statuses as plain ints (cheap on every call); ``bc_status(code)`` names one.
"""

from enum import IntEnum

from _bucketcore._options cimport bc_errors_values, bc_policy_values


cdef tuple option_values(const char *const *values):
    cdef int i = 0
    found = []
    while values[i] != NULL:
        found.append(values[i].decode("ascii"))
        i += 1
    return tuple(found)


# Each string option's values, in the order of the kernels' codes for them (a value's index is its
# code): bucketcore.validation's table of option rules.
OPTIONS = {"errors": option_values(bc_errors_values), "policy": option_values(bc_policy_values)}

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
