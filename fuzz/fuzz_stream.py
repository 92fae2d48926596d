"""The stream store's reader over damaged files: WAL objects, index rows and the head database.

A template store (one stream, three appends: entries stamped and not, with metadata) is written
once per process; each input restores it into a scratch directory, damages it, opens a store over
it and reads (``read`` from fuzzed offsets and ``read_stamps``):

- a WAL object with bytes flipped, replaced, inserted or cut, or wholly fuzzed, or missing;
- an index row's packed columns (stamps, locations, metadata) or its object length, as if the
  database had stored other bytes without noticing;
- the head database file itself with bytes flipped.

Oracle: a refusal is the store's own error (a StreamError: ChecksumError, MissingObjectError,
CorruptionError, ...), never a crash, a hang or a Python error from inside; an entry that is read
is exactly the entry appended (payload, metadata, offsets, stamp), whatever was damaged.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
from typing import Any

from support import expect, instrumented, main

with instrumented():
    import bucketcore.stream as st

STREAM = "x"
HEADS = "heads.sqlite3"


def _template() -> tuple[dict[str, bytes], dict[int, Any], list[str]]:
    """(file bytes by relative path, the entries appended by start offset, WAL object keys)."""
    root = tempfile.mkdtemp(prefix="bucketcore-fuzz-stream-template-")
    try:
        store = st.StreamStore.open(os.path.join(root, "s"))
        store.create_stream(STREAM)
        session = store.open_session(STREAM, "w1")
        appends = [
            [st.EntryPayload(b"A" * 40, 2, b"meta-a", 1, 2), st.EntryPayload(b"B" * 7, 1)],
            [st.EntryPayload(b"C" * 90, 3, b"meta-c", 0x10, 0x8000)],
            [st.EntryPayload(b"", 1), st.EntryPayload(b"E" * 3, 1, b"", 0xFFFF, 0xFFFF), st.EntryPayload(b"F", 2)],
        ]
        keys = [store.append(STREAM, a, session=session).read_target.object_key for a in appends]
        entries = {e.start_offset: e for e in store.read(STREAM, 0, 100)}
        store.close()
        files = {}
        for dirpath, _, names in os.walk(os.path.join(root, "s")):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, os.path.join(root, "s"))] = f.read()
        return files, entries, keys
    finally:
        shutil.rmtree(root, ignore_errors=True)


FILES, ENTRIES, OBJECTS = _template()
SCRATCH = tempfile.mkdtemp(prefix="bucketcore-fuzz-stream-")


def _restore() -> str:
    path = os.path.join(SCRATCH, "s")
    shutil.rmtree(path, ignore_errors=True)
    for rel, data in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(path, rel)), exist_ok=True)
        with open(os.path.join(path, rel), "wb") as f:
            f.write(data)
    return path


def _damaged(fdp: Any, data: bytes) -> bytes:
    if fdp.ConsumeIntInRange(0, 7) == 0:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, len(data) + 16))
    buf = bytearray(data)
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        if not buf:
            break
        op, at = fdp.ConsumeIntInRange(0, 3), fdp.ConsumeIntInRange(0, len(buf) - 1)
        if op == 0:
            buf[at] ^= 1 << fdp.ConsumeIntInRange(0, 7)
        elif op == 1:
            raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 8))
            buf[at : at + len(raw)] = raw
        elif op == 2:
            buf[at:at] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 8))
        else:
            del buf[at:]
    return bytes(buf)


def _damage_wal(fdp: Any, path: str) -> None:
    key = fdp.PickValueInList(OBJECTS)
    target = os.path.join(path, "wal", key)
    if fdp.ConsumeIntInRange(0, 9) == 0:
        os.remove(target)
        return
    with open(target, "wb") as f:
        f.write(_damaged(fdp, FILES[os.path.join("wal", key)]))


def _damage_index(fdp: Any, path: str) -> None:
    db = sqlite3.connect(os.path.join(path, HEADS))
    try:
        rowids = [r[0] for r in db.execute("SELECT rowid FROM appends ORDER BY end_offset")]
        rowid = fdp.PickValueInList(rowids)
        column = fdp.PickValueInList(["stamps", "locations", "metadata", "object_length"])
        if column == "object_length":
            db.execute("UPDATE appends SET object_length = ? WHERE rowid = ?", (fdp.ConsumeIntInRange(-2, 600), rowid))
        else:
            (blob,) = db.execute(f"SELECT {column} FROM appends WHERE rowid = ?", (rowid,)).fetchone()
            db.execute(f"UPDATE appends SET {column} = ? WHERE rowid = ?", (_damaged(fdp, bytes(blob)), rowid))
        db.commit()
    finally:
        db.close()


def _damage_heads_file(fdp: Any, path: str) -> None:
    target = os.path.join(path, HEADS)
    data = bytearray(FILES[HEADS])
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        data[fdp.ConsumeIntInRange(0, len(data) - 1)] = fdp.ConsumeIntInRange(0, 255)
    with open(target, "wb") as f:
        f.write(bytes(data))


def _check_entry(entry: Any) -> None:
    original = ENTRIES.get(entry.start_offset)
    expect(original is not None, f"read an entry at offset {entry.start_offset}, where none starts")
    expect(entry == original, f"read {entry!r}, appended {original!r}")


def test_one_input(data: bytes) -> None:
    """Damage the template store as ``data`` says, then read it back."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    path = _restore()
    mode = fdp.ConsumeIntInRange(0, 4)
    if mode <= 2:
        _damage_wal(fdp, path)
    elif mode == 3:
        _damage_index(fdp, path)
    else:
        _damage_heads_file(fdp, path)
    store = None
    try:
        store = st.StreamStore.open(path)
        for _ in range(fdp.ConsumeIntInRange(1, 3)):
            try:
                if fdp.ConsumeIntInRange(0, 3) == 0:
                    store.read_stamps(STREAM, fdp.ConsumeIntInRange(0, 10))
                else:
                    for entry in store.read(STREAM, fdp.ConsumeIntInRange(0, 10), fdp.ConsumeIntInRange(1, 10)):
                        _check_entry(entry)
            except st.StreamError:
                pass
    except st.StreamError:
        pass
    finally:
        if store is not None:
            store.close()


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
