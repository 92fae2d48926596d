/* Key descriptors and their UTF-8 bytes, without a Python object per key.
 * A key is a pointer to its code units plus their width; str data in UCS1/2/4 form is encoded
 * to UTF-8 in a reusable scratch buffer (what str.encode would produce, minus the object). */
#ifndef BUCKETCORE_KEYS_H
#define BUCKETCORE_KEYS_H

#include <stdint.h>
#include <stdlib.h>
#include "murmur3.h"

enum {
    BC_KEY_NONE = 0,   /* keyless message: hash 0, has_key false */
    BC_KEY_BYTES = 1,  /* bytes hashed as given (bytes, ASCII str, Arrow values) */
    BC_KEY_UCS1 = 2,   /* latin-1 str data with non-ASCII chars */
    BC_KEY_UCS2 = 3,
    BC_KEY_UCS4 = 4,
};

enum { BC_OK = 0, BC_ERR_SURROGATE = 1, BC_ERR_NOMEM = 2 };

typedef struct {
    const void *data;
    int64_t len;   /* in code units of the kind (bytes for BC_KEY_BYTES) */
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

/* Encode wide str data to UTF-8 into s->buf; *out_len gets the byte count.
 * Surrogates: strict -> BC_ERR_SURROGATE; replace -> Java's String.getBytes(UTF_8): a high
 * surrogate directly followed by a low one is one supplementary code point, any other
 * surrogate becomes '?'. */
static inline int bc_encode_utf8(const bc_key *k, int replace, bc_scratch *s, size_t *out_len)
{
    size_t n = (size_t)k->len;
    int width = k->kind == BC_KEY_UCS1 ? 2 : 4;
    if (bc_scratch_reserve(s, n * (size_t)width + 4) != BC_OK)
        return BC_ERR_NOMEM;
    uint8_t *o = s->buf;
    if (k->kind == BC_KEY_UCS1) {
        const uint8_t *p = (const uint8_t *)k->data;
        for (size_t i = 0; i < n; i++)
            o = bc_put_cp(o, p[i]);
    } else {
        const uint16_t *p2 = (const uint16_t *)k->data;
        const uint32_t *p4 = (const uint32_t *)k->data;
        int ucs2 = k->kind == BC_KEY_UCS2;
        for (size_t i = 0; i < n; i++) {
            uint32_t c = ucs2 ? p2[i] : p4[i];
            if ((c & 0xFFFFF800u) == 0xD800u) {
                if (!replace)
                    return BC_ERR_SURROGATE;
                if (c < 0xDC00u && i + 1 < n) {
                    uint32_t d = ucs2 ? p2[i + 1] : p4[i + 1];
                    if ((d & 0xFFFFFC00u) == 0xDC00u) {
                        o = bc_put_cp(o, 0x10000u + ((c - 0xD800u) << 10) + (d - 0xDC00u));
                        i++;
                        continue;
                    }
                }
                c = '?';
            }
            o = bc_put_cp(o, c);
        }
    }
    *out_len = (size_t)(o - s->buf);
    return BC_OK;
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
    int rc = bc_encode_utf8(k, replace, s, &len);
    if (rc != BC_OK)
        return rc;
    *out = bc_murmur3_32(s->buf, len);
    return BC_OK;
}

#endif
