"""A bad argument to any subcommand is one line on stderr naming it, and exit status 2: no
traceback, and nothing computed first (each case here failed with a traceback, or only after the
whole run, before it was checked up front)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bucketcore.cli import main

BINARY = bytes(range(256)) * 4

CASES = [
    # (argv, words the one line must hold); {tmp} is the test's own directory
    (["simulate", "--messages", "5000000000"], ["--messages 5,000,000,000", "of memory", "available"]),
    (["simulate", "--messages", "1000", "--keys", "5000000000"], ["--keys 5,000,000,000", "of memory"]),
    (["tune", "--messages", "3000000000"], ["--messages 3,000,000,000", "of memory"]),
    (["simulate", "--messages", "1000", "--store", "/proc/bucketcore/store"], ["--store", "cannot make"]),
    (["tune", "--messages", "1000", "--plot", "{tmp}/plot.txt"], ["--plot", "not a format matplotlib writes"]),
    (["tune", "--messages", "1000", "--plot", "{tmp}"], ["--plot", "is a directory"]),
    (["tune", "--messages", "1000", "--plot", "{tmp}/missing/plot.png"], ["--plot", "does not exist"]),
    (
        ["plan", "{tmp}/keys.txt", "--buckets", "4", "--output", "{tmp}/missing/layout.json"],
        ["--output", "does not exist"],
    ),
    (["plan", "{tmp}/keys.txt", "--buckets", "4", "--output", "{tmp}"], ["--output", "is a directory"]),
    (["plan", "{tmp}/keys.txt", "--buckets", "4", "--layout", "{tmp}/binary.bin"], ["--layout", "not UTF-8 text"]),
]


@pytest.mark.parametrize(("argv", "words"), CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keys.txt").write_text("user-1\nuser-2\nuser-3\n", encoding="utf-8")
    (tmp_path / "binary.bin").write_bytes(BINARY)
    status = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"bucketcore {argv[0]}: error: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_nothing_is_written_when_the_plot_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--messages", "1000", "--plot", str(tmp_path / "plot.txt")]) == 2
    assert list(tmp_path.iterdir()) == []
