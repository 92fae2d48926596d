# cython: language_level=3
"""Entry routing kernels (serve bucketcore.entry_routing): route whole entries to bucket owners,
give their sticky hashes, test stamps against a boundary list.

Inputs arrive validated and converted by :mod:`bucketcore.entry_routing` (contiguous ``uint16``
stamps, ``uint32`` key hashes, ``uint8`` views of bool masks); the loops (entry_route.h) run with
the GIL released and build no Python object per entry. Buckets come from a boundary list's
65536-entry lookup table (``Buckets.lookup_table()``: one load per entry), or from the shared
``bc_bucket_of`` search for a few entries (``fits`` without a table). Nothing here keeps state.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

from _bucketcore._status cimport *

cdef extern from "entry_route.h" nogil:
    ctypedef struct bc_route_cols:
        int64_t n
        const uint16_t *tab
        const int32_t *own
        const uint16_t *lo
        const uint16_t *hi
        const uint8_t *st
        const uint32_t *key
        const uint8_t *fl
        int32_t *slot
        int32_t *bucket
        uint16_t *hash
    int bc_route_entries(const bc_route_cols *c, int mark, int64_t *err, int64_t *straddling,
                         int64_t *malformed)
    int bc_fits_entries(int64_t n, const uint16_t *splits, uint32_t ns, const uint16_t *tab,
                        const uint16_t *lo, const uint16_t *hi, const uint8_t *fl, uint8_t *out,
                        int64_t *err)

# Slot written for an entry that routes to nobody / that carries a malformed stamp (mark mode).
NO_CONSUMER = -1
MALFORMED = -2


cdef inline const uint16_t *u16_ptr(const uint16_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline const uint8_t *u8_ptr(const uint8_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline bint same_len(object column, Py_ssize_t n) except -1:
    return column is None or len(column) == n


cdef int misfit(str kernel) except -1:
    raise ValueError(f"{kernel}: the columns do not fit together (a bug of bucketcore.entry_routing)")


def route(const uint16_t[::1] table not None, const int32_t[::1] owner,
          const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max,
          const uint8_t[::1] stamped, const uint32_t[::1] key_hash, const uint8_t[::1] flagged,
          int32_t[::1] slot_out, int32_t[::1] bucket_out, uint16_t[::1] hash_out, bint mark):
    """Route n entries by ``table`` (bucket of every hash); returns ``(status, index, straddling, malformed)``.

    An entry is stamped when ``stamped`` is None or ``stamped[i]``; it routes by the bucket of
    ``hash_min[i]`` (straddling counted when ``hash_max`` is given and its bucket differs),
    otherwise by the bucket of ``key_hash[i] & 0xFFFF``. ``flagged[i]`` marks a stamp the edge
    found outside 0..0xFFFF. ``slot_out`` gets ``owner[bucket]``, ``bucket_out`` the bucket,
    ``hash_out`` the sticky hash. A malformed stamp stops the run (status and index returned)
    unless ``mark``: then slot -2, bucket -1, hash 0, and the run goes on. The columns are the
    caller's (bucketcore.entry_routing): a column of another length, a missing owner or key hash
    column, or a table that is not a boundary list's is a bug there (ValueError).
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    cdef bc_route_cols c
    cdef int64_t err = -1, straddling = 0, malformed = 0
    cdef int status
    if not (same_len(hash_max, n) and same_len(stamped, n) and same_len(key_hash, n)
            and same_len(flagged, n) and same_len(slot_out, n) and same_len(bucket_out, n)
            and same_len(hash_out, n)) or (slot_out is not None and owner is None) \
            or (stamped is not None and key_hash is None) or table.shape[0] != 65536 \
            or (owner is not None and owner.shape[0] != <Py_ssize_t>table[65535] + 1):
        misfit("route")
    if n == 0:
        return BC_OK, -1, 0, 0
    c.n = n
    c.tab = &table[0]
    c.own = NULL if owner is None else &owner[0]
    c.lo = &hash_min[0]
    c.hi = u16_ptr(hash_max)
    c.st = u8_ptr(stamped)
    c.key = NULL if key_hash is None else &key_hash[0]
    c.fl = u8_ptr(flagged)
    c.slot = NULL if slot_out is None else &slot_out[0]
    c.bucket = NULL if bucket_out is None else &bucket_out[0]
    c.hash = NULL if hash_out is None else &hash_out[0]
    with nogil:
        status = bc_route_entries(&c, mark, &err, &straddling, &malformed)
    return status, err, straddling, malformed


def fits(const uint16_t[::1] splits not None, const uint16_t[::1] table,
         const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max not None,
         const uint8_t[::1] flagged, uint8_t[::1] out not None):
    """``out[i] = bucket_of(hash_min[i]) == bucket_of(hash_max[i])``; returns ``(status, index)``.

    Uses ``table`` (``Buckets.lookup_table()``) when given, else searches ``splits`` per entry.
    Columns of other lengths, or a table that is not 64 Ki items, are a bug of the caller (ValueError).
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    cdef int64_t err = -1
    cdef int status
    cdef const uint16_t *sp = u16_ptr(splits)
    cdef uint32_t ns = <uint32_t>splits.shape[0]
    cdef const uint16_t *tab = NULL if table is None else &table[0]
    cdef const uint8_t *fl = u8_ptr(flagged)
    if not (same_len(hash_max, n) and same_len(flagged, n) and same_len(out, n)) \
            or (table is not None and table.shape[0] != 65536):
        misfit("fits")
    if n == 0:
        return BC_OK, -1
    with nogil:
        status = bc_fits_entries(n, sp, ns, tab, &hash_min[0], &hash_max[0], fl, &out[0], &err)
    return status, err
