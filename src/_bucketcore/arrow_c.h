/* The Arrow C data interface and C stream interface (the ABI every Arrow producer and consumer
 * shares: pyarrow, polars, duckdb, nanoarrow, arro3 ...), and the two readers of Arrow layouts
 * that are not an offsets buffer: string/binary views and dictionary indices.
 *
 * The structs are the ABI itself (field order and types are fixed by the interface). A struct whose
 * release is NULL is released (or was moved away); whoever holds a live one calls release exactly
 * once. The readers below trust nothing in the arrays they read: every view and every index is
 * checked against the sizes the producer declared before anything is dereferenced. */
#ifndef BUCKETCORE_ARROW_C_H
#define BUCKETCORE_ARROW_C_H

#include <stdint.h>
#include <string.h>
#include "affine16.h"
#include "keys.h"
#include "prefetch.h"
#include "status.h"

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE           2
#define ARROW_FLAG_MAP_KEYS_SORTED    4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#endif

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#endif

typedef struct ArrowSchema bc_arrow_schema;
typedef struct ArrowArray bc_arrow_array;
typedef struct ArrowArrayStream bc_arrow_stream;

/* Whether validity bit i is set (no bitmap: every value is valid). */
static inline int bc_bit(const uint8_t *bits, int64_t i)
{
    return bits == NULL || ((bits[i >> 3] >> (i & 7)) & 1);
}

/* Whether the m + 1 offsets off[0..m] (m >= 1) of a string/binary array step by one length of at
 * least 16 bytes and at most BC_KEY_MAX_BYTES (its m values lie back to back, each *len bytes) and
 * stay inside [0, nvalues]. The step is checked as off[j] == off[0] + j * len in unsigned arithmetic:
 * one xor and one or per value and no compare, so the loop vectorises. The bounds are checked first,
 * so the progression cannot wrap: every offset it accepts is off[0] + j * len <= nvalues. The pages
 * of the offsets BC_PAGE_AHEAD bytes on are prefetched: callers check a column a chunk at a time. */
#define BC_OFFSETS_FIXED(T, U)                                                         \
    do {                                                                               \
        for (size_t at = 0; at <= m * sizeof(T); at += 4096)                           \
            bc_prefetch_page((uintptr_t)off + BC_PAGE_AHEAD + at);                     \
        int64_t o0 = (int64_t)off[0], step = (int64_t)off[1] - (int64_t)off[0];        \
        if (o0 < 0 || o0 > nvalues || step < 16 || step > (int64_t)BC_KEY_MAX_BYTES || \
            (uint64_t)step * (uint64_t)m > (uint64_t)(nvalues - o0))                   \
            return 0;                                                                  \
        U other = 0, expect = (U)o0, ustep = (U)step;                                  \
        for (size_t j = 1; j <= m; j++) {                                              \
            expect += ustep;                                                           \
            other |= (U)off[j] ^ expect;                                               \
        }                                                                              \
        if (other)                                                                     \
            return 0;                                                                  \
        *len = (size_t)step;                                                           \
        return 1;                                                                      \
    } while (0)

static inline int bc_offsets32_fixed(const int32_t *off, size_t m, int64_t nvalues, size_t *len)
{
    BC_OFFSETS_FIXED(int32_t, uint32_t);
}

static inline int bc_offsets64_fixed(const int64_t *off, size_t m, int64_t nvalues, size_t *len)
{
    BC_OFFSETS_FIXED(int64_t, uint64_t);
}

/* Describe m values of a string/binary view array from value `first` on. A view is 16 bytes: an
 * int32 length, then either the value itself (length <= 12) or a 4-byte prefix, the int32 index
 * of a variadic data buffer and the int32 offset of the value in it. Returns BC_OK, or
 * BC_ERR_ARROW_VIEW with *at the value's position in the run: a negative length, or a buffer
 * index or a range outside the variadic buffers (nvariadic of them, sizes[] bytes each).
 * *all_bytes: no null was met. */
