/* numpy 2's StringDType, read through numpy's own C API for it (NpyString_acquire_allocator,
 * NpyString_load, NpyString_release_allocator), so its packed layout (short strings inside the
 * item, longer ones in the array's arena) stays numpy's business. The API slots are called by
 * number: this module is built for numpy 1.x runtimes too, where the NpyString macros are not
 * defined; a StringDType array (dtype kind "T") only exists at runtime under numpy >= 2, where these
 * slots are the NpyString functions. */
#ifndef BUCKETCORE_NPSTRING_H
#define BUCKETCORE_NPSTRING_H

#include <Python.h>
#include <numpy/arrayobject.h>
#include <string.h>
#include "affine16.h"
#include "keys.h"
#include "status.h"

typedef npy_static_string bc_npstr;
typedef npy_string_allocator bc_npstr_allocator;

/* Lock the descriptor's allocator (a mutex, no GIL needed) until bc_npstr_release. */
static inline bc_npstr_allocator *bc_npstr_acquire(void *descr)
{
    return (*(npy_string_allocator * (*)(const PyArray_StringDTypeObject *))
                PyArray_API[316])((const PyArray_StringDTypeObject *)descr);
}

/* Unpack one item: 0 a string (out->buf, out->size), 1 a missing item, -1 a corrupt one. */
static inline int bc_npstr_load(bc_npstr_allocator *a, const void *packed, bc_npstr *out)
{
    return (*(int (*)(npy_string_allocator *, const npy_packed_static_string *,
                      npy_static_string *))PyArray_API[313])(a, (const npy_packed_static_string *)packed,
                                                             out);
}

static inline void bc_npstr_release(bc_npstr_allocator *a)
{
    (*(void (*)(npy_string_allocator *))PyArray_API[318])(a);
}

/* The packed item of numpy >= 2.0 on a little-endian 64-bit host (NEP 55): 16 bytes, the last of
 * which holds the flags in its high nibble. A short string (flags exactly INITIALIZED | OUTSIDE_ARENA)
 * keeps its bytes in the item and its size in the low nibble; a string in the array's arena (flags
 * INITIALIZED, maybe LONG, never OUTSIDE_ARENA or MISSING) has its offset from the arena's start in
 * the first 8 bytes and its size in the low 7 bytes of the second 8. NpyString_load reads exactly
 * these two forms so; every other form (missing, on the heap, uninitialized) is left to it. */
#define BC_NPSTR_FLAGS(item) ((uint8_t)(item)[15] & 0xF0u)
#define BC_NPSTR_SHORT       0x60u /* INITIALIZED | OUTSIDE_ARENA */
#define BC_NPSTR_ARENA       0x40u /* INITIALIZED, in the arena, at most 255 bytes */
#define BC_NPSTR_ARENA_LONG  0x50u /* INITIALIZED | LONG, in the arena */

static inline int bc_npstr_inline_layout(void)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return sizeof(size_t) == 8 && sizeof(npy_packed_static_string *) == 8;
#elif defined(_M_X64) || defined(_M_ARM64)
    return 1;
#else
    return 0;
#endif
}

/* One item by numpy's NpyString_load into k: BC_OK (a missing item keyless), BC_ERR_NPSTRING (numpy
 * could not unpack it) or BC_ERR_KEY_TOO_LONG. */
static inline int bc_npstr_load_key(bc_npstr_allocator *a, const char *item, bc_key *k)
{
    bc_npstr s;
    int rc = bc_npstr_load(a, item, &s);
    if (rc < 0)
        return BC_ERR_NPSTRING;
    if (rc == 1) {
        k->kind = BC_KEY_NONE;
        k->data = NULL;
        k->len = 0;
        return BC_OK;
    }
    if (s.size > BC_KEY_MAX_BYTES)
        return BC_ERR_KEY_TOO_LONG;
    k->kind = BC_KEY_BYTES;
    k->data = s.buf;
    k->len = (uint32_t)s.size;
    return BC_OK;
}

/* A candidate strided run of m arena strings of one length: their bytes (base; len each, step from
 * one start to the next), and the terms its items must match (bc_affine16): item j is
 * (offset + j * step, the first item's size and flags word). */
typedef struct {
    const uint8_t *base;
    size_t len, step;
    bc_item16 first, item_step, care;
} bc_npstr_span;

/* Whether the m items at base + j * stride (the allocator acquired) can be a strided run by their
 * first, second and last items: the first an arena string of a length >= 16, the second the same
 * length a distance >= that length further on, the last exactly where the run puts it. numpy made
 * the first and the last item, so every byte from the first string's start to the last one's end
 * lies in the array's arena: reading the run stays inside it whatever the items between say. The
 * arena's start is taken from numpy's own NpyString_load of the first item. Then *run is the
 * candidate; only its items can confirm it. */
