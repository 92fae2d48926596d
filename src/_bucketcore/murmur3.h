/* MurmurHash3 x86 32-bit, seed 0: the one Murmur3 of bucketcore, shared by every kernel.
 * Bit-identical to mmh3.hash(b, 0, signed=False) and to Pulsar's Murmur3_32Hash raw hash.
 * Loads go through memcpy (unaligned-safe) and are little-endian on every host. */
#ifndef BUCKETCORE_MURMUR3_H
#define BUCKETCORE_MURMUR3_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BC_M3_C1 0xcc9e2d51u
#define BC_M3_C2 0x1b873593u

static inline uint32_t bc_rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static inline uint32_t bc_load32le(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* One 4-byte block mixed into the running state. */
static inline uint32_t bc_m3_block(uint32_t h, uint32_t k)
{
    k *= BC_M3_C1;
    k = bc_rotl32(k, 15);
    k *= BC_M3_C2;
    h ^= k;
    h = bc_rotl32(h, 13);
    return h * 5u + 0xe6546b64u;
}

/* The 0..3 trailing bytes, already assembled little-endian into k. */
static inline uint32_t bc_m3_tail(uint32_t h, uint32_t k)
{
    k *= BC_M3_C1;
    k = bc_rotl32(k, 15);
    k *= BC_M3_C2;
    return h ^ k;
}

static inline uint32_t bc_m3_fmix(uint32_t h, uint32_t len)
{
    h ^= len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static inline uint32_t bc_m3_tail_bytes(const uint8_t *p, size_t rem)
{
    uint32_t k = 0;
    switch (rem) {
    case 3:
        k ^= (uint32_t)p[2] << 16; /* fall through */
    case 2:
        k ^= (uint32_t)p[1] << 8; /* fall through */
    case 1:
        k ^= (uint32_t)p[0];
    }
    return k;
}

/* The trailing len & 3 bytes of a key of len bytes at p, little-endian; 0 when there are none.
 * Keys of 4 bytes or more read their last word whole and shift (no branch on the remainder). */
static inline uint32_t bc_m3_key_tail(const uint8_t *p, size_t len)
{
    size_t rem = len & 3;
    if (len < 4)
        return bc_m3_tail_bytes(p, rem);
    uint32_t w = bc_load32le(p + len - 4);
    return rem ? w >> (8 * (4 - rem)) : 0;
}

static inline uint32_t bc_murmur3_32(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    size_t nblocks = len >> 2;
    uint32_t h = 0;
    for (size_t i = 0; i < nblocks; i++)
        h = bc_m3_block(h, bc_load32le(p + 4 * i));
    size_t rem = len & 3;
    if (rem)
        h = bc_m3_tail(h, bc_m3_tail_bytes(p + 4 * nblocks, rem));
    return bc_m3_fmix(h, (uint32_t)len);
}

#endif
