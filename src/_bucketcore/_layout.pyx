# cython: language_level=3
"""Bucket and segment lookup kernels, and the balanced-boundary solver's inner loops.

bucketcore.layout validates every argument (dtypes, shapes, ranges of the boundary lists)
before it calls these; the kernels only check what they read anyway (the range of the values
of a wider-than-16-bit hash column, block by block while the block is in cache; the weights
of the balanced-boundary histograms).
Every loop runs with the GIL released and builds no Python object per element.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdint cimport INT64_MAX
from libc.float cimport DBL_MAX
from libc.string cimport memcpy, memset

cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)

from _bucketcore._routing cimport bc_legacy_slot, bc_next_turn, bc_range_segment

# How bucket_of maps hashes to buckets (chosen per call by bucketcore.buckets).
cpdef enum LookupMethod:
    METHOD_CONST = 0    # N == 1: every hash is bucket 0
    METHOD_COMPARE = 1  # N == 2: one comparison against the single split
    METHOD_SEARCH = 2   # binary search over the splits (lookup.h's bc_bucket_of), for small columns
    METHOD_TABLE = 3    # one load from a 64 Ki uint16 table: the bucket of every hash value

cdef enum:
    N_TABLE = 65536
    BLOCK = 4096   # hashes range-checked at a time (fits L1 for every dtype)

# Eight numpy bools (0/1 bytes) that are all True, read as one word.
cdef uint64_t ALL_KEYED = 0x0101010101010101ULL

ctypedef fused hash_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    int8_t
    int16_t
    int32_t
    int64_t


cdef inline Py_ssize_t first_out_of_range(const hash_t *h, Py_ssize_t n) noexcept nogil:
    """Index of the first value outside 0..0xFFFF in h[0:n], or -1.

    A vectorisable OR over the block first (negative values wrap to huge unsigned ones), then a
    scan only when something is wrong.
    """
    cdef Py_ssize_t i
    cdef uint64_t acc = 0
    for i in range(n):
        acc |= (<uint64_t>h[i]) >> 16
    if acc == 0:
        return -1
    for i in range(n):
        if (<uint64_t>h[i]) >> 16:
            return i
    return -1


cdef inline void lookup_block(const hash_t *h, Py_ssize_t n, int32_t *out, int method,
                              const uint16_t *s, uint32_t nsplits, const uint16_t *t,
                              uint32_t first) noexcept nogil:
    """out[i] = bucket of h[i] by the given method; every h[i] is already known to be 16-bit."""
    cdef Py_ssize_t i
    if method == METHOD_CONST:
        memset(out, 0, n * sizeof(int32_t))
    elif method == METHOD_COMPARE:
        for i in range(n):
            out[i] = <uint32_t>h[i] >= first
    elif method == METHOD_TABLE:
        for i in range(n):
            out[i] = t[<uint32_t>h[i]]
    else:
        for i in range(n):
            out[i] = <int32_t>bc_bucket_of(s, nsplits, <uint32_t>h[i])


def build_table(const uint16_t[::1] splits, uint16_t[::1] table):
    """table[h] = bucket_of(h) for every h in 0..0xFFFF."""
    if table.shape[0] != N_TABLE:
        raise ValueError("the lookup table must have 65536 entries")
    cdef Py_ssize_t n = splits.shape[0], b, h, start, end
    cdef uint16_t acc
    with nogil:
        if n <= 16384:
            # Few long runs: fill each bucket's range with its index.
            start = 0
            for b in range(n + 1):
                if b < n:
                    end = splits[b]
                else:
                    end = N_TABLE
                for h in range(start, end):
                    table[h] = <uint16_t>b
                start = end
        else:
            # Many short runs: mark each split, then a running count (splits are distinct).
            memset(&table[0], 0, N_TABLE * sizeof(uint16_t))
            for b in range(n):
                table[splits[b]] = 1
            acc = 0
            for h in range(N_TABLE):
                acc += table[h]
                table[h] = acc


def bucket_of(const uint16_t[::1] splits, const hash_t[::1] hashes, int32_t[::1] out,
              const uint16_t[::1] table, int method):
    """out[i] = number of splits <= hashes[i]; returns the index of the first hash outside
    0..0xFFFF (out is then partly written) or -1.

    table is required for METHOD_TABLE and ignored otherwise (pass None).
    """
    cdef Py_ssize_t n = hashes.shape[0]
    cdef uint32_t nsplits = <uint32_t>splits.shape[0]
    cdef const uint16_t *s = &splits[0] if nsplits else NULL
    cdef const uint16_t *t = NULL
    cdef uint32_t first = 0
    cdef Py_ssize_t bad = -1
    if out.shape[0] != n:
        raise ValueError("out must have one slot per hash")
    if method == METHOD_TABLE:
        if table is None or table.shape[0] != N_TABLE:
            raise ValueError("METHOD_TABLE needs the 65536-entry table")
        t = &table[0]
    elif method == METHOD_COMPARE:
        if nsplits != 1:
            raise ValueError("METHOD_COMPARE needs exactly one split")
        first = splits[0]
    elif method == METHOD_CONST:
        if nsplits != 0:
            raise ValueError("METHOD_CONST needs an empty boundary list")
    elif method != METHOD_SEARCH:
        raise ValueError(f"unknown bucket_of method {method}")
    if n == 0:
        return -1
    cdef Py_ssize_t start = 0, m, k
    with nogil:
        if hash_t is uint8_t or hash_t is uint16_t:
            # Every value is a valid hash: one tight loop (CONST and COMPARE vectorise).
            lookup_block(&hashes[0], n, &out[0], method, s, nsplits, t, first)
        else:
            # Wider columns: range-check a cache-sized block, then look it up.
            while start < n:
                m = n - start if n - start < BLOCK else BLOCK
                k = first_out_of_range(&hashes[start], m)
                if k >= 0:
                    bad = start + k
                    break
                lookup_block(&hashes[start], m, &out[start], method, s, nsplits, t, first)
                start += m
    return bad


def route_keyed(const uint16_t[::1] starts, const uint16_t[::1] segment_hash,
                const uint8_t[::1] has_key, int32_t[::1] out, const uint16_t[::1] table,
                int64_t round_robin, int64_t n_active):
    """Index into the active segments (sorted by hash_start) of every message.

    starts are the hash_start values of active segments 1..n-1 (segment 0 starts at 0), so a
    keyed message's index is bucket_of over them, by the table when one is given; the i-th
    keyless message goes to (round_robin + i) % n_active. Returns the next round-robin position.
    """
    cdef Py_ssize_t i, n = segment_hash.shape[0]
    cdef uint32_t nstarts = <uint32_t>starts.shape[0]
    cdef const uint16_t *s = &starts[0] if nstarts else NULL
    cdef const uint16_t *t = NULL
    cdef int64_t rr = round_robin
    cdef Py_ssize_t end
    cdef uint64_t word
    if out.shape[0] != n or has_key.shape[0] != n:
        raise ValueError("segment_hash, has_key and out must have the same length")
    if n_active != <int64_t>nstarts + 1 or not 0 <= round_robin < n_active:
        raise ValueError("inconsistent active segment count or round-robin position")
    if table is not None:
        if table.shape[0] != N_TABLE:
            raise ValueError("the lookup table must have 65536 entries")
        t = &table[0]
    if n == 0:
        return rr
    with nogil:
        if t != NULL:
            for i in range(n):
                out[i] = t[segment_hash[i]]
        elif nstarts == 0:
            memset(&out[0], 0, n * sizeof(int32_t))
        else:
            for i in range(n):
                out[i] = <int32_t>bc_range_segment(s, nstarts, segment_hash[i])
        # Keyless messages are rare: a second pass, eight flags at a time (numpy bools are 0/1
        # bytes, so an all-keyed word is 0x0101010101010101), keeps the lookup loop tight.
        i = 0
        while i < n:
            if i + 8 <= n:
                memcpy(&word, &has_key[i], 8)
                if word == ALL_KEYED:
                    i += 8
                    continue
            end = i + 8 if i + 8 <= n else n
            while i < end:
                if not has_key[i]:
                    out[i] = <int32_t>rr
                    rr = bc_next_turn(rr, n_active)
                i += 1
    return rr


def route_legacy(const uint32_t[::1] raw, const uint8_t[::1] has_key, int32_t[::1] out,
                 const int32_t[::1] legacy_to_active, int64_t round_robin):
    """v4 partitioned-topic routing: signSafeMod(raw & 0x7FFFFFFF, n) over the n legacy
    segments in layout order, mapped to active-segment indexes; keyless round-robin over the
    same order. Returns the next round-robin position."""
    cdef Py_ssize_t i, n = raw.shape[0]
    cdef uint32_t parts = <uint32_t>legacy_to_active.shape[0]
    cdef int64_t rr = round_robin
    if out.shape[0] != n or has_key.shape[0] != n:
        raise ValueError("raw, has_key and out must have the same length")
    if parts == 0 or not 0 <= round_robin < parts:
        raise ValueError("inconsistent legacy segment count or round-robin position")
    if n == 0:
        return rr
    with nogil:
        for i in range(n):
            if has_key[i]:
                out[i] = legacy_to_active[bc_legacy_slot(raw[i], parts)]
            else:
                out[i] = legacy_to_active[rr]
                rr = bc_next_turn(rr, parts)
    return rr


def gather_ids(const int32_t[::1] index, const int64_t[::1] ids, int64_t[::1] out):
    """out[i] = ids[index[i]] (segment id of each routed message); indexes come from a route kernel."""
    cdef Py_ssize_t i, n = index.shape[0]
    if out.shape[0] != n:
        raise ValueError("out must have one slot per index")
    with nogil:
        for i in range(n):
            out[i] = ids[index[i]]


# --- balanced boundaries: greedy linear partition over the 65,536-bin prefix sums ---------------

ctypedef fused prefix_t:
    int64_t
    double


cdef inline Py_ssize_t furthest(const prefix_t *p, Py_ssize_t i, Py_ssize_t nbins,
                                prefix_t limit) noexcept nogil:
    """Largest j in i..nbins with p[j] - p[i] <= limit (the cost is monotone in j).

    Galloping then bisecting: O(log(group width)), so many narrow groups stay cheap.
    """
    cdef Py_ssize_t lo = i, hi, mid, step = 1
    cdef prefix_t base = p[i]
    # invariant: cost(lo) <= limit; find hi with cost(hi) > limit, or return nbins
    while True:
        hi = lo + step
        if hi >= nbins:
            if p[nbins] - base <= limit:
                return nbins
            hi = nbins
            break
        if p[hi] - base > limit:
            break
        lo = hi
        step <<= 1
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        if p[mid] - base <= limit:
            lo = mid
        else:
            hi = mid
    return lo


def greedy_groups(const prefix_t[::1] prefix, prefix_t limit, int64_t max_groups,
                  int64_t[::1] starts):
    """Left-to-right greedy partition of the bins into groups of cost p[j] - p[i] <= limit,
    each group as long as possible. Returns the number of groups, or -1 when a single bin
    exceeds limit or more than max_groups would be needed. When starts is not None (length
    >= max_groups) it receives each group's first bin.

    Greedy is optimal in the number of groups for any cost that grows when a range grows,
    which the prefix difference does for non-negative bins, in integers and in floating point.
    """
    cdef Py_ssize_t nbins = prefix.shape[0] - 1, i = 0, j
    cdef int64_t groups = 0
    cdef const prefix_t *p = &prefix[0]
    cdef int64_t *out = NULL
    if nbins < 1:
        raise ValueError("prefix needs at least two entries")
    if starts is not None:
        if starts.shape[0] < max_groups:
            raise ValueError("starts must have room for max_groups groups")
        out = &starts[0]
    with nogil:
        while i < nbins:
            j = furthest(p, i, nbins, limit)
            if j == i or groups == max_groups:
                groups = -1
                break
            if out != NULL:
                out[groups] = i
            groups += 1
            i = j
    return groups


def histogram(const uint16_t[::1] hashes, int64_t[::1] bins):
    """bins[h] += 1 for every hash (np.bincount without widening the column to intp first)."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    if bins.shape[0] != N_TABLE:
        raise ValueError("bins must have 65536 entries")
    with nogil:
        for i in range(n):
            bins[hashes[i]] += 1


