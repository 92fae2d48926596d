/* One check shared by the run readers of arrow_c.h and npstring.h, alone or fused with the hash of
 * the run it confirms: whether m 16-byte items, a fixed distance apart, are the terms of an
 * arithmetic progression — item j equal to first + j * step in the bytes that matter. An Arrow
 * string view of a run is (length, prefix, buffer index, offset + j * length); a numpy StringDType
 * arena item is (offset + j * distance, size and flags). Both are one 128-bit value growing by a
 * fixed step, added here as two 64-bit lanes that wrap (a 32-bit word stepped in the high half of a
 * lane wraps into nothing the caller compares, since callers bound their values away from the
 * wrap). */
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
/* The comparison of items back to back (stride 16) with their terms, two items per 32-byte load:
 * e holds the terms of the next two items, two the step of two items, d0 and d1 collect every bit
 * in which an item compared so far differed from its term. */
typedef struct {
    __m256i e, two, d0, d1;
} bc_affine16_lanes;

static BC_AVX2 BC_INLINE bc_affine16_lanes bc_affine16_lanes_start(bc_item16 first, bc_item16 step)
{
    bc_affine16_lanes a;
    a.e = _mm256_set_epi64x((long long)(first.hi + step.hi), (long long)(first.lo + step.lo),
                            (long long)first.hi, (long long)first.lo);
    a.two = _mm256_set_epi64x((long long)(2 * step.hi), (long long)(2 * step.lo), (long long)(2 * step.hi),
                              (long long)(2 * step.lo));
    a.d0 = _mm256_setzero_si256();
    a.d1 = a.d0;
    return a;
}

/* The next 8 items, at p. */
static BC_AVX2 BC_INLINE void bc_affine16_round8(bc_affine16_lanes *a, const uint8_t *p)
{
    const __m256i *q = (const __m256i *)p;
    a->d0 = _mm256_or_si256(a->d0, _mm256_xor_si256(_mm256_loadu_si256(q), a->e));
    a->e = _mm256_add_epi64(a->e, a->two);
    a->d1 = _mm256_or_si256(a->d1, _mm256_xor_si256(_mm256_loadu_si256(q + 1), a->e));
    a->e = _mm256_add_epi64(a->e, a->two);
    a->d0 = _mm256_or_si256(a->d0, _mm256_xor_si256(_mm256_loadu_si256(q + 2), a->e));
    a->e = _mm256_add_epi64(a->e, a->two);
    a->d1 = _mm256_or_si256(a->d1, _mm256_xor_si256(_mm256_loadu_si256(q + 3), a->e));
    a->e = _mm256_add_epi64(a->e, a->two);
}

/* The last m items (any m, 0 too), at p: 8 at a time, then one at a time; then whether every item
 * compared equals its term in the bytes care selects. */
static BC_AVX2 BC_INLINE int bc_affine16_lanes_end(bc_affine16_lanes *a, const uint8_t *p, size_t m,
                                                   bc_item16 step, bc_item16 care)
{
    size_t j = 0;
    for (; j + 8 <= m; j += 8)
        bc_affine16_round8(a, p + 16 * j);
    __m256i d01 = _mm256_or_si256(a->d0, a->d1);
    __m128i d = _mm_or_si128(_mm256_castsi256_si128(d01), _mm256_extracti128_si256(d01, 1));
    __m128i e = _mm256_castsi256_si128(a->e);
    const __m128i one = _mm_set_epi64x((long long)step.hi, (long long)step.lo);
    for (; j < m; j++) {
        d = _mm_or_si128(d, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + 16 * j)), e));
        e = _mm_add_epi64(e, one);
    }
    d = _mm_and_si128(d, _mm_set_epi64x((long long)care.hi, (long long)care.lo));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(d, _mm_setzero_si128())) == 0xFFFF;
}

/* Items back to back (stride 16): two per 32-byte load, eight per round, the rest one at a time. */
static BC_AVX2 int bc_affine16_avx2(const uint8_t *p, size_t m, bc_item16 first, bc_item16 step,
                                    bc_item16 care)
{
    bc_affine16_lanes a = bc_affine16_lanes_start(first, step);
    return bc_affine16_lanes_end(&a, p, m, step, care);
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

#if BC_HAVE_AVX2_PATH
/* bc_hash_strided_checked's AVX2 path: each group of 16 keys is hashed from its bytes and its 16
 * items compared with their terms in the same iteration, so the items are read while the keys'
 * bytes stream in, not in a pass of their own; the items' pages are touched ahead as the bytes'
 * are. */
static BC_AVX2 BC_INLINE int bc_hash_rows_checked_avx2(const uint8_t *base, size_t len, size_t stride,
                                                       size_t n, const uint8_t *items, bc_item16 first,
                                                       bc_item16 step, bc_item16 care, uint32_t *out)
{
    bc_affine16_lanes a = bc_affine16_lanes_start(first, step);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        bc_prefetch_page_ahead(items + 16 * i, 256);
        bc_hash_rows16_avx2(base, len, stride, i, out);
        bc_affine16_round8(&a, items + 16 * i);
        bc_affine16_round8(&a, items + 16 * i + 128);
    }
    bc_hash_rows_tail(base, len, stride, i, n, out);
    return bc_affine16_lanes_end(&a, items + 16 * i, n - i, step, care);
}

static BC_AVX2 int bc_hash_strided_checked_avx2(const uint8_t *base, size_t len, size_t stride, size_t n,
                                                const uint8_t *items, bc_item16 first, bc_item16 step,
                                                bc_item16 care, uint32_t *out)
{
    int same = 0;
#define BC_ROWS(L, S) same = bc_hash_rows_checked_avx2(base, L, S, n, items, first, step, care, out)
    BC_ROWS_SWITCH(len)
#undef BC_ROWS
    return same;
}
#endif

/* Hash n >= 1 keys of len bytes each, stride bytes apart from base (as bc_hash_strided), if the n
 * items at items + j * item_stride that say where those keys are equal first + j * step in the
 * bytes care selects (as bc_affine16). Returns 1 when they do, out[0..n) then the keys' hashes; 0
 * when some item differs, out[0..n) then holding anything (the caller describes the items one by
 * one and hashes again). The AVX2 path (len >= 16, items back to back) reads the keys' bytes before
 * their items are checked, so the caller must have bounded all n keys' bytes inside their buffer
 * whatever the items say; the other paths check the items first and hash only a run they confirm. */
static inline int bc_hash_strided_checked(const uint8_t *base, size_t len, size_t stride, size_t n,
                                          const uint8_t *items, ptrdiff_t item_stride, bc_item16 first,
                                          bc_item16 step, bc_item16 care, uint32_t *out, int path)
{
    if (path == BC_PATH_AUTO)
        path = bc_best_path();
#if BC_HAVE_AVX2_PATH
    if (path == BC_PATH_SIMD && len >= 16 && item_stride == 16)
        return bc_hash_strided_checked_avx2(base, len, stride, n, items, first, step, care, out);
#endif
    if (!bc_affine16(items, item_stride, n, first, step, care))
        return 0;
    bc_hash_strided(base, len, stride, n, out, path);
    return 1;
}

#endif
