/* A consumer's outbox in the dispatcher: delivered rows not yet polled, in delivery order (entry
 * id, sticky hash, redelivered flag), grown by doubling. Plain C memory: the dispatcher frees it. */
#ifndef BUCKETCORE_OUTBOX_H
#define BUCKETCORE_OUTBOX_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t *ids;
    uint16_t *hashes;
    uint8_t *redelivered;
    int64_t len, cap;
    int listed; /* in the dispatcher's list of keys given rows since the last poll of all */
} bc_outbox;

/* Append one row; returns 0, or -1 when out of memory (the outbox unchanged). */
static inline int bc_outbox_push(bc_outbox *box, int64_t entry_id, uint16_t hash, uint8_t redelivered)
{
    if (box->len == box->cap) {
        int64_t cap = box->cap ? 2 * box->cap : 8;
        void *p = realloc(box->ids, (size_t)cap * sizeof(int64_t));
        if (p == NULL)
            return -1;
        box->ids = (int64_t *)p;
        p = realloc(box->hashes, (size_t)cap * sizeof(uint16_t));
        if (p == NULL)
            return -1;
        box->hashes = (uint16_t *)p;
        p = realloc(box->redelivered, (size_t)cap);
        if (p == NULL)
            return -1;
        box->redelivered = (uint8_t *)p;
        box->cap = cap;
    }
    box->ids[box->len] = entry_id;
    box->hashes[box->len] = hash;
    box->redelivered[box->len] = redelivered;
    box->len++;
    return 0;
}

static inline void bc_outbox_free(bc_outbox *box)
{
    free(box->ids);
    free(box->hashes);
    free(box->redelivered);
}

/* The position of entry_id among the ascending ids[lo, hi), or -1: one probe where the id would
 * be if the ids had no gaps (as a ledger's offsets have not), then a binary search. */
static inline int64_t bc_find_id(const int64_t *ids, int64_t lo, int64_t hi, int64_t entry_id)
{
    int64_t end = hi;
    if (lo == hi)
        return -1;
    if (entry_id >= ids[lo]) { /* logged ids are >= 0: the difference cannot overflow */
        int64_t gap = entry_id - ids[lo];
        if (gap < hi - lo && ids[lo + gap] == entry_id)
            return lo + gap;
    }
    while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (ids[mid] < entry_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && ids[lo] == entry_id ? lo : -1;
}

static inline int bc_cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#endif
