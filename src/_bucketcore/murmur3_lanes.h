/* Murmur3 over many keys at once. Murmur3 is a serial chain per key, so one key at a time leaves
 * most of the core idle; hashing a group of keys in lockstep fills it. Three paths, bit-identical:
 *   scalar      one key after another (bc_murmur3_32);
 *   interleaved 4 keys in lockstep in plain C (any CPU);
 *   avx2        16 keys as two 8-lane 256-bit vectors (x86-64 with AVX2, chosen at run time);
 *               key bytes reach the lanes by whole-vector loads and transposes, not gathers.
 * The keys are bc_key descriptors of kind BC_KEY_BYTES or BC_KEY_NONE (hash 0, like ""). */
#ifndef BUCKETCORE_MURMUR3_LANES_H
#define BUCKETCORE_MURMUR3_LANES_H

#include "keys.h"
#include "prefetch.h"

enum { BC_PATH_AUTO = 0, BC_PATH_SCALAR = 1, BC_PATH_INTERLEAVED = 2, BC_PATH_SIMD = 3 };

static inline void bc_hash_bytes_scalar(const bc_key *keys, size_t n, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = bc_murmur3_32(keys[i].data, (size_t)keys[i].len);
}

/* The blocks one lane has left after the lockstep part, its tail and finalisation. */
static inline uint32_t bc_m3_finish(uint32_t h, const uint8_t *p, size_t len, size_t from_block)
{
    size_t nblocks = len >> 2;
    for (size_t b = from_block; b < nblocks; b++)
        h = bc_m3_block(h, bc_load32le(p + 4 * b));
    size_t rem = len & 3;
    if (rem)
        h = bc_m3_tail(h, bc_m3_tail_bytes(p + 4 * nblocks, rem));
    return bc_m3_fmix(h, (uint32_t)len);
}

/* Four independent chains in named locals (an array would round-trip through memory). */
static inline void bc_hash_bytes_interleaved(const bc_key *keys, size_t n, uint32_t *out)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint8_t *p0 = (const uint8_t *)keys[i].data, *p1 = (const uint8_t *)keys[i + 1].data;
        const uint8_t *p2 = (const uint8_t *)keys[i + 2].data, *p3 = (const uint8_t *)keys[i + 3].data;
        size_t n0 = (size_t)keys[i].len >> 2, n1 = (size_t)keys[i + 1].len >> 2;
        size_t n2 = (size_t)keys[i + 2].len >> 2, n3 = (size_t)keys[i + 3].len >> 2;
        size_t common = n0 < n1 ? n0 : n1;
        common = common < n2 ? common : n2;
        common = common < n3 ? common : n3;
        uint32_t h0 = 0, h1 = 0, h2 = 0, h3 = 0;
        for (size_t b = 0; b < common; b++) {
            h0 = bc_m3_block(h0, bc_load32le(p0 + 4 * b));
            h1 = bc_m3_block(h1, bc_load32le(p1 + 4 * b));
            h2 = bc_m3_block(h2, bc_load32le(p2 + 4 * b));
            h3 = bc_m3_block(h3, bc_load32le(p3 + 4 * b));
        }
        out[i] = bc_m3_finish(h0, p0, (size_t)keys[i].len, common);
        out[i + 1] = bc_m3_finish(h1, p1, (size_t)keys[i + 1].len, common);
        out[i + 2] = bc_m3_finish(h2, p2, (size_t)keys[i + 2].len, common);
        out[i + 3] = bc_m3_finish(h3, p3, (size_t)keys[i + 3].len, common);
    }
    bc_hash_bytes_scalar(keys + i, n - i, out + i);
}

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define BC_HAVE_AVX2_PATH 1
#include <immintrin.h>

#define BC_AVX2 __attribute__((target("avx2")))

/* Inlined whatever the compiler's budget for the function it is called from: a run's kernel holds
 * a copy of the lane code for each known length and stride, and a call left in any of them would
 * cost more than the few vector instructions it saves. */
#define BC_INLINE inline __attribute__((always_inline))

static BC_AVX2 BC_INLINE __m256i bc_v_rotl(__m256i x, int r)
{
    return _mm256_or_si256(_mm256_slli_epi32(x, r), _mm256_srli_epi32(x, 32 - r));
}

