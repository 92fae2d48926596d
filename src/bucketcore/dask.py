"""Planning and bucketing key logs too large for one machine, over a Dask cluster.

Optional extra: ``pip install 'bucketcore[dask]'`` (dask with its distributed scheduler).
Nothing here is home-made scheduling: each partition of a Dask DataFrame (or Series) of keys is
summarised where it lives and the summaries are combined by Dask.

- :func:`bucket_histogram` / :func:`plan_layout`: every partition becomes a
  :class:`bucketcore.histogram.BucketHistogram` (routed bucket-hash counts, or weights), the
  histograms are added in a tree (``split_every`` at a time), and the merged one plans one
  balanced boundary list per active segment. Counts and integer weights add exactly, so the
  plan equals the one made from the whole log in one process, bit for bit.
- :func:`assign`: adds ``segment_id`` (int64), ``bucket`` (int32) and ``bucket_hash`` (uint16)
  columns to every row, numpy columns next to the Arrow-backed keys (no object columns).
- :func:`bucket_entries`: replays each partition through the producer's bucketing
  (:func:`bucketcore.bucket_entries`); a partition's rows come back grouped into entries, each
  entry's messages in send order, so per-key order holds within a partition.

Keyless rows route round-robin over the active segments, and the rotation starts afresh in every
partition (each partition is replayed as one producer would send it). Keyless rows are left out
of histograms (they carry no bucket hash), as in :func:`bucketcore.bucket_histogram`.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from .buckets import _check_bucket_count
from .hashing import hash_keys
from .histogram import BucketHistogram
from .histogram import bucket_histogram as _histogram_of
from .key_files import key_blocks
from .producer import bucket_entries as _entries_of
from .topic_layout import TopicLayout
from .validation import check_int, describe

try:
    import dask
    import dask.dataframe as dd
    import pandas as pd  # type: ignore[import-untyped]
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ImportError("bucketcore.dask needs dask and pandas: pip install 'bucketcore[dask]'") from _err

__all__ = [
    "assign",
    "bucket_entries",
    "bucket_histogram",
    "client_for",
    "plan_layout",
    "read_keys",
]

#: Columns :func:`assign` adds, and their dtypes.
ASSIGNED: dict[str, np.dtype] = {
    "segment_id": np.dtype(np.int64),
    "bucket": np.dtype(np.int32),
    "bucket_hash": np.dtype(np.uint16),
}

#: Columns :func:`bucket_entries` adds to every message row, and their dtypes.
ENTRY_COLUMNS: dict[str, np.dtype] = {
    "entry": np.dtype(np.int64),
    "row": np.dtype(np.int64),
    "segment_id": np.dtype(np.int64),
    "bucket": np.dtype(np.int32),
    "hash_min": np.dtype(np.uint16),
    "hash_max": np.dtype(np.uint16),
}


# --- inputs ---------------------------------------------------------------------------------------


def _check_layout(layout: Any) -> Any:
    if not isinstance(layout, TopicLayout):
        raise TypeError(f"layout must be a TopicLayout, not {describe(layout)}")
    return layout


def _key_series(ddf: Any, column: str | None, what: str = "ddf_or_series") -> Any:
    """The Dask Series of keys: ``ddf`` itself, or its ``column``."""
    if isinstance(ddf, dd.Series):
        if column is not None:
            raise ValueError(f"column={column!r} names a column, but {what} is already a Series of keys")
        return ddf
    if isinstance(ddf, dd.DataFrame):
        if column is None:
            raise ValueError(f"{what} is a DataFrame: name its key column with column=")
        if column not in ddf.columns:
            raise KeyError(f"no column {column!r} in the DataFrame (columns: {list(ddf.columns)})")
        return ddf[column]
    raise TypeError(f"{what} must be a dask DataFrame or Series, not {describe(ddf)}")


def _keys_of(series: Any) -> Any:
    """A partition's keys in a form :func:`bucketcore.hash_keys` reads without a copy where it can.

    Arrow-backed columns (the pandas string dtype, ``ArrowDtype``) hand over their Arrow arrays;
    anything else goes as a numpy object array (None/NaN/NA are keyless).
    """
    array = series.array
    if hasattr(array, "__arrow_array__"):
        return array.__arrow_array__()
    return series.to_numpy(dtype=object, na_value=None)


def _weights_of(part: Any, weights: str | None) -> np.ndarray | None:
    if weights is None:
        return None
    col = part[weights]
    if col.isna().any():
        i = int(np.flatnonzero(col.isna().to_numpy())[0])
        raise ValueError(f"weight column {weights!r} holds a missing value at row {i} of its partition")
    return col.to_numpy()


# --- histograms and plans -------------------------------------------------------------------------


def _partition_histogram(
    part: Any, layout: Any, column: str | None, weights: str | None, errors: str
) -> BucketHistogram:
    keys = part if column is None else part[column]
    # a worker is one core's share of the cluster: hashing in more threads would oversubscribe it
    return _histogram_of(_keys_of(keys), layout, weights=_weights_of(part, weights), errors=errors, threads=1)


def _add(*hists: BucketHistogram) -> BucketHistogram:
    total = hists[0]
    for h in hists[1:]:
        total = total + h
    return total


def bucket_histogram(
    ddf_or_series: Any,
    layout: Any,
    *,
    column: str | None = None,
    weights: str | None = None,
    split_every: int = 8,
    errors: str = "strict",
    compute: bool = True,
) -> Any:
    """The :class:`~bucketcore.histogram.BucketHistogram` of a whole Dask collection of keys.

    One histogram per partition, added in a tree of ``split_every`` inputs per node.

    Parameters
    ----------
    ddf_or_series : dask DataFrame or Series
        The keys: a Series, or a DataFrame with ``column``.
    layout : TopicLayout
    column : str, optional
        The key column of a DataFrame.
    weights : str, optional
        A numeric column of the DataFrame to weight each message by (e.g. its size in bytes).
    split_every : int
        Histograms added per tree node (>= 2).
    errors : {"strict", "replace"}
        As in :func:`bucketcore.hash_keys`.
    compute : bool
        False: return the Dask ``Delayed`` instead of computing it.

    Returns
    -------
    BucketHistogram or dask.delayed.Delayed
        Computed on the current scheduler (a ``distributed.Client`` made current, if any).

    Raises
    ------
    TypeError
        Not a Dask collection, or ``layout`` not a TopicLayout.
    ValueError
        A missing ``column``, or a Series given with ``column``; bad keys or weights surface
        from the partition that holds them when the graph runs.
    KeyError
        ``column`` or ``weights`` is not a column of the DataFrame.
    """
    layout = _check_layout(layout)
    split_every = check_int(split_every, "split_every", lo=2)
    keys = _key_series(ddf_or_series, column)
    if weights is not None:
        if not isinstance(ddf_or_series, dd.DataFrame):
            raise ValueError("weights= names a column, so ddf_or_series must be a DataFrame")
        if weights not in ddf_or_series.columns:
            raise KeyError(f"no weight column {weights!r} in the DataFrame (columns: {list(ddf_or_series.columns)})")
        source = ddf_or_series[[column, weights]] if column != weights else ddf_or_series[[column]]
        key_column: str | None = column
    else:
        source, key_column = keys, None
    parts = [
        dask.delayed(_partition_histogram, pure=True)(p, layout, key_column, weights, errors)
        for p in source.to_delayed()
    ]
    if not parts:
        raise ValueError("the collection has no partitions")
    while len(parts) > 1:
        parts = [dask.delayed(_add, pure=True)(*parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0].compute() if compute else parts[0]


def plan_layout(
    ddf_or_series: Any,
    layout: Any,
    n: int,
    *,
    column: str | None = None,
    weights: str | None = None,
    split_every: int = 8,
    errors: str = "strict",
) -> Any:
    """Balanced boundary lists of ``n`` buckets for every active segment, from a whole key log.

    The layout is returned with each active segment's list replaced by
    ``Buckets.balanced(hist[segment_id], n)`` (epoch, topic and everything else unchanged), the
    same layout ``bucketcore plan`` writes and
    ``layout.rebalanced(bucketcore.bucket_histogram(all_keys, layout), n)`` gives in one
    process.

    Parameters
    ----------
    ddf_or_series : dask DataFrame or Series
    layout : TopicLayout
    n : int
        Buckets per active segment, 1..65536.
    column, weights, split_every, errors
        As in :func:`bucket_histogram`.

    Returns
    -------
    TopicLayout

    Raises
    ------
    TypeError, ValueError, KeyError
        As :func:`bucket_histogram`.
    InvalidBoundaryError
        ``n`` outside 1..65536 (checked before any work).
    """
    _check_bucket_count(n)
    layout = _check_layout(layout)
    hist = bucket_histogram(
        ddf_or_series, layout, column=column, weights=weights, split_every=split_every, errors=errors
    )
    return layout.rebalanced(hist, n)


# --- per-row assignment and entry replay ----------------------------------------------------------


def _assign_partition(part: Any, layout: Any, column: str, errors: str) -> Any:
    kh = hash_keys(_keys_of(part[column]), errors=errors)
    index = np.asarray(layout.route_index(kh)[0], dtype=np.int32).reshape(-1)
    bucket_hash = np.asarray(kh.bucket_hash, dtype=np.uint16).reshape(-1)
    active = layout.active_segments
    ids = np.asarray([s.segment_id for s in active], dtype=np.int64)
    bucket = np.zeros(index.size, dtype=np.int32)
    if index.size:
        for seg in np.flatnonzero(np.bincount(index, minlength=len(active))).tolist():
            buckets = active[seg].buckets
            if buckets.count > 1:
                rows = np.flatnonzero(index == seg)
                bucket[rows] = buckets.bucket_of(bucket_hash[rows])
    out = part.copy(deep=False)
    out["segment_id"] = ids[index] if index.size else np.zeros(0, dtype=np.int64)
    out["bucket"] = bucket
    out["bucket_hash"] = bucket_hash
    return out


def _meta_with(meta: Any, columns: dict[str, np.dtype], first: bool = False) -> Any:
    """An empty frame like ``meta`` with ``columns`` added (at the end, or in front)."""
    added = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in columns.items()})
    base = meta.iloc[:0].reset_index(drop=True)
    return pd.concat([added, base] if first else [base, added], axis=1)


def assign(ddf: Any, layout: Any, *, column: str, errors: str = "strict") -> Any:
    """Add each row's ``segment_id``, ``bucket`` and ``bucket_hash`` (lazily, per partition).

    Parameters
    ----------
    ddf : dask DataFrame
    layout : TopicLayout
    column : str
        The key column.
    errors : {"strict", "replace"}
        As in :func:`bucketcore.hash_keys`.

    Returns
    -------
    dask DataFrame
        ``ddf`` with three more columns: ``segment_id`` int64, ``bucket`` int32 (in the
        segment's boundary list), ``bucket_hash`` uint16 (0 for a keyless row).

    Raises
    ------
    TypeError
        ``ddf`` is not a Dask DataFrame, or ``layout`` not a TopicLayout.
    KeyError
        No such column.
    ValueError
        ``ddf`` already has one of the added columns.
    """
    layout = _check_layout(layout)
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"ddf must be a dask DataFrame, not {describe(ddf)}")
    _key_series(ddf, column, "ddf")
    clash = [c for c in ASSIGNED if c in ddf.columns]
    if clash:
        raise ValueError(f"ddf already has column(s) {clash}: rename them before assign")
    return ddf.map_partitions(_assign_partition, layout, column, errors, meta=_meta_with(ddf._meta, ASSIGNED))


def _entries_partition(
    part: Any, layout: Any, column: str, size_column: str | None, options: dict[str, Any], errors: str
) -> Any:
    sizes = None
    if size_column is not None:
        sizes = _weights_of(part, size_column)
    table = _entries_of(_keys_of(part[column]), layout, sizes=sizes, errors=errors, **options)
    order = np.asarray(table.order, dtype=np.int64)
    count = np.asarray(table.count, dtype=np.int64)
    entry = np.repeat(np.arange(count.size, dtype=np.int64), count)
    head = pd.DataFrame(
        {
            "entry": entry,
            "row": order,
            "segment_id": np.repeat(np.asarray(table.segment_id, dtype=np.int64), count),
            "bucket": np.repeat(np.asarray(table.bucket, dtype=np.int32), count),
            "hash_min": np.repeat(np.asarray(table.hash_min, dtype=np.uint16), count),
            "hash_max": np.repeat(np.asarray(table.hash_max, dtype=np.uint16), count),
        }
    )
    rest = part.iloc[order].reset_index(drop=True)
    return pd.concat([head, rest], axis=1)


def bucket_entries(
    ddf: Any,
    layout: Any,
    *,
    column: str,
    size_column: str | None = None,
    max_messages: int = 1000,
    max_bytes: int = 131072,
    policy: str = "shared",
    encrypted: bool = False,
    errors: str = "strict",
) -> Any:
    """Replay every partition through :func:`bucketcore.bucket_entries`: its rows grouped into entries.

    Each output partition holds its input partition's rows reordered into entries, in emission
    order, with six leading columns: ``entry`` (the entry's number within the partition),
    ``row`` (the message's position in its input partition), ``segment_id``, ``bucket``,
    ``hash_min`` and ``hash_max`` (the entry's stamp). An entry's rows are contiguous and in send
    order, so every key keeps its order within a partition.

    Parameters
    ----------
    ddf : dask DataFrame
    layout : TopicLayout
    column : str
        The key column.
    size_column : str, optional
        Per-message payload bytes (for ``max_bytes``).
    max_messages, max_bytes, policy, encrypted
        As in :func:`bucketcore.bucket_entries`.
    errors : {"strict", "replace"}
        As in :func:`bucketcore.hash_keys`.

    Returns
    -------
    dask DataFrame
        The index of every partition is a fresh range.

    Raises
    ------
    TypeError
        ``ddf`` is not a Dask DataFrame, or ``layout`` not a TopicLayout.
    KeyError
        No such column.
    ValueError
        ``ddf`` already has one of the added columns; bad limits or policy (checked at once).
    """
    layout = _check_layout(layout)
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"ddf must be a dask DataFrame, not {describe(ddf)}")
    _key_series(ddf, column, "ddf")
    if size_column is not None and size_column not in ddf.columns:
        raise KeyError(f"no size column {size_column!r} in the DataFrame (columns: {list(ddf.columns)})")
    clash = [c for c in ENTRY_COLUMNS if c in ddf.columns]
    if clash:
        raise ValueError(f"ddf already has column(s) {clash}: rename them before bucket_entries")
    options: dict[str, Any] = {
        "max_messages": max_messages,
        "max_bytes": max_bytes,
        "policy": policy,
        "encrypted": encrypted,
    }
    _entries_of([], layout, **options)  # checks every option now, not inside a worker
    meta = _meta_with(ddf._meta, ENTRY_COLUMNS, first=True)
    return ddf.map_partitions(
        _entries_partition, layout, column, size_column, options, errors, meta=meta, align_dataframes=False
    )


# --- where the keys and the cluster come from -----------------------------------------------------

_TABLE_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def _line_block(block: bytes) -> Any:
    keys: list[bytes] = []
    for chunk in key_blocks(io.BytesIO(block), 1 << 16):
        keys.extend(chunk)
    return pd.Series(np.array(keys, dtype=object), dtype=object, name="key")


def read_keys(path: str, *, column: str | None = None, blocksize: int = 64 << 20) -> Any:
    """A Dask Series of keys from a Parquet file or directory, a CSV file (``column``), or a line file.

    Parameters
    ----------
    path : str
        A ``.parquet``/``.pq`` file or a directory of them, a ``.csv`` file (both need
        ``column``), or a text file of one key per line (bytes keys, line endings removed).
    column : str, optional
        The key column of a table.
    blocksize : int
        Bytes per partition of a CSV or line file.

    Returns
    -------
    dask Series

    Raises
    ------
    ValueError
        A table without ``column``, or ``column`` for a line file.
    FileNotFoundError
        No such path.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such key file or directory: {path!r}")
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    kind = "parquet" if os.path.isdir(path) else _TABLE_SUFFIXES.get(suffix)
    if kind is None:
        if column is not None:
            raise ValueError(f"column={column!r} given, but {path!r} is not a .parquet or .csv table")
        from dask.bytes import read_bytes

        _, blocks = read_bytes(path, delimiter=b"\n", blocksize=blocksize, sample=False)
        parts = [dask.delayed(_line_block)(b) for b in blocks[0]]
        return dd.from_delayed(parts, meta=pd.Series([], dtype=object, name="key"), verify_meta=False)
    if column is None:
        raise ValueError(f"{path!r} is a table: name its key column with column=")
    if kind == "parquet":
        return dd.read_parquet(path, columns=[column])[column]
    return dd.read_csv(
        path, usecols=[column], dtype={column: "string"}, blocksize=blocksize, keep_default_na=False, na_values=[]
    )[column]


@contextlib.contextmanager
def client_for(scheduler: str, *, n_workers: int = 2) -> Iterator[Any]:
    """A ``distributed.Client`` made current for the block: ``"local"`` starts a local cluster.

    Parameters
    ----------
    scheduler : str
        ``"local"`` (a ``LocalCluster`` of ``n_workers`` processes on loopback, one thread each,
        closed afterwards, and the environment variables its workers were started with taken out of
        ``os.environ`` again) or a scheduler address such as ``tcp://10.0.0.5:8786``.
    n_workers : int
        Workers of a local cluster.

    Yields
    ------
    distributed.Client

    Raises
    ------
    ImportError
        The distributed scheduler is not installed.
    OSError
        The scheduler cannot be reached.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("a cluster needs dask's distributed scheduler: pip install 'bucketcore[dask]'") from err
    if scheduler == "local":
        # distributed's Nanny writes the environment it gives its workers (PYTHONHASHSEED, thread
        # counts of BLAS libraries, ...) into this process's os.environ and leaves it there: put the
        # caller's environment back, so later child processes of the caller are not changed by it
        environment = dict(os.environ)
        try:
            with (
                LocalCluster(
                    n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
                ) as cluster,
                Client(cluster) as client,
            ):
                yield client
        finally:
            for name in set(os.environ) - set(environment):
                del os.environ[name]
            os.environ.update(environment)
    else:
        with Client(scheduler, timeout="20s") as client:
            yield client
