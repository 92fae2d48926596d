"""Step 3 of the data flow: messages to stamped single-bucket entries
(docs/design.md, "Producer bucketing and stamping").

Every message is routed to a segment (:meth:`TopicLayout.route_index`; a bare :class:`Buckets`
is one segment), its bucket is looked up in that segment's boundary list, and messages are
batched per (segment, bucket) and cut into entries by ``max_messages`` / ``max_bytes``. Each
entry is stamped with the smallest and largest bucket hash actually present.

Batching rules (both the one-shot :func:`bucket_entries` and the streaming
:class:`EntryBucketBatcher`, which share one compiled state machine):

- ``policy="shared"`` (the Java reference): the limits apply to a segment's batch *window*,
  i.e. to all its buckets' pending batches together. ``policy="per_bucket"``: to each bucket's
  pending batch on its own.
- Before a message is added, if the window (shared) or its bucket's batch (per_bucket) is
  non-empty and the message's bytes would push it over ``max_bytes``, the window / batch is
  emitted first: the overflowing message opens the next one. After the message is added, a
  window / batch that reached ``max_messages`` messages or ``max_bytes`` bytes is emitted at
  once. So no entry holds more than ``max_messages`` messages or more than ``max_bytes`` bytes,
  except a single message larger than ``max_bytes``, which is an entry of its own.
- Emitting a shared window emits every pending bucket batch of that segment; the entries of one
  emission are ordered by their first message's send position. At the end of the input (and on
  :meth:`EntryBucketBatcher.flush`) every pending batch of every segment is emitted, likewise
  ordered by first message. Entries are listed in emission order.
- ``encrypted=True``: every message is its own entry (still stamped).
- Keyless messages (``None``) have bucket hash 0 and go round-robin over the active segments
  (the legacy segments in layout order for an all-legacy layout), starting at ``round_robin``;
  the next position is returned as :attr:`EntryTable.next_round_robin` (the batcher keeps it
  itself). A bare :class:`Buckets` is one segment with ``segment_id`` 0.
- Without ``sizes`` only ``max_messages`` applies and every entry's ``nbytes`` is 0; the batcher
  always counts its payloads' bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from _bucketcore import _batcher, _grouping, _pipeline, _producer, _routing

from .entries import Entry, EntryTable
from .hashing import (
    KeyHashes,
    classify_keys,
    column_parts,
    hash_keys,
    is_buffer_source,
    key_columns,
    objects_on_one_thread,
    replaces_surrogates,
    run_parts,
    select_column,
    shared_pool,
    threads_for,
)
from .layout import Buckets, TopicLayout
from .status import Status, check_status
from .validation import check_bool, check_int, check_option, plain_ints

__all__ = ["bucket_entries", "EntryTable", "Entry", "EntryBucketBatcher"]

_INT64_MAX = np.iinfo(np.int64).max
# Batch states a plan keeps for later calls (one per thread using the plan at the same time).
_KEPT_STREAMS = 4


# ----------------------------------------------------------------------------------------------
# validation at the edge


def _as_key_hashes(keys: Any, errors: str) -> KeyHashes:
    if isinstance(keys, KeyHashes):
        kh = keys
        if np.ndim(kh.raw) == 0:
            kh = KeyHashes(
                *(np.atleast_1d(np.asarray(c)) for c in (kh.raw, kh.segment_hash, kh.bucket_hash, kh.has_key))
            )
    else:
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        kh = hash_keys(keys, errors=errors)
    raw = kh.raw
    if not (isinstance(raw, np.ndarray) and raw.ndim == 1):
        raise ValueError(f"keys must be one-dimensional (a message stream), got shape {np.shape(raw)}")
    n = raw.shape[0]
    for name, dtype in (
        ("raw", np.uint32),
        ("segment_hash", np.uint16),
        ("bucket_hash", np.uint16),
        ("has_key", np.bool_),
    ):
        col = getattr(kh, name)
        if not isinstance(col, np.ndarray) or col.dtype != dtype or col.shape != (n,):
            raise TypeError(f"KeyHashes.{name} must be a {np.dtype(dtype)} array of shape ({n},)")
    return kh


def _check_sizes(sizes: Any, n: int) -> np.ndarray | None:
    """Per-message payload bytes as a contiguous int64 array (validated), or None."""
    if sizes is None:
        return None
    if isinstance(sizes, (list, tuple)):
        plain = plain_ints(sizes)  # the common list: no item loop
        if plain is not None:
            arr = plain
        else:
            for i, x in enumerate(sizes):
                if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                    raise TypeError(f"sizes[{i}] must be an int, not {type(x).__name__}")
            try:
                arr = np.array(sizes, dtype=np.int64) if sizes else np.zeros(0, dtype=np.int64)
            except OverflowError:
                bad = next(i for i, x in enumerate(sizes) if not -(2**63) <= int(x) <= _INT64_MAX)
                raise ValueError(f"sizes[{bad}] = {sizes[bad]} does not fit in 64 bits") from None
    elif isinstance(sizes, np.ndarray):
        if sizes.dtype.kind not in "iu":
            raise TypeError(f"sizes must be integers, not an array of dtype {sizes.dtype}")
        arr = sizes
    else:
        raise TypeError(f"sizes must be a list, tuple or numpy integer array, not {type(sizes).__name__}")
    if arr.ndim != 1:
        raise ValueError(f"sizes must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"sizes has {arr.shape[0]} values for {n} keys")
    if n and arr.dtype.kind == "i":
        bad = int(np.argmin(arr))
        if arr[bad] < 0:
            raise ValueError(f"sizes[{bad}] = {int(arr[bad])} is negative")
    if n and arr.dtype == np.uint64:
        bad = int(np.argmax(arr))
        if arr[bad] > _INT64_MAX:
            raise ValueError(f"sizes[{bad}] = {int(arr[bad])} does not fit in 64 bits")
    return np.ascontiguousarray(arr, dtype=np.int64)


class _Plan:
    """The segments a producer writes to, flattened for the kernels (built by :func:`_plan_for`)."""

    __slots__ = (
        "layout",
        "buckets",
        "segment_ids",
        "splits",
        "split_offsets",
        "bucket_offsets",
        "single",
        "tables",
        "starts",
        "legacy_order",
        "_router",
        "_streams",
        "short",
    )

    def __init__(self, target: Buckets | TopicLayout) -> None:
        # _plan_for checked the target's type and tiling (on every call, cached plan or not)
        if isinstance(target, Buckets):
            self.layout: TopicLayout | None = None
            buckets_list = [target]
            self.segment_ids = np.zeros(1, dtype=np.int64)
        else:
            active = target.active_segments
            self.layout = target
            buckets_list = [seg.buckets for seg in active]
            self.segment_ids = np.array([seg.segment_id for seg in active], dtype=np.int64)
        self.buckets = buckets_list
        self.tables: list[np.ndarray] | None = None
        arrays = [np.asarray(b.splits_array, dtype=np.uint16) for b in buckets_list]
        self.splits = np.ascontiguousarray(np.concatenate(arrays) if arrays else np.zeros(0, np.uint16))
        self.split_offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([a.shape[0] for a in arrays], out=self.split_offsets[1:])
        self.bucket_offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([a.shape[0] + 1 for a in arrays], out=self.bucket_offsets[1:])
        # one active segment: every message goes there, round-robin included (position mod 1)
        self.single = len(arrays) == 1 and (self.layout is None or not self.layout.is_legacy)
        # for the per-send path (Grouper.add_key): the same rules as TopicLayout.route_index
        self.starts = np.zeros(0, dtype=np.uint16)
        self.legacy_order: np.ndarray | None = None
        self._router: _routing.Router | None = None
        # batch states over these segments, built once and reused (take_stream / give_stream)
        self._streams: list[_grouping.WholeStream] = []
        # bucket_entries' path for its common call (made with the router)
        self.short: _producer.ShortEntries | None = None
        if self.layout is not None:
            active = self.layout.active_segments
            self.starts = np.array([seg.hash_start for seg in active[1:]], dtype=np.uint16)
            if self.layout.is_legacy:
                position = {seg.segment_id: i for i, seg in enumerate(active)}
                self.legacy_order = np.array(
                    [position[seg.segment_id] for seg in self.layout.segments if seg.segment_id in position],
                    dtype=np.int32,
                )

    def route(self, kh: KeyHashes, round_robin: int) -> tuple[np.ndarray | None, np.ndarray, int]:
        """(segment index per message or None for one segment, bucket per message, next round-robin)."""
        n = kh.raw.shape[0]
        if self.single or self.layout is None:
            seg = None
            next_rr = 0
        elif n == 0:
            seg = np.zeros(0, dtype=np.int32)
            next_rr = round_robin % self.segment_ids.shape[0]
        else:
            seg, next_rr = self.layout.route_index(kh, round_robin=round_robin)
            seg = np.ascontiguousarray(seg, dtype=np.int32)
        bucket = np.empty(n, dtype=np.int32)
        if self.tables is None and any(b.table_pays_off(n) for b in self.buckets):
            self.use_tables()
        _producer.bucket_index(
            seg, np.ascontiguousarray(kh.bucket_hash), self.splits, self.split_offsets, bucket, self.tables
        )
        return seg, bucket, int(next_rr)

    def router(self) -> _routing.Router:
        """The kernels' router for keys, built once: the same rules as TopicLayout.route_index
        (keyed by segment hash over the active starts, v4 signSafeMod for an all-legacy layout,
        keyless messages in turn), with every boundary list's 64 Ki table. Tables hold 8-bit
        entries where every index fits (half the cache footprint), and segments with the same
        boundary list share one table."""
        if self._router is None:
            tables = self.use_tables()
            counts = np.diff(self.bucket_offsets)
            narrow = len(tables) <= 0x100 and int(counts.max()) <= 0x100
            dtype = np.uint8 if narrow else np.uint16
            shared: dict[tuple[int, ...], np.ndarray] = {}
            bucket_tables = [shared.setdefault(b.splits, t.astype(dtype)) for b, t in zip(self.buckets, tables)]
            if int(self.bucket_offsets[-1]) > 0x7FFFFFFF:
                raise ValueError(f"the layout has {int(self.bucket_offsets[-1])} buckets; at most 2**31-1 are routed")
            first_buckets = self.bucket_offsets.astype(np.int32)
            segment_table = None
            if self.single or self.layout is None:
                mode, rotation = _routing.BC_ROUTE_ONE, np.zeros(1, dtype=np.int32)
            elif self.legacy_order is not None:
                mode, rotation = _routing.BC_ROUTE_LEGACY, self.legacy_order
            else:
                mode, rotation = _routing.BC_ROUTE_RANGE, np.arange(len(tables), dtype=np.int32)
                segment_table = self.layout.segment_table().astype(dtype)
            self._router = _routing.Router(mode, narrow, segment_table, rotation, bucket_tables, first_buckets)
            self.short = _producer.ShortEntries(
                self._router,
                self._streams,
                self.bucket_offsets,
                self.segment_ids,
                EntryTable._of_frozen,
                objects_on_one_thread(),
                _KEPT_STREAMS,
            )
        return self._router

    def take_stream(self) -> _grouping.WholeStream:
        """A batch state over the plan's segments for one stream, sized to the layout once: a
        kept one (reset where the last stream used it) or a new one. Give it back with
        :meth:`give_stream` when the stream is done (popping and appending are atomic, so two
        threads never hold the same one)."""
        try:
            return self._streams.pop()
        except IndexError:
            stream = _grouping.WholeStream(self.bucket_offsets, 0, 1, 1, 0)
            stream.name_segments(self.segment_ids)
            return stream

    def give_stream(self, stream: _grouping.WholeStream) -> None:
        """Keep a stream state for a later call (a few: as many as threads use the plan at once)."""
        if len(self._streams) < _KEPT_STREAMS:
            self._streams.append(stream)

    def use_tables(self) -> list[np.ndarray]:
        """Look buckets up in each boundary list's 64 Ki table (Buckets.lookup_table, built once per
        Buckets and kept by it) instead of the search: one load instead of a compare per level,
        for long columns or a long-lived batcher."""
        if self.tables is None:
            self.tables = [b.lookup_table() for b in self.buckets]
        return self.tables


@functools.lru_cache(maxsize=32, typed=True)
def _cached_plan(target: Buckets | TopicLayout) -> _Plan:
    return _Plan(target)


# The last target and its plan: a producer passes the same layout object call after call, which
# then costs an identity test instead of hashing the layout for the cache. The first target is
# one no caller holds.
_last_plan: tuple[object, _Plan | None] = (object(), None)


def _plan_for(target: Any, argname: str) -> _Plan:
    """The plan of a Buckets or TopicLayout. Both are immutable and hash by value, so plans are
    kept for the last few targets (a producer calls with the same layout again and again)."""
    global _last_plan
    last, plan = _last_plan  # one read: another thread may replace the pair meanwhile
    if target is last and plan is not None:
        return plan
    if not isinstance(target, (Buckets, TopicLayout)):
        raise TypeError(f"{argname} must be a Buckets or a TopicLayout, not {type(target).__name__}")
    plan = _cached_plan(target)
    _last_plan = (target, plan)
    return plan


# ----------------------------------------------------------------------------------------------
# one-shot


def bucket_entries(
    keys_or_hashes: Any,
    layout_or_buckets: Buckets | TopicLayout,
    *,
    sizes: Any = None,
    max_messages: int = 1000,
    max_bytes: int = 131072,
    policy: str = "shared",
    encrypted: bool = False,
    round_robin: int = 0,
    errors: str = "strict",
    threads: int | None = None,
    column: str | int | None = None,
) -> EntryTable:
    """Group a message stream into stamped single-(segment, bucket) entries; see the module doc.

    Parameters
    ----------
    keys_or_hashes : key column or KeyHashes
        Any key input of :func:`hash_keys` (one-dimensional), or precomputed hashes.
    layout_or_buckets : TopicLayout or Buckets
        Where messages go: a layout's active segments, or one segment (``segment_id`` 0).
    sizes : list or integer array, optional
        Per-message payload bytes (>= 0); without it only ``max_messages`` applies.
    max_messages, max_bytes : int
        Batch limits (>= 1).
    policy : {"shared", "per_bucket"}
        Whether the limits apply to a segment's window or to each bucket's batch.
    encrypted : bool
        One message per entry.
    round_robin : int
        Where the keyless round-robin starts.
    errors : {"strict", "replace"}
        What a key with a surrogate does (as in :func:`murmur3_32`).
    threads : int or None
        How many threads share a large key stream (None: automatic). Two run a pipeline (a
        worker groups in stream order while the calling thread hashes and routes ahead); more
        split the hashing of Arrow or numpy keys. The result never depends on it.
    column : str, int or None
        A table's key column (name or index), as in :func:`hash_keys`; a one-column table needs
        none.

    Returns
    -------
    EntryTable
        One row per entry in emission order; ``next_round_robin`` continues the rotation.

    Raises
    ------
    TypeError, ValueError, KeyEncodingError
        A bad argument, key or size, named (with its index); every argument is checked before
        any work.
    """
    last, plan = _last_plan  # one read: another thread may replace the pair meanwhile
    if (
        layout_or_buckets is last and sizes is None and threads is None and column is None and plan.short is not None  # type: ignore[union-attr]
    ):
        # the common call (a list of keys, plain options) in one kernel call; None: any other
        # argument or a refused key, which the general path below checks and raises
        table = plan.short.entries(  # type: ignore[union-attr]
            keys_or_hashes, max_messages, max_bytes, policy, encrypted, round_robin, errors
        )
        if table is not None:
            return table
    if column is not None:
        keys_or_hashes = select_column(keys_or_hashes, column)
    max_messages = check_int(max_messages, "max_messages", lo=1, hi=_INT64_MAX)
    max_bytes = check_int(max_bytes, "max_bytes", lo=1, hi=_INT64_MAX)
    code = check_option(policy, "policy")
    encrypted = check_bool(encrypted, "encrypted")
    round_robin = check_int(round_robin, "round_robin", lo=0, hi=_INT64_MAX)
    replaces_surrogates(errors)  # checked even when precomputed KeyHashes make it unused
    plan = _plan_for(layout_or_buckets, "layout_or_buckets")
    if threads is not None:
        threads_for(threads, 1, True)  # checks the argument on every path
    limit = 1 if encrypted else max_messages
    if not isinstance(keys_or_hashes, KeyHashes):
        return _fused_entries(keys_or_hashes, plan, sizes, code, limit, max_bytes, round_robin, errors, threads)
    kh = _as_key_hashes(keys_or_hashes, errors)
    n = kh.raw.shape[0]
    size_arr = _check_sizes(sizes, n)
    stream = plan.take_stream()
    try:
        if plan.legacy_order is None:  # routed and grouped a chunk at a time, like keys
            columns, next_rr = _producer.hashed_entries(
                np.ascontiguousarray(kh.segment_hash),
                np.ascontiguousarray(kh.bucket_hash),
                np.ascontiguousarray(kh.has_key).view(np.uint8),
                size_arr,
                stream,
                code,
                limit,
                max_bytes,
                plan.router(),
                round_robin,
            )
            return _entry_table(plan, columns, next_rr)
        # an all-legacy layout routes by the raw hash: the staged path reads raw and bucket_hash apart
        seg, bucket, next_rr = plan.route(kh, round_robin)
        bucket_hash = np.ascontiguousarray(kh.bucket_hash)
        del kh  # only the bucket hashes are needed from here on (drops our own hashes early)
        status, index, columns = _grouping.group_entries(
            seg, bucket, bucket_hash, size_arr, plan.bucket_offsets, code, limit, max_bytes, False, stream
        )
        check_status(status, index, segments=seg, buckets=bucket, sizes=size_arr)
        return _entry_table(plan, columns, next_rr)
    finally:
        plan.give_stream(stream)


def _fused_entries(
    keys: Any,
    plan: _Plan,
    sizes: Any,
    code: int,
    max_messages: int,
    max_bytes: int,
    round_robin: int,
    errors: str,
    threads: int | None,
) -> EntryTable:
    """Keys to entries with no column of hashes in between. One thread: the fused kernel hashes,
    routes, looks up and groups a chunk at a time. Two (or more for Python objects, which take two
    at most): a pipeline, see _pipelined_entries. More over buffers: each
    thread hashes and routes its part of the stream into (segment, bucket, bucket hash) columns,
    the keyless rotation is placed in send order, and the grouping (sequential by nature) runs
    once over the columns."""
    replace = replaces_surrogates(errors)
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    shape, source = classify_keys(keys)
    if len(shape) != 1:
        raise ValueError(f"keys must be one-dimensional (a message stream), got shape {shape}")
    n = shape[0]
    size_arr = _check_sizes(sizes, n)
    router = plan.router()
    buffers = is_buffer_source(source)
    parts = threads_for(threads, n, buffers)
    if parts == 2 or (parts > 2 and not buffers):
        status, index, columns, next_rr = _pipelined_entries(
            source, n, size_arr, plan, router, code, max_messages, max_bytes, round_robin, replace
        )
        if status == Status.BC_ERR_NEEDS_GIL:
            parts = 1  # a legacy str only the GIL holder may ready (before 3.12): one thread
        else:
            check_status(status, index, keys=keys, shape=shape)
    if parts <= 1:
        stream = plan.take_stream()
        try:
            status, index, columns, next_rr = _producer.fused_entries(
                key_columns(source),
                size_arr,
                stream,
                code,
                max_messages,
                max_bytes,
                replace,
                router,
                round_robin,
            )
        finally:
            plan.give_stream(stream)
        check_status(status, index, keys=keys, shape=shape)
    elif parts > 2 and buffers:
        bucket = np.empty(n, dtype=np.int32)  # global bucket indexes
        bucket_hash = np.empty(n, dtype=np.uint16)

        def run(start: int, stop: int) -> tuple[int, int]:
            for column, lo, hi, out in column_parts(source, start, stop):
                end = out + hi - lo
                status, index = _producer.route_keys(
                    router, column, lo, hi, replace, bucket[out:end], bucket_hash[out:end]
                )
                if status != Status.BC_OK:
                    return status, out + index - lo
            return Status.BC_OK, -1

        status, index = run_parts(run, n, parts)
        check_status(status, index, keys=keys, shape=shape)
        next_rr = _producer.place_keyless(router, bucket, round_robin)
        stream = plan.take_stream()
        try:
            status, index, columns = _grouping.group_entries(
                None, bucket, bucket_hash, size_arr, plan.bucket_offsets, code, max_messages, max_bytes, True, stream
            )
        finally:
            plan.give_stream(stream)
        check_status(status, index, buckets=bucket, sizes=size_arr)
    assert columns is not None  # a failed status raised above
    return _entry_table(plan, columns, next_rr)


def _entry_table(plan: _Plan, columns: tuple[np.ndarray, ...], next_rr: int) -> EntryTable:
    """The table of a kernel's entry columns (segment, bucket, hash_min, hash_max, start, count,
    nbytes, order): a plan's kept stream names its segments (int64 ids, read-only columns),
    another gives segment indexes (int32), turned into the target's segment ids here."""
    seg, bkt, hmin, hmax, start, count, nbytes, order = columns
    if seg.dtype == np.int64:
        return EntryTable._of_frozen(seg, bkt, hmin, hmax, start, count, nbytes, order, int(next_rr))
    return EntryTable(plan.segment_ids[seg], bkt, hmin, hmax, start, count, nbytes, order, int(next_rr))


