# The producer's key reader, shared with the streaming batcher (_batcher): a key column read a
# chunk at a time into C key descriptors and raw hashes.
from libc.stdint cimport uint8_t, uint32_t

from _bucketcore._keycolumns cimport KeyColumn, bc_key
from _bucketcore._hashing cimport HashOut, bc_scratch


cdef class KeyChunks:
    cdef bc_key *keys
    cdef uint32_t *raw
    cdef uint8_t *has_key
    cdef Py_ssize_t cap          # the longest chunk the buffers hold
    cdef bc_scratch scratch
    cdef HashOut out

    cdef int hash_chunk(self, KeyColumn col, Py_ssize_t cpos, Py_ssize_t m, bint replace,
                        Py_ssize_t *err_index) except -2
