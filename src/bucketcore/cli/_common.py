"""What every subcommand shares: the one-line-error parser, argument types, and the terminal
output (rich tables and progress, loaded only when a command runs)."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = [
    "CommandError",
    "Parser",
    "check_memory",
    "plot_file",
    "writable_file",
    "add_entry_limit_arguments",
    "add_workload_arguments",
    "console",
    "float_range",
    "int_at_least",
    "int_list",
    "print_json",
    "print_table",
    "progress",
    "workload_from_args",
]

# Peak memory of the interpreter, numpy and the command's own modules before any workload
BASE_MEMORY = 100 * 2**20


class CommandError(Exception):
    """A bad argument or input found after parsing: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``bucketcore SUB: error: ...``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print one line naming the problem and exit with status 2.

        Parameters
        ----------
        message : str
            argparse's description of the problem.
        """
        self.exit(2, f"{self.prog}: error: {message}\n")


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an int in ``low..high``.

    Parameters
    ----------
    low : int
    high : int, optional

    Returns
    -------
    callable
    """

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"{value} is out of range (must be {bound})")
        return value

    parse.__name__ = "integer"
    return parse


def float_range(low: float, high: float | None = None) -> Callable[[str], float]:
    """An argparse type: a float in ``[low, high]``.

    Parameters
    ----------
    low : float
    high : float, optional

    Returns
    -------
    callable
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value >= low or (high is not None and value > high):
            bound = f"{low:g}..{high:g}" if high is not None else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range (must be {bound})")
        return value

    parse.__name__ = "number"
    return parse


def int_list(low: int, high: int) -> Callable[[str], list[int]]:
    """An argparse type: a comma-separated list of ints, each in ``low..high``, sorted, distinct.

    Parameters
    ----------
    low, high : int

    Returns
    -------
    callable
    """
    one = int_at_least(low, high)

    def parse(text: str) -> list[int]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("an empty list")
        return sorted({one(p) for p in parts})

    parse.__name__ = "list"
    return parse


def console(stderr: bool = False) -> Any:
    """A rich Console for stdout (or stderr); 120 columns wide when not writing to a terminal.

    Parameters
    ----------
    stderr : bool

    Returns
    -------
    rich.console.Console
    """
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 120
    return Console(file=stream, width=width, highlight=False, soft_wrap=False, markup=False)


@contextmanager
def progress(description: str, total: int | None, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (only on a terminal, and not with ``enabled=False``).

    Parameters
    ----------
    description : str
    total : int or None
        Units of work; None when unknown (the bar pulses and counts).
    enabled : bool

    Yields
    ------
    callable
        ``update(completed)``: the units done so far.
    """
    if not enabled or not sys.stderr.isatty():
        yield lambda completed: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda completed: bar.update(task, completed=completed)


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    out: Any = None,
    caption: str | None = None,
) -> None:
    """Print a table (numbers right-aligned).

    Parameters
    ----------
    title : str or None
    columns : sequence of str
    rows : sequence of sequences
        Cells; anything printable.
    out : rich Console, optional
        Default: stdout.
    caption : str, optional
        A line under the table.
    """
    from rich import box
    from rich.table import Table

    out = out or console()
    if title:
        out.print(title)
    table = Table(box=box.SIMPLE_HEAD, caption=caption, caption_justify="left", pad_edge=False)
    first = rows[0] if rows else [""] * len(columns)
    for name, cell in zip(columns, first, strict=False):
        table.add_column(name, justify="right" if _numeric(cell) else "left")
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    out.print(table)


_NUMBER = re.compile(r"[-+]?[\d,.]+(x|%| ?/\w+)?|-|inf")


def _numeric(cell: Any) -> bool:
    if isinstance(cell, bool):
        return False
    return isinstance(cell, (int, float)) or (isinstance(cell, str) and bool(_NUMBER.fullmatch(cell)))


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout.

    Parameters
    ----------
    data : JSON-serialisable object
    """
    json.dump(data, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def add_entry_limit_arguments(p: argparse.ArgumentParser) -> None:
    """The entry limits shared by simulate and tune: ``--max-messages`` and ``--max-bytes``.

    Their defaults are the batcher's own (1000 messages, 131072 bytes per entry).

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument(
        "--max-messages", type=int_at_least(1), default=1000, help="messages per entry at most (default 1000)"
    )
    p.add_argument("--max-bytes", type=int_at_least(1), default=131072, help="bytes per entry at most (default 131072)")


