"""The end-to-end simulation behind ``bucketcore simulate`` (docs/simulate.md explains the model).

One run moves a keyed message stream through every step of the system, each step done by the
library's own API, and records on the consumer side what every message went through:

1. **producer** — per tick, the next chunk of messages is bucketed and stamped by
   :func:`bucketcore.bucket_entries` under the current layout (the chunk's end is a flush, as a
   producer's linger timer would cut it);
2. **store** — each segment's entries are appended to its own stream of a
   :class:`bucketcore.stream.StreamStore`; every entry's payload is the indices of its messages;
3. **broker** — per segment, a :class:`bucketcore.Dispatcher` reads the new stamps with
   ``read_stamps`` (payloads with ``read``), offers them, and delivers whole entries to the
   segment's sharers, draining a bucket before it moves;
4. **controller** — :func:`bucketcore.compute_assignment` reassigns segments on every membership
   change, layout change (a split and a rebucket rollover during the run) and drained parent;
5. **consumers** — each applies its assignment with a :class:`bucketcore.StreamConsumerState`
   (subscribe, drain, close), processes its deliveries in order at its own speed and acks each
   entry after a random delay. Consumers join, leave cleanly and crash during the run.

The checks (:mod:`bucketcore.harness.checks`) then compare the consumer-side record with what was
produced. Everything random comes from one seed: the same configuration gives the same report.
"""

from __future__ import annotations

import heapq
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import bucketcore as bc

from .checks import CheckResult, EventLog, run_checks
from .workloads import KeyWorkload, tiled_layout

__all__ = ["FAULTS", "SimConfig", "SimReport", "simulate"]

#: Faults a test may inject through ``simulate(..., _faults=...)`` (never a user option): each
#: must make one of the checks fail.
FAULTS = frozenset(
    {"consumer_out_of_order", "skip_drain", "store_drops_entry", "store_duplicates_entry", "dispatcher_misses_join"}
)


@dataclass(frozen=True)
class SimConfig:
    """What to simulate.

    Attributes
    ----------
    segments : int
        Active segments at the start (equal hash ranges).
    buckets : int
        Equal-width buckets per segment at the start.
    consumers : int
        Consumers at the start.
    churn : int
        Membership events (join, clean leave, crash) spread over the production phase.
    seed : int
        Seed of every random choice (speeds, delays, churn, the split and rebucket targets).
    policy : {"shared", "per_bucket"}
        Producer batching policy.
    max_messages, max_bytes : int
        Producer batch limits.
    chunk : int
        Messages produced per tick.
    split : bool
        Split one segment at a third of the production.
    rebucket : bool
        Rebucket one segment (traffic-balanced boundaries) at two thirds of the production.
    max_ack_delay : int
        Acks follow processing by 0..max_ack_delay ticks.
    """

    segments: int = 4
    buckets: int = 16
    consumers: int = 6
    churn: int = 12
    seed: int = 1
    policy: str = "shared"
    max_messages: int = 1000
    max_bytes: int = 131072
    chunk: int = 10_000
    split: bool = True
    rebucket: bool = True
    max_ack_delay: int = 3


@dataclass
class ConsumerLoad:
    """One consumer incarnation's totals over the run."""

    name: str
    consumer_id: int
    fate: str = "active"
    entries: int = 0
    messages: int = 0
    redelivered_entries: int = 0
    segments: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class SimReport:
    """The outcome of one simulation.

    Attributes
    ----------
    produced : int
        Messages produced.
    keyless : int
        Of which keyless.
    entries : int
        Entries appended to the store.
    delivered_entries, redelivered_entries, redelivered_messages : int
        Deliveries by the dispatchers (redeliveries after crashes included / counted apart).
    misrouted_entries : int
        Deliveries to a consumer that :func:`bucketcore.route_entries` does not name as the owner
        of the entry's bucket under the segment's membership at that moment (must be 0).
    paused_bucket_ticks : int
        Sum over ticks of the buckets withheld from their owner while another consumer drained them.
    bucket_ticks : int
        Sum over ticks of all buckets of the segments being dispatched (the denominator).
    ticks : int
        Simulated time steps.
    events : dict
        Counts of joins, leaves, crashes, splits, rebuckets, drained segments, assignments.
    layout_epochs : int
        The final layout epoch.
    consumers : list of ConsumerLoad
    checks : CheckResult
    store_path : str
        Where the stream store lives (a temporary directory unless one was given).
    """

    produced: int
    keyless: int
    entries: int
    delivered_entries: int
    misrouted_entries: int
    redelivered_entries: int
    redelivered_messages: int
    paused_bucket_ticks: int
    bucket_ticks: int
    ticks: int
    events: dict[str, int]
    layout_epochs: int
    consumers: list[ConsumerLoad]
    checks: CheckResult
    store_path: str

    @property
    def ok(self) -> bool:
        """True when every check passed (and no delivery was misrouted)."""
        return self.checks.ok and self.misrouted_entries == 0