static BC_AVX2 BC_INLINE __m256i bc_v_block(__m256i h, __m256i k)
{
    k = _mm256_mullo_epi32(k, _mm256_set1_epi32((int)BC_M3_C1));
    k = bc_v_rotl(k, 15);
    k = _mm256_mullo_epi32(k, _mm256_set1_epi32((int)BC_M3_C2));
    h = _mm256_xor_si256(h, k);
    h = bc_v_rotl(h, 13);
    h = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 2), h), _mm256_set1_epi32((int)0xe6546b64u));
    return h;
}

/* Blocks b..b+7 of 8 keys: eight 32-byte loads transposed so vector j holds block b+j of every
 * key. Far cheaper than gathers; only for blocks every key has. */
static BC_AVX2 inline void bc_v_load8x8(const bc_key *k, uint32_t b, __m256i c[8])
{
    __m256i r[8], t[8], u[8];
    for (int l = 0; l < 8; l++)
        r[l] = _mm256_loadu_si256((const __m256i *)((const uint8_t *)k[l].data + 4 * (size_t)b));
    for (int l = 0; l < 8; l += 2) {
        t[l] = _mm256_unpacklo_epi32(r[l], r[l + 1]);
        t[l + 1] = _mm256_unpackhi_epi32(r[l], r[l + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm256_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int j = 0; j < 4; j++) {
        c[j] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
        c[j + 4] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
    }
}

/* Where the 8 keys of a lane group start: at p[l], or, when p is NULL, at q + l * stride (a run of
 * keys of one length a constant distance apart: no address to load). Passed by value to always-inline
 * helpers, so each caller keeps only its own addressing. */
typedef struct {
    const uint8_t *const *p;
    const uint8_t *q;
    size_t stride;
} bc_lanes8;

/* Loads that run past a key's end inside its page are invisible to the hardware but not to the
 * address and thread sanitizers (they see bytes of other allocations read): sanitized builds copy
 * every short tail instead, so a sanitizer report always means a real fault. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BC_READ_PAST_KEYS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BC_READ_PAST_KEYS 0
#endif
#endif
#ifndef BC_READ_PAST_KEYS
#define BC_READ_PAST_KEYS 1
#endif

static BC_INLINE const uint8_t *bc_lane(bc_lanes8 g, int l)
{
    return g.p ? g.p[l] : g.q + (size_t)l * g.stride;
}

/* Blocks at byte offset off..off+15 of the 8 keys of g, all 16 bytes inside every key:
 * transposed so c[j] holds block j of the window for every key. */
static BC_AVX2 BC_INLINE void bc_v_window8x4(bc_lanes8 g, size_t off, __m256i c[4])
{
    __m256i y[4];
    for (int l = 0; l < 4; l++)
        y[l] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(bc_lane(g, l) + off))),
            _mm_loadu_si128((const __m128i *)(bc_lane(g, l + 4) + off)), 1);
    __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
    __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
    c[0] = _mm256_unpacklo_epi64(t0, t2);
    c[1] = _mm256_unpackhi_epi64(t0, t2);
    c[2] = _mm256_unpacklo_epi64(t1, t3);
    c[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Blocks b..b+3 of 8 keys from one 16-byte load each, transposed. A load may run past a key's
 * end only inside the same 4 KiB page (never faults; not in sanitized builds); a key ending near a
 * page end is copied. */
static BC_AVX2 inline void bc_v_load8x4(const bc_key *k, const uint32_t *len32, uint32_t b,
                                        uint8_t (*tmp)[16], __m256i c[4])
{
    static const uint8_t zeros[16] = {0};
    const uint8_t *src[8];
    for (int l = 0; l < 8; l++) {
        uint32_t left = len32[l] > 4 * b ? len32[l] - 4 * b : 0;
        if (left == 0) {
            src[l] = zeros; /* also a keyless key's: no arithmetic on its NULL data */
            continue;
        }
        const uint8_t *p = (const uint8_t *)k[l].data + 4 * (size_t)b;
        if (left >= 16 || (BC_READ_PAST_KEYS && ((uintptr_t)p & 4095) <= 4080))
            src[l] = p;
        else {
            memcpy(tmp[l], p, left);
            src[l] = tmp[l];
        }
    }
    bc_v_window8x4((bc_lanes8){src, NULL, 0}, 0, c);
}

/* The last 4 bytes of the 8 keys of len bytes (len >= 16) of g, one word per lane: the last
 * column of the window ending at len (the compiler drops the other three). */
static BC_AVX2 BC_INLINE __m256i bc_v_last_word8(bc_lanes8 g, size_t len)
{
    __m256i c[4];
    bc_v_window8x4(g, len - 16, c);
    return c[3];
}

static BC_AVX2 BC_INLINE __m256i bc_v_final(__m256i h, __m256i tw, __m256i vlen)
{
    __m256i rembits = _mm256_slli_epi32(
        _mm256_sub_epi32(_mm256_set1_epi32(4), _mm256_and_si256(vlen, _mm256_set1_epi32(3))), 3);
    __m256i t = _mm256_and_si256(tw, _mm256_srlv_epi32(_mm256_set1_epi32(-1), rembits));
    t = _mm256_mullo_epi32(t, _mm256_set1_epi32((int)BC_M3_C1));
    t = bc_v_rotl(t, 15);
    t = _mm256_mullo_epi32(t, _mm256_set1_epi32((int)BC_M3_C2));
    h = _mm256_xor_si256(h, t);
    h = _mm256_xor_si256(h, vlen);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x85ebca6bu));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0xc2b2ae35u));
    return _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
}

