/* The routing rule of a producer (docs/design.md, "Segments, layouts and routing"), written once
 * for every kernel that routes:
 * - keyed, one segment per hash range: the active segment whose range holds the high 16 bits of
 *   the raw hash (the number of active-segment starts, segment 0 excluded, <= segment_hash);
 * - keyed, all-legacy layout: signSafeMod(raw & 0x7FFFFFFF, n) over the legacy segments in layout
 *   order (v4 partitioned-topic routing; the masked value is never negative, so a remainder);
 * - keyless: the segments in turn (round-robin), bucket hash 0.
 * A message's bucket is then its segment's bucket of the low 16 bits. */
#ifndef BUCKETCORE_ROUTE_H
#define BUCKETCORE_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include "lookup.h"

enum {
    BC_ROUTE_ONE = 0,    /* a bare boundary list or one active segment */
    BC_ROUTE_RANGE = 1,  /* keyed: by segment hash over the active ranges */
    BC_ROUTE_LEGACY = 2, /* all-legacy layout: signSafeMod over the legacy order */
};

static inline uint32_t bc_segment_hash(uint32_t raw)
{
    return raw >> 16;
}
static inline uint16_t bc_bucket_hash(uint32_t raw)
{
    return (uint16_t)(raw & 0xFFFFu);
}

/* The segment and bucket hashes of n raw hashes, into whichever of the two outputs is not NULL, in
 * one pass over raw (the compiler vectorizes it; callers pass separate arrays). */
static inline void bc_split_hashes(const uint32_t *raw, size_t n, uint16_t *segment, uint16_t *bucket)
{
    if (segment != NULL && bucket != NULL) {
        for (size_t i = 0; i < n; i++) {
            segment[i] = (uint16_t)bc_segment_hash(raw[i]);
            bucket[i] = bc_bucket_hash(raw[i]);
        }
    } else if (segment != NULL) {
        for (size_t i = 0; i < n; i++)
            segment[i] = (uint16_t)bc_segment_hash(raw[i]);
    } else if (bucket != NULL) {
        for (size_t i = 0; i < n; i++)
            bucket[i] = bc_bucket_hash(raw[i]);
    }
}

/* Active-segment index of a segment hash: starts are hash_start of active segments 1..n-1. */
static inline uint32_t bc_range_segment(const uint16_t *starts, uint32_t nstarts, uint32_t segment_hash)
{
    return bc_bucket_of(starts, nstarts, segment_hash);
}

/* Position in the legacy order of a keyed message (n >= 1 legacy segments). */
static inline uint32_t bc_legacy_slot(uint32_t raw, uint32_t n)
{
    return (raw & 0x7FFFFFFFu) % n;
}

/* The keyless turn after r among n segments. */
static inline int64_t bc_next_turn(int64_t r, int64_t n)
{
    return r + 1 == n ? 0 : r + 1;
}

/* A producer target's routing state, tables prepared once per layout: the 64 Ki segment table
 * (segment_table[segment_hash] = active index, BC_ROUTE_RANGE), the rotation keyless messages take
 * (and the legacy order), each segment's 64 Ki bucket table and first global bucket index. With
 * narrow, the tables hold uint8_t (every index fits), else uint16_t. */
typedef struct {
    int mode;
    int narrow;
    const void *segment_table;
    const int32_t *rotation;
    int64_t nrotation;
    const void *const *bucket_tables;
    const int32_t *first_bucket;
} bc_router;

/* Global bucket index (first_bucket[segment] + bucket) and bucket hash of m hashed messages.
 * *turn is the next keyless position; with defer a keyless message gets index -1 instead, for
 * bc_fill_keyless to place in send order. has_key NULL: every message has a key. */
#define BC_ROUTE_CHUNK(NAME, T)                                                                \
    static inline void NAME(const bc_router *r, int mode, size_t m, const uint32_t *raw,       \
                            const uint8_t *has_key, int defer, int64_t *turn, int32_t *global, \
                            uint16_t *bucket_hash)                                             \
    {                                                                                          \
        /* the fields are read once: the stores below may alias them (no strict aliasing) */   \
        const T *segment_table = (const T *)r->segment_table;                                  \
        const T *const *tables = (const T *const *)r->bucket_tables;                           \
        const int32_t *rotation = r->rotation, *first_bucket = r->first_bucket;                \
        const int64_t nrotation = r->nrotation;                                                \
        int64_t t = *turn;                                                                     \
        int32_t s = 0;                                                                         \
        for (size_t i = 0; i < m; i++) {                                                       \
            uint32_t h = raw[i];                                                               \
            if (mode != BC_ROUTE_ONE) {                                                        \
                if (has_key != NULL && !has_key[i]) {                                          \
                    if (defer) {                                                               \
                        global[i] = -1;                                                        \
                        bucket_hash[i] = 0;                                                    \
                        continue;                                                              \
                    }                                                                          \
                    s = rotation[t];                                                           \
                    t = bc_next_turn(t, nrotation);                                            \
                } else if (mode == BC_ROUTE_RANGE) {                                           \
                    s = segment_table[bc_segment_hash(h)];                                     \
                } else {                                                                       \
                    s = rotation[bc_legacy_slot(h, (uint32_t)nrotation)];                      \
                }                                                                              \
            }                                                                                  \
            bucket_hash[i] = bc_bucket_hash(h);                                                \
            global[i] = first_bucket[s] + tables[s][bc_bucket_hash(h)];                        \
        }                                                                                      \
        *turn = t;                                                                             \
    }

