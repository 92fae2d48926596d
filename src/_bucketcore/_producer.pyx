# cython: language_level=3
"""The producer's entry points from keys: hash, route and group a key stream a chunk at a time.

``fused_entries`` takes each chunk of keys through describing, hashing (multi-lane), routing
(route.h) and the batch state machine (_grouping) while it is in L1; ``hashed_entries`` does the
same from precomputed hashes; ``route_keys`` / ``place_keyless`` route parts of a stream on
several threads for one grouping pass afterwards; ``bucket_index`` looks up the buckets of routed
messages for the general path (layout_lookup.h).
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memchr
from cpython.list cimport PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc

cimport numpy as cnp

from _bucketcore._status cimport *
from _bucketcore._keycolumns cimport CHUNK, KeyColumn, bc_key, objects_column
from _bucketcore._hashing cimport bc_scratch_free, hash_run, hash_view_run
from _bucketcore._options cimport bc_errors_values, bc_option_code, bc_policy_values
from _bucketcore._grouping cimport (
    GroupState, WholeStream, chunk_room, gs_scan, optional_i32, optional_i64,
)
from _bucketcore._routing cimport BC_ROUTE_LEGACY, Router, bc_fill_keyless, bc_route

cdef extern from "layout_lookup.h" nogil:
    void bc_buckets_search(size_t n, const int32_t *seg, const uint16_t *bucket_hash, const uint16_t *splits,
                           const int64_t *split_off, int32_t *out)
    void bc_buckets_table(size_t n, const int32_t *seg, const uint16_t *bucket_hash, const uint16_t **tables,
                          int32_t *out)

cnp.import_array()


cdef class KeyChunks:
    """Reads a KeyColumn a chunk at a time: describes, hashes (multi-lane) and routes each chunk
    into caller-given columns. The scratch buffers are allocated once."""

    def __cinit__(self, Py_ssize_t longest):
        self.cap = chunk_room(longest)
        # one block: the descriptors, then the raw hashes, then the has-key flags
        self.keys = <bc_key *>PyMem_RawMalloc(self.cap * (sizeof(bc_key) + sizeof(uint32_t) + sizeof(uint8_t)))
        if self.keys == NULL:
            raise MemoryError()
        self.raw = <uint32_t *>(self.keys + self.cap)
        self.has_key = <uint8_t *>(self.raw + self.cap)
        self.out.raw = self.raw
        self.out.has_key = self.has_key
        self.out.segment_hash = NULL
        self.out.bucket_hash = NULL
        self.scratch.buf = NULL
        self.scratch.cap = 0

    def __dealloc__(self):
        bc_scratch_free(&self.scratch)
        PyMem_RawFree(self.keys)

    cdef int hash_chunk(self, KeyColumn col, Py_ssize_t cpos, Py_ssize_t m, bint replace,
                        Py_ssize_t *err_index) except -2:
        """Hash keys [cpos, cpos+m) of col into self.raw / self.has_key; the GIL is held only
        while an object column's chunk is described. On failure *err_index is the key's
        position in the column."""
        cdef int status
        cdef Py_ssize_t out_index = -1
        if m > self.cap:
            raise ValueError(f"a chunk of {m} keys is longer than the buffers ({self.cap})")
        if not col.needs_gil:
            with nogil:
                status = hash_view_run(&col.view, cpos, m, self.keys, replace, True, &self.scratch,
                                       &self.out, 0, err_index)
            return status
        status = col.describe_objects(cpos, m, self.keys, err_index)
        if status == BC_OK:
            with nogil:
                status = hash_run(self.keys, m, col.view.plain, NULL, 0, replace, True, &self.scratch,
                                  &self.out, 0, &out_index)
        col.release()
        if out_index >= 0:
            err_index[0] = cpos + out_index
        return status


def route_keys(Router router, KeyColumn col, Py_ssize_t lo, Py_ssize_t hi, bint replace,
               int32_t[::1] global_bucket, uint16_t[::1] bucket_hash):
    """Hash and route keys [lo, hi) of a column into global bucket indexes and bucket hashes
    (hi - lo values each). Keyless messages are left at index -1 for place_keyless. Several
    threads may route disjoint parts at once. Returns (status, index of the failing key in the
    column)."""
    if global_bucket.shape[0] != hi - lo or bucket_hash.shape[0] != hi - lo:
        raise ValueError("output columns do not match the key range")
    cdef KeyChunks chunks = KeyChunks(hi - lo)
    cdef Py_ssize_t cpos = lo, m, done, err_index = -1
    cdef int64_t rr = 0
    cdef int status = BC_OK
    while cpos < hi:
        m = hi - cpos if hi - cpos < CHUNK else CHUNK
        status = chunks.hash_chunk(col, cpos, m, replace, &err_index)
        if status != BC_OK:
            break
        done = cpos - lo
        with nogil:
            bc_route(&router.rule, m, chunks.raw, chunks.has_key, True, &rr, &global_bucket[done], &bucket_hash[done])
        cpos += m
    if status == BC_ERR_NOMEM:
        raise MemoryError()
    return status, err_index


def place_keyless(Router router, int32_t[::1] global_bucket, int64_t round_robin):
    """Give the keyless messages route_keys deferred (index -1) their round-robin segment's
    keyless bucket in send order, starting at round_robin; returns the next position."""
    cdef int64_t r = router.first_turn(round_robin)
    if global_bucket.shape[0]:
        with nogil:
            r = bc_fill_keyless(&router.rule, &global_bucket[0], global_bucket.shape[0], r)
    return r


cdef int check_router(Router router, WholeStream stream) except -1:
    """The stream's segments must be the router's (the same first global bucket indexes); a
    stream remembers the router it last matched (both are fixed once made), so a plan's calls
    compare them once."""
    cdef Py_ssize_t s
    cdef GroupState *st = &stream.st
    if stream.router_checked is router:
        return 0
    if st.nseg != router.nsegments:
        raise ValueError("the router's bucket tables do not match the segments")
    for s in range(st.nseg + 1):
        if st.segs[s].first_bucket != router.rule.first_bucket[s]:
            raise ValueError("the router's bucket tables do not match the segments")
    stream.router_checked = router
    return 0


cdef KeyChunks stream_reader(WholeStream stream, Py_ssize_t n):
    """The key reader kept with a stream state (used by one call at a time, like the state), made
    or enlarged for a stream of n keys."""
    cdef KeyChunks chunks = <KeyChunks>stream.key_reader if stream.key_reader is not None else None
    if chunks is None or chunks.cap < chunk_room(n):
        chunks = KeyChunks(n)
        stream.key_reader = chunks
    return chunks


cdef int scan_keys(list columns, Py_ssize_t n, const int64_t *size_ptr, WholeStream stream, int policy,
                   int64_t max_messages, int64_t max_bytes, bint replace, Router router, int64_t *rr,
                   Py_ssize_t *err_index, int *rc) except -2:
    """fused_entries' scan: begin the stream and feed it every key of the columns (n in all),
    a chunk at a time. Returns the hashing status (err_index: the failing key's stream
    position); *rc is the scan's result for WholeStream.finish."""
    cdef Py_ssize_t pos = 0, cpos, m
    cdef KeyColumn col
    cdef int status = BC_OK
    check_router(router, stream)
    rr[0] = router.first_turn(rr[0])
    stream.begin(policy, max_messages, max_bytes, n)
    cdef GroupState *st = &stream.st
    cdef KeyChunks chunks = stream_reader(stream, n)
    rc[0] = 0
    for col in columns:
        cpos = 0
        while cpos < col.length:
            m = col.length - cpos if col.length - cpos < CHUNK else CHUNK
            status = chunks.hash_chunk(col, cpos, m, replace, err_index)
            if status != BC_OK:
                err_index[0] += pos - cpos  # the key's stream position
                break
            with nogil:
                bc_route(&router.rule, m, chunks.raw, NULL if col.view.plain else chunks.has_key, False, rr,
                         stream.global_bucket, stream.bucket_hash)
                rc[0] = gs_scan(st, m, stream.global_bucket, stream.bucket_hash,
                                size_ptr + pos if size_ptr != NULL else NULL)
            if rc[0] != 0:
                break
            cpos += m
            pos += m
        if status != BC_OK or rc[0] != 0:
            break
    if status == BC_ERR_NOMEM:
        raise MemoryError()
    return status


