/* The streaming batcher's call lock (_batcher.BatcherCore). Under the GIL it is a flag the GIL
 * holder tests and sets with nothing in between that could let the GIL go, so it costs nothing
 * (bc_mutex is then a placeholder); a thread that finds the flag taken naps until it is free. On
 * a free-threaded build (no GIL to order those steps) it is a PyMutex, which parks a waiting
 * thread with its thread state detached. The holder's thread id is read by other threads there,
 * so it is stored and loaded atomically. */
#ifndef BUCKETCORE_CALL_LOCK_H
#define BUCKETCORE_CALL_LOCK_H

#include "free_threaded.h"
#ifdef _WIN32
#include <windows.h>
#else
#include <sched.h>
#endif

/* Give the core to another thread (the holder of the flag, which let the GIL go). */
static inline void bc_nap(void)
{
#ifdef _WIN32
    Sleep(0);
#else
    sched_yield();
#endif
}

#if BC_FREE_THREADED
typedef PyMutex bc_mutex;
static inline void bc_mutex_lock(bc_mutex *m)
{
    PyMutex_Lock(m);
}
static inline void bc_mutex_unlock(bc_mutex *m)
{
    PyMutex_Unlock(m);
}
#else
typedef char bc_mutex;
static inline void bc_mutex_lock(bc_mutex *m)
{
    (void)m;
}
static inline void bc_mutex_unlock(bc_mutex *m)
{
    (void)m;
}
#endif

#if defined(__GNUC__) || defined(__clang__)
static inline unsigned long bc_owner_load(unsigned long *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void bc_owner_store(unsigned long *p, unsigned long v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
#else
static inline unsigned long bc_owner_load(unsigned long *p)
{
    return *(volatile unsigned long *)p;
}
static inline void bc_owner_store(unsigned long *p, unsigned long v)
{
    *(volatile unsigned long *)p = v;
}
#endif

#endif