/* 16 keys of one length len >= 16 (UUIDs, fixed-format ids), 8 in g0 and 8 in g1, as two 8-lane
 * chains run side by side: one chain alone would wait on its own multiply latency. Every load lies inside its
 * key, so no lane needs a page check, a copy or a mask: blocks come 4 at a time from 16-byte windows (few
 * registers live, so nothing spills), the blocks past the last whole 4 from a window ending at the last whole
 * block, the tail bytes from one ending at len. */
static BC_AVX2 BC_INLINE void bc_hash16_same_len(bc_lanes8 g0, bc_lanes8 g1, size_t len, uint32_t *out)
{
    size_t nb = len >> 2, rem = len & 3, b = 0;
    __m256i h0 = _mm256_setzero_si256(), h1 = _mm256_setzero_si256(), c0[4], c1[4];
    for (; b + 4 <= nb; b += 4) {
        bc_v_window8x4(g0, 4 * b, c0);
        bc_v_window8x4(g1, 4 * b, c1);
        for (int j = 0; j < 4; j++) {
            h0 = bc_v_block(h0, c0[j]);
            h1 = bc_v_block(h1, c1[j]);
        }
    }
    if (b < nb) {
        bc_v_window8x4(g0, 4 * (nb - 4), c0);
        bc_v_window8x4(g1, 4 * (nb - 4), c1);
        switch (nb - b) {
        case 3:
            h0 = bc_v_block(h0, c0[1]);
            h1 = bc_v_block(h1, c1[1]);
            /* fall through */
        case 2:
            h0 = bc_v_block(h0, c0[2]);
            h1 = bc_v_block(h1, c1[2]);
            /* fall through */
        default:
            h0 = bc_v_block(h0, c0[3]);
            h1 = bc_v_block(h1, c1[3]);
        }
    }
    __m256i tw0 = _mm256_setzero_si256(), tw1 = _mm256_setzero_si256();
    if (rem) {
        __m128i drop = _mm_cvtsi32_si128((int)(8 * (4 - rem)));
        tw0 = _mm256_srl_epi32(bc_v_last_word8(g0, len), drop);
        tw1 = _mm256_srl_epi32(bc_v_last_word8(g1, len), drop);
    }
    __m256i vlen = _mm256_set1_epi32((int)len);
    _mm256_storeu_si256((__m256i *)out, bc_v_final(h0, tw0, vlen));
    _mm256_storeu_si256((__m256i *)(out + 8), bc_v_final(h1, tw1, vlen));
}

/* Whether 16 keys all have length len: the len words of the 16 descriptors (8 vectors of two
 * descriptors) compared at once. */
