"""``bucketcore plan``: traffic-balanced boundary lists for a key sample.

The sample (one key per line, ``-`` for stdin, or a column of a Parquet, Arrow IPC/Feather or CSV
file with ``--column``) is hashed and routed to the layout's active segments; per segment, its
observed bucket-hash load picks the N-bucket boundary list whose heaviest bucket carries the
least load (:meth:`bucketcore.Buckets.balanced`). The result is the layout with those lists, in
``TopicLayout.to_dict`` form (what a controller stores), plus per-segment load statistics against
equal-width boundaries.

With ``--dask SCHEDULER`` (or ``local``) the sample is counted on a Dask cluster
(:mod:`bucketcore.dask`); a SAMPLE written by ``BucketHistogram.to_bytes`` is counted already.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from ..key_files import key_blocks
from ._common import CommandError, console, int_at_least, print_json, print_table, progress, writable_file

__all__ = ["add_parser", "run"]

_ARROW_SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "ipc",
    ".feather": "ipc",
    ".ipc": "ipc",
    ".csv": "csv",
}


def add_parser(p: argparse.ArgumentParser) -> None:
    """Register plan's options.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument(
        "sample",
        metavar="SAMPLE",
        help="key sample: a file with one key per line, '-' for stdin, or a .parquet/.arrow/"
        ".feather/.csv file with --column",
    )
    p.add_argument("--column", help="the key column of a Parquet, Arrow or CSV sample (needs pyarrow)")
    p.add_argument(
        "--buckets",
        type=int_at_least(1, 32768),
        required=True,
        metavar="N",
        help="buckets per active segment (at most 32768: bucket 0 must keep two hash values)",
    )
    layout = p.add_mutually_exclusive_group()
    layout.add_argument(
        "--segments",
        type=int_at_least(1, 4096),
        default=None,
        help="a fresh layout of this many equal-range segments (default 1)",
    )
    layout.add_argument("--layout", metavar="FILE.json", help="a layout in TopicLayout.to_dict JSON form")
    p.add_argument(
        "--output", metavar="FILE.json", help="write the layout JSON here and print the statistics table on stdout"
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object: {'layout': ..., 'segments': [statistics]}"
    )
    p.add_argument(
        "--dask",
        metavar="SCHEDULER",
        help="count the sample on a Dask cluster: a scheduler address, or 'local' for a local cluster "
        "(needs bucketcore[dask]; SAMPLE is then a Parquet file or directory, a CSV file or a key file "
        "the workers can read)",
    )


def _load_layout(args: argparse.Namespace) -> Any:
    import bucketcore as bc
    from bucketcore.harness import tiled_layout

    if args.layout is None:
        return tiled_layout(args.segments or 1, 1)
    try:
        data = json.loads(Path(args.layout).read_text(encoding="utf-8"))
    except OSError as err:
        raise CommandError(f"argument --layout: cannot read {args.layout!r}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise CommandError(
            f"argument --layout: {args.layout!r} is not a layout: it is not UTF-8 text (a layout is the JSON "
            "of TopicLayout.to_dict, as plan --output writes it)"
        ) from None
    except json.JSONDecodeError as err:
        raise CommandError(f"argument --layout: {args.layout!r} is not JSON ({err.msg}, line {err.lineno})") from None
    if isinstance(data, dict) and "layout" in data and "segments" not in data:
        data = data["layout"]  # the --json output of an earlier plan
    try:
        return bc.TopicLayout.from_dict(data)
    except (bc.BucketcoreError, TypeError, ValueError) as err:
        raise CommandError(f"argument --layout: {err}") from None


def _key_chunks(args: argparse.Namespace) -> Any:
    """The sample's keys, in chunks (constant memory for line files)."""
    suffix = Path(args.sample).suffix.lower()
    if args.column is not None:
        kind = _ARROW_SUFFIXES.get(suffix)
        if kind is None:
            raise CommandError(
                f"argument --column: {args.sample!r} is not a .parquet, .arrow, .feather, .ipc or .csv file"
            )
        yield _arrow_column(args.sample, kind, args.column)
        return
    if suffix in (".parquet", ".pq", ".arrow", ".feather", ".ipc"):
        raise CommandError(f"argument --column: {args.sample!r} is a table file; name its key column with --column")
    if args.sample == "-":
        yield from key_blocks(sys.stdin.buffer, 1 << 16)
        return
    try:
        stream = open(args.sample, "rb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise CommandError(f"cannot read sample {args.sample!r}: {err.strerror}") from None
    with stream:
        yield from key_blocks(stream, 1 << 16)


def _arrow_column(path: str, kind: str, column: str) -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise CommandError("reading a table needs pyarrow: pip install 'bucketcore[arrow]'") from None
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path, columns=[column])
        elif kind == "csv":
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(
                path, convert_options=pacsv.ConvertOptions(include_columns=[column], column_types={column: pa.string()})
            )
        else:
            from pyarrow import feather

            table = feather.read_table(path, columns=[column])
    except FileNotFoundError:
        raise CommandError(f"cannot read sample {path!r}: no such file") from None
    except (pa.ArrowInvalid, KeyError, ValueError) as err:
        raise CommandError(f"cannot read column {column!r} of {path!r}: {str(err).splitlines()[0]}") from None
    col = table.column(column)
    if not (
        pa.types.is_string(col.type)
        or pa.types.is_large_string(col.type)
        or pa.types.is_binary(col.type)
        or pa.types.is_large_binary(col.type)
    ):
        raise CommandError(f"column {column!r} of {path!r} holds {col.type}, not string or binary keys")
    return col


