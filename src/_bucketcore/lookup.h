/* Bucket lookup over a boundary list: bucket_of(h) = number of splits <= h
 * (docs/design.md, "Boundary lists"). */
#ifndef BUCKETCORE_LOOKUP_H
#define BUCKETCORE_LOOKUP_H

#include <stdint.h>

/* Branchless upper bound over n ascending splits; the loop runs ceil(log2 n) times. The step is a
 * masked add, not ?: (which GCC compiles to a jump that mispredicts on random hashes). */
static inline uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)
{
    if (n == 0)
        return 0;
    const uint16_t *base = splits;
    uint32_t len = n;
    while (len > 1) {
        uint32_t half = len >> 1;
        base += half & (0u - (uint32_t)(base[half - 1] <= h));
        len -= half;
    }
    return (uint32_t)(base - splits) + (*base <= h);
}

#endif
