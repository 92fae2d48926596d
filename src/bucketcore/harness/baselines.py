"""The per-message / per-entry Python baselines bucketcore is measured against (see the README's Speed section).

Each is written the way code without bucketcore does the job: a list comprehension over
``mmh3.hash``; a producer batcher with a dict of per-bucket lists per segment window (the Java
reference's shape, around ``mmh3.hash`` and ``bisect``); a broker routing and dispatching entry by
entry. They double as cross-checks: the benchmarks verify bucketcore's result equals theirs.
The stream store's baseline (:class:`NaiveLog`) is an SQLite log of one transaction per entry.
``mmh3`` (the ``bench`` extra) is imported on first use.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

import bucketcore as bc

__all__ = [
    "NaiveLog",
    "PyDispatcher",
    "PyDispatcherAdapter",
    "bisect_all",
    "mmh3_hashes",
    "py_fits",
    "py_route",
    "python_route",
    "reference_batches",
    "run_churn",
    "same_entries",
]

Consumer = tuple[str, int]


def _mmh3() -> Any:
    try:
        import mmh3
    except ImportError:
        raise ImportError("the baselines need mmh3: pip install 'bucketcore[bench]'") from None
    return mmh3


def mmh3_hashes(keys: list[Any]) -> list[int]:
    """The hashing baseline: ``[mmh3.hash(k, 0, signed=False) for k in keys]``.

    Parameters
    ----------
    keys : list of str or bytes

    Returns
    -------
    list of int
        Raw unsigned 32-bit hashes.
    """
    h = _mmh3().hash
    return [h(k, 0, signed=False) for k in keys]


def reference_batches(
    keys: list[Any], layout: bc.TopicLayout, max_messages: int = 1000, policy: str = "shared"
) -> list[tuple[int, int, int, int, list[int]]]:
    """The producer baseline: a per-message Python batcher.

    Count limit only (as :func:`bucketcore.bucket_entries` without ``sizes``); keyless messages
    (``None``) go round-robin from 0 with bucket hash 0.

    Parameters
    ----------
    keys : list of str, bytes or None
    layout : TopicLayout
    max_messages : int
    policy : {"shared", "per_bucket"}

    Returns
    -------
    list of tuple
        ``(segment_id, bucket, hash_min, hash_max, message indices)`` per entry, in emission order.
    """
    mmh3_hash = _mmh3().hash
    active = layout.active_segments
    starts = [s.hash_start for s in active]
    splits = [list(s.buckets.splits) for s in active]
    ids = [s.segment_id for s in active]
    nseg = len(active)
    windows: list[dict[int, tuple[list[int], list[int]]]] = [{} for _ in active]
    counts = [0] * nseg
    shared = policy == "shared"
    out: list[tuple[int, int, int, int, list[int]]] = []
    rr = 0
    for i, key in enumerate(keys):
        if key is None:
            s, h = rr % nseg, 0
            rr += 1
        else:
            raw = mmh3_hash(key, 0, signed=False)
            s = bisect.bisect_right(starts, raw >> 16) - 1
            h = raw & 0xFFFF
        b = bisect.bisect_right(splits[s], h)
        window = windows[s]
        batch = window.get(b)
        if batch is None:
            batch = window[b] = ([], [])
        batch[0].append(i)
        batch[1].append(h)
        if shared:
            counts[s] += 1
            if counts[s] >= max_messages:
                # the dict keeps insertion order: the batches come out by first message
                out.extend((ids[s], bb, min(hs), max(hs), idx) for bb, (idx, hs) in window.items())
                window.clear()
                counts[s] = 0
        elif len(batch[0]) >= max_messages:
            out.append((ids[s], b, min(batch[1]), max(batch[1]), batch[0]))
            del window[b]
    rest = [(ids[s], bb, min(hs), max(hs), idx) for s in range(nseg) for bb, (idx, hs) in windows[s].items()]
    out.extend(sorted(rest, key=lambda e: e[4][0]))
    return out


def same_entries(table: bc.EntryTable, ref: list[tuple[int, int, int, int, list[int]]]) -> bool:
    """Whether an :class:`EntryTable` holds exactly the baseline's entries, in order.

    Parameters
    ----------
    table : EntryTable
    ref : list of tuple
        The result of :func:`reference_batches`.

    Returns
    -------
    bool
    """
    if len(table) != len(ref):
        return False
    cols = list(zip(*[e[:4] for e in ref], strict=False)) if ref else [(), (), (), ()]
    order = np.fromiter((i for e in ref for i in e[4]), dtype=np.int64, count=int(table.order.shape[0]))
    return bool(
        np.array_equal(table.segment_id, cols[0])
        and np.array_equal(table.bucket, cols[1])
        and np.array_equal(table.hash_min, cols[2])
        and np.array_equal(table.hash_max, cols[3])
        and np.array_equal(table.order, order)
    )


def py_route(splits: list[int], owner: list[int], hash_min: list[int]) -> list[int]:
    """The routing baseline: each entry's owner slot by ``bisect`` in a Python loop.

    Parameters
    ----------
    splits : list of int
        The boundary list.
    owner : list of int
        Owner slot per bucket.
    hash_min : list of int
        Stamps.

    Returns
    -------
    list of int
    """
    return [owner[bisect.bisect_right(splits, h)] for h in hash_min]


def bisect_all(splits: list[int], hashes: list[int]) -> list[int]:
    """The bucket lookup baseline: each hash's bucket by ``bisect`` in a Python loop.

    Parameters
    ----------
    splits : list of int
        The boundary list.
    hashes : list of int
        Bucket hashes.

    Returns
    -------
    list of int
        Bucket per hash (as :meth:`bucketcore.Buckets.bucket_of`).
    """
    return [bisect.bisect_right(splits, h) for h in hashes]


def py_fits(splits: list[int], hash_min: list[int], hash_max: list[int]) -> list[bool]:
    """The stamp check baseline: whether each entry's stamp lies in one bucket, by two bisects.

    Parameters
    ----------
    splits : list of int
        The boundary list.
    hash_min, hash_max : list of int
        Stamps.

    Returns
    -------
    list of bool
        As :func:`bucketcore.fits_one_bucket`.
    """
    right = bisect.bisect_right
    return [right(splits, a) == right(splits, b) for a, b in zip(hash_min, hash_max)]


def python_route(layout: bc.TopicLayout, raw: list[int], segment_hash: list[int], has_key: list[bool]) -> list[int]:
    """The segment routing baseline: route each pre-hashed key in a Python loop (bisect over the
    active segments' starts; v4 signSafeMod for an all-legacy layout; keyless round-robin).

    Parameters
    ----------
    layout : TopicLayout
    raw, segment_hash, has_key : list
        The key hashes' columns (as :class:`bucketcore.KeyHashes` holds them).

    Returns
    -------
    list of int
        Segment id per key (as :meth:`bucketcore.TopicLayout.route`).
    """
    ids = [s.segment_id for s in layout.active_segments]
    starts = [s.hash_start for s in layout.active_segments]
    parts = len(ids)
    out, rr = [], 0
    if layout.is_legacy:
        for r, k in zip(raw, has_key):
            if k:
                out.append(ids[(r & 0x7FFFFFFF) % parts])
            else:
                out.append(ids[rr])
                rr = (rr + 1) % parts
        return out
    for h, k in zip(segment_hash, has_key):
        if k:
            out.append(ids[bisect.bisect_right(starts, h) - 1])
        else:
            out.append(ids[rr])
            rr = (rr + 1) % parts
    return out


class PyDispatcher:
    """The Dispatcher's rules written per entry in plain Python: the baseline and a cross-check.

    Parameters
    ----------
    splits : list of int
        The segment's boundary list.
    """

    def __init__(self, splits: list[int]) -> None:
        self.splits = splits
        self.n = len(splits) + 1
        self.members: list[Consumer] = []
        self.owner: list[Consumer | None] = [None] * self.n
        self.holder: list[Consumer | None] = [None] * self.n
        self.held = [0] * self.n
        self.queue: list[deque[int]] = [deque() for _ in range(self.n)]
        self.pending: dict[int, tuple[Consumer, int]] = {}
        self.outbox: dict[Consumer, list[int]] = {}

    def set_members(self, members: list[Consumer]) -> None:
        """Start with these sharers (one spread, instead of one per join)."""
        self.members = sorted(members)
        self._spread()

    def _spread(self) -> None:
        k = len(self.members)
        self.owner = [None] * self.n
        for j, c in enumerate(self.members):
            for b in range(j * self.n // k, (j + 1) * self.n // k):
                self.owner[b] = c
        for b in range(self.n):
            self._release(b)

    def _ready(self, b: int) -> bool:
        o = self.owner[b]
        return o is not None and (self.holder[b] is None or self.holder[b] == o)

    def _deliver(self, e: int, b: int) -> None:
        o = self.owner[b]
        assert o is not None
        self.pending[e] = (o, b)
        self.holder[b] = o
        self.held[b] += 1
        self.outbox.setdefault(o, []).append(e)

    def _release(self, b: int) -> None:
        q = self.queue[b]
        while q and self._ready(b):
            self._deliver(q.popleft(), b)

    def offer(self, ids: list[int], hash_min: list[int]) -> None:
        """Take committed entries in offset order."""
        splits, queue = self.splits, self.queue
        for e, h in zip(ids, hash_min, strict=False):
            b = bisect.bisect_right(splits, h)
            if not queue[b] and self._ready(b):
                self._deliver(e, b)
            else:
                queue[b].append(e)

    def ack(self, consumer: Consumer, ids: list[int]) -> None:
        """Individual acks of one consumer."""
        for e in ids:
            c, b = self.pending.pop(e)
            if c != consumer:
                raise KeyError(f"entry {e} is pending on {c}, not {consumer}")
            self.held[b] -= 1
            if self.held[b] == 0:
                self.holder[b] = None
                self._release(b)

    def poll(self) -> dict[Consumer, list[int]]:
        """Empty the outboxes."""
        out, self.outbox = self.outbox, {}
        return out

    def add_consumer(self, name: str, cid: int) -> None:
        """A sharer joins."""
        self.members = sorted(self.members + [(name, cid)])
        self._spread()

    def remove_consumer(self, name: str, cid: int, crash: bool = False) -> None:
        """A sharer leaves (crash: its unacked entries are queued again at the front)."""
        c = (name, cid)
        if c in self.members:
            self.members.remove(c)
        if crash:
            mine = sorted(e for e, (h, _) in self.pending.items() if h == c)
            self.outbox.pop(c, None)
            for e in reversed(mine):
                b = self.pending.pop(e)[1]
                self.held[b] -= 1
                self.holder[b] = None
                self.queue[b].appendleft(e)
        self._spread()


class PyDispatcherAdapter:
    """:class:`PyDispatcher` behind the :class:`bucketcore.Dispatcher` call shapes.

    Parameters
    ----------
    buckets : Buckets
    """

    def __init__(self, buckets: bc.Buckets) -> None:
        self.d = PyDispatcher(list(buckets.splits))

    def add_consumer(self, name: str, cid: int) -> None:
        """A sharer joins."""
        self.d.add_consumer(name, cid)

    def remove_consumer(self, name: str, cid: int, crash: bool = False) -> None:
        """A sharer leaves."""
        self.d.remove_consumer(name, cid, crash)

    def offer(self, ids: np.ndarray, hash_min: np.ndarray) -> None:
        """Committed entries as columns."""
        self.d.offer(ids.tolist(), hash_min.tolist())

    def ack(self, name: str, cid: int, ids: np.ndarray) -> None:
        """Acks as a column."""
        self.d.ack((name, cid), ids.tolist())

    def poll(self) -> dict[Consumer, list[int]]:
        """Empty the outboxes."""
        return self.d.poll()

    @property
    def outstanding(self) -> int:
        """Entries pending or queued."""
        return len(self.d.pending) + sum(len(q) for q in self.d.queue)


def run_churn(
    make: Callable[[bc.Buckets], Any],
    n_entries: int,
    n_consumers: int = 16,
    churn_every: int = 10_000,
    n_buckets: int = 256,
    seed: int = 3,
) -> dict[str, int]:
    """Drive a dispatcher through the churn workload: offers in rounds, acks of all but the newest
    10% each round, and a leave, join, crash or join after every round.

    Parameters
    ----------
    make : callable
        ``make(buckets)`` returns a fresh dispatcher (:class:`bucketcore.Dispatcher` or
        :class:`PyDispatcherAdapter`).
    n_entries : int
    n_consumers : int
    churn_every : int
        Entries per round.
    n_buckets : int
    seed : int

    Returns
    -------
    dict
        ``delivered`` (redeliveries included), an order-insensitive ``checksum`` of who got what,
        and ``pending`` (entries left pending or queued: 0 when everything was acked).
    """
    rng = np.random.default_rng(seed)
    buckets = bc.Buckets.equal_width(n_buckets)
    d = make(buckets)
    members = [(f"consumer-{i:03d}", i) for i in range(n_consumers)]
    for c in members:
        d.add_consumer(*c)
    next_id = n_consumers
    unacked: dict[Consumer, list[np.ndarray]] = {}
    hash_min = rng.integers(0, 0x10000, size=n_entries, dtype=np.int64).astype(np.uint16)
    delivered = 0
    checksum = 0
    events = ("leave", "join", "crash", "join")

    def collect() -> None:
        nonlocal delivered, checksum
        for c, batch in d.poll().items():
            got = batch.entry_ids if hasattr(batch, "entry_ids") else np.asarray(batch, dtype=np.int64)
            delivered += got.size
            checksum += int(got.sum()) * (c[1] + 1)
            unacked.setdefault(c, []).append(got)

    for r, start in enumerate(range(0, n_entries, churn_every)):
        stop = min(start + churn_every, n_entries)
        d.offer(np.arange(start, stop), hash_min[start:stop])
        collect()
        for c in list(unacked):
            held = np.sort(np.concatenate(unacked[c]))  # hold the highest ids across the churn
            keep = held.size // 10
            done, rest = held[: held.size - keep], held[held.size - keep :]
            if done.size:
                d.ack(*c, done)
            unacked[c] = [rest]
        event = events[r % len(events)]
        if event == "join":
            c = (f"consumer-{next_id:03d}", next_id)
            next_id += 1
            d.add_consumer(*c)
            members.append(c)
        elif members:
            c = members.pop(int(rng.integers(len(members))))
            d.remove_consumer(*c, crash=event == "crash")
            if event == "crash":
                unacked.pop(c, None)
    for _ in range(4):
        collect()
        for c in list(unacked):
            held = np.concatenate(unacked.pop(c))
            if held.size:
                d.ack(*c, held)
    outstanding = (d.pending_entries + d.queued_entries) if hasattr(d, "pending_entries") else d.outstanding
    return {"delivered": delivered, "checksum": checksum, "pending": outstanding}


class NaiveLog:
    """The stream store's baseline: an SQLite log (WAL journal, ``synchronous=FULL``) of one
    transaction per entry, its payload a BLOB, the way a naive log stores entries.

    Parameters
    ----------
    path : str
        The database file (created).
    """

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE log (offset INTEGER PRIMARY KEY, record_count INTEGER, "
            "hash_min INTEGER, hash_max INTEGER, metadata BLOB, payload BLOB)"
        )
        self.next = 0

    def append(self, e: Any) -> None:
        """Append one entry (a :class:`bucketcore.stream.EntryPayload`) in its own transaction."""
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
            (self.next, e.record_count, e.hash_min, e.hash_max, e.metadata, e.payload),
        )
        self.db.execute("COMMIT")
        self.next += e.record_count

    def fill(self, entries: list[Any]) -> None:
        """Append entries of one record each in one transaction (filling a log whose reads are
        measured, not its appends)."""
        self.db.execute("BEGIN")
        for e in entries:
            self.db.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                (self.next, 1, e.hash_min, e.hash_max, e.metadata, e.payload),
            )
            self.next += 1
        self.db.execute("COMMIT")

    def read_stamps(self) -> np.ndarray:
        """(offset, hash_min, hash_max) of every entry, in offset order (int64)."""
        rows = self.db.execute("SELECT offset, hash_min, hash_max FROM log ORDER BY offset").fetchall()
        return np.array(rows, dtype=np.int64)

    def read_all(self) -> int:
        """Read every payload in offset order; their total size."""
        n = 0
        for (payload,) in self.db.execute("SELECT payload FROM log ORDER BY offset"):
            n += len(payload)
        return n

    def close(self) -> None:
        """Close the database."""
        self.db.close()
