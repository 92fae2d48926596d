/* A hint that a line will be read soon, for loops over state sized to a layout (the batch state
 * machine, the batcher's queues) and over long buffers (a key column's bytes and offsets): a
 * prefetch never faults and compiles to nothing where the compiler has no builtin for it. */
#ifndef BUCKETCORE_PREFETCH_H
#define BUCKETCORE_PREFETCH_H

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
 * walk in a VM) and the hardware prefetcher stops at every page's end; one prefetch into the page this
 * far ahead has its translation cached before the loads arrive. */
#define BC_PAGE_AHEAD 65536

#endif
