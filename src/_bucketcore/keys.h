/* Key descriptors and their UTF-8 bytes, without a Python object per key.
 * A key is a pointer to its code units plus their width; str data in UCS1/2/4 form is encoded
 * to UTF-8 in a reusable scratch buffer (what str.encode would produce, minus the object). */
#ifndef BUCKETCORE_KEYS_H
#define BUCKETCORE_KEYS_H

#include <stdint.h>
#include <stdlib.h>
#include "murmur3.h"
#include "status.h"

enum {
    BC_KEY_NONE = 0,  /* keyless message: hash 0, has_key false */
    BC_KEY_BYTES = 1, /* bytes hashed as given (bytes, ASCII str, Arrow values) */
    BC_KEY_UCS1 = 2,  /* latin-1 str data with non-ASCII chars */
    BC_KEY_UCS2 = 3,
    BC_KEY_UCS4 = 4,
};

/* Longest key in UTF-8 bytes: Java's largest byte[] (Pulsar could not hash a longer one). */
#define BC_KEY_MAX_BYTES 0x7FFFFFFFu

typedef struct {
    const void *data;
    uint32_t len; /* in code units of the kind (bytes for BC_KEY_BYTES) */
    int32_t kind;
} bc_key;

typedef struct {
    uint8_t *buf;
    size_t cap;
} bc_scratch;

static inline void bc_scratch_free(bc_scratch *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

static inline int bc_scratch_reserve(bc_scratch *s, size_t need)
{
    if (need <= s->cap)
        return BC_OK;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *b = (uint8_t *)realloc(s->buf, cap);
    if (!b)
        return BC_ERR_NOMEM;
    s->buf = b;
    s->cap = cap;
    return BC_OK;
}

static inline uint8_t *bc_put_cp(uint8_t *o, uint32_t c)
{
    if (c < 0x80) {
        *o++ = (uint8_t)c;
    } else if (c < 0x800) {
        *o++ = (uint8_t)(0xC0 | (c >> 6));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (uint8_t)(0xE0 | (c >> 12));
        *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        *o++ = (uint8_t)(0xF0 | (c >> 18));
        *o++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    }
    return o;
}

/* Whether units code units of a kind could encode to more than BC_KEY_MAX_BYTES. */
static inline int bc_key_too_long(int kind, uint64_t units)
{
    uint64_t per = kind == BC_KEY_UCS1 ? 2 : kind == BC_KEY_UCS2 ? 3 : kind == BC_KEY_UCS4 ? 4 : 1;
    return units * per > BC_KEY_MAX_BYTES;
}

/* Upper bound of the UTF-8 size of a key's code units. */
static inline size_t bc_utf8_bound(const bc_key *k)
{
    size_t per = k->kind == BC_KEY_UCS1 ? 2 : k->kind == BC_KEY_UCS2 ? 3 : k->kind == BC_KEY_UCS4 ? 4 : 1;
    return (size_t)k->len * per;
}

static inline uint32_t bc_unit(const void *data, size_t i, int width)
{
    return width == 1   ? ((const uint8_t *)data)[i]
           : width == 2 ? ((const uint16_t *)data)[i]
                        : ((const uint32_t *)data)[i];
}

/* The ASCII units from i on, one at a time (what is left after the 16-unit steps). */
static inline size_t bc_ascii_tail(const void *data, size_t n, int width, uint8_t *o, size_t i)
{
    for (; i < n; i++) {
        uint32_t c = bc_unit(data, i, width);
        if (c >= 0x80)
            break;
        o[i] = (uint8_t)c;
    }
    return i;
}

/* Copy the ASCII prefix of n code units (width 1, 2 or 4 bytes) to o, 16 units at a time;
 * returns how many units it copied. SSE2 (every x86-64) packs 16 units per step; elsewhere a
 * plain loop. */
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
static inline size_t bc_ascii_run(const void *data, size_t n, int width, uint8_t *o)
{
    size_t i = 0;
    const __m128i high = _mm_set1_epi32((int)0xFFFFFF80u);
    for (; i + 16 <= n; i += 16) {
        __m128i bytes;
        if (width == 4) {
            const __m128i *p = (const __m128i *)((const uint32_t *)data + i);
            __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1);
            __m128i c = _mm_loadu_si128(p + 2), d = _mm_loadu_si128(p + 3);
            __m128i any = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
            if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(any, high), _mm_setzero_si128())) != 0xFFFF)
                break;
            bytes = _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
        } else if (width == 2) {
            const __m128i *p = (const __m128i *)((const uint16_t *)data + i);
            __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1);
            __m128i any = _mm_or_si128(a, b);
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(any, _mm_set1_epi16((short)0xFF80)),
                                                  _mm_setzero_si128())) != 0xFFFF)
                break;
            bytes = _mm_packus_epi16(a, b);
        } else {
            bytes = _mm_loadu_si128((const __m128i *)((const uint8_t *)data + i));
            if (_mm_movemask_epi8(bytes))
                break;
        }
        _mm_storeu_si128((__m128i *)(o + i), bytes);
    }
    return bc_ascii_tail(data, n, width, o, i);
}
#else
static inline size_t bc_ascii_run(const void *data, size_t n, int width, uint8_t *o)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t any = 0;
        for (int j = 0; j < 16; j++)
            any |= bc_unit(data, i + j, width);
        if (any >= 0x80)
            break;
        for (int j = 0; j < 16; j++)
            o[i + j] = (uint8_t)bc_unit(data, i + j, width);
    }
    return bc_ascii_tail(data, n, width, o, i);
}
#endif

