"""What the kernels declare to a free-threaded CPython (3.13t and later) through Py_mod_gil.

The kernels audited as correct without the GIL declare so; every other kernel declares that it
needs the GIL, and the interpreter turns the GIL back on when it imports one (docs/hardening.md).
These tests run only on a free-threaded interpreter (CI's free-threaded job).
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import sysconfig

import pytest

import _bucketcore

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
pytestmark = pytest.mark.skipif(
    not FREE_THREADED, reason="not a free-threaded interpreter: Py_mod_gil is only read by 3.13t and later"
)

# The kernels that run without the GIL (setup.py, FREE_THREADING_COMPATIBLE).
WITHOUT_GIL = {"_status", "_routing"}
KERNELS = sorted(m.name for m in pkgutil.iter_modules(_bucketcore.__path__) if m.name.startswith("_"))


def _gil_after_importing(module: str) -> bool:
    code = f"import sys, warnings; warnings.simplefilter('ignore'); import {module}; print(sys._is_gil_enabled())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


def test_every_kernel_is_one_of_the_audited_or_the_gil_needing_ones():
    assert set(WITHOUT_GIL) <= set(KERNELS), KERNELS


@pytest.mark.parametrize("name", KERNELS)
def test_a_kernel_turns_the_gil_on_exactly_when_it_declares_it_needs_it(name):
    assert _gil_after_importing(f"_bucketcore.{name}") is (name not in WITHOUT_GIL)


def test_importing_bucketcore_runs_it_with_the_gil():
    # the package imports every kernel, some of which need the GIL
    assert _gil_after_importing("bucketcore") is True
