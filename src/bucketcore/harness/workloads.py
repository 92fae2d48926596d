"""Deterministic workloads of the README's Speed section and of the ``bucketcore`` commands.

Three kinds of thing live here:

* key lists for the kernels' benchmarks (:func:`uuid_keys`, :func:`short_keys`,
  :func:`zipf_keys`) and the equal-range layouts they run on (:func:`tiled_layout`);
* the other inputs of the benchmarks, the same for ``benches/compare_*.py`` and the
  pytest-benchmark suites: bucket hashes (:func:`uniform_hashes`), pre-hashed keys
  (:func:`prehashed_keys`), stamped entries (:func:`stamped_entries`, :func:`spread_stamps`),
  encoded batches' entries (:func:`wire_batches`), store entries (:func:`payload_entries`) and
  a key column seen through the Arrow PyCapsule stream interface alone (:class:`CapsuleOnly`);
* :class:`KeyWorkload`, a stream of keyed messages (with a share of keyless ones) drawn from a
  key population: uniform UUIDs, Zipf over K keys with exponent s, or the lines of a file. The
  same seed always gives the same stream.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import bucketcore as bc
from bucketcore.stream import EntryPayload

__all__ = [
    "WORKLOADS",
    "CapsuleOnly",
    "KeyWorkload",
    "StampedEntries",
    "key_workload",
    "payload_entries",
    "prehashed_keys",
    "read_key_file",
    "short_keys",
    "spread_stamps",
    "stamped_entries",
    "tiled_layout",
    "uniform_hashes",
    "uuid_keys",
    "wire_batches",
    "zipf_keys",
]


def uuid_keys(n: int, seed: int = 1) -> list[str]:
    """``n`` distinct UUID strings (36 bytes each).

    Parameters
    ----------
    n : int
        How many.
    seed : int
        Generator seed: the same seed gives the same keys.

    Returns
    -------
    list of str
    """
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 1 << 63, size=(n, 2), dtype=np.int64)
    return [str(uuid.UUID(int=(int(a) << 64) | int(b))) for a, b in words]


def short_keys(n: int) -> list[str]:
    """``user-<i>`` for i in 0..n-1: short keys of 6 to 12 bytes.

    Parameters
    ----------
    n : int
        How many.

    Returns
    -------
    list of str
    """
    return [f"user-{i}" for i in range(n)]


def zipf_keys(n: int, a: float = 1.2, seed: int = 2) -> list[str]:
    """``n`` keys ``user-<rank>`` with Zipf-distributed ranks: a few hot keys, a long tail.

    Parameters
    ----------
    n : int
        How many (with repeats).
    a : float
        Zipf exponent (> 1, numpy's unbounded Zipf).
    seed : int
        Generator seed.

    Returns
    -------
    list of str
    """
    ranks = np.random.default_rng(seed).zipf(a, size=n)
    return [f"user-{r}" for r in ranks.tolist()]


def tiled_layout(segments: int, buckets: int = 1, legacy: bool = False) -> bc.TopicLayout:
    """A layout of ``segments`` active segments over equal hash ranges.

    Parameters
    ----------
    segments : int
        Segment count (1..65536).
    buckets : int
        Equal-width buckets per segment.
    legacy : bool
        Every segment an adopted v4 partition (signSafeMod routing).

    Returns
    -------
    TopicLayout
        Epoch 1, segment ids 0..segments-1 in hash order.
    """
    bounds = [i * 0x10000 // segments for i in range(segments + 1)]
    return bc.TopicLayout(
        1,
        [
            bc.Segment(
                i,
                a,
                b - 1,
                bc.Buckets.equal_width(buckets),
                legacy_topic_name=f"persistent://t/ns/t-partition-{i}" if legacy else None,
            )
            for i, (a, b) in enumerate(itertools.pairwise(bounds))
        ],
    )


WORKLOADS = {"uuid": uuid_keys, "short": short_keys, "zipf": zipf_keys}


def uniform_hashes(n: int, seed: int = 1) -> np.ndarray:
    """``n`` uniform 16-bit bucket hashes (uint16): the bucket lookup's and the balancer's input.

    Parameters
    ----------
    n : int
    seed : int
        Generator seed (the hashes are its first draw).

    Returns
    -------
    numpy.ndarray
    """
    return np.random.default_rng(seed).integers(0, 0x10000, size=n, dtype=np.int64).astype(np.uint16)


def prehashed_keys(n: int, seed: int = 2, keyless: float = 0.01) -> bc.KeyHashes:
    """``n`` uniform raw key hashes, a ``keyless`` share of them keyless: the routing input.

    Parameters
    ----------
    n : int
    seed : int
    keyless : float
        Share of keyless messages (raw hash 0, ``has_key`` False).

    Returns
    -------
    KeyHashes
    """
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    has_key = rng.random(n) >= keyless
    raw[~has_key] = 0
    return bc.KeyHashes(raw, *bc.split_hash(raw), has_key)


@dataclass(frozen=True, eq=False)
class StampedEntries:
    """Committed entries as a broker routes them.

    Attributes
    ----------
    hash_min, hash_max : numpy.ndarray
        Each entry's stamp (uint16; ``hash_max`` 0..63 above ``hash_min``).
    stamped : numpy.ndarray
        Whether the entry carries its stamp (bool, 90%); the others are routed by ``key_hash``.
    key_hash : numpy.ndarray
        The raw key hash of each entry's first message (uint32).
    """

    hash_min: np.ndarray
    hash_max: np.ndarray
    stamped: np.ndarray
    key_hash: np.ndarray


def stamped_entries(n: int, seed: int = 1) -> StampedEntries:
    """``n`` entries with uniform stamps: the input of ``route_entries`` and ``fits_one_bucket``.

    Parameters
    ----------
    n : int
    seed : int
        Generator seed (``hash_min`` is its first draw, the same column as
        ``uniform_hashes(n, seed)``).

    Returns
    -------
    StampedEntries
    """
    rng = np.random.default_rng(seed)
    hash_min = rng.integers(0, 0x10000, size=n, dtype=np.int64).astype(np.uint16)
    hash_max = np.minimum(hash_min.astype(np.int64) + rng.integers(0, 64, n), 0xFFFF).astype(np.uint16)
    stamped = rng.random(n) >= 0.10
    key_hash = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    return StampedEntries(hash_min, hash_max, stamped, key_hash)


def spread_stamps(count: int) -> list[int]:
    """``count`` stamps 1..65535 spread over the ring by a fixed stride (no generator): the
    per-call dispatcher rows offer one at a time."""
    return [(i * 40503) % 65535 + 1 for i in range(count)]


def wire_batches(
    messages: int, payload: int = 100, per_entry: int = 64, seed: int = 7
) -> tuple[list[bc.Entry], list[list[str]]]:
    """Entries of ``messages`` random payloads with str keys ``key-<i mod 10000>``, batched by an
    :class:`bucketcore.EntryBucketBatcher` (one segment of 16 buckets, ``per_bucket`` policy,
    ``max_messages=per_entry``), and each entry's keys: what a producer encodes.

    Parameters
    ----------
    messages : int
    payload : int
        Bytes per message.
    per_entry : int
        Most messages per entry.
    seed : int
        Generator seed of the payload bytes.

    Returns
    -------
    tuple
        (entries, per entry the list of its messages' keys).
    """
    blob = np.random.default_rng(seed).integers(0, 256, messages * payload, dtype=np.uint8).tobytes()
    payloads = [blob[i * payload : (i + 1) * payload] for i in range(messages)]
    all_keys = [f"key-{i % 10000}" for i in range(messages)]
    batcher = bc.EntryBucketBatcher(bc.Buckets.equal_width(16), max_messages=per_entry, policy="per_bucket")
    entries = batcher.add_many(all_keys, payloads) + batcher.flush()
    return entries, [[all_keys[i] for i in e.message_indices.tolist()] for e in entries]


def payload_entries(rng: np.random.Generator, n: int, size: int = 1024) -> list[EntryPayload]:
    """``n`` stamped store entries of one record each, ``size`` random payload bytes, stamps of
    200 hashes from a uniform start, publisher slots 0..15 in turn.

    Parameters
    ----------
    rng : numpy.random.Generator
        Drawn from (a row's successive batches continue the same generator).
    n : int
    size : int
        Payload bytes per entry.

    Returns
    -------
    list of EntryPayload
    """
    lo = rng.integers(0, 0xFF00, size=n)
    blob = rng.bytes(size * n)
    return [
        EntryPayload(blob[i * size : (i + 1) * size], 1, b"", int(lo[i]), int(lo[i]) + 200, 0, int(i % 16))
        for i in range(n)
    ]


@dataclass(frozen=True, eq=False)
class KeyWorkload:
    """A message stream over a key population.

    Attributes
    ----------
    keys : list of str
        The distinct keys (the population).
    key_ids : numpy.ndarray
        Per message, the index of its key in ``keys``; ``-1`` for a keyless message (int64).
    sizes : numpy.ndarray
        Per message, its payload size in bytes (int64).
    description : str
        One line saying what the stream is.
    """

    keys: list[str]
    key_ids: np.ndarray
    sizes: np.ndarray
    description: str

    def __len__(self) -> int:
        return int(self.key_ids.size)

    @property
    def keyless(self) -> np.ndarray:
        """Bool mask of the keyless messages."""
        return self.key_ids < 0

    def column(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The messages' keys as a numpy ``object`` column, ``None`` for keyless messages.

        Parameters
        ----------
        start, stop : int
            The slice of the stream (default: all of it).

        Returns
        -------
        numpy.ndarray
            dtype object, one ``str`` or ``None`` per message.
        """
        ids = self.key_ids[start:stop]
        population = np.empty(len(self.keys) + 1, dtype=object)
        population[:-1] = self.keys
        population[-1] = None  # index -1 picks it
        return population[ids]

    def bucket_hashes(self) -> np.ndarray:
        """Every keyed message's bucket hash (the low 16 bits of its key's Murmur3), uint16."""
        per_key = bc.hash_keys(self.keys).bucket_hash
        return per_key[self.key_ids[self.key_ids >= 0]]

    def key_sequence(self) -> np.ndarray:
        """Per message, its position among the messages of its key (0, 1, 2, ... in send order);
        ``-1`` for keyless messages. The per-key order checks compare against it."""
        ids = self.key_ids
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
        run_start = np.repeat(starts, np.diff(np.append(starts, ids.size)))
        seq = np.empty(ids.size, dtype=np.int64)
        seq[order] = np.arange(ids.size, dtype=np.int64) - run_start
        seq[ids < 0] = -1
        return seq


def read_key_file(path: str | Path) -> list[str]:
    """The keys of a key file: one per line, UTF-8.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    list of str
        The lines, in order (at least one).

    Raises
    ------
    ValueError
        The file is missing, unreadable, not UTF-8 or empty (named in the message).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"key file {str(path)!r} does not exist") from None
    except OSError as err:
        raise ValueError(f"key file {str(path)!r} cannot be read: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"key file {str(path)!r} is not UTF-8 (byte {err.start})") from None
    keys = text.splitlines()
    if not keys:
        raise ValueError(f"key file {str(path)!r} holds no keys (one key per line)")
    return keys


def key_workload(
    kind: str,
    messages: int,
    *,
    keys: int = 100_000,
    zipf_s: float = 1.1,
    keyless: float = 0.05,
    seed: int = 1,
    key_file: str | Path | None = None,
    mean_size: int = 256,
) -> KeyWorkload:
    """Draw a message stream.

    Parameters
    ----------
    kind : {"uuid", "zipf", "file"}
        ``uuid``: every message picks one of ``keys`` distinct UUIDs uniformly; ``zipf``: key of
        rank r (1..``keys``) with probability proportional to ``r ** -zipf_s``; ``file``: the
        lines of ``key_file`` are the population, each line as likely as its repeats make it.
    messages : int
        Stream length (>= 1).
    keys : int
        Population size for ``uuid`` and ``zipf`` (>= 1).
    zipf_s : float
        Zipf exponent (>= 0; 0 is uniform).
    keyless : float
        Share of keyless messages, 0..1.
    seed : int
        Generator seed: the same arguments give the same stream.
    key_file : str or Path, optional
        The population file for ``kind="file"`` (one key per line, UTF-8).
    mean_size : int
        Mean payload size; sizes are uniform in ``[mean_size // 2, 3 * mean_size // 2]``.

    Returns
    -------
    KeyWorkload

    Raises
    ------
    ValueError
        A bad count, share or exponent (named), or an unreadable key file.
    """
    if messages < 1:
        raise ValueError(f"messages must be >= 1, got {messages}")
    if not 0.0 <= keyless <= 1.0:
        raise ValueError(f"keyless share must be in 0..1, got {keyless}")
    if mean_size < 2:
        raise ValueError(f"mean_size must be >= 2, got {mean_size}")
    rng = np.random.default_rng(seed)
    if kind == "file":
        if key_file is None:
            raise ValueError("kind 'file' needs key_file")
        lines = read_key_file(key_file)
        population, inverse = np.unique(np.array(lines, dtype=object), return_inverse=True)
        key_list = [str(k) for k in population.tolist()]
        key_ids = inverse.astype(np.int64)[rng.integers(0, len(lines), size=messages)]
        description = f"{messages:,} messages over the {len(key_list):,} distinct keys of {key_file}"
    elif kind in ("uuid", "zipf"):
        if keys < 1:
            raise ValueError(f"keys must be >= 1, got {keys}")
        key_list = uuid_keys(keys, seed=seed)
        if kind == "uuid":
            key_ids = rng.integers(0, keys, size=messages, dtype=np.int64)
            description = f"{messages:,} messages over {keys:,} uniform UUID keys"
        else:
            if zipf_s < 0:
                raise ValueError(f"zipf exponent must be >= 0, got {zipf_s}")
            weights = np.arange(1, keys + 1, dtype=np.float64) ** -zipf_s
            cdf = np.cumsum(weights)
            cdf /= cdf[-1]
            key_ids = np.minimum(np.searchsorted(cdf, rng.random(messages), side="right"), keys - 1)
            key_ids = key_ids.astype(np.int64)
            description = f"{messages:,} messages, Zipf s={zipf_s:g} over {keys:,} UUID keys"
    else:
        raise ValueError(f"workload must be 'uuid', 'zipf' or 'file', not {kind!r}")
    if keyless > 0:
        key_ids[rng.random(messages) < keyless] = -1
        description += f", {keyless:.0%} keyless"
    sizes = rng.integers(mean_size // 2, 3 * mean_size // 2 + 1, size=messages, dtype=np.int64)
    return KeyWorkload(key_list, key_ids, sizes, description)


class CapsuleOnly:
    """A key column that exposes nothing but the Arrow PyCapsule stream interface of another
    (``__arrow_c_stream__``): the input of a producer bucketcore knows only by that interface.

    Parameters
    ----------
    column : object
        Anything with ``__arrow_c_stream__`` (a pyarrow ``ChunkedArray``).
    """

    def __init__(self, column: Any) -> None:
        self.column = column

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.column.__arrow_c_stream__(requested_schema)