/* Encode n code units of the given width (1, 2, 4; a constant at each call) to UTF-8 at o.
 * Surrogates: strict -> BC_ERR_SURROGATE; replace -> Java's String.getBytes(UTF_8): a high
 * surrogate directly followed by a low one is one supplementary code point, any other
 * surrogate becomes '?'. */
static inline int bc_encode_units(const void *data, size_t n, int width, int replace, uint8_t *o,
                                  size_t *out_len)
{
    uint8_t *start = o;
    size_t i = 0;
    while (i < n) {
        size_t run = bc_ascii_run((const uint8_t *)data + i * (size_t)width, n - i, width, o);
        i += run;
        o += run;
        if (i == n)
            break;
        uint32_t c = bc_unit(data, i, width);
        if (width > 1 && (c & 0xFFFFF800u) == 0xD800u) {
            if (!replace)
                return BC_ERR_SURROGATE;
            if (c < 0xDC00u && i + 1 < n) {
                uint32_t d = bc_unit(data, i + 1, width);
                if ((d & 0xFFFFFC00u) == 0xDC00u) {
                    o = bc_put_cp(o, 0x10000u + ((c - 0xD800u) << 10) + (d - 0xDC00u));
                    i += 2;
                    continue;
                }
            }
            c = '?';
        }
        o = bc_put_cp(o, c);
        i++;
    }
    *out_len = (size_t)(o - start);
    return BC_OK;
}

/* UTF-8 of a str key (kind UCS1/2/4) at o, which has room for bc_utf8_bound(k) bytes. */
static inline int bc_encode_utf8(const bc_key *k, int replace, uint8_t *o, size_t *out_len)
{
    switch (k->kind) {
    case BC_KEY_UCS1:
        return bc_encode_units(k->data, (size_t)k->len, 1, replace, o, out_len);
    case BC_KEY_UCS2:
        return bc_encode_units(k->data, (size_t)k->len, 2, replace, o, out_len);
    default:
        return bc_encode_units(k->data, (size_t)k->len, 4, replace, o, out_len);
    }
}

/* Raw Murmur3 of one key's UTF-8 bytes (0 for a keyless message). */
static inline int bc_hash_key(const bc_key *k, int replace, bc_scratch *s, uint32_t *out)
{
    if (k->kind == BC_KEY_BYTES) {
        *out = bc_murmur3_32(k->data, (size_t)k->len);
        return BC_OK;
    }
    if (k->kind == BC_KEY_NONE) {
        *out = 0;
        return BC_OK;
    }
    size_t len;
    if (bc_scratch_reserve(s, bc_utf8_bound(k)) != BC_OK)
        return BC_ERR_NOMEM;
    int rc = bc_encode_utf8(k, replace, s->buf, &len);
    if (rc != BC_OK)
        return rc;
    *out = bc_murmur3_32(s->buf, len);
    return BC_OK;
}

/* Turn every str key of a chunk into UTF-8 bytes in the scratch arena, so the whole chunk is
 * byte keys (BC_KEY_BYTES or BC_KEY_NONE) for the multi-lane hash. On failure *err_at is the
 * offending key's position in the chunk. */
static inline int bc_encode_chunk(bc_key *keys, size_t n, int replace, bc_scratch *s, size_t *err_at)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        if (keys[i].kind >= BC_KEY_UCS1)
            need += bc_utf8_bound(&keys[i]);
    if (need == 0)
        return BC_OK;
    if (bc_scratch_reserve(s, need) != BC_OK)
        return BC_ERR_NOMEM;
    uint8_t *o = s->buf;
    for (size_t i = 0; i < n; i++) {
        if (keys[i].kind < BC_KEY_UCS1)
            continue;
        size_t len;
        int rc = bc_encode_utf8(&keys[i], replace, o, &len);
        if (rc != BC_OK) {
            *err_at = i;
            return rc;
        }
        keys[i].data = o;
        keys[i].len = (uint32_t)len;
        keys[i].kind = BC_KEY_BYTES;
        o += len;
    }
    return BC_OK;
}

#endif