static inline int bc_describe_views(const uint8_t *views, const uint8_t *bits, int64_t first, size_t m,
                                    const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                                    bc_key *keys, size_t *at, int *all_bytes)
{
    int plain = 1;
    for (size_t j = 0; j < m; j++) {
        int64_t i = first + (int64_t)j;
        if (!bc_bit(bits, i)) {
            keys[j].kind = BC_KEY_NONE;
            keys[j].data = NULL;
            keys[j].len = 0;
            plain = 0;
            continue;
        }
        const uint8_t *v = views + i * 16;
        int32_t len, index, offset;
        memcpy(&len, v, 4);
        if (len < 0) {
            *at = j;
            return BC_ERR_ARROW_VIEW;
        }
        if (len <= 12) {
            keys[j].data = v + 4;
        } else {
            memcpy(&index, v + 8, 4);
            memcpy(&offset, v + 12, 4);
            if (index < 0 || index >= nvariadic || offset < 0 || (int64_t)offset + len > sizes[index] ||
                variadic[index] == NULL) {
                *at = j;
                return BC_ERR_ARROW_VIEW;
            }
            keys[j].data = variadic[index] + offset;
        }
        keys[j].len = (uint32_t)len;
        keys[j].kind = BC_KEY_BYTES;
    }
    *all_bytes = plain;
    return BC_OK;
}

/* The first view v of a possible run of out-of-line values: its length (at least 16, so not inline),
 * data buffer index (one of the nvariadic) and offset (not negative); 0 when it cannot start one. */
static inline int bc_view_run_head(const uint8_t *v, int64_t nvariadic, int32_t *len, int32_t *index,
                                   int32_t *offset)
{
    memcpy(len, v, 4);
    memcpy(index, v + 8, 4);
    memcpy(offset, v + 12, 4);
    return *len >= 16 && *index >= 0 && *index < nvariadic && *offset >= 0;
}

/* A candidate run of m out-of-line values of one length lying back to back in one variadic buffer:
 * their bytes (base, len each), and the terms its views must match (bc_affine16): view j is
 * (len, any prefix, index, offset + j * len), the prefix word not compared. */
typedef struct {
    const uint8_t *base;
    size_t len;
    bc_item16 first, step, care;
} bc_view_run;

/* Whether the m views from value `first` on can be a run by their first view alone: a length >= 16,
 * and m values of that length from its offset on lie inside its data buffer (checked against the
 * buffer's size), so that reading them as a run stays inside that buffer whatever the other views
 * say. Then *run is the candidate; only its views can confirm it. */
static inline int bc_views_run_bounds(const uint8_t *views, int64_t first, size_t m,
                                      const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                                      bc_view_run *run)
{
    int32_t len0, index0, offset0;
    if (m == 0 || !bc_view_run_head(views + first * 16, nvariadic, &len0, &index0, &offset0))
        return 0;
    int64_t end = (int64_t)offset0 + (int64_t)len0 * (int64_t)m;
    if (variadic[index0] == NULL || end > sizes[index0] || end > INT32_MAX)
        return 0;
    run->base = variadic[index0] + offset0;
    run->len = (size_t)len0;
    run->first = bc_item16_words((uint32_t)len0, 0, (uint32_t)index0, (uint32_t)offset0);
    run->step = bc_item16_words(0, 0, 0, (uint32_t)len0);
    run->care = bc_item16_words(~0u, 0, ~0u, ~0u);
    return 1;
}

/* Whether m valid views from value `first` on all have one length >= 16 and lie back to back in
 * one variadic buffer (checked against its size): then *base is the first value and *len the
 * length, and the run can be hashed without descriptors. Reads the views only. */
static inline int bc_views_fixed(const uint8_t *views, int64_t first, size_t m,
                                 const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                                 const uint8_t **base, size_t *len)
{
    bc_view_run run;
    if (!bc_views_run_bounds(views, first, m, variadic, sizes, nvariadic, &run) ||
        !bc_affine16(views + first * 16, 16, m, run.first, run.step, run.care))
        return 0;
    *base = run.base;
    *len = run.len;
    return 1;
}

/* How many of the m views from value `first` on a run could take, by the first view alone: m when
 * its data buffer has room for m values of its length from its offset on; k, 16 <= k < m, when it
 * has room for exactly k (a producer that fills data buffers one after another, such as polars,
 * ends a run at a buffer's end so); else 0. Reads one view. */
static inline size_t bc_views_run_extent(const uint8_t *views, int64_t first, size_t m,
                                         const uint8_t *const *variadic, const int64_t *sizes,
                                         int64_t nvariadic)
{
    int32_t len0, index0, offset0;
    if (m == 0 || !bc_view_run_head(views + first * 16, nvariadic, &len0, &index0, &offset0) ||
        sizes[index0] < offset0)
        return 0;
    int64_t fit = (sizes[index0] - offset0) / len0;
    if (fit >= (int64_t)m)
        return m;
    return fit >= 16 ? (size_t)fit : 0;
}

