# cython: language_level=3
"""Broker dispatch kernels: route whole entries to bucket owners, test stamps against a boundary list.

Inputs arrive validated and converted by :mod:`bucketcore.dispatch` (contiguous ``uint16`` stamps,
``uint32`` key hashes, ``uint8`` views of bool masks). The loops run with the GIL released and
build no Python object per entry. Buckets come from a boundary list's 65536-entry lookup table
(``Buckets.lookup_table()``: one load per entry, where a search costs ~10 ns on random stamps), or
from the shared ``bc_bucket_of`` search for a few entries (``fits`` without a table).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)

# Status of a kernel call; bucketcore.dispatch turns a failure into a MalformedStampError.
STATUS_OK = 0
STATUS_OUT_OF_RANGE = 1
STATUS_MIN_ABOVE_MAX = 2

# Slot written for an entry that routes to nobody / that carries a malformed stamp (mark mode).
NO_CONSUMER = -1
MALFORMED = -2

cdef enum:
    ST_OK = 0
    ST_OUT_OF_RANGE = 1
    ST_MIN_ABOVE_MAX = 2


cdef inline const uint16_t *u16_ptr(const uint16_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline const uint8_t *u8_ptr(const uint8_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline void check_len(object column, Py_ssize_t n, str name) except *:
    if column is not None and len(column) != n:
        raise ValueError(f"{name} has {len(column)} items; expected {n}")


def route(const uint16_t[::1] table not None, const int32_t[::1] owner,
          const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max,
          const uint8_t[::1] stamped, const uint32_t[::1] key_hash, const uint8_t[::1] flagged,
          int32_t[::1] slot_out, int32_t[::1] bucket_out, uint16_t[::1] hash_out, bint mark):
    """Route n entries by ``table`` (bucket of every hash); returns ``(status, index, straddling, malformed)``.

    An entry is stamped when ``stamped`` is None or ``stamped[i]``; it routes by the bucket of
    ``hash_min[i]`` (straddling counted when ``hash_max`` is given and its bucket differs),
    otherwise by the bucket of ``key_hash[i] & 0xFFFF``. ``flagged[i]`` marks a stamp the edge
    found outside 0..0xFFFF. ``slot_out`` gets ``owner[bucket]``, ``bucket_out`` the bucket,
    ``hash_out`` the routing hash with 0 nudged to 1. A malformed stamp stops the run (status and
    index returned) unless ``mark``: then slot -2, bucket -1, hash 0, and the run goes on.
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    check_len(hash_max, n, "hash_max")
    check_len(stamped, n, "stamped")
    check_len(key_hash, n, "key_hash")
    check_len(flagged, n, "flagged")
    check_len(slot_out, n, "slot_out")
    check_len(bucket_out, n, "bucket_out")
    check_len(hash_out, n, "hash_out")
    if slot_out is not None and owner is None:
        raise ValueError("slot_out needs the owner table")
    if stamped is not None and key_hash is None:
        raise ValueError("stamped needs key_hash for the unstamped entries")
    if table.shape[0] != 65536:
        raise ValueError(f"a bucket table has 65536 items, not {table.shape[0]}")
    if owner is not None and owner.shape[0] != <Py_ssize_t>table[65535] + 1:
        raise ValueError(f"owner table has {owner.shape[0]} items; the bucket table has {table[65535] + 1} buckets")
    cdef const uint16_t *tab = &table[0]
    cdef const int32_t *own = NULL if owner is None else &owner[0]
    cdef const uint16_t *lo_p = u16_ptr(hash_min)
    cdef const uint16_t *hi_p = u16_ptr(hash_max)
    cdef const uint8_t *st_p = u8_ptr(stamped)
    cdef const uint32_t *key_p = NULL if key_hash is None or n == 0 else &key_hash[0]
    cdef const uint8_t *fl_p = u8_ptr(flagged)
    cdef int32_t *slot_p = NULL if slot_out is None or n == 0 else &slot_out[0]
    cdef int32_t *bk_p = NULL if bucket_out is None or n == 0 else &bucket_out[0]
    cdef uint16_t *h_p = NULL if hash_out is None or n == 0 else &hash_out[0]
    cdef Py_ssize_t i, err_index = -1
    cdef int64_t straddling = 0, malformed = 0
    cdef int status = ST_OK, bad
    cdef uint32_t h, b
    if n == 0:
        return STATUS_OK, -1, 0, 0
    with nogil:
        if hi_p == NULL and st_p == NULL and fl_p == NULL and bk_p == NULL and h_p == NULL \
                and slot_p != NULL:
            # The hot path of a conforming producer: every entry stamped, only owners wanted.
            for i in range(n):
                slot_p[i] = own[tab[lo_p[i]]]
        elif hi_p != NULL and st_p == NULL and fl_p == NULL and bk_p == NULL and h_p == NULL \
                and slot_p != NULL and not mark:
            # Stamps checked (min <= max) and straddles counted: two table loads per entry.
            for i in range(n):
                h = lo_p[i]
                if hi_p[i] < h:
                    status = ST_MIN_ABOVE_MAX
                    err_index = i
                    break
                b = tab[h]
                straddling += tab[hi_p[i]] != b
                slot_p[i] = own[b]
        else:
            for i in range(n):
                bad = ST_OK
                if st_p == NULL or st_p[i]:
                    h = lo_p[i]
                    if fl_p != NULL and fl_p[i]:
                        bad = ST_OUT_OF_RANGE
                    elif hi_p != NULL and hi_p[i] < h:
                        bad = ST_MIN_ABOVE_MAX
                    b = tab[h]
                    if bad == ST_OK and hi_p != NULL and tab[hi_p[i]] != b:
                        straddling += 1
                else:
                    h = key_p[i] & 0xFFFF
                    b = tab[h]
                if bad != ST_OK:
                    if not mark:
                        status = bad
                        err_index = i
                        break
                    malformed += 1
                    if slot_p != NULL:
                        slot_p[i] = -2
                    if bk_p != NULL:
                        bk_p[i] = -1
                    if h_p != NULL:
                        h_p[i] = 0
                    continue
                if slot_p != NULL:
                    slot_p[i] = own[b]
                if bk_p != NULL:
                    bk_p[i] = <int32_t>b
                if h_p != NULL:
                    # 0 means "no hash" to a Pulsar broker: the exposed hash of 0 is 1.
                    h_p[i] = <uint16_t>(h if h != 0 else 1)
    return status, err_index, straddling, malformed


