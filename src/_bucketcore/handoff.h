/* A count published by one thread and watched by another, with release/acquire ordering: what
 * the publisher wrote before publishing is visible to a watcher that sees the new count. */
#ifndef BUCKETCORE_HANDOFF_H
#define BUCKETCORE_HANDOFF_H

#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <immintrin.h>
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static inline void bc_publish(int64_t *p, int64_t v)
{
    _InterlockedExchange64((volatile __int64 *)p, v);
}
static inline int64_t bc_observe(int64_t *p)
{
    return _InterlockedCompareExchange64((volatile __int64 *)p, 0, 0);
}
static inline int64_t bc_take(int64_t *p)
{
    return _InterlockedExchangeAdd64((volatile __int64 *)p, 1);
}
#else
static inline void bc_publish(int64_t *p, int64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static inline int64_t bc_observe(int64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
/* A ticket: the count before this thread's increment (threads taking work items in turn). */
static inline int64_t bc_take(int64_t *p)
{
    return __atomic_fetch_add(p, 1, __ATOMIC_ACQ_REL);
}
#endif

/* Spin until *p differs from seen, at most spins rounds; returns whether it did. The other
 * thread of a pipeline is usually microseconds from publishing, far less than a sleep and a
 * wake-up cost; the caller sleeps only when this gives up. */
static inline int bc_spin_for_change(int64_t *p, int64_t seen, int spins)
{
    for (int i = 0; i < spins; i++) {
        if (bc_observe(p) != seen)
            return 1;
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
        _mm_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
        __asm__ __volatile__("yield");
#endif
    }
    return bc_observe(p) != seen;
}

#endif