_Static_assert(sizeof(bc_key) == 16 && offsetof(bc_key, len) == 8, "bc_key layout the AVX2 path reads");
static BC_AVX2 inline int bc_same_len16(const bc_key *k, uint32_t len)
{
    __m256i want = _mm256_set1_epi32((int)len), diff = _mm256_setzero_si256();
    for (int v = 0; v < 8; v++)
        diff =
            _mm256_or_si256(diff, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(k + 2 * v)), want));
    /* the len word is the third 32-bit word of each 16-byte descriptor */
    const __m256i len_words = _mm256_setr_epi32(0, 0, -1, 0, 0, 0, -1, 0);
    return _mm256_testz_si256(diff, len_words);
}

/* 16 keys of any lengths: two 8-lane chains side by side; lanes whose keys are shorter than the
 * group's longest are masked, and a 16-byte load that could cross into the next page past a key
 * reads a copy instead. */
static BC_AVX2 __attribute__((noinline)) void bc_hash16_mixed(const bc_key *k, uint32_t *out)
{
    uint32_t len32[16];
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int l = 0; l < 16; l++) {
        uint32_t len = (uint32_t)k[l].len;
        len32[l] = len;
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
    }
    if (hi - lo > 64) {
        for (int l = 0; l < 16; l++)
            out[l] = bc_murmur3_32(k[l].data, (size_t)k[l].len);
        return;
    }
    __m256i vlen0 = _mm256_loadu_si256((const __m256i *)len32);
    __m256i vlen1 = _mm256_loadu_si256((const __m256i *)(len32 + 8));
    __m256i vnb0 = _mm256_srli_epi32(vlen0, 2), vnb1 = _mm256_srli_epi32(vlen1, 2);
    __m256i h0 = _mm256_setzero_si256(), h1 = _mm256_setzero_si256();
    __m256i tw0 = _mm256_setzero_si256(), tw1 = _mm256_setzero_si256();
    uint32_t b = 0;
    for (; 4 * (b + 8) <= lo; b += 8) {
        __m256i c0[8], c1[8];
        bc_v_load8x8(k, b, c0);
        bc_v_load8x8(k + 8, b, c1);
        for (int j = 0; j < 8; j++) {
            h0 = bc_v_block(h0, c0[j]);
            h1 = bc_v_block(h1, c1[j]);
        }
    }
    uint8_t tmp[16][16];
    uint32_t same_nb = (lo >> 2) == (hi >> 2), nb = lo >> 2;
    for (; 4 * b < hi; b += 4) {
        __m256i c0[4], c1[4];
        bc_v_load8x4(k, len32, b, tmp, c0);
        bc_v_load8x4(k + 8, len32 + 8, b, tmp + 8, c1);
        for (uint32_t j = 0; j < 4; j++) {
            if (same_nb) {
                if (b + j < nb) {
                    h0 = bc_v_block(h0, c0[j]);
                    h1 = bc_v_block(h1, c1[j]);
                } else if (b + j == nb) {
                    tw0 = c0[j];
                    tw1 = c1[j];
                }
                continue;
            }
            __m256i bj = _mm256_set1_epi32((int)(b + j));
            __m256i a0 = _mm256_cmpgt_epi32(vnb0, bj), a1 = _mm256_cmpgt_epi32(vnb1, bj);
            h0 = _mm256_blendv_epi8(h0, bc_v_block(h0, c0[j]), a0);
            h1 = _mm256_blendv_epi8(h1, bc_v_block(h1, c1[j]), a1);
            tw0 = _mm256_blendv_epi8(tw0, c0[j], _mm256_cmpeq_epi32(vnb0, bj));
            tw1 = _mm256_blendv_epi8(tw1, c1[j], _mm256_cmpeq_epi32(vnb1, bj));
        }
    }
    _mm256_storeu_si256((__m256i *)out, bc_v_final(h0, tw0, vlen0));
    _mm256_storeu_si256((__m256i *)(out + 8), bc_v_final(h1, tw1, vlen1));
}