def _histogram_file(args: argparse.Namespace, layout: Any) -> Any:
    """The BucketHistogram of a SAMPLE written by ``BucketHistogram.to_bytes``, checked against the layout."""
    from ..hash_histogram import BucketHistogram

    path = args.sample
    if args.column is not None or args.dask is not None:
        raise CommandError(f"{path!r} is a histogram: --column and --dask apply to key samples only")
    try:
        with open(path, "rb") as f:
            hist = BucketHistogram.from_bytes(f.read())
    except (OSError, ValueError) as err:
        raise CommandError(f"cannot read histogram {path!r}: {err}") from None
    ids = tuple(s.segment_id for s in layout.active_segments)
    if hist.segment_ids != ids:
        raise CommandError(
            f"histogram {path!r} counts active segments {list(hist.segment_ids[:8])}, the layout has "
            f"{list(ids[:8])}: pass the layout it was made with (--layout or --segments)"
        )
    if hist.measure != "count":
        raise CommandError(f"histogram {path!r} holds weights; plan takes a histogram of counts")
    return hist


def _cluster_histogram(args: argparse.Namespace, layout: Any) -> Any:
    """The BucketHistogram of the sample counted on the Dask cluster of ``--dask``."""
    try:
        from bucketcore import dask as bcd
    except ImportError as err:
        raise CommandError(f"argument --dask: {err}") from None
    if args.sample == "-":
        raise CommandError("argument --dask: the sample must be a file or directory the workers can read, not stdin")
    try:
        keys = bcd.read_keys(args.sample, column=args.column)
    except FileNotFoundError:
        raise CommandError(f"cannot read sample {args.sample!r}: no such file or directory") from None
    except ValueError as err:
        raise CommandError(f"argument --column: {err}") from None
    try:
        with bcd.client_for(args.dask):
            return bcd.bucket_histogram(keys, layout)
    except OSError as err:
        raise CommandError(f"argument --dask: cannot use the scheduler {args.dask!r}: {err}") from None


def _sample_histogram(args: argparse.Namespace, layout: Any) -> Any:
    """The BucketHistogram of the sample: a histogram file as it is, ``--dask`` on a cluster,
    anything else read here chunk by chunk."""
    import bucketcore as bc

    from ..hash_histogram import is_histogram_file

    if is_histogram_file(args.sample):
        return _histogram_file(args, layout)
    if args.dask is not None:
        return _cluster_histogram(args, layout)
    hist = bc.BucketHistogram([s.segment_id for s in layout.active_segments], {})
    with progress("plan: reading the sample", None, enabled=not args.json) as update:
        for chunk in _key_chunks(args):
            hist += bc.bucket_histogram(chunk, layout)
            update(int(hist.total))
    return hist


def run(args: argparse.Namespace) -> int:
    """Plan balanced boundary lists and print them with their load statistics.

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
        Unreadable sample or layout, or a missing column (named).
    """
    import bucketcore as bc

    if args.output:
        writable_file(args.output, "--output")
    layout = _load_layout(args)
    hist = _sample_histogram(args, layout)
    keys_seen = int(hist.total)
    if keys_seen == 0:
        raise CommandError(f"sample {args.sample!r} holds no keys")
    planned = layout.rebalanced(hist, args.buckets)
    equal = bc.Buckets.equal_width(args.buckets)
    stats = []
    for seg in planned.active_segments:
        counts = hist[seg.segment_id]
        stats.append(
            {
                "segment_id": seg.segment_id,
                "hash_range": [seg.hash_start, seg.hash_end],
                "keys": int(counts.total),
                "equal_width_max_over_mean": _finite(equal.load(counts).ratio),
                "balanced_max_over_mean": _finite(seg.buckets.load(counts).ratio),
                "splits": list(seg.buckets.splits),
            }
        )
    result = planned.to_dict()
    if args.json:
        print_json({"layout": result, "segments": stats, "sample_keys": keys_seen, "keyless_lines": hist.keyless})
        return 0
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        out = console()
    else:
        print_json(result)
        out = console(stderr=True)
    rows = [
        (
            s["segment_id"],
            f"{s['hash_range'][0]:04x}-{s['hash_range'][1]:04x}",
            s["keys"],
            _ratio(s["equal_width_max_over_mean"]),
            _ratio(s["balanced_max_over_mean"]),
        )
        for s in stats
    ]
    print_table(
        f"{keys_seen:,} sample keys, N={args.buckets} per segment: bucket load max/mean (1.00 is even)",
        ("segment", "range", "keys", "equal width", "balanced"),
        rows,
        out=out,
    )
    if args.output:
        out.print(f"layout written to {args.output}")
    return 0


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 4)


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
