"""bucketcore.dask on a real distributed.LocalCluster (2 worker processes, loopback) over generated Parquet.

Every cluster result is compared with the single-process result on the same data, bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

MISSING = "dask[distributed] is not installed: the cluster tests cannot run (pip install 'bucketcore[dask]')"
dask = pytest.importorskip("dask", reason=MISSING, exc_type=ImportError)
distributed = pytest.importorskip("distributed", reason=MISSING, exc_type=ImportError)
pa = pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed: the Parquet data cannot be written", exc_type=ImportError
)
import dask.dataframe as dd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import bucketcore as bc  # noqa: E402
from bucketcore import dask as bcd  # noqa: E402
from bucketcore.histogram import bucket_histogram  # noqa: E402

ROWS, FILES = 24_000, 4


def layout() -> bc.TopicLayout:
    return bc.TopicLayout(
        5,
        [
            bc.Segment(0, 0, 0x2FFF),
            bc.Segment(1, 0x3000, 0xBFFF, bc.Buckets.equal_width(4)),
            bc.Segment(2, 0xC000, 0xFFFF),
        ],
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A Zipf-skewed key log with keyless rows and sizes: four Parquet files, and one file of it all."""
    root = tmp_path_factory.mktemp("keys")
    rng = np.random.default_rng(18)
    ranks = rng.zipf(1.3, size=ROWS) % 20_000
    keys = [None if i % 101 == 0 else f"tenant-{r}/order-{r * 7}" for i, r in enumerate(ranks.tolist())]
    sizes = rng.integers(1, 4096, size=ROWS).astype(np.int64)
    (root / "log").mkdir()
    per = ROWS // FILES
    for f in range(FILES):
        sl = slice(f * per, (f + 1) * per)
        pq.write_table(
            pa.table({"key": pa.array(keys[sl], pa.string()), "size": pa.array(sizes[sl])}),
            root / "log" / f"part-{f}.parquet",
        )
    pq.write_table(pa.table({"key": pa.array(keys, pa.string()), "size": pa.array(sizes)}), root / "all.parquet")
    return {"dir": str(root / "log"), "file": str(root / "all.parquet"), "keys": keys, "sizes": sizes, "root": root}


@pytest.fixture(scope="module")
def client():
    with bcd.client_for("local", n_workers=2) as c:
        assert len(c.scheduler_info()["workers"]) == 2
        yield c


def test_a_local_cluster_leaves_the_environment_as_it_found_it(monkeypatch) -> None:
    # distributed's Nanny writes its workers' environment (PYTHONHASHSEED among it) into os.environ
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    before = dict(os.environ)
    with bcd.client_for("local", n_workers=1) as c:
        assert len(c.scheduler_info()["workers"]) == 1
    assert dict(os.environ) == before


def partitions(data):
    per = ROWS // FILES
    return [(data["keys"][f * per : (f + 1) * per], data["sizes"][f * per : (f + 1) * per]) for f in range(FILES)]


# --- planning -------------------------------------------------------------------------------------


def test_cluster_plan_equals_the_single_process_plan(client, data) -> None:
    ddf = dd.read_parquet(data["dir"])
    assert ddf.npartitions == FILES
    planned = bcd.plan_layout(ddf, layout(), 16, column="key", split_every=2)
    one_process = bucket_histogram(data["keys"], layout()).balanced_layout(layout(), 16)
    assert planned.to_dict() == one_process.to_dict()
    assert planned.segment(1).buckets != bc.Buckets.equal_width(16)  # the skew was planned for


def test_cluster_plan_equals_the_plan_command(client, data) -> None:
    from bucketcore.harness import tiled_layout

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bucketcore",
            "plan",
            data["file"],
            "--column",
            "key",
            "--buckets",
            "16",
            "--segments",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    planned = bcd.plan_layout(bcd.read_keys(data["dir"], column="key"), tiled_layout(3, 1), 16)
    assert planned.to_dict() == json.loads(out.stdout)["layout"]


