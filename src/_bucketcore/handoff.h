/* A count published by one thread and watched by another, with release/acquire ordering: what
 * the publisher wrote before publishing is visible to a watcher that sees the new count. */
#ifndef BUCKETCORE_HANDOFF_H
#define BUCKETCORE_HANDOFF_H

#include <stdint.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static inline void bc_publish(int64_t *p, int64_t v) { _InterlockedExchange64((volatile __int64 *)p, v); }
static inline int64_t bc_observe(int64_t *p) { return _InterlockedCompareExchange64((volatile __int64 *)p, 0, 0); }
#else
static inline void bc_publish(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline int64_t bc_observe(int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
#endif

#endif
