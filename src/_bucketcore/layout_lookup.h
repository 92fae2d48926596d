/* Lookups over a layout of several segments, each with its boundary list (docs/design.md,
 * "Boundary lists"): the bucket of a message's bucket hash in its segment's list, by search
 * (lookup.h) or by the list's 64 Ki table, and the segment of a global bucket index (a segment's
 * buckets are numbered on from the one before's: global bucket = its first global bucket + bucket). */
#ifndef BUCKETCORE_LAYOUT_LOOKUP_H
#define BUCKETCORE_LAYOUT_LOOKUP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lookup.h"

/* out[i] = bucket of bucket_hash[i] in segment seg[i]'s splits (seg NULL: every message in
 * segment 0), by search; segment s's ascending splits are splits[split_off[s]:split_off[s + 1]]. */
static inline void bc_buckets_search(size_t n, const int32_t *seg, const uint16_t *bucket_hash,
                                     const uint16_t *splits, const int64_t *split_off, int32_t *out)
{
    if (seg == NULL) {
        const uint16_t *sp = splits + split_off[0];
        uint32_t ns = (uint32_t)(split_off[1] - split_off[0]);
        for (size_t i = 0; i < n; i++)
            out[i] = (int32_t)bc_bucket_of(sp, ns, bucket_hash[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t s = seg[i];
        out[i] = (int32_t)bc_bucket_of(splits + split_off[s], (uint32_t)(split_off[s + 1] - split_off[s]),
                                       bucket_hash[i]);
    }
}

/* out[i] = tables[seg[i]][bucket_hash[i]] (seg NULL: tables[0]): each segment's 64 Ki table of
 * buckets (Buckets.lookup_table), for long columns, where a table load beats the search's
 * mispredicted compares. */
static inline void bc_buckets_table(size_t n, const int32_t *seg, const uint16_t *bucket_hash,
                                    const uint16_t *const *tables, int32_t *out)
{
    if (seg == NULL) {
        const uint16_t *t = tables[0];
        for (size_t i = 0; i < n; i++)
            out[i] = t[bucket_hash[i]];
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = tables[seg[i]][bucket_hash[i]];
}

/* The segments of a layout, for finding the segment of a global bucket index. */
typedef struct bc_segment_map {
    int64_t *first_bucket; /* nseg + 1: segment s's first global bucket; the last is the total */
    int64_t nseg;
    int64_t uniform;   /* every segment's bucket count when they are all equal, else 0 */
    int uniform_shift; /* log2(uniform) when uniform is a power of two, else -1 */
} bc_segment_map;

/* A map of nseg >= 1 segments over first_bucket[0..nseg] (ascending, copied). -1: no memory. */
static inline int bc_segment_map_init(bc_segment_map *m, const int64_t *first_bucket, int64_t nseg)
{
    m->first_bucket = (int64_t *)malloc((size_t)(nseg + 1) * sizeof(int64_t));
    if (m->first_bucket == NULL)
        return -1;
    memcpy(m->first_bucket, first_bucket, (size_t)(nseg + 1) * sizeof(int64_t));
    m->nseg = nseg;
    m->uniform = first_bucket[1] - first_bucket[0];
    for (int64_t s = 0; s < nseg; s++)
        if (first_bucket[s + 1] - first_bucket[s] != m->uniform)
            m->uniform = 0;
    m->uniform_shift = -1;
    if (m->uniform > 0 && (m->uniform & (m->uniform - 1)) == 0) {
        m->uniform_shift = 0;
        while (((int64_t)1 << m->uniform_shift) != m->uniform)
            m->uniform_shift++;
    }
    return 0;
}

static inline void bc_segment_map_free(bc_segment_map *m)
{
    free(m->first_bucket);
    m->first_bucket = NULL;
}

/* The segment of global bucket g (0 <= g < the total): a shift or a division when every segment
 * has as many buckets (a power of two, as layouts mostly have, or not), else a bisection over the
 * segments' first buckets. Global bucket indices are 32-bit, so is the division (several times
 * faster than a 64-bit one on some CPUs). */
static inline int64_t bc_segment_of(const bc_segment_map *m, int64_t g)
{
    if (m->uniform_shift >= 0)
        return g >> m->uniform_shift;
    if (m->uniform)
        return (int64_t)((uint32_t)g / (uint32_t)m->uniform);
    int64_t lo = 0, n = m->nseg;
    while (n > 1) {
        int64_t half = n >> 1;
        if (m->first_bucket[lo + half] <= g)
            lo += half;
        n -= half;
    }
    return lo;
}

#endif