def fused_entries(list columns, object sizes, WholeStream stream, int policy,
                  int64_t max_messages, int64_t max_bytes, bint replace, Router router,
                  int64_t round_robin):
    """Hash, route, look up and group a key stream a chunk at a time, placing messages as their
    entries are emitted.

    Each chunk of keys is described, hashed (multi-lane), routed, looked up in its segment's
    64 Ki bucket table (Buckets.lookup_table) and fed to the batch state machine while it is in
    L1; an emitted entry's messages are copied to ``order`` at once (GroupState.order), so no
    per-message column outlives its chunk and there is no placement pass. The GIL is released
    except while an object column's chunk is described. ``stream``: the batch state over the
    router's segments (a layout's, reused call after call; its next stream begins here).

    Returns (status, err_index, columns or None, next_round_robin): status is a hashing
    STATUS_* code for the first bad key (err_index its stream position); the columns are those
    of group_entries: (seg, bucket, hash_min, hash_max, start, count, nbytes, order).
    """
    cdef Py_ssize_t n = 0
    cdef KeyColumn col
    for col in columns:
        n += col.length
    cdef const int64_t *size_ptr = optional_i64(sizes, n, "sizes")
    cdef int64_t rr = round_robin
    cdef Py_ssize_t err_index = -1
    cdef int rc = 0
    cdef int status = scan_keys(columns, n, size_ptr, stream, policy, max_messages, max_bytes, replace, router,
                                &rr, &err_index, &rc)
    if status != BC_OK:
        return status, err_index, None, rr
    return BC_OK, -1, stream.finish(rc), rr


