/* A hint that a line will be read soon, for loops over state sized to a layout (the batch state
 * machine, the batcher's queues): a prefetch never faults and compiles to nothing where the
 * compiler has no builtin for it. */
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

#endif
