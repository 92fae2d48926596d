"""Short runs of every fuzz harness (fuzz/fuzz_*.py): its seed corpus, then a hundred inputs
of seeded pseudo-random bytes, then one pass through atheris itself (libFuzzer's mutations).

A harness raises when bucketcore disagrees with its oracle (mmh3, the reference batcher, the
dispatch and consumer models, ...), so these runs fail on a divergence, not only on a crash. The
long, instrumented runs are ``tools/fuzz.sh`` (docs/fuzzing.md).
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("atheris", reason="atheris (the test extra) runs the fuzz harnesses")

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
if not FUZZ.is_dir():
    pytest.skip(f"no fuzz harnesses at {FUZZ} (a copy of tests/ outside the source tree)", allow_module_level=True)
HARNESSES = sorted(p.stem.removeprefix("fuzz_") for p in FUZZ.glob("fuzz_*.py"))
RANDOM_INPUTS = 100


def _harness(name: str) -> ModuleType:
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    return importlib.import_module(f"fuzz_{name}")


def test_every_harness_has_a_seed_corpus() -> None:
    assert HARNESSES, f"no fuzz/fuzz_*.py in {FUZZ}"
    for name in HARNESSES:
        seeds = list((FUZZ / "corpus" / name).glob("*"))
        assert seeds, f"fuzz/corpus/{name}/ is empty"


@pytest.mark.parametrize("name", HARNESSES)
def test_harness_agrees_with_its_oracle_on_seeds_and_random_inputs(name: str) -> None:
    harness = _harness(name)
    for seed in sorted((FUZZ / "corpus" / name).glob("*")):
        harness.test_one_input(seed.read_bytes())
    rng = random.Random(f"bucketcore-fuzz-{name}")
    for _ in range(RANDOM_INPUTS):
        harness.test_one_input(rng.randbytes(rng.randrange(0, 600)))


@pytest.mark.parametrize("name", HARNESSES)
def test_harness_runs_under_atheris(name: str, tmp_path: Path) -> None:
    """The harness as tools/fuzz.sh runs it: a script handing test_one_input to libFuzzer."""
    import _bucketcore
    import bucketcore

    # the bucketcore this test process imports (an install, or the source tree on PYTHONPATH)
    where = {str(Path(m.__file__).resolve().parent.parent) for m in (bucketcore, _bucketcore)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sorted(where), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            str(FUZZ / f"fuzz_{name}.py"),
            "-runs=50",
            "-seed=1",
            f"-artifact_prefix={tmp_path}/",
            str(tmp_path),
            str(FUZZ / "corpus" / name),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done 50 runs" in proc.stderr, proc.stderr[-2000:]
