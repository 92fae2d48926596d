"""``bucketcore hash``: raw, segment and bucket hashes of keys, streaming.

Keys come one per line from files or stdin (``-``); each line's bytes without the line ending
(``\\n`` or ``\\r\\n``) are the key, hashed as given (a UTF-8 text line hashes as that string). The
input is read and written in blocks of ``--block`` lines, so memory stays constant on any input
size. Output: CSV (default), JSON lines, or an aligned table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import IO, Any

from ..key_files import key_blocks
from ._common import CommandError, int_at_least, progress

__all__ = ["add_parser", "run"]


def add_parser(p: argparse.ArgumentParser) -> None:
    """Register hash's options.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument(
        "files", nargs="*", default=["-"], metavar="FILE", help="key files, one key per line ('-' or nothing: stdin)"
    )
    p.add_argument(
        "--format",
        choices=("csv", "jsonl", "table"),
        default="csv",
        help="csv (default), jsonl (one JSON object per key) or table",
    )
    p.add_argument("--no-header", action="store_true", help="csv/table: no header line")
    p.add_argument(
        "--block",
        type=int_at_least(1, 1 << 24),
        default=65536,
        metavar="LINES",
        help="lines hashed per call (default 65,536): the memory bound",
    )


def _open(name: str) -> IO[bytes]:
    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except OSError as err:
        raise CommandError(f"cannot read key file {name!r}: {err.strerror}") from None


def _text(key: bytes) -> str:
    return key.decode("utf-8", errors="backslashreplace")


def _csv_field(text: str) -> str:
    if any(ch in text for ch in ',"\r\n') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def run(args: argparse.Namespace) -> int:
    """Hash every key of the inputs and write one row per key to stdout.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        0.

    Raises
    ------
    CommandError
        An unreadable input file (named).
    """
    import bucketcore as bc

    out = sys.stdout
    fmt = args.format
    header = not args.no_header
    width = 36
    for name in args.files:  # every input readable before anything is written
        if name != "-":
            _open(name).close()
    if fmt == "csv" and header:
        out.write("key,raw,segment_hash,bucket_hash\n")
    if fmt == "table" and header:
        out.write(f"{'key':<{width}}  {'raw':>10}  {'segment':>7}  {'bucket':>6}\n")
    # progress (on a terminal's stderr) counts input bytes when every input is a file of known size
    sizes = [os.path.getsize(name) if name != "-" and os.path.isfile(name) else None for name in args.files]
    total = None if None in sizes else sum(s for s in sizes if s is not None)
    done = 0
    with progress("hash", total) as update:
        for name in args.files:
            stream = _open(name)
            try:
                for keys in key_blocks(stream, args.block):
                    kh = bc.hash_keys(keys)
                    raw, seg, bkt = kh.raw.tolist(), kh.segment_hash.tolist(), kh.bucket_hash.tolist()
                    out.write(_render(fmt, keys, raw, seg, bkt, width))
                    out.flush()  # a block at a time: a reader sees each block as soon as it is hashed
                    done += sum(map(len, keys)) + len(keys)
                    update(done)
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()
    out.flush()
    return 0


def _render(fmt: str, keys: list[bytes], raw: list[Any], seg: list[Any], bkt: list[Any], width: int) -> str:
    if fmt == "csv":
        return "".join(f"{_csv_field(_text(k))},{r},{s},{b}\n" for k, r, s, b in zip(keys, raw, seg, bkt, strict=False))
    if fmt == "jsonl":
        return "".join(
            json.dumps({"key": _text(k), "raw": r, "segment_hash": s, "bucket_hash": b}) + "\n"
            for k, r, s, b in zip(keys, raw, seg, bkt, strict=False)
        )
    return "".join(
        f"{_text(k):<{width}}  {r:#010x}  {s:#06x}  {b:#06x}\n" for k, r, s, b in zip(keys, raw, seg, bkt, strict=False)
    )