cdef inline bint plain_int(object value, int64_t lo, int64_t *out):
    """Whether value is an int (exactly) in [lo, 2**63-1]; then *out is it."""
    cdef int overflow = 0
    cdef long long x
    if type(value) is not int:
        return False
    x = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow != 0 or x < lo:
        return False
    out[0] = x
    return True


@cython.final
cdef class ShortEntries:
    """bucket_entries' path for its common call, one per plan: a list of keys, no sizes, one
    thread, every option a plain value (ints as ``int``, ``encrypted`` a ``bool``, ``policy``
    and ``errors`` one of their strings). It runs the one-thread kernel of the general path on a
    kept stream state and returns the same table; for any other argument, or a key the kernel
    refuses, it returns None and changes nothing, and the general path checks and raises.

    Parameters
    ----------
    router : Router
        The plan's router.
    streams : list of WholeStream
        The plan's kept stream states (taken and given back here as by its own calls).
    bucket_offsets, segment_ids : numpy.ndarray of int64
        The plan's segments, for a new stream state.
    make_table : callable
        ``EntryTable._of_frozen``.
    longest : int
        Lists of this many keys or more take the general path (which may use threads).
    kept : int
        How many stream states the plan keeps.
    """

    cdef Router router
    cdef list streams
    cdef object bucket_offsets
    cdef object segment_ids
    cdef object make_table
    cdef Py_ssize_t longest
    cdef Py_ssize_t kept

    def __init__(self, Router router, list streams, object bucket_offsets, object segment_ids,
                 object make_table, Py_ssize_t longest, Py_ssize_t kept):
        self.router = router
        self.streams = streams
        self.bucket_offsets = bucket_offsets
        self.segment_ids = segment_ids
        self.make_table = make_table
        self.longest = longest
        self.kept = kept

    def entries(self, object keys, object max_messages, object max_bytes, object policy, object encrypted,
                object round_robin, object errors):
        """The EntryTable of ``bucket_entries(keys, layout, max_messages=..., ...)``, or None
        when the call is not of the common shape (or a key is refused): nothing changed then."""
        cdef int64_t maxm, maxb, rr
        cdef int code, code_replace
        cdef bint replace
        cdef Py_ssize_t n, err_index = -1
        cdef int rc = 0, status
        cdef WholeStream stream
        if type(keys) is not list:
            return None
        n = PyList_GET_SIZE(keys)
        if n >= self.longest:
            return None
        if not plain_int(max_messages, 1, &maxm) or not plain_int(max_bytes, 1, &maxb):
            return None
        if not plain_int(round_robin, 0, &rr):
            return None
        code = bc_option_code(policy, bc_policy_values)  # the codes of POLICY_SHARED, POLICY_PER_BUCKET
        if code < 0:
            return None
        if encrypted is True:
            maxm = 1
        elif encrypted is not False:
            return None
        code_replace = bc_option_code(errors, bc_errors_values)
        if code_replace < 0:
            return None
        replace = code_replace
        columns = [objects_column(keys)]
        try:
            stream = <WholeStream>self.streams.pop()
        except IndexError:
            stream = WholeStream(self.bucket_offsets, 0, 1, 1, 0)
            stream.name_segments(self.segment_ids)
        try:
            status = scan_keys(columns, n, NULL, stream, code, maxm, maxb, replace, self.router, &rr,
                               &err_index, &rc)
            if status != BC_OK:
                return None
            seg, bkt, hmin, hmax, start, count, nbytes, order = stream.finish(rc)
        finally:
            if len(self.streams) < self.kept:
                self.streams.append(stream)
        return self.make_table(seg, bkt, hmin, hmax, start, count, nbytes, order, rr)