BC_ROUTE_CHUNK(bc_route_chunk_u8, uint8_t)
BC_ROUTE_CHUNK(bc_route_chunk_u16, uint16_t)

/* Route m hashed messages; each mode gets its own inlined copy of the loop (a constant mode). */
static inline void bc_route(const bc_router *r, size_t m, const uint32_t *raw, const uint8_t *has_key,
                            int defer, int64_t *turn, int32_t *global, uint16_t *bucket_hash)
{
    if (r->narrow) {
        if (r->mode == BC_ROUTE_RANGE)
            bc_route_chunk_u8(r, BC_ROUTE_RANGE, m, raw, has_key, defer, turn, global, bucket_hash);
        else if (r->mode == BC_ROUTE_LEGACY)
            bc_route_chunk_u8(r, BC_ROUTE_LEGACY, m, raw, has_key, defer, turn, global, bucket_hash);
        else
            bc_route_chunk_u8(r, BC_ROUTE_ONE, m, raw, has_key, defer, turn, global, bucket_hash);
    } else {
        if (r->mode == BC_ROUTE_RANGE)
            bc_route_chunk_u16(r, BC_ROUTE_RANGE, m, raw, has_key, defer, turn, global, bucket_hash);
        else if (r->mode == BC_ROUTE_LEGACY)
            bc_route_chunk_u16(r, BC_ROUTE_LEGACY, m, raw, has_key, defer, turn, global, bucket_hash);
        else
            bc_route_chunk_u16(r, BC_ROUTE_ONE, m, raw, has_key, defer, turn, global, bucket_hash);
    }
}

/* Global bucket index of one message given its parts: raw routes an all-legacy layout, the segment
 * hash a ranged one, the bucket hash picks the bucket; a keyless message (has_key 0) takes the
 * turn *turn, which advances. The per-send path (one key) and a batch of precomputed hashes. */
static inline int32_t bc_route_parts(const bc_router *r, uint32_t raw, uint32_t segment_hash,
                                     uint16_t bucket_hash, int has_key, int64_t *turn)
{
    int32_t s = 0;
    if (!has_key) {
        if (r->nrotation > 0) {
            s = r->rotation[*turn];
            *turn = bc_next_turn(*turn, r->nrotation);
        }
    } else if (r->mode == BC_ROUTE_RANGE) {
        s = r->narrow ? ((const uint8_t *)r->segment_table)[segment_hash]
                      : ((const uint16_t *)r->segment_table)[segment_hash];
    } else if (r->mode == BC_ROUTE_LEGACY) {
        s = r->rotation[bc_legacy_slot(raw, (uint32_t)r->nrotation)];
    }
    if (r->narrow)
        return r->first_bucket[s] + ((const uint8_t *const *)r->bucket_tables)[s][bucket_hash];
    return r->first_bucket[s] + ((const uint16_t *const *)r->bucket_tables)[s][bucket_hash];
}

/* The global bucket index of a keyless message (bucket hash 0) in segment s. */
static inline int32_t bc_keyless_bucket(const bc_router *r, int32_t s)
{
    if (r->narrow)
        return r->first_bucket[s] + ((const uint8_t *const *)r->bucket_tables)[s][0];
    return r->first_bucket[s] + ((const uint16_t *const *)r->bucket_tables)[s][0];
}

/* Place the keyless messages bc_route deferred (index -1), in send order from turn t; returns
 * the next turn. */
static inline int64_t bc_fill_keyless(const bc_router *r, int32_t *global, size_t n, int64_t t)
{
    for (size_t i = 0; i < n; i++) {
        if (global[i] < 0) {
            global[i] = bc_keyless_bucket(r, r->rotation[t]);
            t = bc_next_turn(t, r->nrotation);
        }
    }
    return t;
}

#endif
