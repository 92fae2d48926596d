/* One check shared by the run readers of arrow_c.h and npstring.h: whether m 16-byte items, a
 * fixed distance apart, are the terms of an arithmetic progression — item j equal to first + j * step
 * in the bytes that matter. An Arrow string view of a run is (length, prefix, buffer index, offset +
 * j * length); a numpy StringDType arena item is (offset + j * distance, size and flags). Both are
 * one 128-bit value growing by a fixed step, added here as two 64-bit lanes that wrap (a 32-bit word
 * stepped in the high half of a lane wraps into nothing the caller compares, since callers bound
 * their values away from the wrap). */
#ifndef BUCKETCORE_AFFINE16_H
#define BUCKETCORE_AFFINE16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "murmur3_lanes.h"
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#endif

/* A 16-byte item as its two native 64-bit halves (bytes 0-7, bytes 8-15, each read as memcpy reads it). */
typedef struct {
    uint64_t lo, hi;
} bc_item16;

/* The item of four native 32-bit words, in the order they lie in memory. */
static inline bc_item16 bc_item16_words(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    const uint32_t w[4] = {w0, w1, w2, w3};
    bc_item16 item;
    memcpy(&item.lo, w, 8);
    memcpy(&item.hi, w + 2, 8);
    return item;
}

#if BC_HAVE_AVX2_PATH
/* Items back to back (stride 16): two per 32-byte load, eight per round in two accumulators, the
 * rest one at a time. */
static BC_AVX2 int bc_affine16_avx2(const uint8_t *p, size_t m, bc_item16 first, bc_item16 step,
                                    bc_item16 care)
{
    const __m256i two = _mm256_set_epi64x((long long)(2 * step.hi), (long long)(2 * step.lo),
                                          (long long)(2 * step.hi), (long long)(2 * step.lo));
    const __m256i eight = _mm256_slli_epi64(two, 2);
    __m256i e0 = _mm256_set_epi64x((long long)(first.hi + step.hi), (long long)(first.lo + step.lo),
                                   (long long)first.hi, (long long)first.lo);
    __m256i e1 = _mm256_add_epi64(e0, two), e2 = _mm256_add_epi64(e1, two), e3 = _mm256_add_epi64(e2, two);
    __m256i d0 = _mm256_setzero_si256(), d1 = d0;
    size_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256i *q = (const __m256i *)(p + 16 * j);
        d0 = _mm256_or_si256(d0, _mm256_xor_si256(_mm256_loadu_si256(q), e0));
        d1 = _mm256_or_si256(d1, _mm256_xor_si256(_mm256_loadu_si256(q + 1), e1));
        d0 = _mm256_or_si256(d0, _mm256_xor_si256(_mm256_loadu_si256(q + 2), e2));
        d1 = _mm256_or_si256(d1, _mm256_xor_si256(_mm256_loadu_si256(q + 3), e3));
        e0 = _mm256_add_epi64(e0, eight);
        e1 = _mm256_add_epi64(e1, eight);
        e2 = _mm256_add_epi64(e2, eight);
        e3 = _mm256_add_epi64(e3, eight);
    }
    __m256i d01 = _mm256_or_si256(d0, d1);
    __m128i d = _mm_or_si128(_mm256_castsi256_si128(d01), _mm256_extracti128_si256(d01, 1));
    __m128i e = _mm256_castsi256_si128(e0);
    const __m128i one = _mm_set_epi64x((long long)step.hi, (long long)step.lo);
    for (; j < m; j++) {
        d = _mm_or_si128(d, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + 16 * j)), e));
        e = _mm_add_epi64(e, one);
    }
    d = _mm_and_si128(d, _mm_set_epi64x((long long)care.hi, (long long)care.lo));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(d, _mm_setzero_si128())) == 0xFFFF;
}
#endif

#if defined(__SSE2__) || defined(_M_X64)
/* Whether the m items (m >= 1) at p + j * stride equal first + j * step in the bytes care selects.
 * AVX2 (items back to back) compares two items per load, eight per round; SSE2 (every x86-64) one
 * item per load, four per round; elsewhere a plain loop. */
static inline int bc_affine16(const uint8_t *p, ptrdiff_t stride, size_t m, bc_item16 first, bc_item16 step,
                              bc_item16 care)
{
#if BC_HAVE_AVX2_PATH
    if (stride == 16 && bc_cpu_has_avx2())
        return bc_affine16_avx2(p, m, first, step, care);
#endif
    const __m128i one = _mm_set_epi64x((long long)step.hi, (long long)step.lo), four = _mm_slli_epi64(one, 2);
    __m128i e0 = _mm_set_epi64x((long long)first.hi, (long long)first.lo), e1 = _mm_add_epi64(e0, one);
    __m128i e2 = _mm_add_epi64(e1, one), e3 = _mm_add_epi64(e2, one);
    __m128i d0 = _mm_setzero_si128(), d1 = d0;
    size_t j = 0;
    for (; j + 4 <= m; j += 4) {
        const uint8_t *q = p + (ptrdiff_t)j * stride;
        d0 = _mm_or_si128(d0, _mm_xor_si128(_mm_loadu_si128((const __m128i *)q), e0));
        d1 = _mm_or_si128(d1, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(q + stride)), e1));
        d0 = _mm_or_si128(d0, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(q + 2 * stride)), e2));
        d1 = _mm_or_si128(d1, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(q + 3 * stride)), e3));
        e0 = _mm_add_epi64(e0, four);
        e1 = _mm_add_epi64(e1, four);
        e2 = _mm_add_epi64(e2, four);
        e3 = _mm_add_epi64(e3, four);
    }
    for (; j < m; j++) {
        d0 = _mm_or_si128(d0,
                          _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + (ptrdiff_t)j * stride)), e0));
        e0 = _mm_add_epi64(e0, one);
    }
    __m128i d = _mm_and_si128(_mm_or_si128(d0, d1), _mm_set_epi64x((long long)care.hi, (long long)care.lo));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(d, _mm_setzero_si128())) == 0xFFFF;
}
#else
static inline int bc_affine16(const uint8_t *p, ptrdiff_t stride, size_t m, bc_item16 first, bc_item16 step,
                              bc_item16 care)
{
    uint64_t other = 0, lo = first.lo, hi = first.hi;
    for (size_t j = 0; j < m; j++, lo += step.lo, hi += step.hi) {
        uint64_t a, b;
        memcpy(&a, p + (ptrdiff_t)j * stride, 8);
        memcpy(&b, p + (ptrdiff_t)j * stride + 8, 8);
        other |= ((a ^ lo) & care.lo) | ((b ^ hi) & care.hi);
    }
    return other == 0;
}
#endif

#endif
