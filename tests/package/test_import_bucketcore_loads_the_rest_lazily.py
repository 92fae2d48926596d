"""The package's import surface: what ``import bucketcore`` loads and what it reaches lazily."""

from __future__ import annotations

import subprocess
import sys


def test_stream_is_reachable_from_the_package_and_loads_on_first_use() -> None:
    code = (
        "import sys, bucketcore as bc\n"
        "assert 'bucketcore.stream' not in sys.modules and 'sqlite3' not in sys.modules\n"
        "assert bc.stream.StreamStore is sys.modules['bucketcore.stream'].StreamStore\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