# Messages per pipeline step: the worker starts after the first one.
_PIPELINE_STEP = 1 << 14
# Tests only (set with monkeypatch, as _PIPELINE_STEP): how far the calling thread of a pipeline
# takes each step, in turn ("left", "hashed", "routed"), instead of the balancing rule; None: the rule.
_PIPELINE_LEVELS: tuple[str, ...] | None = None


def _pipelined_entries(
    source: Any,
    n: int,
    size_arr: np.ndarray | None,
    plan: _Plan,
    router: Any,
    code: int,
    max_messages: int,
    max_bytes: int,
    round_robin: int,
    replace: bool,
) -> tuple[int, int, tuple[np.ndarray, ...] | None, int]:
    """Two threads in a pipeline (ScanStage): this one reads the stream step by step while a
    worker, with the GIL released throughout, groups it in stream order, so the entries are those
    of the one-thread kernel. Each step is hashed (and routed) by whichever thread has time for
    it. Python keys are read with the GIL held throughout, so nothing can change them and no item
    is held. Returns (status, failing index, entry columns or None, next round robin);
    BC_ERR_NEEDS_GIL asks the caller to use one thread."""
    stage = _pipeline.ScanStage(
        router,
        plan.bucket_offsets,
        code,
        max_messages,
        max_bytes,
        size_arr,
        n,
        round_robin,
        _PIPELINE_STEP,
        None if _PIPELINE_LEVELS is None else bytes(_pipeline.STEP_CODES[lv] for lv in _PIPELINE_LEVELS),
    )
    # a thread of the shared pool (not one started per call); none of the
    # pool's tasks waits for another, so a busy pool only delays the worker, and feed waits for it
    columns = key_columns(source)
    status, index = stage.feed_with(shared_pool().submit, columns, replace)  # stops the worker on any exception
    if status != Status.BC_OK:
        return status, index, None, round_robin
    columns, next_rr = stage.finish()
    return status, index, columns, next_rr