/* The common fixed-format key lengths, hashed by copies of the kernel with the length a constant:
 * the block loop unrolls and, in a column of one length, every lane loads at a constant offset
 * from the group's start. 16: raw UUIDs; 24: ObjectId hex; 32: MD5 hex, UUIDs without dashes; 36: UUIDs;
 * 40: SHA-1 hex; 64: SHA-256 hex. */
#define BC_KNOWN_LENGTHS(X) X(16) X(24) X(32) X(36) X(40) X(64)

/* 16 described keys all of length len >= 16, by the windowed path. */
static BC_AVX2 BC_INLINE void bc_hash16_described(const bc_key *k, size_t len, uint32_t *out)
{
    const uint8_t *p[16];
    for (int l = 0; l < 16; l++)
        p[l] = (const uint8_t *)k[l].data;
    bc_hash16_same_len((bc_lanes8){p, NULL, 0}, (bc_lanes8){p + 8, NULL, 0}, len, out);
}

/* One group of 16 keys of any lengths: the windowed path when they share a length >= 16. */
static BC_AVX2 __attribute__((noinline)) void bc_hash16_any(const bc_key *k, uint32_t *out)
{
    uint32_t len = (uint32_t)k[0].len;
    if (len >= 16 && bc_same_len16(k, len))
        bc_hash16_described(k, len, out);
    else
        bc_hash16_mixed(k, out);
}

/* Groups of 16 keys, those all of length known (a constant; 0: none) by the copy for it; the
 * last n % 16 by the interleaved path. */
static BC_AVX2 BC_INLINE void bc_hash_groups_avx2(const bc_key *keys, size_t n, uint32_t *out, uint32_t known)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const bc_key *k = keys + i;
        if (known && k[0].len == known && bc_same_len16(k, known))
            bc_hash16_described(k, known, out + i);
        else
            bc_hash16_any(k, out + i);
    }
    bc_hash_bytes_interleaved(keys + i, n - i, out + i);
}

/* The first key's length picks the copy: a list of ids of one format takes it for every group. */
static BC_AVX2 void bc_hash_bytes_avx2(const bc_key *keys, size_t n, uint32_t *out)
{
#define BC_CASE(L)                            \
    case L:                                   \
        bc_hash_groups_avx2(keys, n, out, L); \
        return;
    switch (n >= 16 ? (uint32_t)keys[0].len : 0) {
        BC_KNOWN_LENGTHS(BC_CASE)
    }
#undef BC_CASE
    bc_hash_groups_avx2(keys, n, out, 0);
}

/* Keys i..i+15 of n keys of len >= 16 bytes each, stride bytes apart from base (stride >= len: an
 * Arrow column of one length has stride == len, numpy's StringDType arena puts a length prefix
 * between keys): no descriptors to read, the lanes' addresses follow from the group's position.
 * Only the keys' own bytes are loaded, never the gaps between them. The bytes 128 keys ahead are
 * prefetched (past the end too: a prefetch never faults), which the hardware prefetcher alone does
 * not keep up with, and each page the run enters BC_PAGE_AHEAD bytes ahead (bc_prefetch_page_ahead). */
static BC_AVX2 BC_INLINE void bc_hash_rows16_avx2(const uint8_t *base, size_t len, size_t stride, size_t i,
                                                  uint32_t *out)
{
    uintptr_t ahead = (uintptr_t)base + (i + 128) * stride; /* an address, never dereferenced */
    for (size_t at = 0; at < 16 * stride; at += 64)
        __builtin_prefetch((const void *)(ahead + at));
    const uint8_t *q = base + i * stride;
    bc_prefetch_page_ahead(q, 16 * stride);
    bc_hash16_same_len((bc_lanes8){NULL, q, stride}, (bc_lanes8){NULL, q + 8 * stride, stride}, len, out + i);
}

/* Keys i..n-1 of such a run (fewer than 16 left) one at a time. */
static inline void bc_hash_rows_tail(const uint8_t *base, size_t len, size_t stride, size_t i, size_t n,
                                     uint32_t *out)
{
    for (const uint8_t *key = base + i * stride; i < n; i++, key += stride)
        out[i] = bc_murmur3_32(key, len);
}

