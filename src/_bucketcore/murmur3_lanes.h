/* Murmur3 over many keys at once. Murmur3 is a serial chain per key, so one key at a time leaves
 * most of the core idle; hashing a group of keys in lockstep fills it. Three paths, bit-identical:
 *   scalar      one key after another (bc_murmur3_32);
 *   interleaved 4 keys in lockstep in plain C (any CPU);
 *   avx2        8 keys in the lanes of a 256-bit vector (x86-64 with AVX2, chosen at run time).
 * The keys are bc_key descriptors of kind BC_KEY_BYTES or BC_KEY_NONE (hash 0, like ""). */
#ifndef BUCKETCORE_MURMUR3_LANES_H
#define BUCKETCORE_MURMUR3_LANES_H

#include "keys.h"

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

#define BC_LANES4 4
static inline void bc_hash_bytes_interleaved(const bc_key *keys, size_t n, uint32_t *out)
{
    size_t i = 0;
    for (; i + BC_LANES4 <= n; i += BC_LANES4) {
        const uint8_t *p[BC_LANES4];
        uint32_t h[BC_LANES4];
        size_t common = SIZE_MAX;
        for (int l = 0; l < BC_LANES4; l++) {
            p[l] = (const uint8_t *)keys[i + l].data;
            h[l] = 0;
            size_t nb = (size_t)keys[i + l].len >> 2;
            common = nb < common ? nb : common;
        }
        for (size_t b = 0; b < common; b++)
            for (int l = 0; l < BC_LANES4; l++)
                h[l] = bc_m3_block(h[l], bc_load32le(p[l] + 4 * b));
        for (int l = 0; l < BC_LANES4; l++)
            out[i + l] = bc_m3_finish(h[l], p[l], (size_t)keys[i + l].len, common);
    }
    bc_hash_bytes_scalar(keys + i, n - i, out + i);
}

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define BC_HAVE_AVX2_PATH 1
#include <immintrin.h>

#define BC_AVX2 __attribute__((target("avx2")))

static BC_AVX2 inline __m256i bc_v_rotl(__m256i x, int r)
{
    return _mm256_or_si256(_mm256_slli_epi32(x, r), _mm256_srli_epi32(x, 32 - r));
}

static BC_AVX2 inline __m256i bc_v_block(__m256i h, __m256i k)
{
    k = _mm256_mullo_epi32(k, _mm256_set1_epi32((int)BC_M3_C1));
    k = bc_v_rotl(k, 15);
    k = _mm256_mullo_epi32(k, _mm256_set1_epi32((int)BC_M3_C2));
    h = _mm256_xor_si256(h, k);
    h = bc_v_rotl(h, 13);
    h = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 2), h), _mm256_set1_epi32((int)0xe6546b64u));
    return h;
}

/* Block b of each of 8 keys; lanes whose key has no block b (mask 0) read nothing and get 0. */
static BC_AVX2 inline __m256i bc_v_gather(__m256i addr_lo, __m256i addr_hi, __m256i mask, int64_t off)
{
    __m256i o = _mm256_set1_epi64x(off);
    __m128i lo = _mm256_mask_i64gather_epi32(_mm_setzero_si128(), (const int *)0,
                                             _mm256_add_epi64(addr_lo, o),
                                             _mm256_castsi256_si128(mask), 1);
    __m128i hi = _mm256_mask_i64gather_epi32(_mm_setzero_si128(), (const int *)0,
                                             _mm256_add_epi64(addr_hi, o),
                                             _mm256_extracti128_si256(mask, 1), 1);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

static BC_AVX2 void bc_hash_bytes_avx2(const bc_key *keys, size_t n, uint32_t *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const bc_key *k = keys + i;
        uint32_t nb[8], tail[8], len32[8];
        uint32_t lo = UINT32_MAX, hi = 0;
        for (int l = 0; l < 8; l++) {
            size_t len = (size_t)k[l].len;
            nb[l] = (uint32_t)(len >> 2);
            len32[l] = (uint32_t)len;
            tail[l] = bc_m3_tail_bytes((const uint8_t *)k[l].data + (len & ~(size_t)3), len & 3);
            lo = nb[l] < lo ? nb[l] : lo;
            hi = nb[l] > hi ? nb[l] : hi;
        }
        /* Lockstep with masks while lengths are close; a far longer key finishes on its own. */
        uint32_t steps = hi - lo <= 8 ? hi : lo;
        __m256i addr_lo = _mm256_set_epi64x((int64_t)(intptr_t)k[3].data, (int64_t)(intptr_t)k[2].data,
                                            (int64_t)(intptr_t)k[1].data, (int64_t)(intptr_t)k[0].data);
        __m256i addr_hi = _mm256_set_epi64x((int64_t)(intptr_t)k[7].data, (int64_t)(intptr_t)k[6].data,
                                            (int64_t)(intptr_t)k[5].data, (int64_t)(intptr_t)k[4].data);
        __m256i vnb = _mm256_loadu_si256((const __m256i *)nb);
        __m256i h = _mm256_setzero_si256();
        for (uint32_t b = 0; b < steps; b++) {
            __m256i active = _mm256_cmpgt_epi32(vnb, _mm256_set1_epi32((int)b));
            __m256i kv = bc_v_gather(addr_lo, addr_hi, active, (int64_t)b * 4);
            h = _mm256_blendv_epi8(h, bc_v_block(h, kv), active);
        }
        if (steps < hi) {
            uint32_t hs[8];
            _mm256_storeu_si256((__m256i *)hs, h);
            for (int l = 0; l < 8; l++)
                out[i + l] = bc_m3_finish(hs[l], (const uint8_t *)k[l].data, (size_t)k[l].len,
                                          steps < nb[l] ? steps : nb[l]);
            continue;
        }
        /* Tail (a zero tail mixes in as a no-op) and finalisation, all lanes at once. */
        __m256i t = _mm256_loadu_si256((const __m256i *)tail);
        t = _mm256_mullo_epi32(t, _mm256_set1_epi32((int)BC_M3_C1));
        t = bc_v_rotl(t, 15);
        t = _mm256_mullo_epi32(t, _mm256_set1_epi32((int)BC_M3_C2));
        h = _mm256_xor_si256(h, t);
        h = _mm256_xor_si256(h, _mm256_loadu_si256((const __m256i *)len32));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0x85ebca6bu));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int)0xc2b2ae35u));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        _mm256_storeu_si256((__m256i *)(out + i), h);
    }
    bc_hash_bytes_interleaved(keys + i, n - i, out + i);
}

static inline int bc_cpu_has_avx2(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return cached;
}
#else
#define BC_HAVE_AVX2_PATH 0
static inline int bc_cpu_has_avx2(void) { return 0; }
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

#endif
