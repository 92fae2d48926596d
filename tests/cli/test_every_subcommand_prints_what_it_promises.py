"""The ``bucketcore`` command, run as a subprocess on small inputs: what each subcommand prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bucketcore as bc

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SMALL_SIM = ["--messages", "20000", "--keys", "2000", "--chunk", "1000"]


def run_cli(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bucketcore", *args],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_import_bucketcore_loads_no_cli_or_plotting_library() -> None:
    code = (
        "import sys, bucketcore; print([m for m in ('rich', 'matplotlib', 'bucketcore.cli', "
        "'bucketcore.harness') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("sub", ["simulate", "tune", "bench", "plan", "hash"])
def test_every_subcommand_has_help(sub: str) -> None:
    res = run_cli(sub, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"usage: bucketcore {sub}")
    assert "--" in res.stdout


def test_no_subcommand_prints_the_list_and_exits_2() -> None:
    res = run_cli()
    assert res.returncode == 2
    for sub in ("simulate", "tune", "bench", "plan", "hash"):
        assert sub in res.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["simulate", "--messages", "0"], "--messages"),
        (["simulate", "--consumers", "many"], "--consumers"),
        (["simulate", "--keys", "/no/such/keys.txt"], "--keys"),
        (["simulate", "--keyless", "1.5"], "--keyless"),
        (["tune", "--segments", "0,2"], "--segments"),
        (["tune", "--buckets", ""], "--buckets"),
        (["bench", "--groups", "hash,nope"], "--groups"),
        (["bench", "--compare", "/no/such/old.json"], "--compare"),
        (["plan", "-", "--segments", "2"], "--buckets"),
        (["plan", "/no/such/sample.txt", "--buckets", "4"], "/no/such/sample.txt"),
        (["hash", "--format", "xml"], "--format"),
        (["hash", "/no/such/keys.txt"], "/no/such/keys.txt"),
    ],
)
def test_a_bad_argument_gives_one_line_naming_it_and_exit_2(args: list[str], named: str) -> None:
    res = run_cli(*args, stdin="")
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"bucketcore {args[0]}: error:")
    assert named in lines[0]
    assert res.stdout == ""


def test_simulate_store_must_be_new_or_empty(tmp_path: Path) -> None:
    (tmp_path / "other.txt").write_text("x")
    res = run_cli("simulate", *SMALL_SIM, "--store", str(tmp_path))
    assert res.returncode == 2
    assert "--store" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_simulate_counts_add_up_and_every_check_is_zero() -> None:
    res = run_cli("simulate", *SMALL_SIM, "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is True
    assert data["produced"] == data["consumed"] == 20000
    assert data["checks"] == {
        "order_violations": 0,
        "lost": 0,
        "duplicated_after_ack": 0,
        "first_violation": -1,
        "first_lost": -1,
        "first_duplicate": -1,
        "misrouted_entries": 0,
    }
    assert 0 < data["keyless"] < data["produced"]
    assert data["entries"] > 0
    assert data["mean_messages_per_entry"] == pytest.approx(data["produced"] / data["entries"])
    # every message was processed at least once; crash redeliveries are the only extra processing
    processed = sum(c["messages"] for c in data["consumers"])
    assert data["produced"] <= processed <= data["produced"] + data["redelivered_messages"]
    assert data["delivered_entries"] >= data["entries"]
    assert data["events"]["splits"] == 1 and data["events"]["rebuckets"] == 1
    assert data["events"]["drained"] >= 2  # both sealed parents drained
    assert data["layout_epoch"] == 3
    assert sum(data["events"][k] for k in ("joins", "leaves", "crashes")) == 12
    assert 0 <= data["paused_bucket_ticks"] <= data["bucket_ticks"]


def test_simulate_prints_a_readable_report() -> None:
    res = run_cli("simulate", *SMALL_SIM, "--seed", "5", "--no-layout-changes", "--churn", "3")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    for line in (
        "messages produced",
        "messages consumed",
        "entries",
        "mean messages per entry",
        "redeliveries",
        "paused-bucket time",
        "per-consumer load",
        "per-key order violations",
        "lost messages",
        "duplicated after ack",
        "result: PASS",
    ):
        assert line in text
    assert "20,000" in text
    assert "0 split, 0 rebucket" in text


def test_simulate_keeps_the_store_when_asked(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    res = run_cli("simulate", *SMALL_SIM, "--store", str(store_dir), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    from bucketcore import stream

    store = stream.StreamStore.open(store_dir)
    try:
        records = 0
        entries = 0
        for stream_id in store.streams():
            stamps = store.read_stamps(stream_id)
            records += int(np.sum(stamps.end_offset - stamps.start_offset))
            entries += len(stamps)
            assert bool(np.all(stamps.hash_min <= stamps.hash_max))
    finally:
        store.close()
    assert records == data["produced"]
    assert entries == data["entries"]


def test_simulate_with_a_key_file_uses_its_lines(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"order-{i}\n" for i in range(50)))
    res = run_cli("simulate", "--messages", "5000", "--chunk", "500", "--keys", str(keys), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert "50 distinct keys" in data["workload"]
    assert data["consumed"] == 5000 and data["ok"]


def test_tune_writes_a_valid_png_and_a_consistent_recommendation(tmp_path: Path) -> None:
    mpimg = pytest.importorskip("matplotlib.image", reason="tune --plot needs matplotlib (the plot extra)")
    png = tmp_path / "tune.png"
    res = run_cli(
        "tune",
        "--messages",
        "20000",
        "--keys",
        "5000",
        "--segments",
        "1,2",
        "--buckets",
        "1,2,4,8",
        "--consumers",
        "4",
        "--plot",
        str(png),
        "--json",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert png.read_bytes()[:8] == PNG_MAGIC
    image = mpimg.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    points = {(p["segments"], p["buckets"]): p for p in data["points"]}
    assert set(points) == {(s, n) for s in (1, 2) for n in (1, 2, 4, 8)}
    for (s, n), p in points.items():
        assert p["fill_shared"] <= p["fill_per_bucket"] + 1e-9  # per-bucket batches are never emptier
        assert p["usable_equal"] <= min(4, s * n)
        assert p["entries_per_s_shared"] == pytest.approx(data["rate"] / p["fill_shared"])
    rec = data["recommendation"]
    assert rec is not None
    best = points[(rec["segments"], rec["buckets"])]
    assert best["usable_" + rec["boundaries"]] == 4
    assert best["imbalance_" + rec["boundaries"]] <= data["max_imbalance"]
    # nothing with fewer buckets per segment qualified
    for (_, n), p in points.items():
        if n < rec["buckets"]:
            assert not (
                (p["usable_equal"] == 4 and p["imbalance_equal"] <= data["max_imbalance"])
                or (p["usable_balanced"] == 4 and p["imbalance_balanced"] <= data["max_imbalance"])
            )


def test_tune_table_names_the_recommendation() -> None:
    res = run_cli(
        "tune",
        "--messages",
        "5000",
        "--keys",
        "1000",
        "--segments",
        "1,4",
        "--buckets",
        "1,4",
        "--consumers",
        "4",
        "--max-imbalance",
        "3",
    )
    assert res.returncode == 0, res.stderr
    assert "recommendation: 4 segments x N=1 buckets" in res.stdout


def test_bench_json_parses_compare_shows_the_change_and_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("mmh3", reason="bench's baselines need mmh3 (the bench extra)")
    pytest.importorskip("matplotlib", reason="bench --plot needs matplotlib")
    res = run_cli("bench", "--n", "2000", "--repeat", "1", "--groups", "hash,dispatch", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = data["rows"]
    assert {r["group"] for r in rows} == {"hash", "dispatch"}
    for r in rows:
        assert r["ns"] > 0
        assert (r["ratio"] is None) == (r["baseline"] is None)
    assert any(r["what"] == "murmur3_32" and r["threads"] == 2 for r in rows)
    old = tmp_path / "old.json"
    old.write_text(res.stdout)
    png = tmp_path / "bench.png"
    res2 = run_cli(
        "bench", "--n", "2000", "--repeat", "1", "--groups", "hash", "--compare", str(old), "--plot", str(png)
    )
    assert res2.returncode == 0, res2.stderr
    assert "vs old.json" in res2.stdout
    assert "mmh3 comprehension" in res2.stdout and "%" in res2.stdout
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_plan_balances_every_segment_and_prints_a_storable_layout(tmp_path: Path) -> None:
    from bucketcore.harness import key_workload

    w = key_workload("zipf", 20000, keys=3000, zipf_s=0.8, keyless=0.0, seed=4)
    sample = tmp_path / "sample.txt"
    sample.write_text("".join(w.keys[i] + "\n" for i in w.key_ids.tolist()))
    res = run_cli("plan", str(sample), "--buckets", "8", "--segments", "3", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    layout = bc.TopicLayout.from_dict(data["layout"])
    assert len(layout.active_segments) == 3
    assert sum(s["keys"] for s in data["segments"]) == data["sample_keys"] == 20000
    for seg, stats in zip(layout.active_segments, data["segments"], strict=False):
        assert seg.buckets.count == 8
        assert list(seg.buckets.splits) == stats["splits"]
        assert stats["balanced_max_over_mean"] <= stats["equal_width_max_over_mean"]
    # without --json: the layout alone on stdout (to_dict form), the table on stderr
    res2 = run_cli("plan", str(sample), "--buckets", "8", "--segments", "3")
    assert bc.TopicLayout.from_dict(json.loads(res2.stdout)).to_dict() == data["layout"]
    assert "equal width" in res2.stderr


def test_plan_reads_a_parquet_column_and_names_a_missing_one(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="plan --column needs pyarrow (the arrow extra)")
    import pyarrow.parquet as pq

    path = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"key": [f"k{i}" for i in range(3000)], "n": list(range(3000))}), path)
    out = tmp_path / "layout.json"
    res = run_cli("plan", str(path), "--column", "key", "--buckets", "4", "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert bc.TopicLayout.from_dict(json.loads(out.read_text())).active_segments[0].buckets.count == 4
    assert "3,000 sample keys" in res.stdout
    bad = run_cli("plan", str(path), "--column", "nope", "--buckets", "4")
    assert bad.returncode == 2 and "'nope'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    wrong = run_cli("plan", str(path), "--column", "n", "--buckets", "4")
    assert wrong.returncode == 2 and "int64" in wrong.stderr


VECTORS = {
    "": 0x00000000,
    "a": 0x3C2569B2,
    "key-1": 0x98B115A0,
    "some-routing-key": 0x73DFD1D5,
    "ключ": 0x9A592042,
    "550e8400-e29b-41d4-a716-446655440000": 0x38D60CDC,
}


def test_hash_prints_the_reference_hashes_in_every_format(tmp_path: Path) -> None:
    keys = list(VECTORS)
    text = "".join(k + "\n" for k in keys)
    csv = run_cli("hash", stdin=text)
    assert csv.returncode == 0, csv.stderr
    lines = csv.stdout.splitlines()
    assert lines[0] == "key,raw,segment_hash,bucket_hash"
    for key, line in zip(keys, lines[1:], strict=False):
        raw = VECTORS[key]
        assert line == f"{key},{raw},{raw >> 16},{raw & 0xFFFF}"
    path = tmp_path / "keys.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode())  # CRLF lines give the same keys
    jl = run_cli("hash", "--format", "jsonl", str(path))
    rows = [json.loads(x) for x in jl.stdout.splitlines()]
    assert [(r["key"], r["raw"]) for r in rows] == list(VECTORS.items())
    table = run_cli("hash", "--format", "table", "--no-header", str(path))
    assert f"{0x98B115A0:#010x}" in table.stdout and len(table.stdout.splitlines()) == len(keys)


def test_hash_streams_its_input_block_by_block() -> None:
    # the first block's rows come out while the input is still open: nothing waits for the end
    proc = subprocess.Popen(
        [sys.executable, "-m", "bucketcore", "hash", "--block", "4", "--no-header"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("a\nb\nc\nkey-1\n")
        proc.stdin.flush()
        first = [proc.stdout.readline() for _ in range(4)]
        assert first[3] == f"key-1,{0x98B115A0},{0x98B1},{0x15A0}\n"
        proc.stdin.write("a\n")
        proc.stdin.close()
        assert proc.stdout.read() == f"a,{0x3C2569B2},{0x3C25},{0x69B2}\n"
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_the_console_script_runs_the_same_command() -> None:
    exe = shutil.which("bucketcore")
    if exe is None or not os.access(exe, os.X_OK):
        pytest.skip("the bucketcore console script is not installed here (editable install without scripts)")
    res = subprocess.run(
        [exe, "hash", "--no-header"], check=False, input="a\n", capture_output=True, text=True, timeout=120
    )
    assert res.stdout == f"a,{0x3C2569B2},{0x3C25},{0x69B2}\n"