class _Consumer:
    """A simulated application: one StreamConsumerState, a FIFO of deliveries, a speed."""

    __slots__ = ("budget", "cid", "leaving", "load", "members", "name", "queue", "speed", "state")

    def __init__(self, name: str, cid: int, speed: float) -> None:
        self.name = name
        self.cid = cid
        self.state = bc.StreamConsumerState()
        self.queue: deque[tuple[int, int, np.ndarray]] = deque()
        self.speed = speed
        self.budget = 0.0
        self.leaving = False
        self.load = ConsumerLoad(name, cid)
        self.members: set[int] = set()  # segments whose dispatcher knows it (active or leaving)


class _Segment:
    """The broker side of one segment: its stream, its dispatcher, the read cursor."""

    __slots__ = (
        "cursor",
        "dispatcher",
        "drained",
        "end",
        "force_acked",
        "hash_min",
        "messages",
        "sealed",
        "segment",
        "selector",
        "stream_id",
    )

    def __init__(self, segment: bc.Segment, stream_id: str) -> None:
        self.segment = segment
        self.stream_id = stream_id
        self.dispatcher = bc.Dispatcher(segment.buckets)
        # the same membership, kept apart: route_entries over it cross-checks every delivery
        self.selector = bc.EntryBucketSelector(segment.buckets)
        self.cursor = 0
        self.end = 0
        self.messages: dict[int, np.ndarray] = {}
        self.hash_min: dict[int, int] = {}
        self.sealed = False
        self.drained = False
        self.force_acked: set[int] = set()


class _Store:
    """The simulator's view of the stream store: one stream per segment (fault hooks included)."""

    def __init__(self, path: Path, faults: frozenset[str]) -> None:
        from bucketcore import stream

        self._stream = stream
        self.store = stream.StreamStore.open(str(path))
        self.sessions: dict[str, Any] = {}
        self.faults = faults
        self.appended = 0
        self._held_back: list[tuple[str, Any]] = []

    def create(self, stream_id: str) -> None:
        self.store.create_stream(stream_id)
        self.sessions[stream_id] = self.store.open_session(stream_id, writer="simulate", ttl=3600.0)

    def append(self, stream_id: str, payloads: list[Any]) -> int:
        """Append whole entries; returns the committed end."""
        if "store_drops_entry" in self.faults:
            # a store that loses an acknowledged write: every 50th entry never reaches the stream
            payloads = [p for i, p in enumerate(payloads, self.appended) if i % 50 != 7]
        if "store_duplicates_entry" in self.faults:
            held, self._held_back = self._held_back, []
            payloads = payloads + [p for sid, p in held if sid == stream_id]
            self._held_back += [(sid, p) for sid, p in held if sid != stream_id]
            self._held_back += [(stream_id, p) for i, p in enumerate(payloads, self.appended) if i % 40 == 3]
        self.appended += len(payloads)
        if not payloads:
            return -1
        result = self.store.append(stream_id, payloads, session=self.sessions[stream_id])
        return int(result.committed_end)

    def read_new(self, stream_id: str, cursor: int) -> tuple[Any, list[Any]]:
        stamps = self.store.read_stamps(stream_id, from_offset=cursor, max_entries=1 << 20)
        n = len(stamps.start_offset)
        if n == 0:
            return stamps, []
        entries = self.store.read(stream_id, from_offset=cursor, max_entries=n)
        return stamps, entries

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()


