"""examples/scaling_out.py runs against a local Dask cluster and a throw-away PostgreSQL, printing what it promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "scaling_out.py"


def test_scaling_out_example_plans_on_a_cluster_and_fences_through_postgres(tmp_path, pg_url) -> None:
    pytest.importorskip("distributed", reason="dask[distributed] is not installed: pip install 'bucketcore[dask]'")
    if not EXAMPLE.exists():
        pytest.skip("examples/scaling_out.py is not in this checkout (tests run outside the source tree)")
    res = subprocess.run(
        [sys.executable, str(EXAMPLE), "--pg-url", pg_url, "--dir", str(tmp_path)],
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
    assert keyed + keyless == 200_000 and keyless > 0
    for equal, balanced in re.findall(r"max/mean ([\d.]+) equal width -> ([\d.]+) balanced", out):
        assert float(balanced) <= float(equal)
    assert "partition 0 replayed:" in out and "for 50,000 messages" in out
    assert "broker-a fenced: session epoch 1 of writer 'broker-a' is stale" in out
    assert re.search(r"committed end \d+, 21 entries, version 21", out)
