# The kernels' one status vocabulary (status.h), for every kernel to cimport. A C enum: a status
# reaches Python as a plain int (no enum object per call); _status.bc_status names the values.
cdef extern from "status.h" nogil:
    enum:
        BC_OK
        BC_ERR_NOMEM
        BC_ERR_KEY_TYPE
        BC_ERR_KEY_NONE
        BC_ERR_SURROGATE
        BC_ERR_KEY_TOO_LONG
        BC_ERR_LIST_CHANGED
        BC_ERR_ARROW_OFFSETS
        BC_ERR_NEEDS_GIL
        BC_ERR_SEGMENT_INDEX
        BC_ERR_BUCKET_INDEX
        BC_ERR_GLOBAL_INDEX
        BC_ERR_NEGATIVE_SIZE
        BC_ERR_STAMP_RANGE
        BC_ERR_STAMP_ORDER
        BC_ERR_ACK_UNKNOWN
        BC_ERR_ACK_ALREADY
        BC_ERR_ACK_QUEUED
        BC_ERR_ACK_OTHER
        BC_ERR_ACK_DUPLICATE
        BC_ERR_ARROW_VIEW
        BC_ERR_DICT_INDEX
        BC_ERR_KEY_BUFFER
        BC_ERR_NPSTRING
