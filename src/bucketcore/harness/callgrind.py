"""Instruction counts under ``valgrind --tool=callgrind``: deterministic on a loaded machine, unlike
wall time (the README's Speed section proves speed changes with them).

Every count here runs a Python child (``sys.executable``, the real interpreter: valgrind cannot
start a shim script) and reads callgrind's ``Collected`` total, usually counted inside one function
only (``toggle``) so that the interpreter's start and exit and the set-up stay out of it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence

__all__ = ["CHILD_ENV", "callgrind", "collected", "totals"]

#: The children's environment on top of this process's: one BLAS thread, a fixed str hash seed
#: (so dict and set layouts, and with them the counts, repeat from run to run).
CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def callgrind(
    argv: Sequence[str],
    *,
    toggle: str | None = None,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    out_file: str = "/dev/null",
) -> subprocess.CompletedProcess[str]:
    """Run ``python argv...`` under callgrind.

    Parameters
    ----------
    argv : sequence of str
        The child's arguments after the interpreter (a script and its arguments).
    toggle : str, optional
        Count only inside this function (``--collect-atstart=no --toggle-collect=...``), e.g.
        ``_operator_call`` when the child makes the measured calls through ``operator.call``.
    options : sequence of str
        More valgrind options (``--cache-sim=yes``, ``--dump-after=...``).
    env : mapping, optional
        The child's whole environment (default: this process's with :data:`CHILD_ENV`).
    out_file : str
        callgrind's output file (``/dev/null`` when only the total is wanted).

    Returns
    -------
    subprocess.CompletedProcess
        With the captured output (callgrind reports on stderr).

    Raises
    ------
    RuntimeError
        The child failed (its stderr's end attached).
    """
    collect = ["--collect-atstart=no", f"--toggle-collect={toggle}"] if toggle else []
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", *collect, *options]
        + [sys.executable, *argv],
        env=dict(os.environ, **CHILD_ENV) if env is None else dict(env),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the callgrind run of {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return done


def collected(argv: Sequence[str], **kwargs: object) -> int:
    """The instructions callgrind counted in a :func:`callgrind` run (its ``Collected`` total).

    Parameters
    ----------
    argv : sequence of str
        As in :func:`callgrind`.
    **kwargs
        :func:`callgrind`'s options.

    Returns
    -------
    int
    """
    done = callgrind(argv, **kwargs)  # type: ignore[arg-type]
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no total for {' '.join(argv)}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def totals(path: str) -> dict[str, int]:
    """The event totals of one callgrind output file, by event name (``Ir``, ``D1mr``, ...).

    Parameters
    ----------
    path : str
        A callgrind output file (one dump).

    Returns
    -------
    dict
        Event name to count; empty when the file holds no totals. callgrind leaves trailing zero
        counts out of its totals line, so a missing event is 0.
    """
    with open(path) as f:
        text = f.read()
    events = re.search(r"^events: (.+)$", text, re.M)
    found = re.search(r"^(?:totals|summary): ([\d ]+)$", text, re.M)
    if events is None or found is None:
        return {}
    return dict(zip(events.group(1).split(), map(int, found.group(1).split())))
