"""Type stub of _status.pyx: the kernels' one status vocabulary (status.h) as the IntEnum ``bc_status``."""

from enum import IntEnum

class bc_status(IntEnum):
    """A kernel's result: BC_OK, or the failure (each with the index of the element it concerns)."""

    BC_OK = 0
    BC_ERR_NOMEM = 1
    BC_ERR_KEY_TYPE = 2
    BC_ERR_KEY_NONE = 3
    BC_ERR_SURROGATE = 4
    BC_ERR_KEY_TOO_LONG = 5
    BC_ERR_LIST_CHANGED = 6
    BC_ERR_ARROW_OFFSETS = 7
    BC_ERR_NEEDS_GIL = 8
    BC_ERR_SEGMENT_INDEX = 9
    BC_ERR_BUCKET_INDEX = 10
    BC_ERR_GLOBAL_INDEX = 11
    BC_ERR_NEGATIVE_SIZE = 12
    BC_ERR_STAMP_RANGE = 13
    BC_ERR_STAMP_ORDER = 14
    BC_ERR_ACK_UNKNOWN = 15
    BC_ERR_ACK_ALREADY = 16
    BC_ERR_ACK_QUEUED = 17
    BC_ERR_ACK_OTHER = 18
    BC_ERR_ACK_DUPLICATE = 19
    BC_ERR_ARROW_VIEW = 20
    BC_ERR_DICT_INDEX = 21
    BC_ERR_KEY_BUFFER = 22
    BC_ERR_NPSTRING = 23