def test_cluster_histogram_equals_the_whole_log_histogram_counts_and_weights(client, data) -> None:
    ddf = dd.read_parquet(data["dir"])
    assert bcd.bucket_histogram(ddf, layout(), column="key") == bucket_histogram(data["keys"], layout())
    weighted = bcd.bucket_histogram(ddf, layout(), column="key", weights="size")
    assert weighted == bucket_histogram(data["keys"], layout(), weights=data["sizes"])
    assert weighted.keyless == sum(k is None for k in data["keys"])


def test_a_series_of_keys_plans_like_its_dataframe(client, data) -> None:
    ddf = dd.read_parquet(data["dir"])
    assert bcd.plan_layout(ddf["key"], layout(), 7) == bcd.plan_layout(ddf, layout(), 7, column="key")


def test_line_and_csv_key_files_plan_like_the_same_keys_in_one_process(client, data) -> None:
    keyed = [k for k in data["keys"] if k is not None]
    lines = data["root"] / "keys.txt"
    lines.write_bytes(b"".join(k.encode() + b"\n" for k in keyed))
    csv = data["root"] / "keys.csv"
    csv.write_text("key\n" + "".join(k + "\n" for k in keyed), encoding="utf-8")
    expected = bucket_histogram(keyed, layout()).balanced_layout(layout(), 9)
    assert bcd.plan_layout(bcd.read_keys(str(lines), blocksize=50_000), layout(), 9) == expected
    series = bcd.read_keys(str(csv), column="key", blocksize=50_000)
    assert series.npartitions > 1
    assert bcd.plan_layout(series, layout(), 9) == expected


# --- per-row assignment and entry replay ----------------------------------------------------------


def test_assign_adds_numpy_columns_equal_to_single_process_routing(client, data) -> None:
    out = bcd.assign(dd.read_parquet(data["dir"]), layout(), column="key").compute()
    assert {c: str(out[c].dtype) for c in ("segment_id", "bucket", "bucket_hash")} == {
        "segment_id": "int64",
        "bucket": "int32",
        "bucket_hash": "uint16",
    }
    assert not any(isinstance(dtype, np.dtype) and dtype == np.dtype(object) for dtype in out.dtypes)
    assert hasattr(out["key"].array, "__arrow_array__")  # the keys stay Arrow-backed
    lay = layout()
    seg, bucket, bhash = [], [], []
    for keys, _ in partitions(data):
        kh = bc.hash_keys(keys)
        s = np.asarray(lay.route(kh))
        seg.append(s)
        bhash.append(np.asarray(kh.bucket_hash))
        bucket.append(
            np.array(
                [
                    lay.segment(int(x)).buckets.bucket_of(int(h))
                    for x, h in zip(s.tolist(), np.asarray(kh.bucket_hash).tolist())
                ],
                dtype=np.int32,
            )
        )
    assert np.array_equal(out["segment_id"].to_numpy(), np.concatenate(seg))
    assert np.array_equal(out["bucket_hash"].to_numpy(), np.concatenate(bhash))
    assert np.array_equal(out["bucket"].to_numpy(), np.concatenate(bucket))


