"""Shared helpers of the stream-store tests (no tests here), and the child-process entry points.

Run as a script (``python tests/stream/stream_support.py <command> <json>``) it is the child of the
crash and fencing tests: a separate process with its own store handle, which may die by
``os._exit`` in the middle of an append.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

from bucketcore.stream import CommittedEntry, EntryPayload, FencedError, StreamStore

SUPPORT = os.path.abspath(__file__)
EXIT_CODE = 77


class InjectedFault(Exception):
    """Raised by the raising fault hook."""


def raising_hook(step: int, *, times: int = 1) -> Any:
    """A fault hook that raises InjectedFault after ``step``, the first ``times`` times."""
    left = [times]

    def hook(done: int) -> None:
        if done == step and left[0] > 0:
            left[0] -= 1
            raise InjectedFault(f"injected after step {step}")

    return hook


def exiting_hook(step: int) -> Any:
    """A fault hook that ends the process at once (no cleanup, no flush) after ``step``."""

    def hook(done: int) -> None:
        if done == step:
            os._exit(EXIT_CODE)

    return hook


def random_entries(rng: random.Random, n: int | None = None, *, max_payload: int = 300) -> list[EntryPayload]:
    """``n`` (default 1..6) entries with random payloads, record counts, metadata and stamps."""
    n = rng.randint(1, 6) if n is None else n
    out = []
    for _ in range(n):
        payload = rng.randbytes(rng.randint(0, max_payload))
        if rng.random() < 0.7:
            lo = rng.randint(0, 0xFFFF)
            hi = rng.randint(lo, 0xFFFF)
            out.append(
                EntryPayload(
                    payload,
                    rng.randint(1, 5),
                    rng.randbytes(rng.randint(0, 8)),
                    lo,
                    hi,
                    rng.randint(0, 9),
                    rng.randint(0, 63),
                )
            )
        else:
            out.append(EntryPayload(payload, rng.randint(1, 5), rng.randbytes(rng.randint(0, 8))))
    return out


def entry_dict(e: EntryPayload) -> dict[str, Any]:
    """A JSON-able form of an EntryPayload."""
    return {
        "payload": e.payload.hex(),
        "record_count": e.record_count,
        "metadata": e.metadata.hex(),
        "hash_min": e.hash_min,
        "hash_max": e.hash_max,
        "segment_id": e.segment_id,
        "bucket": e.bucket,
    }


def entry_from_dict(d: dict[str, Any]) -> EntryPayload:
    """Inverse of :func:`entry_dict`."""
    return EntryPayload(
        bytes.fromhex(d["payload"]),
        d["record_count"],
        bytes.fromhex(d["metadata"]),
        d["hash_min"],
        d["hash_max"],
        d["segment_id"],
        d["bucket"],
    )


def same_entry(read: CommittedEntry, sent: EntryPayload) -> bool:
    """Whether a read entry carries exactly what was appended."""
    return (
        read.payload == sent.payload
        and read.metadata == sent.metadata
        and read.record_count == sent.record_count
        and read.hash_min == sent.hash_min
        and read.hash_max == sent.hash_max
        and read.segment_id == sent.segment_id
        and read.bucket == sent.bucket
    )


def read_all(store: StreamStore, stream_id: str) -> list[CommittedEntry]:
    """Every retained entry of a stream, checking offsets are contiguous from the log start."""
    head = store.head(stream_id)
    out: list[CommittedEntry] = []
    pos = head.log_start
    while pos < head.committed_end:
        batch = store.read(stream_id, pos, 50)
        assert batch, f"no entry at offset {pos} below the committed end {head.committed_end}"
        for e in batch:
            assert e.start_offset == pos, f"gap or overlap at offset {pos}: entry starts at {e.start_offset}"
            assert e.end_offset - e.start_offset == e.record_count >= 1
            pos = e.end_offset
        out.extend(batch)
    assert pos == head.committed_end
    return out


def wal_objects(path: str) -> list[str]:
    """Published object names in a store's WAL directory."""
    return sorted(n for n in os.listdir(os.path.join(path, "wal")) if n.endswith(".obj"))