def weighted_histogram(const uint16_t[::1] hashes, const int64_t[::1] weights, int64_t[::1] bins):
    """bins[h] += weights[i] for every i, exactly, in int64. Returns the index of the first
    weight that is negative or makes the total (which bounds every bin) overflow, or -1."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef int64_t total = 0, w
    cdef Py_ssize_t bad = -1
    if weights.shape[0] != n or bins.shape[0] != N_TABLE:
        raise ValueError("weights must match hashes and bins must have 65536 entries")
    with nogil:
        for i in range(n):
            w = weights[i]
            if w < 0 or w > INT64_MAX - total:
                bad = i
                break
            total += w
            bins[hashes[i]] += w
    return bad


def weighted_histogram_f64(const uint16_t[::1] hashes, const double[::1] weights, double[::1] bins):
    """bins[h] += weights[i] in input order (deterministic rounding). Returns the index of the
    first weight that is negative, NaN or infinite, or -1."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef double w
    cdef Py_ssize_t bad = -1
    if weights.shape[0] != n or bins.shape[0] != N_TABLE:
        raise ValueError("weights must match hashes and bins must have 65536 entries")
    with nogil:
        for i in range(n):
            w = weights[i]
            if not (w >= 0.0 and w <= DBL_MAX):
                bad = i
                break
            bins[hashes[i]] += w
    return bad