def add_workload_arguments(p: argparse.ArgumentParser, *, messages: int, keys: int) -> None:
    """The workload options shared by simulate and tune.

    Parameters
    ----------
    p : argparse.ArgumentParser
    messages : int
        Default message count.
    keys : int
        Default key population.
    """
    p.add_argument(
        "--messages",
        type=int_at_least(1),
        default=messages,
        metavar="M",
        help=f"messages in the stream (default {messages:,})",
    )
    p.add_argument(
        "--keys",
        default=str(keys),
        metavar="K|FILE",
        help=f"distinct keys (default {keys:,}), or a file with one key per line whose lines are the key population",
    )
    p.add_argument(
        "--workload",
        choices=("uuid", "zipf"),
        default="uuid",
        help="key popularity: uniform UUID keys, or Zipf over the K keys (default uuid)",
    )
    p.add_argument(
        "--zipf-s",
        type=float_range(0.0, 10.0),
        default=1.1,
        metavar="S",
        help="Zipf exponent for --workload zipf (default 1.1)",
    )
    p.add_argument(
        "--keyless",
        type=float_range(0.0, 1.0),
        default=0.05,
        metavar="SHARE",
        help="share of keyless messages, 0..1 (default 0.05)",
    )
    p.add_argument("--seed", type=int_at_least(0), default=1, help="random seed (default 1)")


def workload_from_args(args: argparse.Namespace, *, bytes_per_message: int, bytes_per_key: int) -> Any:
    """Build the :class:`bucketcore.harness.KeyWorkload` the workload options describe, after
    checking that the run fits in memory (:func:`check_memory`).

    Parameters
    ----------
    args : argparse.Namespace
    bytes_per_message, bytes_per_key : int
        The subcommand's peak memory per message of ``--messages`` and per key of ``--keys``.

    Returns
    -------
    KeyWorkload

    Raises
    ------
    CommandError
        A key count out of range, an unreadable key file (named), or a run too large for memory.
    """
    from bucketcore.harness import key_workload

    text = str(args.keys)
    try:
        count = int(text.replace("_", ""))
    except ValueError:
        count = None
    try:
        if count is not None:
            if count < 1:
                raise CommandError(f"argument --keys: {count} is out of range (must be >= 1)")
            check_memory([("--messages", args.messages, bytes_per_message), ("--keys", count, bytes_per_key)])
            return key_workload(
                args.workload, args.messages, keys=count, zipf_s=args.zipf_s, keyless=args.keyless, seed=args.seed
            )
        check_memory([("--messages", args.messages, bytes_per_message)])
        return key_workload("file", args.messages, keyless=args.keyless, seed=args.seed, key_file=text)
    except ValueError as err:
        raise CommandError(f"argument --keys: {err}") from None


def available_memory() -> int | None:
    """Bytes of memory a new allocation can still get here (Linux ``MemAvailable``, else the
    physical memory), or None where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def _size(nbytes: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes / 2**10:,.0f} KiB"


def check_memory(parts: Sequence[tuple[str, int, int]]) -> None:
    """Refuse a run that cannot fit in memory before building anything.

    Parameters
    ----------
    parts : sequence of (argument, value, bytes per unit)
        What the run sizes by, e.g. ``("--messages", 10**9, 176)``: each argument's value and the
        peak memory the subcommand needs per unit of it.

    Raises
    ------
    CommandError
        Naming each argument with its share, the total the run would need and what is available.
    """
    shares = [(flag, value, value * per_unit) for flag, value, per_unit in parts]
    need = BASE_MEMORY + sum(share for _, _, share in shares)
    have = available_memory()
    if have is None or need <= have:
        return
    named = " and ".join(f"{flag} {value:,} (about {_size(share)})" for flag, value, share in shares)
    raise CommandError(f"{named} would need about {_size(need)} of memory; this machine has {_size(have)} available")


def writable_file(path: str, flag: str) -> str:
    """``path`` if a file can be written there, checked before any work is done.

    Raises
    ------
    CommandError
        The path is a directory, its directory does not exist or cannot be written in.
    """
    if os.path.isdir(path):
        raise CommandError(f"argument {flag}: {path!r} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CommandError(f"argument {flag}: cannot write {path!r}: the directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise CommandError(f"argument {flag}: cannot write {path!r}: the directory {parent!r} is not writable")
    return path


def plot_file(path: str, flag: str = "--plot") -> str:
    """``path`` if matplotlib can draw a figure into it (a writable file of a format it knows).

    Raises
    ------
    CommandError
        matplotlib is missing, the path cannot be written (see :func:`writable_file`), or its
        suffix names no format matplotlib writes (the known ones listed).
    """
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise CommandError(f"{flag} needs matplotlib: pip install 'bucketcore[plot]'") from None
    writable_file(path, flag)
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in formats:
        raise CommandError(
            f"argument {flag}: {path!r} is not a format matplotlib writes (use one of: {', '.join(sorted(formats))})"
        )
    return path