def snapshot(path: str) -> dict[str, str]:
    """Digest of every file of a store directory (the SQLite shared-memory index excluded: readers
    may touch it; the database and its WAL journal hold all durable state)."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith("-shm"):
                continue
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


def run_child(command: str, args: dict[str, Any], *, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run this file as a child process with ``command`` and ``args``; returns the finished process."""
    return subprocess.run(
        [sys.executable, SUPPORT, command, json.dumps(args)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def spawn_child(command: str, args: dict[str, Any]) -> subprocess.Popen:
    """Start this file as a child process (not waited for)."""
    return subprocess.Popen(
        [sys.executable, SUPPORT, command, json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


# ----------------------------------------------------------------------------------------------
# child entry points


def _open_in_child(path: str, **kwargs: Any) -> StreamStore:
    """The store at ``path`` with the head store the parent test used for it (tests/pg_fixture.py
    runs the stream tests against PostgreSQL heads too; otherwise the embedded SQLite one)."""
    url = None
    try:
        from pg_fixture import heads_for_child
    except ImportError:
        pass
    else:
        url = heads_for_child(path)
    return StreamStore.open(path, heads=url, **kwargs)


def _child_crash(args: dict[str, Any]) -> None:
    """Append with a hook that ends the process after ``step``; if it survives, print the result."""
    store = _open_in_child(args["path"], _fault=exiting_hook(args["step"]))
    session = store.open_session(args["stream"], args["writer"], ttl=60.0)
    entries = [entry_from_dict(d) for d in args["entries"]]
    res = store.append(args["stream"], entries, session=session, attempt_id=args["attempt"])
    print(json.dumps({"start": res.start_offset, "end": res.end_offset}))


def _child_session(args: dict[str, Any]) -> None:
    """Open a session (fencing every older one) and print its epoch."""
    store = _open_in_child(args["path"])
    session = store.open_session(args["stream"], args["writer"], ttl=60.0)
    print(json.dumps({"epoch": session.epoch}))


def _child_contender(args: dict[str, Any]) -> None:
    """Alternate: open a session, append a few times until fenced; record every outcome."""
    store = _open_in_child(args["path"])
    rng = random.Random(args["seed"])
    name = args["writer"]
    outcomes = []
    # all contenders start together, however long each took to start up
    open(os.path.join(args["ready_dir"], name), "w").close()
    give_up = time.time() + 60.0
    while len(os.listdir(args["ready_dir"])) < args["parties"] and time.time() < give_up:
        time.sleep(0.005)
    deadline = time.time() + args["seconds"]
    rounds = 0
    while rounds < args["rounds"] and time.time() < deadline:
        rounds += 1
        session = store.open_session(args["stream"], name, ttl=60.0)
        for seq in range(rng.randint(1, 4)):
            tag = f"{name}:{session.epoch}:{seq}".encode()
            try:
                entry = EntryPayload(rng.randbytes(rng.randint(1, 64)), rng.randint(1, 3), tag)
                res = store.append(args["stream"], [entry], session=session)
            except FencedError:
                outcomes.append({"epoch": session.epoch, "tag": tag.decode(), "ok": False})
                break
            outcomes.append(
                {
                    "epoch": session.epoch,
                    "tag": tag.decode(),
                    "ok": True,
                    "start": res.start_offset,
                    "end": res.end_offset,
                }
            )
            time.sleep(rng.random() * 0.002)
    with open(args["out"], "w") as f:
        json.dump(outcomes, f)


if __name__ == "__main__":
    # a child process: tests/ (pg_fixture, for the parent's head store) is not on its path yet
    sys.path.insert(1, os.path.dirname(os.path.dirname(SUPPORT)))
    command, raw = sys.argv[1], sys.argv[2]
    {"crash": _child_crash, "session": _child_session, "contender": _child_contender}[command](json.loads(raw))
