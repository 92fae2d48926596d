"""Shared test setup: the one place that decides what happens when pyarrow is missing.

pyarrow is optional for bucketcore, so a run without it must still pass, but it must not pass
*quietly*: every test of an Arrow input takes the ``pa`` fixture, which skips with the reason
below, the report header says up front whether pyarrow is there, and the summary counts the
tests that were skipped for it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from pg_fixture import pg_server, pg_url, pytest_generate_tests, stream_heads  # noqa: F401  (PostgreSQL head-store tests)

PYARROW_MISSING = "pyarrow is not installed: this test of an Arrow input cannot run (pip install pyarrow)"


def _pyarrow_version() -> str | None:
    try:
        import pyarrow
    except ImportError:
        return None
    return str(pyarrow.__version__)


def pytest_configure(config: pytest.Config) -> None:
    # also declared in pyproject.toml; here too for a copy of tests/ run outside the source tree
    config.addinivalue_line("markers", "slow: long soak or stress runs, opt in with -m slow")


def pytest_report_header(config: pytest.Config) -> str:
    version = _pyarrow_version()
    if version is None:
        return "pyarrow: MISSING - every test of an Arrow input will be SKIPPED"
    return f"pyarrow: {version}"


@pytest.fixture(scope="session")
def pa() -> ModuleType:
    """The pyarrow module; the test is skipped, naming the reason, when it is not installed."""
    return pytest.importorskip("pyarrow", reason=PYARROW_MISSING, exc_type=ImportError)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", ())
        if PYARROW_MISSING in str(getattr(report, "longrepr", ""))
    ]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test(s) SKIPPED because pyarrow is not installed: the Arrow inputs were not tested",
            yellow=True,
            bold=True,
        )