# ----------------------------------------------------------------------------------------------
# streaming


class EntryBucketBatcher(_batcher.BatcherCore):
    """The per-send container of an SDK: feed messages, get the entries that became ready.

    Same semantics as :func:`bucket_entries` over the concatenated stream: ``add`` /
    ``add_many`` return the entries emitted while adding (a window or batch that filled up),
    ``flush`` emits everything pending. Entries carry their payloads in send order;
    ``message_indices`` count messages since the batcher was created. A call that emitted
    nothing returns one shared empty list that cannot be changed. Calls from several threads
    are serialised.

    Parameters
    ----------
    buckets : Buckets or TopicLayout
        One segment's boundary list, or a whole layout (messages are routed to its active
        segments).
    max_messages, max_bytes : int
        Batch limits (>= 1), applied per segment window or per bucket by ``policy``.
    policy : {"shared", "per_bucket"}
        Where the limits apply (see the module documentation).
    encrypted : bool
        One message per entry (an encrypted producer never batches).
    round_robin : int
        Where the keyless round-robin starts.
    errors : {"strict", "replace"}
        What a key with a surrogate does (as in :func:`murmur3_32`).

    Raises
    ------
    TypeError, ValueError
        A bad argument, named.
    """

    def __init__(
        self,
        buckets: Buckets | TopicLayout,
        *,
        max_messages: int = 1000,
        max_bytes: int = 131072,
        policy: str = "shared",
        encrypted: bool = False,
        round_robin: int = 0,
        errors: str = "strict",
    ) -> None:
        self.max_messages = check_int(max_messages, "max_messages", lo=1, hi=_INT64_MAX)
        self.max_bytes = check_int(max_bytes, "max_bytes", lo=1, hi=_INT64_MAX)
        self.policy = policy
        code = check_option(policy, "policy")
        self.encrypted = check_bool(encrypted, "encrypted")
        round_robin = check_int(round_robin, "round_robin", lo=0, hi=_INT64_MAX)
        replace = replaces_surrogates(errors)
        self._errors = errors
        # `buckets`, as the README's API section names it: a Buckets (one segment) or a whole TopicLayout
        self._plan = _plan_for(buckets, "buckets")
        self._target = buckets
        plan = self._plan
        self._setup(
            plan.bucket_offsets,
            code,
            1 if self.encrypted else self.max_messages,
            self.max_bytes,
            plan.router(),
            plan.segment_ids,
            round_robin,
            replace,
        )

    @property
    def layout(self) -> Buckets | TopicLayout:
        """The Buckets or TopicLayout this batcher routes by."""
        return self._target

    # ``add``, ``add_many`` of a list of keys and ``flush`` run in the kernel (documented on
    # BatcherCore); ``add_many`` of any other key input reads its keys here and hands them to the
    # kernel, which raises through ``_refuse``.

    def _add_many_keys(self, keys: Any, payloads: Sequence[Any]) -> list[Entry]:
        """``add_many`` of keys other than a list: read (or taken as :class:`KeyHashes`) here."""
        if not isinstance(payloads, (list, tuple)):
            raise TypeError(f"payloads must be a list or tuple, not {type(payloads).__name__}")
        if isinstance(keys, KeyHashes):
            kh = _as_key_hashes(keys, self._errors)
            hashes = (
                np.ascontiguousarray(kh.raw),
                np.ascontiguousarray(kh.segment_hash),
                np.ascontiguousarray(kh.bucket_hash),
                np.ascontiguousarray(kh.has_key).view(np.uint8),
            )
            return self._add_columns(keys, [], kh.raw.shape[0], payloads, hashes)
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        shape, source = classify_keys(keys)
        if len(shape) != 1:
            raise ValueError(f"keys must be one-dimensional (a message stream), got shape {shape}")
        return self._add_columns(keys, key_columns(source), shape[0], payloads, None)

    def _refuse(self, keys: Any, status: int, index: int) -> None:
        """Raise the error of a key the kernel refused (index -1: the one key of ``add``)."""
        if index < 0:
            if status == Status.BC_ERR_KEY_TYPE:
                raise TypeError(
                    "key must be str, bytes, bytearray, memoryview or a missing value (None, NaN, pandas.NA), "
                    f"not {type(keys).__name__}"
                )
            check_status(status, 0, keys=[keys])
        else:
            check_status(status, index, keys=keys)
        raise AssertionError(f"the kernel refused a key with status {status}, which names no error")