class _Simulation:
    def __init__(
        self,
        workload: KeyWorkload,
        config: SimConfig,
        store: _Store,
        faults: frozenset[str],
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.w = workload
        self.cfg = config
        self.store = store
        self.faults = faults
        self.progress = progress
        self.rng = np.random.default_rng(config.seed)
        self.key_hashes = bc.hash_keys(workload.keys)
        self.layout = tiled_layout(config.segments, config.buckets)
        self.segments: dict[int, _Segment] = {}
        for seg in self.layout.segments:
            self._add_segment(seg)
        self.consumers: dict[str, _Consumer] = {}
        self.gone: list[_Consumer] = []
        self.next_name = 0
        self.next_cid = 1
        self.clock = 0
        self.tick = 0
        self.acks_due: list[tuple[int, int, str, int, int]] = []  # (tick, clock, name, segment, offset)
        self.delivered = EventLog()
        self.processed = EventLog()
        self.acked = EventLog()
        self.events = {
            "joins": 0,
            "leaves": 0,
            "crashes": 0,
            "splits": 0,
            "rebuckets": 0,
            "drained": 0,
            "assignments": 0,
        }
        self.delivered_entries = 0
        self.misrouted_entries = 0
        self.redelivered_entries = 0
        self.redelivered_messages = 0
        self.paused_bucket_ticks = 0
        self.bucket_ticks = 0
        self.acked_messages = 0
        self.round_robin = 0
        self.base_speed = 1.4 * config.chunk / max(1, config.consumers)
        for _ in range(config.consumers):
            self._new_consumer()

    # -- set-up ----------------------------------------------------------------------------------

    def _add_segment(self, seg: bc.Segment) -> None:
        stream_id = f"segment-{seg.segment_id}"
        self.store.create(stream_id)
        self.segments[seg.segment_id] = _Segment(seg, stream_id)

    def _new_consumer(self) -> _Consumer:
        name = f"c{self.next_name:02d}"
        self.next_name += 1
        c = _Consumer(name, self.next_cid, self.base_speed * float(self.rng.uniform(0.6, 1.4)))
        self.next_cid += 1
        self.consumers[name] = c
        return c

    def _stamp(self) -> int:
        self.clock += 1
        return self.clock

    # -- controller ------------------------------------------------------------------------------

    def _drained_ids(self) -> frozenset[int]:
        return frozenset(sid for sid, s in self.segments.items() if s.drained)

    def reassign(self) -> None:
        """Recompute the assignment and have every consumer apply it (membership, layout, drains)."""
        self.events["assignments"] += 1
        active = [c for c in self.consumers.values() if not c.leaving]
        assignment = bc.compute_assignment(self.layout, [c.name for c in active], drained=self._drained_ids())
        for c in active:
            self._apply(c, c.state.apply(assignment[c.name]))

    def _apply(self, c: _Consumer, commands: Iterable[Any]) -> None:
        for cmd in commands:
            if isinstance(cmd, bc.Subscribe):
                seg = self.segments[cmd.segment_id]
                if "dispatcher_misses_join" in self.faults and seg.dispatcher.consumers:
                    pass  # a broker that loses the join of a sharer: the old owners keep its buckets
                else:
                    declared = list(cmd.hash_ranges) if cmd.shared else None
                    seg.dispatcher.add_consumer(c.name, c.cid, declared=declared)
                seg.selector.add_consumer(c.name, c.cid)
                c.members.add(cmd.segment_id)
                c.load.segments.add(cmd.segment_id)
                self._deliver(seg)
            elif isinstance(cmd, bc.Drain):
                seg = self.segments[cmd.segment_id]
                if (c.name, c.cid) in seg.dispatcher.consumers:
                    seg.dispatcher.remove_consumer(c.name, c.cid)
                seg.selector.remove_consumer(c.name, c.cid)
                if "skip_drain" in self.faults:
                    # a broker that hands the buckets over at once: it acks for the leaver
                    open_ids = c.state.unacked(cmd.segment_id) if cmd.segment_id in c.state.subscriptions else ()
                    held = [m for m in open_ids if m not in seg.force_acked]
                    if held:
                        seg.dispatcher.ack(c.name, c.cid, np.asarray(held, dtype=np.int64))
                        seg.force_acked.update(held)
                self._deliver(seg)
            elif isinstance(cmd, bc.Close):
                c.members.discard(cmd.segment_id)
        if c.leaving and not c.state.subscriptions:
            self._retire(c, "left")

    def _retire(self, c: _Consumer, fate: str) -> None:
        c.load.fate = fate
        del self.consumers[c.name]
        self.gone.append(c)

    # -- membership churn ------------------------------------------------------------------------

    def join(self) -> None:
        self.events["joins"] += 1
        self._new_consumer()
        self.reassign()

    def leave(self, c: _Consumer) -> None:
        self.events["leaves"] += 1
        c.leaving = True
        self.reassign()
        self._apply(c, c.state.apply(bc.Assignment(self.layout.epoch, ())))

    def crash(self, c: _Consumer) -> None:
        self.events["crashes"] += 1
        for sid in sorted(c.members):
            seg = self.segments[sid]
            d = seg.dispatcher
            if (c.name, c.cid) in d.consumers or (c.name, c.cid) in d.leaving:
                d.remove_consumer(c.name, c.cid, crash=True)
            if (c.name, c.cid) in seg.selector.consumers:
                seg.selector.remove_consumer(c.name, c.cid)
        c.queue.clear()
        c.members.clear()
        self._retire(c, "crashed")
        # every outbox is emptied after each dispatcher call, so no consumer's state is behind
        for sid in sorted(self.segments):
            self._deliver(self.segments[sid])
        self.acks_due = [a for a in self.acks_due if a[2] != c.name]  # names are never reused
        heapq.heapify(self.acks_due)
        self.reassign()

    def churn_event(self) -> None:
        active = sorted((c for c in self.consumers.values() if not c.leaving), key=lambda c: c.name)
        roll = float(self.rng.random())
        if len(active) <= 1 or roll < 0.4:
            self.join()
        elif roll < 0.7:
            self.leave(active[int(self.rng.integers(len(active)))])
        else:
            self.crash(active[int(self.rng.integers(len(active)))])

    # -- layout changes --------------------------------------------------------------------------

    def _seal_changes(self, new_layout: bc.TopicLayout) -> None:
        old_ids = set(self.segments)
        self.layout = new_layout
        for seg in new_layout.segments:
            if seg.segment_id not in old_ids:
                self._add_segment(seg)
            elif seg.state == bc.SEALED:
                self.segments[seg.segment_id].sealed = True
                self.segments[seg.segment_id].segment = seg
        self.reassign()

    def split(self) -> None:
        active = self.layout.active_segments
        target = active[int(self.rng.integers(len(active)))]
        self.events["splits"] += 1
        self._seal_changes(self.layout.split(target.segment_id))

    def rebucket(self, produced: int) -> None:
        active = self.layout.active_segments
        target = active[int(self.rng.integers(len(active)))]
        count = target.buckets.count
        # the traffic the new boundaries balance: the keyed messages produced so far in its range
        ids = self.w.key_ids[:produced]
        ids = ids[ids >= 0]
        in_range = (self.key_hashes.segment_hash[ids] >= target.hash_start) & (
            self.key_hashes.segment_hash[ids] <= target.hash_end
        )
        observed = self.key_hashes.bucket_hash[ids[in_range]]
        balanced = bc.Buckets.balanced(observed, count) if observed.size else bc.Buckets.equal_width(count + 1)
        if balanced == target.buckets:
            balanced = bc.Buckets.equal_width(count + 1)
        self.events["rebuckets"] += 1
        self._seal_changes(self.layout.rebucket(target.segment_id, balanced))

    # -- producer --------------------------------------------------------------------------------

    def produce(self, start: int, stop: int) -> None:
        """Bucket, stamp and append messages [start, stop) under the current layout."""
        w = self.w
        table = bc.bucket_entries(
            w.column(start, stop),
            self.layout,
            sizes=w.sizes[start:stop],
            max_messages=self.cfg.max_messages,
            max_bytes=self.cfg.max_bytes,
            policy=self.cfg.policy,
            round_robin=self.round_robin,
        )
        self.round_robin = table.next_round_robin
        from bucketcore import stream

        order = table.order + start
        starts, counts = table.start.tolist(), table.count.tolist()
        seg_ids, lo, hi = table.segment_id.tolist(), table.hash_min.tolist(), table.hash_max.tolist()
        per_segment: dict[int, list[Any]] = {}
        for i in range(len(table)):
            s, n = starts[i], counts[i]
            per_segment.setdefault(seg_ids[i], []).append(
                stream.EntryPayload(
                    payload=order[s : s + n].astype("<i8").tobytes(),
                    record_count=n,
                    metadata=b"",
                    hash_min=lo[i],
                    hash_max=hi[i],
                )
            )
        for sid in sorted(per_segment):
            end = self.store.append(self.segments[sid].stream_id, per_segment[sid])
            if end >= 0:
                self.segments[sid].end = end

    # -- broker ----------------------------------------------------------------------------------

    def read_and_offer(self, seg: _Segment) -> None:
        stamps, entries = self.store.read_new(seg.stream_id, seg.cursor)
        n = len(entries)
        if n == 0:
            return
        starts = np.asarray(stamps.start_offset, dtype=np.int64)
        ends = np.asarray(stamps.end_offset, dtype=np.int64)
        for e in entries:
            seg.messages[e.start_offset] = np.frombuffer(e.payload, dtype="<i8")
        seg.hash_min.update(zip(starts.tolist(), np.asarray(stamps.hash_min).tolist(), strict=False))
        seg.dispatcher.offer(
            starts, np.asarray(stamps.hash_min), hash_max=np.asarray(stamps.hash_max), message_count=ends - starts
        )
        seg.cursor = int(ends[-1])
        self._deliver(seg)

    def _deliver(self, seg: _Segment) -> None:
        sid = seg.segment.segment_id
        for (name, cid), batch in seg.dispatcher.poll().items():
            c = self.consumers[name]
            ids = batch.entry_ids.tolist()
            # every entry must go to the owner of its stamp's bucket under the current membership
            stamps = np.fromiter((seg.hash_min[off] for off in ids), dtype=np.uint16, count=len(ids))
            slots = bc.route_entries(seg.selector, stamps)
            members = seg.selector.consumers
            expected = members.index((name, cid)) if (name, cid) in members else -3
            self.misrouted_entries += int(np.count_nonzero(slots != expected))
            redelivered = batch.redelivered.tolist()
            for off, again in zip(ids, redelivered, strict=False):
                msgs = seg.messages[off]
                c.state.delivered(sid, off)
                c.queue.append((sid, off, msgs))
                self.delivered.add(msgs, self._stamp())
                self.delivered_entries += 1
                if again:
                    self.redelivered_entries += 1
                    self.redelivered_messages += int(msgs.size)
                    c.load.redelivered_entries += 1

    def check_drained(self) -> bool:
        changed = False
        for seg in self.segments.values():
            d = seg.dispatcher
            if (
                seg.sealed
                and not seg.drained
                and seg.cursor >= seg.end
                and d.pending_entries == 0
                and d.queued_entries == 0
            ):
                seg.drained = True
                self.events["drained"] += 1
                changed = True
        return changed

    # -- consumers -------------------------------------------------------------------------------

    def consume(self) -> None:
        out_of_order = "consumer_out_of_order" in self.faults
        for name in sorted(self.consumers):
            c = self.consumers[name]
            c.budget = min(c.budget + c.speed, 4 * c.speed)
            while c.queue and c.budget > 0:
                sid, off, msgs = c.queue.pop() if out_of_order else c.queue.popleft()
                self.processed.add(msgs, self._stamp())
                c.budget -= msgs.size
                c.load.entries += 1
                c.load.messages += int(msgs.size)
                delay = int(self.rng.integers(0, self.cfg.max_ack_delay + 1))
                heapq.heappush(self.acks_due, (self.tick + delay, self.clock, name, sid, off))

    def ack_due(self) -> None:
        while self.acks_due and self.acks_due[0][0] <= self.tick:
            _, _, name, sid, off = heapq.heappop(self.acks_due)
            c = self.consumers.get(name)
            if c is None:
                continue  # crashed before the ack went out
            seg = self.segments[sid]
            commands = c.state.acked(sid, off)
            if off in seg.force_acked:
                seg.force_acked.discard(off)
            else:
                seg.dispatcher.ack(c.name, c.cid, off)
                # what the ack released goes out before anything else changes the membership
                self._deliver(seg)
            msgs = seg.messages[off]
            self.acked.add(msgs, self._stamp())
            self.acked_messages += int(msgs.size)
            follow_ups = [cmd for cmd in commands if not isinstance(cmd, (bc.IndividualAck, bc.CumulativeAck))]
            if follow_ups or (c.leaving and not c.state.subscriptions):
                self._apply(c, follow_ups)

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> None:
        n = len(self.w)
        chunk = self.cfg.chunk
        production_ticks = -(-n // chunk)
        churn_ticks = sorted(int(t) for t in self.rng.integers(1, max(2, production_ticks), size=self.cfg.churn))
        split_tick = production_ticks // 3 if self.cfg.split else -1
        rebucket_tick = (2 * production_ticks) // 3 if self.cfg.rebucket else -1
        self.reassign()
        produced = 0
        idle = 0
        while True:
            self.tick += 1
            if produced < n:
                stop = min(n, produced + chunk)
                self.produce(produced, stop)
                produced = stop
                if self.tick == split_tick:
                    self.split()
                if self.tick == rebucket_tick:
                    self.rebucket(produced)
                while churn_ticks and churn_ticks[0] <= self.tick:
                    churn_ticks.pop(0)
                    self.churn_event()
            for sid in sorted(self.segments):
                self.read_and_offer(self.segments[sid])
            self.consume()
            self.ack_due()
            if self.check_drained():
                self.reassign()
            self._count_paused()
            if self.progress is not None:
                self.progress(produced, self.acked_messages)
            if produced >= n and self._quiet():
                break
            idle = idle + 1 if produced >= n else 0
            if idle > 2000:
                break  # stuck: whatever is unacked now is reported lost

    def _count_paused(self) -> None:
        for seg in self.segments.values():
            if seg.drained:
                continue
            self.paused_bucket_ticks += int(seg.dispatcher.paused_buckets().size)
            self.bucket_ticks += seg.segment.buckets.count

    def _quiet(self) -> bool:
        if self.acks_due or any(c.queue for c in self.consumers.values()):
            return False
        for seg in self.segments.values():
            d = seg.dispatcher
            if seg.cursor < seg.end or d.pending_entries or d.queued_entries:
                return False
        return True


def simulate(
    workload: KeyWorkload,
    config: SimConfig = SimConfig(),
    *,
    store_path: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    _faults: Iterable[str] = (),
) -> SimReport:
    """Run one end-to-end simulation and check it.

    Parameters
    ----------
    workload : KeyWorkload
        The message stream (:func:`bucketcore.harness.key_workload`).
    config : SimConfig
        Topology, churn, batching and seed.
    store_path : str or Path, optional
        Directory of the stream store; a fresh temporary directory (removed afterwards) when None.
        An existing store must not hold streams named ``segment-<id>`` already.
    progress : callable, optional
        Called once per tick with (messages produced, messages acked so far).
    _faults : iterable of str
        Test-only fault injection (one of :data:`FAULTS` each); not a user option.

    Returns
    -------
    SimReport

    Raises
    ------
    ValueError
        An unknown fault name, or a configuration value out of range (named).
    """
    faults = frozenset(_faults)
    unknown = faults - FAULTS
    if unknown:
        raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
    for name in ("segments", "buckets", "consumers", "chunk", "max_messages", "max_bytes"):
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(config, name)}")
    if config.churn < 0:
        raise ValueError(f"churn must be >= 0, got {config.churn}")
    if config.segments > 0x10000 or config.buckets > 0x10000:
        raise ValueError("segments and buckets are at most 65536")
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if store_path is None:
        tmp = tempfile.TemporaryDirectory(prefix="bucketcore-simulate-")
        path = Path(tmp.name)
    else:
        path = Path(store_path)
        path.mkdir(parents=True, exist_ok=True)
    try:
        store = _Store(path, faults)
        try:
            sim = _Simulation(workload, config, store, faults, progress)
            sim.run()
        finally:
            store.close()
        checks = run_checks(
            len(workload), workload.key_ids, workload.key_sequence(), sim.delivered, sim.processed, sim.acked
        )
        loads = sorted(
            [c.load for c in sim.gone] + [c.load for c in sim.consumers.values()],
            key=lambda load: (load.name, load.consumer_id),
        )
        return SimReport(
            produced=len(workload),
            keyless=int(np.count_nonzero(workload.keyless)),
            entries=store.appended,
            delivered_entries=sim.delivered_entries,
            misrouted_entries=sim.misrouted_entries,
            redelivered_entries=sim.redelivered_entries,
            redelivered_messages=sim.redelivered_messages,
            paused_bucket_ticks=sim.paused_bucket_ticks,
            bucket_ticks=sim.bucket_ticks,
            ticks=sim.tick,
            events=dict(sim.events),
            layout_epochs=sim.layout.epoch,
            consumers=loads,
            checks=checks,
            store_path=str(path) if tmp is None else "(temporary, removed)",
        )
    finally:
        if tmp is not None:
            tmp.cleanup()