/* Hash the m valid values from value `first` on into out[0..m) as one run, if their views say they
 * are one (bc_views_fixed's run): returns 1, *base and *len the run's bytes and length; else 0 with
 * out[0..m) holding anything, for the caller to describe the views one by one. The run's bytes are
 * bounded by its first view before they are read, its other views checked as they are hashed
 * (bc_hash_strided_checked). */
static inline int bc_hash_views_run(const uint8_t *views, int64_t first, size_t m,
                                    const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                                    uint32_t *out, int path, const uint8_t **base, size_t *len)
{
    bc_view_run run;
    if (!bc_views_run_bounds(views, first, m, variadic, sizes, nvariadic, &run) ||
        !bc_hash_strided_checked(run.base, run.len, run.len, m, views + first * 16, 16, run.first, run.step,
                                 run.care, out, path))
        return 0;
    *base = run.base;
    *len = run.len;
    return 1;
}

/* Read dictionary index i of an indices buffer of the given width (1, 2, 4, 8 bytes), signed or
 * not, as a signed 64-bit value (an unsigned 64-bit index above INT64_MAX reads as negative: out of
 * range either way). */
static inline int64_t bc_index_at(const void *indices, int width, int is_signed, int64_t i)
{
    switch (width) {
    case 1:
        return is_signed ? (int64_t)((const int8_t *)indices)[i] : (int64_t)((const uint8_t *)indices)[i];
    case 2:
        return is_signed ? (int64_t)((const int16_t *)indices)[i] : (int64_t)((const uint16_t *)indices)[i];
    case 4:
        return is_signed ? (int64_t)((const int32_t *)indices)[i] : (int64_t)((const uint32_t *)indices)[i];
    default:
        return (int64_t)((const uint64_t *)indices)[i];
    }
}

/* The gather of one index type: out[j] = the hash of the dictionary value row first + j names. */
#define BC_GATHER_LOOP(T)                                            \
    do {                                                             \
        const T *ix = (const T *)indices + first;                    \
        for (size_t j = 0; j < m; j++) {                             \
            if (bits != NULL && !bc_bit(bits, first + (int64_t)j)) { \
                if (!allow_none) {                                   \
                    *at = j;                                         \
                    return BC_ERR_KEY_NONE;                          \
                }                                                    \
                raw[j] = 0;                                          \
                if (has_key)                                         \
                    has_key[j] = 0;                                  \
                keyless = 1;                                         \
                continue;                                            \
            }                                                        \
            int64_t d = (int64_t)ix[j];                              \
            if (d < 0 || d >= dict_len) {                            \
                *at = j;                                             \
                return BC_ERR_DICT_INDEX;                            \
            }                                                        \
            raw[j] = dict_raw[d];                                    \
            if (!dict_has[d]) {                                      \
                if (!allow_none) {                                   \
                    *at = j;                                         \
                    return BC_ERR_KEY_NONE;                          \
                }                                                    \
                keyless = 1;                                         \
            }                                                        \
            if (has_key)                                             \
                has_key[j] = dict_has[d];                            \
        }                                                            \
    } while (0)

/* Hashes of m dictionary-encoded values from row `first` on, gathered from the dictionary's
 * hashes (dict_raw, dict_has: computed once per dictionary). A null row, or a row naming a null
 * dictionary value, is keyless (BC_ERR_KEY_NONE unless allow_none). An index outside
 * [0, dict_len): BC_ERR_DICT_INDEX. *at: the failing row's position in the run; *keyless: some row
 * has no key. has_key may be NULL. */
static inline int bc_gather_dict(const void *indices, int width, int is_signed, const uint8_t *bits,
                                 int64_t first, size_t m, const uint32_t *dict_raw, const uint8_t *dict_has,
                                 int64_t dict_len, int allow_none, uint32_t *raw, uint8_t *has_key,
                                 size_t *at, int *keyless_out)
{
    int keyless = 0;
    switch (width * (is_signed ? 1 : -1)) {
    case 1:
        BC_GATHER_LOOP(int8_t);
        break;
    case -1:
        BC_GATHER_LOOP(uint8_t);
        break;
    case 2:
        BC_GATHER_LOOP(int16_t);
        break;
    case -2:
        BC_GATHER_LOOP(uint16_t);
        break;
    case 4:
        BC_GATHER_LOOP(int32_t);
        break;
    case -4:
        BC_GATHER_LOOP(uint32_t);
        break;
    default: /* 8 bytes: an unsigned index above INT64_MAX reads negative, out of range */
        BC_GATHER_LOOP(int64_t);
        break;
    }
    *keyless_out = keyless;
    return BC_OK;
}

#endif
