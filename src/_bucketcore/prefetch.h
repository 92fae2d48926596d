/* A hint that a line will be read soon, for loops over state sized to a layout (the batch state
 * machine, the batcher's queues) and over long buffers (a key column's bytes and offsets): a
 * prefetch never faults and compiles to nothing where the compiler has no builtin for it. */
#ifndef BUCKETCORE_PREFETCH_H
#define BUCKETCORE_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define bc_prefetch(p) __builtin_prefetch(p)
#else
#define bc_prefetch(p) ((void)(p))
#endif

/* How many messages ahead a loop asks for a message's line: enough for the line to arrive while
 * the messages in between are handled, few enough that it is still cached when its turn comes. */
#define BC_PREFETCH_AHEAD 8

/* How far ahead a loop streaming through a buffer touches each 4 KiB page it is about to enter. In
 * memory of 4 KiB pages the first load into a page waits for its address translation (a nested page
 * walk in a VM) and the hardware prefetcher stops at every page's end; a prefetch into the page this
 * far ahead has its translation cached before the loads arrive. */
#define BC_PAGE_AHEAD 65536

/* Touch the 4 KiB page holding p: its first line and its middle one (the hardware prefetcher
 * picks a page up sooner from two lines than from one). */
static inline void bc_prefetch_page(uintptr_t p)
{
    uintptr_t page = p & ~(uintptr_t)4095; /* an address, never dereferenced */
    bc_prefetch((const void *)page);
    bc_prefetch((const void *)(page + 2048));
}

/* Touch the page a stream enters BC_PAGE_AHEAD bytes ahead, when its next step, [at, at + span),
 * crosses into a new page there: one call per step, two prefetches per page. A step of more than
 * 4 KiB touches only the page it ends in. */
static inline void bc_prefetch_page_ahead(const void *at, size_t span)
{
    uintptr_t from = (uintptr_t)at + BC_PAGE_AHEAD, to = from + span;
    if ((from >> 12) != (to >> 12))
        bc_prefetch_page(to);
}

#endif
