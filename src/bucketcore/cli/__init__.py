"""The ``bucketcore`` command (also ``python -m bucketcore``): simulate, tune, bench, plan, hash.

Each subcommand is one module of this package with ``add_parser(subparsers)`` and ``run(args)``;
a module is imported only when its subcommand runs, and the terminal libraries (rich, and
matplotlib for ``--plot``) only then too, so ``import bucketcore`` never loads them. docs/cli.md
describes every subcommand; docs/design.md the semantics they exercise.

Exit status: 0 success; 1 a check failed (``simulate``) or the run could not finish; 2 a bad
argument or input, reported as one line naming it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from ._common import CommandError, Parser

__all__ = ["SUBCOMMANDS", "main"]

#: subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulate": (
        "simulate",
        "end-to-end run: produce, store, dispatch, consume with churn; check order, loss, duplicates",
    ),
    "tune": ("tune", "sweep segment counts, bucket counts N and policies; recommend the smallest N"),
    "bench": ("bench", "kernel throughput side by side with the per-message Python baselines"),
    "plan": ("plan", "traffic-balanced boundary lists for a key sample, as a layout JSON"),
    "hash": ("hash", "raw, segment and bucket hashes of keys from a file or stdin, streaming"),
}


def build_parser() -> Parser:
    """The command's argument parser with every subcommand registered.

    Returns
    -------
    Parser
    """
    from bucketcore import __version__

    parser = Parser(
        prog="bucketcore",
        description="bucketcore: the compiled hot path of Apache Pulsar entry-bucketing (PIP-486). "
        "Run 'bucketcore simulate' for the end-to-end check.",
    )
    parser.add_argument("--version", action="version", version=f"bucketcore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (module, help_text) in SUBCOMMANDS.items():
        mod = importlib.import_module(f"bucketcore.cli.{module}")
        mod.add_parser(sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + "."))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(f"bucketcore.cli.{SUBCOMMANDS[args.command][0]}")
    try:
        return int(module.run(args))
    except CommandError as err:
        print(f"bucketcore {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bucketcore {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (| head): not an error of ours; point stdout at /dev/null so the
        # interpreter's final flush does not complain either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