/* n keys of len >= 16 bytes each, stride bytes apart from base: 16 at a time, then the rest. */
static BC_AVX2 BC_INLINE void bc_hash_rows_avx2(const uint8_t *base, size_t len, size_t stride, size_t n,
                                                uint32_t *out)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        bc_hash_rows16_avx2(base, len, stride, i, out);
    bc_hash_rows_tail(base, len, stride, i, n, out);
}

/* A switch on a run's length len that runs BC_ROWS(L, S), a macro its user defines, with the
 * length L a constant for each known length, and the stride S (a variable named stride) a constant
 * too in the two common layouts: back to back (an Arrow column) and one byte apart (numpy's
 * StringDType arena, whose strings shorter than 256 bytes each follow a one-byte length). */
#define BC_ROWS_CASE(L)           \
    case L:                       \
        if (stride == L)          \
            BC_ROWS(L, L);        \
        else if (stride == L + 1) \
            BC_ROWS(L, L + 1);    \
        else                      \
            BC_ROWS(L, stride);   \
        break;
#define BC_ROWS_SWITCH(len)            \
    switch (len) {                     \
        BC_KNOWN_LENGTHS(BC_ROWS_CASE) \
    default:                           \
        BC_ROWS(len, stride);          \
    }

/* A run of one of the known lengths by its copy (BC_ROWS_SWITCH). */
static BC_AVX2 void bc_hash_strided_avx2(const uint8_t *base, size_t len, size_t stride, size_t n,
                                         uint32_t *out)
{
#define BC_ROWS(L, S) bc_hash_rows_avx2(base, L, S, n, out)
    BC_ROWS_SWITCH(len)
#undef BC_ROWS
}

/* Whether the CPU has AVX2, asked once. Threads asking at the same time may each compute it; they
 * store the same value, and the relaxed atomics keep that free of a data race. */
static inline int bc_cpu_has_avx2(void)
{
    static int cached = -1;
    int has = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&cached, has, __ATOMIC_RELAXED);
    }
    return has;
}
#else
#define BC_HAVE_AVX2_PATH 0
static inline int bc_cpu_has_avx2(void)
{
    return 0;
}
#endif

/* The path AUTO resolves to on this CPU. */
static inline int bc_best_path(void)
{
    return bc_cpu_has_avx2() ? BC_PATH_SIMD : BC_PATH_INTERLEAVED;
}

/* Hash n byte keys by the given path; SIMD where the CPU lacks it is the caller's error. */
static inline void bc_hash_bytes(const bc_key *keys, size_t n, uint32_t *out, int path)
{
    if (path == BC_PATH_AUTO)
        path = bc_best_path();
#if BC_HAVE_AVX2_PATH
    if (path == BC_PATH_SIMD) {
        bc_hash_bytes_avx2(keys, n, out);
        return;
    }
#endif
    if (path == BC_PATH_INTERLEAVED)
        bc_hash_bytes_interleaved(keys, n, out);
    else
        bc_hash_bytes_scalar(keys, n, out);
}

/* n keys of len bytes each, stride bytes apart from base (stride >= len; stride == len: back to
 * back), by the given path. Reads only the keys' own bytes. */
static inline void bc_hash_strided(const uint8_t *base, size_t len, size_t stride, size_t n, uint32_t *out,
                                   int path)
{
    if (path == BC_PATH_AUTO)
        path = bc_best_path();
#if BC_HAVE_AVX2_PATH
    if (path == BC_PATH_SIMD && len >= 16) {
        bc_hash_strided_avx2(base, len, stride, n, out);
        return;
    }
#endif
    bc_key keys[64];
    for (size_t i = 0; i < n; i += 64) {
        size_t m = n - i < 64 ? n - i : 64;
        for (size_t j = 0; j < m; j++) {
            keys[j].data = base + (i + j) * stride;
            keys[j].len = (uint32_t)len;
            keys[j].kind = BC_KEY_BYTES;
        }
        bc_hash_bytes(keys, m, out + i, path);
    }
}

/* n keys of len bytes each, back to back from base, by the given path. */
static inline void bc_hash_fixed(const uint8_t *base, size_t len, size_t n, uint32_t *out, int path)
{
    bc_hash_strided(base, len, len, n, out, path);
}

#endif
