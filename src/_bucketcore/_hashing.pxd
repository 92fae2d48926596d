# Shared declarations of the hashing kernel: the C key descriptor and the per-column hash run.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cdef extern from "keys.h" nogil:
    enum:
        BC_KEY_NONE
        BC_KEY_BYTES
        BC_KEY_UCS1
        BC_KEY_UCS2
        BC_KEY_UCS4
        BC_OK
        BC_ERR_SURROGATE
        BC_ERR_NOMEM
        BC_KEY_MAX_BYTES
    ctypedef struct bc_key:
        const void *data
        uint32_t len
        int32_t kind
    ctypedef struct bc_scratch:
        uint8_t *buf
        size_t cap
    void bc_scratch_free(bc_scratch *s)
    int bc_hash_key(const bc_key *k, int replace, bc_scratch *s, uint32_t *out)
    int bc_encode_chunk(bc_key *keys, size_t n, int replace, bc_scratch *s, size_t *err_at)

cdef extern from "murmur3_lanes.h" nogil:
    enum:
        BC_PATH_AUTO
        BC_PATH_SCALAR
        BC_PATH_INTERLEAVED
        BC_PATH_SIMD
    int bc_best_path()
    int bc_cpu_has_avx2()
    void bc_hash_bytes(const bc_key *keys, size_t n, uint32_t *out, int path)

cdef extern from "murmur3.h" nogil:
    uint32_t bc_murmur3_32(const void *data, size_t len)

# Where a hash run writes: raw is required, the other columns may be NULL.
cdef struct HashOut:
    uint32_t *raw
    uint16_t *segment_hash
    uint16_t *bucket_hash
    uint8_t *has_key
