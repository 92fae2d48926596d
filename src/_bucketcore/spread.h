/* The spread of a shared segment's buckets over its sharers (docs/design.md, "Dispatch"), written
 * once for the selector and the dispatcher: consumer j of k owns buckets [j*n/k, (j+1)*n/k); with
 * no consumer every bucket is unowned (-1). A walk over two spreads visits their slot boundaries,
 * not their buckets, so a membership change costs in proportion to the consumers. */
#ifndef BUCKETCORE_SPREAD_H
#define BUCKETCORE_SPREAD_H

#include <stdint.h>

/* One past the last bucket of slot j of a spread of n buckets over k slots. */
static inline int64_t bc_slot_end(int64_t j, int64_t n, int64_t k)
{
    return ((j + 1) * n) / k;
}

/* owner[b] = the slot owning bucket b, for the spread of n buckets over k slots. */
static inline void bc_fill_spread(int32_t *owner, int64_t n, int64_t k)
{
    if (k == 0) {
        for (int64_t b = 0; b < n; b++)
            owner[b] = -1;
        return;
    }
    for (int64_t j = 0; j < k; j++)
        for (int64_t b = (j * n) / k, hi = bc_slot_end(j, n, k); b < hi; b++)
            owner[b] = (int32_t)j;
}

/* Two spreads of n buckets over ko and kw slots (a slot's owner: old[j] / new_[j]); the walk is at
 * bucket b, in old slot jo (ending at end_o) and new slot jw (ending at end_w). */
typedef struct {
    int64_t n, ko, kw, b, jo, jw, end_o, end_w;
    const int32_t *old;
    const int32_t *new_;
} bc_spread_walk;

static inline void bc_walk_begin(bc_spread_walk *s, int64_t n, const int32_t *old, int64_t ko,
                                 const int32_t *new_, int64_t kw)
{
    s->n = n;
    s->ko = ko;
    s->kw = kw;
    s->old = old;
    s->new_ = new_;
    s->b = s->jo = s->jw = 0;
    s->end_o = ko ? bc_slot_end(0, n, ko) : n;
    s->end_w = kw ? bc_slot_end(0, n, kw) : n;
}

/* The next stretch [*start, *end) of buckets with one slot in each spread, and those slots' owners
 * (-1: a spread of no consumers); 0 after the last. Each slot's end is computed once. */
static inline int bc_walk_next(bc_spread_walk *s, int64_t *start, int64_t *end, int32_t *o, int32_t *w)
{
    if (s->b >= s->n)
        return 0;
    *o = -1;
    *w = -1;
    if (s->ko) {
        while (s->end_o <= s->b)
            s->end_o = bc_slot_end(++s->jo, s->n, s->ko);
        *o = s->old[s->jo];
    }
    if (s->kw) {
        while (s->end_w <= s->b)
            s->end_w = bc_slot_end(++s->jw, s->n, s->kw);
        *w = s->new_[s->jw];
    }
    *start = s->b;
    *end = s->end_o < s->end_w ? s->end_o : s->end_w;
    s->b = *end;
    return 1;
}

/* Give buckets [start, stop) to consumer key `key` (-1: nobody): set their owner and their ready
 * flag (owned, and held by nobody or by that key), and append to todo (after its first m) those
 * that became ready with a queue (any_queued: some bucket has one); returns the new length of
 * todo. Separate passes so that the compiler vectorises the per-bucket work. */
static inline int64_t bc_give_run(int32_t *restrict owner, const int32_t *restrict holder,
                                  uint8_t *restrict ready, const int64_t *restrict q_head,
                                  int32_t *restrict todo, int64_t start, int64_t stop, int32_t key, int64_t m,
                                  int any_queued)
{
    int64_t b;
    int queued = 0;
    for (b = start; b < stop; b++)
        owner[b] = key;
    if (key < 0) {
        for (b = start; b < stop; b++)
            ready[b] = 0;
        return m;
    }
    for (b = start; b < stop; b++)
        ready[b] = (uint8_t)((holder[b] < 0) | (holder[b] == key));
    if (!any_queued)
        return m;
    for (b = start; b < stop; b++)
        queued |= q_head[b] >= 0;
    if (queued)
        for (b = start; b < stop; b++)
            if (ready[b] && q_head[b] >= 0)
                todo[m++] = (int32_t)b;
    return m;
}

#endif