static inline int bc_npstr_run_bounds(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                                      bc_npstr_span *run)
{
    if (m == 0 || !bc_npstr_inline_layout())
        return 0;
    unsigned flags = BC_NPSTR_FLAGS(base);
    if (flags != BC_NPSTR_ARENA && flags != BC_NPSTR_ARENA_LONG)
        return 0;
    uint64_t w0, w1, size, gap;
    memcpy(&w0, base, 8);
    memcpy(&w1, base + 8, 8);
    size = w1 & 0x00FFFFFFFFFFFFFFull;
    if (size < 16 || size > BC_KEY_MAX_BYTES)
        return 0;
    gap = size;
    if (m > 1) {
        uint64_t v0, v1, l0, l1;
        memcpy(&v0, base + stride, 8);
        memcpy(&v1, base + stride + 8, 8);
        gap = v0 - w0;
        if (v1 != w1 || v0 < w0 || gap < size || gap > BC_KEY_MAX_BYTES ||
            w0 > UINT64_MAX - (uint64_t)(m - 1) * gap)
            return 0;
        const char *last = base + (Py_ssize_t)(m - 1) * stride;
        memcpy(&l0, last, 8);
        memcpy(&l1, last + 8, 8);
        if (l0 != w0 + (uint64_t)(m - 1) * gap || l1 != w1)
            return 0;
    }
    bc_npstr s;
    if (bc_npstr_load(a, base, &s) != 0 || s.size != size)
        return 0;
    run->base = (const uint8_t *)s.buf;
    run->len = (size_t)size;
    run->step = (size_t)gap;
    /* item j is (w0 + j * gap, w1): the offset steps, the size and flags word stays */
    run->first = (bc_item16){w0, w1};
    run->item_step = (bc_item16){gap, 0};
    run->care = (bc_item16){~0ull, ~0ull};
    return 1;
}

/* A strided run: m items (the allocator acquired) that are all arena strings of one length
 * >= 16 whose offsets step by one stride >= that length (numpy's arena keeps a string's bytes after
 * its length prefix, so equal-length strings made in order lie a constant distance apart). Then
 * *run is the first string's bytes, *len their length, *step the distance from one to the next,
 * and returns 1. Returns 0 (nothing read past the first, second and last items when they differ)
 * for anything else: the caller describes the items one by one. */
static inline int bc_npstr_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                               const uint8_t **run, size_t *len, size_t *step)
{
    bc_npstr_span span;
    if (!bc_npstr_run_bounds(a, base, stride, m, &span) ||
        !bc_affine16((const uint8_t *)base, stride, m, span.first, span.item_step, span.care))
        return 0;
    *run = span.base;
    *len = span.len;
    *step = span.step;
    return 1;
}

/* Hash the m items at base + j * stride (the allocator acquired) into out[0..m) as one strided run,
 * if they are one (bc_npstr_run's run): returns 1, *run, *len and *step as bc_npstr_run gives them;
 * else 0 with out[0..m) holding anything, for the caller to describe the items one by one. The
 * run's bytes are bounded by its first and last items before they are read, the items between
 * checked as they are hashed (bc_hash_strided_checked). */
static inline int bc_npstr_hash_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                                    uint32_t *out, int path, const uint8_t **run, size_t *len, size_t *step)
{
    bc_npstr_span span;
    if (!bc_npstr_run_bounds(a, base, stride, m, &span) ||
        !bc_hash_strided_checked(span.base, span.len, span.step, m, (const uint8_t *)base, stride, span.first,
                                 span.item_step, span.care, out, path))
        return 0;
    *run = span.base;
    *len = span.len;
    *step = span.step;
    return 1;
}

/* Describe the m StringDType items at base + j * stride (the allocator acquired): short and arena
 * strings are unpacked here, a block at a time, the arena's start taken once from numpy's own
 * NpyString_load of the first arena string (its buffer minus its offset); every other item by
 * NpyString_load. Returns BC_OK, or the status of the item at *at. *plain: no item was missing. */
static inline int bc_npstr_describe(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                                    bc_key *keys, size_t *at, int *plain)
{
    static const char empty[1] = {0};
    int inline_layout = bc_npstr_inline_layout(), all = 1;
    uintptr_t arena = 0;
    for (size_t j = 0; j < m; j++) {
        const char *item = base + (Py_ssize_t)j * stride;
        unsigned flags = inline_layout ? BC_NPSTR_FLAGS(item) : 0;
        if (flags == BC_NPSTR_SHORT) {
            keys[j].kind = BC_KEY_BYTES;
            keys[j].data = item;
            keys[j].len = (uint32_t)((uint8_t)item[15] & 0x0Fu);
            continue;
        }
        if (flags == BC_NPSTR_ARENA || flags == BC_NPSTR_ARENA_LONG) {
            uint64_t offset, size;
            memcpy(&offset, item, 8);
            memcpy(&size, item + 8, 8);
            size &= 0x00FFFFFFFFFFFFFFull;
            if (size > BC_KEY_MAX_BYTES) {
                *at = j;
                return BC_ERR_KEY_TOO_LONG;
            }
            keys[j].kind = BC_KEY_BYTES;
            keys[j].len = (uint32_t)size;
            if (size == 0) {
                keys[j].data = empty;
            } else if (arena != 0) {
                keys[j].data = (const void *)(arena + (uintptr_t)offset);
            } else {
                int rc = bc_npstr_load_key(a, item, &keys[j]);
                if (rc != BC_OK) {
                    *at = j;
                    return rc;
                }
                arena = (uintptr_t)keys[j].data - (uintptr_t)offset;
            }
            continue;
        }
        int rc = bc_npstr_load_key(a, item, &keys[j]);
        if (rc != BC_OK) {
            *at = j;
            return rc;
        }
        all &= keys[j].kind == BC_KEY_BYTES;
    }
    *plain = all;
    return BC_OK;
}

#endif