def hashed_entries(const uint16_t[::1] segment_hash, const uint16_t[::1] bucket_hash,
                   const uint8_t[::1] has_key, object sizes, WholeStream stream, int policy,
                   int64_t max_messages, int64_t max_bytes, Router router, int64_t round_robin):
    """Route precomputed hashes and group them a chunk at a time, as fused_entries does keys
    (bucket_entries over KeyHashes): each message is routed by its segment hash, looked up by its
    bucket hash and stamped with it, the columns read as given. Not for a legacy router, which
    routes by the whole raw hash. Returns (the columns of group_entries, next_round_robin)."""
    cdef Py_ssize_t n = segment_hash.shape[0], pos = 0, m, i
    if bucket_hash.shape[0] != n or has_key.shape[0] != n:
        raise ValueError("the hash columns differ in length")
    if router.rule.mode == BC_ROUTE_LEGACY:
        raise ValueError("a legacy router routes by the raw hash")
    check_router(router, stream)
    cdef const int64_t *size_ptr = optional_i64(sizes, n, "sizes")
    cdef int64_t rr = router.first_turn(round_robin)
    stream.begin(policy, max_messages, max_bytes, n)
    cdef GroupState *st = &stream.st
    cdef uint32_t key[CHUNK]
    cdef int rc = 0
    cdef bint keyless
    with nogil:
        while pos < n and rc == 0:
            m = n - pos if n - pos < CHUNK else CHUNK
            # the router's key: segment hash above, bucket hash below
            for i in range(m):
                key[i] = (<uint32_t>segment_hash[pos + i] << 16) | bucket_hash[pos + i]
            keyless = memchr(&has_key[pos], 0, <size_t>m) != NULL
            bc_route(&router.rule, m, key, &has_key[pos] if keyless else NULL, False, &rr, stream.global_bucket,
                     stream.bucket_hash)
            rc = gs_scan(st, m, stream.global_bucket, stream.bucket_hash, size_ptr + pos if size_ptr != NULL else NULL)
            pos += m
    return stream.finish(rc), rr


def bucket_index(object seg, const uint16_t[::1] bucket_hash, const uint16_t[::1] splits,
                 const int64_t[::1] split_offsets, int32_t[::1] out, object tables=None):
    """out[i] = bucket of bucket_hash[i] in segment seg[i] (seg None: one segment).

    Segment s's ascending splits are splits[split_offsets[s]:split_offsets[s+1]]; seg values
    must be valid segment indexes (the caller routed them). ``tables``: optional sequence of each
    segment's 65536-entry uint16 lookup table (Buckets.lookup_table), used instead of the search.
    The lookups are layout_lookup.h's.
    """
    cdef Py_ssize_t n = bucket_hash.shape[0], nseg = split_offsets.shape[0] - 1, s
    if out.shape[0] != n:
        raise ValueError(f"out has {out.shape[0]} values for {n} messages")
    cdef const int32_t *segp = optional_i32(seg, n, "seg")
    cdef const uint16_t **tp = NULL
    cdef const uint16_t[::1] table
    if tables is not None:
        if len(tables) != nseg:
            raise ValueError(f"{len(tables)} lookup tables for {nseg} segments")
        for s in range(nseg):
            table = tables[s]
            if table.shape[0] != 65536:
                raise ValueError(f"lookup table {s} has {table.shape[0]} entries, not 65536")
    if n == 0:
        return
    if tables is not None:
        tp = <const uint16_t **>PyMem_RawMalloc(nseg * sizeof(uint16_t *))
        if tp == NULL:
            raise MemoryError()
        for s in range(nseg):
            table = tables[s]
            tp[s] = &table[0]
        # the tables stay referenced by ``tables`` for the call
        with nogil:
            bc_buckets_table(n, segp, &bucket_hash[0], tp, &out[0])
        PyMem_RawFree(tp)
        return
    # an empty splits view still has a data pointer; bc_bucket_of never reads it when n == 0
    with nogil:
        bc_buckets_search(n, segp, &bucket_hash[0], &splits[0], &split_offsets[0], &out[0])