def test_bucket_entries_replays_each_partition_like_the_producer(client, data) -> None:
    ddf = dd.read_parquet(data["dir"])
    out = bcd.bucket_entries(
        ddf, layout(), column="key", size_column="size", max_messages=50, max_bytes=20_000
    ).compute()
    for f, (keys, sizes) in enumerate(partitions(data)):
        got = out.iloc[f * (ROWS // FILES) : (f + 1) * (ROWS // FILES)]
        table = bc.bucket_entries(keys, layout(), sizes=sizes, max_messages=50, max_bytes=20_000)
        assert np.array_equal(got["row"].to_numpy(), np.asarray(table.order))
        count = np.asarray(table.count)
        assert np.array_equal(got["segment_id"].to_numpy(), np.repeat(np.asarray(table.segment_id), count))
        assert np.array_equal(got["hash_min"].to_numpy(), np.repeat(np.asarray(table.hash_min), count))
        assert np.array_equal(got["hash_max"].to_numpy(), np.repeat(np.asarray(table.hash_max), count))
        assert [k if isinstance(k, str) else None for k in got["key"].tolist()] == [
            keys[i] for i in table.order.tolist()
        ]
        # per key, rows appear in send order
        firsts: dict[str, int] = {}
        for key, row in zip(got["key"].tolist(), got["row"].tolist()):
            if isinstance(key, str):
                assert row > firsts.get(key, -1)
                firsts[key] = row


# --- bad input ------------------------------------------------------------------------------------


def test_bad_arguments_are_refused_before_any_work(data) -> None:
    ddf = dd.read_parquet(data["dir"])
    with pytest.raises(ValueError, match="name its key column"):
        bcd.plan_layout(ddf, layout(), 4)
    with pytest.raises(ValueError, match="already a Series"):
        bcd.plan_layout(ddf["key"], layout(), 4, column="key")
    with pytest.raises(KeyError, match="no column 'nope'"):
        bcd.plan_layout(ddf, layout(), 4, column="nope")
    with pytest.raises(KeyError, match="no weight column 'w'"):
        bcd.bucket_histogram(ddf, layout(), column="key", weights="w")
    with pytest.raises(TypeError, match="dask DataFrame or Series"):
        bcd.plan_layout(["a"], layout(), 4)
    with pytest.raises(TypeError, match="TopicLayout"):
        bcd.plan_layout(ddf, bc.Buckets(), 4, column="key")
    with pytest.raises(bc.InvalidBoundaryError, match="bucket count 0"):
        bcd.plan_layout(ddf, layout(), 0, column="key")
    with pytest.raises(ValueError, match="already has column"):
        bcd.assign(bcd.assign(ddf, layout(), column="key"), layout(), column="key")
    with pytest.raises(ValueError, match="max_messages"):
        bcd.bucket_entries(ddf, layout(), column="key", max_messages=0)
    with pytest.raises(FileNotFoundError, match="no such key file"):
        bcd.read_keys(str(data["root"] / "missing.parquet"), column="key")
    with pytest.raises(ValueError, match="name its key column"):
        bcd.read_keys(data["dir"])


# --- the plan command -----------------------------------------------------------------------------


def plan_json(capsys, *args: str) -> dict:
    from bucketcore.cli import main

    capsys.readouterr()
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_command_with_dask_equals_the_plan_without(client, data, capsys) -> None:
    one = plan_json(capsys, data["file"], "--column", "key", "--buckets", "16", "--segments", "3")
    address = client.scheduler.address  # the module's running cluster, by its address
    cluster = plan_json(capsys, data["dir"], "--column", "key", "--buckets", "16", "--segments", "3", "--dask", address)
    assert cluster == one


def test_plan_command_refuses_stdin_with_dask(capsys) -> None:
    from bucketcore.cli import main

    assert main(["plan", "-", "--buckets", "4", "--dask", "local"]) == 2
    assert "not stdin" in capsys.readouterr().err


# --- the example ----------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scaling_out.py"


def test_scaling_out_example_plans_on_a_cluster_and_fences_through_postgres(client, tmp_path, pg_url) -> None:
    if not EXAMPLE.exists():
        pytest.skip("examples/scaling_out.py is not in this checkout (tests run outside the source tree)")
    res = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--scheduler",
            client.scheduler.address,
            "--pg-url",
            pg_url,
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "cluster: 2 workers" in out
    keyed, keyless = (
        int(x.replace(",", ""))
        for x in re.search(r"histogram: ([\d,]+) keyed messages, ([\d,]+) keyless", out).groups()
    )
    assert keyed + keyless == 100_000 and keyless > 0
    for equal, balanced in re.findall(r"max/mean ([\d.]+) equal width -> ([\d.]+) balanced", out):
        assert float(balanced) <= float(equal)
    assert "partition 0 replayed:" in out and "for 25,000 messages" in out
    assert "broker-a fenced: session epoch 1 of writer 'broker-a' is stale" in out
    assert re.search(r"committed end \d+, 21 entries, version 21", out)
