"""route_entries, sticky_hashes and fits_one_bucket with fuzzed stamps, key hashes and selectors,
against the test suite's reference routing (tests/dispatch/dispatch_reference.py: ref_route, ref_bucket_of).

A selector over a fuzzed boundary list (first split 1 included: it must be refused) with fuzzed
consumers; columns as lists or numpy arrays of several dtypes, values in range or not (negative,
above 0xFFFF, ``hash_min > hash_max``, above 2**32 for key hashes). Well-formed entries must route
to the reference's consumer and count as straddling exactly when their stamp crosses a boundary; a
malformed stamp must raise MalformedStampError naming its index (``malformed="raise"``, nothing
counted) or get slot -2 (``"mark"``); fits_one_bucket must say whether both ends share a bucket.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from support import Divergence, expect, instrumented, main, named_index

with instrumented():
    import bucketcore as bc

from dispatch_reference import ref_bucket_of, ref_route  # the suite's reference routing

NAMES = ["a", "b", "c", "zed", "ü"]
DTYPES = [None, None, np.int64, np.int32, np.uint16, np.uint32, np.uint64, np.int16]
MAX = 0xFFFF


def _stamp(fdp: Any, wild: bool) -> int:
    if wild and fdp.ConsumeIntInRange(0, 9) == 0:
        return fdp.PickValueInList([-1, -(2**31), 0x10000, 0x1FFFF, 2**32, 2**63 - 1])
    return fdp.ConsumeIntInRange(0, MAX)


def _column(fdp: Any, values: list[int]) -> tuple[Any, list[int]]:
    """The values as a list or a numpy array of a dtype that holds them (else a list)."""
    dtype = fdp.PickValueInList(DTYPES)
    if dtype is None:
        return list(values), list(values)
    info = np.iinfo(dtype)
    if all(info.min <= v <= info.max for v in values):
        return np.array(values, dtype=dtype), list(values)
    return list(values), list(values)


def _selector(fdp: Any) -> tuple[bc.EntryBucketSelector | None, tuple[int, ...]]:
    splits = tuple(sorted({fdp.ConsumeIntInRange(1, MAX) for _ in range(fdp.ConsumeIntInRange(0, 12))}))
    try:
        sel = bc.EntryBucketSelector(bc.Buckets(splits))
    except bc.InvalidBoundaryError as err:
        expect(splits[:1] == (1,), f"selector refused dispatchable splits {splits!r}: {err}")
        return None, splits
    expect(splits[:1] != (1,), f"selector accepted the undispatchable first split 1: {splits!r}")
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        consumer = (fdp.PickValueInList(NAMES), fdp.ConsumeIntInRange(0, 4))
        if consumer in sel.consumers:
            sel.remove_consumer(*consumer)
        else:
            sel.add_consumer(*consumer)
    return sel, splits


def _check_fits(fdp: Any, splits: tuple[int, ...]) -> None:
    n = fdp.ConsumeIntInRange(0, 20)
    lo, lo_v = _column(fdp, [_stamp(fdp, True) for _ in range(n)])
    hi, hi_v = _column(
        fdp,
        [
            min(MAX, v + fdp.ConsumeIntInRange(0, 3000)) if fdp.ConsumeBool() and 0 <= v <= MAX else _stamp(fdp, True)
            for v in lo_v
        ],
    )
    bad = [i for i in range(n) if not (0 <= lo_v[i] <= MAX and 0 <= hi_v[i] <= MAX and lo_v[i] <= hi_v[i])]
    target = bc.Buckets(splits) if fdp.ConsumeBool() else list(splits)
    try:
        got = bc.fits_one_bucket(target, lo, hi)
    except bc.MalformedStampError as err:
        expect(bad and named_index(err) in bad, f"fits_one_bucket: {err} (malformed: {bad})")
        return
    expect(not bad, f"fits_one_bucket accepted malformed stamps at {bad}")
    want = [ref_bucket_of(splits, a) == ref_bucket_of(splits, b) for a, b in zip(lo_v, hi_v)]
    expect(got.tolist() == want, f"fits_one_bucket {got.tolist()} != {want} for {splits!r}")


def test_one_input(data: bytes) -> None:
    """Route one fuzzed column of entries and check it against the reference."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    sel, splits = _selector(fdp)
    if sel is None:
        return
    if fdp.ConsumeIntInRange(0, 3) == 0:
        _check_fits(fdp, splits)
        return
    n = fdp.ConsumeIntInRange(0, 24)
    lo_v = [_stamp(fdp, True) for _ in range(n)]
    with_max = fdp.ConsumeBool()
    hi_v = [
        min(MAX, v + fdp.ConsumeIntInRange(0, 4000)) if 0 <= v <= MAX and fdp.ConsumeBool() else _stamp(fdp, True)
        for v in lo_v
    ]
    stamped_v = [fdp.ConsumeIntInRange(0, 3) != 0 for _ in range(n)] if fdp.ConsumeBool() else None
    key_v = None
    if stamped_v is not None:
        key_v = [fdp.ConsumeIntInRange(0, 2**32 - 1) for _ in range(n)]
        if n and fdp.ConsumeIntInRange(0, 9) == 0:
            key_v[fdp.ConsumeIntInRange(0, n - 1)] = fdp.PickValueInList([-1, 2**32, 2**40])
    malformed = fdp.PickValueInList(["raise", "mark"])
    stamped_at = [True] * n if stamped_v is None else stamped_v

    def stamp_bad(i: int) -> bool:
        if not 0 <= lo_v[i] <= MAX:
            return True
        return with_max and not (0 <= hi_v[i] <= MAX and lo_v[i] <= hi_v[i])

    bad = [i for i in range(n) if stamped_at[i] and stamp_bad(i)]
    unsure = {i for i in range(n) if not stamped_at[i] and stamp_bad(i)}  # a stamp nobody reads
    key_bad = [] if key_v is None else [i for i in range(n) if not 0 <= key_v[i] <= 2**32 - 1]
    lo, _ = _column(fdp, lo_v)
    hi = _column(fdp, hi_v)[0] if with_max else None
    kh = None if key_v is None else _column(fdp, key_v)[0]
    before = (sel.routed_entries, sel.straddling_entries, sel.malformed_entries)
    try:
        got = bc.route_entries(sel, lo, key_hash=kh, stamped=stamped_v, hash_max=hi, malformed=malformed)
    except bc.MalformedStampError as err:
        expect(malformed == "raise" and named_index(err) in (set(bad) | unsure), f"{err} (malformed: {bad})")
        expect((sel.routed_entries, sel.straddling_entries, sel.malformed_entries) == before, "counted on error")
        return
    except ValueError as err:
        expect(key_bad and named_index(err) in key_bad, f"route_entries: {err!r} (bad key hashes: {key_bad})")
        return
    expect(not key_bad, f"route_entries accepted key hashes outside 32 bits at {key_bad}")
    expect(malformed == "mark" or not bad, f"route_entries accepted malformed stamps at {bad}")
    safe_lo = [v if 0 <= v <= MAX else 0 for v in lo_v]
    want = ref_route(splits, list(sel.consumers), safe_lo, stamped_v, key_v)
    got_l = got.tolist()
    for i in range(n):
        if i in bad:
            expect(got_l[i] == bc.MALFORMED, f"entry {i}: malformed stamp routed to {got_l[i]}")
        elif i not in unsure and got_l[i] != want[i]:
            raise Divergence(f"entry {i} routed to {got_l[i]}, reference {want[i]} (splits {splits!r})")
    straddling = sum(
        1
        for i in range(n)
        if with_max and stamped_at[i] and i not in bad and i not in unsure
        and ref_bucket_of(splits, lo_v[i]) != ref_bucket_of(splits, hi_v[i])
    )  # fmt: skip
    counted = (sel.routed_entries - before[0], sel.straddling_entries - before[1], sel.malformed_entries - before[2])
    if not unsure:
        expect(counted == (n - len(bad), straddling, len(bad)), f"counters moved by {counted}, expected "
               f"{(n - len(bad), straddling, len(bad))}")  # fmt: skip
    if not bad and not unsure:
        sticky = bc.sticky_hashes(lo, key_hash=kh, stamped=stamped_v).tolist()
        raw = [lo_v[i] if stamped_at[i] else key_v[i] & MAX for i in range(n)]  # type: ignore[index]
        expect(sticky == [h or 1 for h in raw], f"sticky_hashes {sticky} for {raw}")


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
