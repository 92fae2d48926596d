/* An entry's stamp: the min and max of its messages' bucket hashes
 * (docs/design.md, "Producer bucketing and stamping"). */
#ifndef BUCKETCORE_STAMP_H
#define BUCKETCORE_STAMP_H

#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#endif

/* Min and max of n >= 1 hashes. Eight at a time where SSE2 is (every x86_64): the last eight
 * are read again when n is not a multiple of eight, which a min or max does not mind. SSE2 has
 * only signed 16-bit min/max, so the hashes are compared with their top bit flipped. */
static inline void bc_stamp(const uint16_t *h, size_t n, uint16_t *lo, uint16_t *hi)
{
#if defined(__SSE2__) || defined(_M_X64)
    if (n >= 8) {
        const __m128i flip = _mm_set1_epi16((short)0x8000);
        __m128i mn = _mm_set1_epi16(0x7FFF), mx = _mm_set1_epi16((short)0x8000), v;
        size_t i;
        for (i = 0; i + 8 <= n; i += 8) {
            v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(h + i)), flip);
            mn = _mm_min_epi16(mn, v);
            mx = _mm_max_epi16(mx, v);
        }
        if (i < n) {
            v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(h + n - 8)), flip);
            mn = _mm_min_epi16(mn, v);
            mx = _mm_max_epi16(mx, v);
        }
        /* fold the eight lanes: halves, quarters, pairs */
        mn = _mm_min_epi16(mn, _mm_shuffle_epi32(mn, 0x4E));
        mx = _mm_max_epi16(mx, _mm_shuffle_epi32(mx, 0x4E));
        mn = _mm_min_epi16(mn, _mm_shuffle_epi32(mn, 0xB1));
        mx = _mm_max_epi16(mx, _mm_shuffle_epi32(mx, 0xB1));
        mn = _mm_min_epi16(mn, _mm_srli_epi32(mn, 16));
        mx = _mm_max_epi16(mx, _mm_srli_epi32(mx, 16));
        *lo = (uint16_t)(_mm_cvtsi128_si32(mn) ^ 0x8000);
        *hi = (uint16_t)(_mm_cvtsi128_si32(mx) ^ 0x8000);
        return;
    }
#endif
    uint16_t a = h[0], b = h[0];
    for (size_t i = 1; i < n; i++) {
        a = h[i] < a ? h[i] : a;
        b = h[i] > b ? h[i] : b;
    }
    *lo = a;
    *hi = b;
}

#endif
