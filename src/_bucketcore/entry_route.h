/* Whole-entry routing of a broker (docs/design.md, "Dispatch"), written once for route_entries,
 * sticky_hashes, fits_one_bucket and the Dispatcher:
 * - a stamped entry routes by the bucket of its hash_min, an unstamped one by the bucket of its
 *   key hash's low 16 bits; a stamp crossing a boundary still routes whole (it is counted);
 * - a stamp is malformed when a bound is outside 0..0xFFFF or hash_min > hash_max;
 * - the sticky hash a broker records is the routing hash, with 0 ("no hash" to a Pulsar broker)
 *   nudged to 1. */
#ifndef BUCKETCORE_ENTRY_ROUTE_H
#define BUCKETCORE_ENTRY_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include "lookup.h"
#include "status.h"

/* The sticky hash of routing hash h (0..0xFFFF). */
static inline uint16_t bc_sticky_hash(uint32_t h)
{
    return (uint16_t)(h != 0 ? h : 1);
}

/* The status of one stamp given as wide integers. */
static inline int bc_stamp_status(int64_t lo, int64_t hi)
{
    if (lo < 0 || lo > 0xFFFF || hi < 0 || hi > 0xFFFF)
        return BC_ERR_STAMP_RANGE;
    return lo > hi ? BC_ERR_STAMP_ORDER : BC_OK;
}

/* The columns of one routing call: n entries; every pointer but tab and lo may be NULL. An entry
 * is stamped when st is NULL or st[i]; fl[i] marks a stamp the caller found outside 0..0xFFFF.
 * Outputs: slot (own[bucket]), bucket and sticky hash per entry. */
typedef struct {
    int64_t n;
    const uint16_t *tab;
    const int32_t *own;
    const uint16_t *lo, *hi;
    const uint8_t *st;
    const uint32_t *key;
    const uint8_t *fl;
    int32_t *slot, *bucket;
    uint16_t *hash;
} bc_route_cols;

/* Route c's entries; returns BC_OK or the first malformed stamp's status (its index in *err).
 * With mark, a malformed stamp gets slot -2, bucket -1, hash 0 and the run goes on. Counts the
 * straddling and the malformed entries. */
static inline int bc_route_entries(const bc_route_cols *c, int mark, int64_t *err, int64_t *straddling,
                                   int64_t *malformed)
{
    const uint16_t *tab = c->tab, *lo = c->lo, *hi = c->hi;
    const int32_t *own = c->own;
    const uint8_t *st = c->st, *fl = c->fl;
    const uint32_t *key = c->key;
    int32_t *slot = c->slot, *bk = c->bucket;
    uint16_t *hash = c->hash;
    int64_t n = c->n, i;
    *err = -1;
    if (hi == NULL && st == NULL && fl == NULL && bk == NULL && hash == NULL && slot != NULL) {
        /* the hot path of a conforming producer: every entry stamped, only owners wanted */
        for (i = 0; i < n; i++)
            slot[i] = own[tab[lo[i]]];
        return BC_OK;
    }
    if (st != NULL && hi == NULL && fl == NULL && bk == NULL && hash == NULL && slot != NULL) {
        /* stamped and unstamped entries mixed, no stamp check asked: select, then one load */
        for (i = 0; i < n; i++)
            slot[i] = own[tab[st[i] ? lo[i] : (key[i] & 0xFFFFu)]];
        return BC_OK;
    }
    if (hi != NULL && st == NULL && fl == NULL && bk == NULL && hash == NULL && slot != NULL && !mark) {
        /* stamps checked and straddles counted: two table loads per entry */
        for (i = 0; i < n; i++) {
            uint32_t b;
            if (hi[i] < lo[i]) {
                *err = i;
                return BC_ERR_STAMP_ORDER;
            }
            b = tab[lo[i]];
            *straddling += tab[hi[i]] != b;
            slot[i] = own[b];
        }
        return BC_OK;
    }
    for (i = 0; i < n; i++) {
        int bad = BC_OK;
        uint32_t h, b;
        if (st == NULL || st[i]) {
            h = lo[i];
            if (fl != NULL && fl[i])
                bad = BC_ERR_STAMP_RANGE;
            else if (hi != NULL && hi[i] < h)
                bad = BC_ERR_STAMP_ORDER;
            b = tab[h];
            if (bad == BC_OK && hi != NULL && tab[hi[i]] != b)
                *straddling += 1;
        } else {
            h = key[i] & 0xFFFFu;
            b = tab[h];
        }
        if (bad != BC_OK) {
            if (!mark) {
                *err = i;
                return bad;
            }
            *malformed += 1;
            if (slot != NULL)
                slot[i] = -2;
            if (bk != NULL)
                bk[i] = -1;
            if (hash != NULL)
                hash[i] = 0;
            continue;
        }
        if (slot != NULL)
            slot[i] = own[b];
        if (bk != NULL)
            bk[i] = (int32_t)b;
        if (hash != NULL)
            hash[i] = bc_sticky_hash(h);
    }
    return BC_OK;
}

/* out[i] = whether stamp i lies in one bucket: by the 64 Ki table tab, or (tab NULL) by searching
 * the ns splits; returns BC_OK or the first malformed stamp's status (its index in *err). */
static inline int bc_fits_entries(int64_t n, const uint16_t *splits, uint32_t ns, const uint16_t *tab,
                                  const uint16_t *lo, const uint16_t *hi, const uint8_t *fl, uint8_t *out,
                                  int64_t *err)
{
    for (int64_t i = 0; i < n; i++) {
        if (fl != NULL && fl[i]) {
            *err = i;
            return BC_ERR_STAMP_RANGE;
        }
        if (hi[i] < lo[i]) {
            *err = i;
            return BC_ERR_STAMP_ORDER;
        }
        if (tab != NULL)
            out[i] = tab[lo[i]] == tab[hi[i]];
        else
            out[i] = bc_bucket_of(splits, ns, lo[i]) == bc_bucket_of(splits, ns, hi[i]);
    }
    *err = -1;
    return BC_OK;
}

#endif