def fits(const uint16_t[::1] splits not None, const uint16_t[::1] table,
         const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max not None,
         const uint8_t[::1] flagged, uint8_t[::1] out not None):
    """``out[i] = bucket_of(hash_min[i]) == bucket_of(hash_max[i])``; returns ``(status, index)``.

    Uses ``table`` (``Buckets.lookup_table()``) when given, else searches ``splits`` per entry.
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    check_len(hash_max, n, "hash_max")
    check_len(flagged, n, "flagged")
    check_len(out, n, "out")
    cdef const uint16_t *sp = u16_ptr(splits)
    cdef uint32_t ns = <uint32_t>splits.shape[0]
    cdef const uint16_t *lo_p = u16_ptr(hash_min)
    cdef const uint16_t *hi_p = u16_ptr(hash_max)
    cdef const uint8_t *fl_p = u8_ptr(flagged)
    cdef uint8_t *o = NULL if n == 0 else &out[0]
    cdef const uint16_t *tab = NULL
    if table is not None:
        if table.shape[0] != 65536:
            raise ValueError(f"a bucket table has 65536 items, not {table.shape[0]}")
        tab = &table[0]
    cdef Py_ssize_t i, err_index = -1
    cdef int status = ST_OK
    if n == 0:
        return STATUS_OK, -1
    with nogil:
        for i in range(n):
            if fl_p != NULL and fl_p[i]:
                status = ST_OUT_OF_RANGE
                err_index = i
                break
            if hi_p[i] < lo_p[i]:
                status = ST_MIN_ABOVE_MAX
                err_index = i
                break
            if tab != NULL:
                o[i] = tab[lo_p[i]] == tab[hi_p[i]]
            else:
                o[i] = bc_bucket_of(sp, ns, lo_p[i]) == bc_bucket_of(sp, ns, hi_p[i])
    return status, err_index


def spread(int32_t[::1] owner not None, Py_ssize_t consumers):
    """Fill ``owner`` (one slot per bucket) with the spread of DESIGN.md §3.5.

    Consumer j of k owns buckets ``[j*N//k, (j+1)*N//k)``; with no consumer every bucket gets -1.
    """
    cdef Py_ssize_t n = owner.shape[0], j, b, lo, hi
    if consumers < 0:
        raise ValueError(f"consumers must be >= 0, not {consumers}")
    with nogil:
        if consumers == 0:
            for b in range(n):
                owner[b] = -1
        else:
            for j in range(consumers):
                lo = (j * n) // consumers
                hi = ((j + 1) * n) // consumers
                for b in range(lo, hi):
                    owner[b] = <int32_t>j
