"""The wheel matrix builds what users run: every job of .github/workflows/wheels.yml, with its own
environment, selects a non-empty set of builds that includes the newest CPython (and its
free-threaded build) that cibuildwheel knows, and pyproject's classifiers and ``requires-python``
name exactly the CPython versions those builds cover.

cibuildwheel itself answers which builds a job gets (``--print-build-identifiers``, the pinned
version of the workflow), so a selection it rejects or that matches nothing fails here, not on a
release tag.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "wheels.yml"
PYPROJECT = REPO / "pyproject.toml"
PLATFORMS = {"ubuntu": "linux", "macos": "macos", "windows": "windows"}
IDENTIFIER = re.compile(r"^cp3(\d+)(t?)-")

if not WORKFLOW.exists():
    pytest.skip(f"no wheels workflow at {WORKFLOW} (a copy of tests/ outside the source tree)", allow_module_level=True)
yaml = pytest.importorskip("yaml", reason="PyYAML (the test extra) reads the wheels workflow", exc_type=ImportError)
tomllib = pytest.importorskip("tomllib", reason="tomllib (Python 3.11+) reads pyproject.toml", exc_type=ImportError)


def cibuildwheel() -> list[str]:
    """The command that runs the cibuildwheel the workflow pins; the test skips, saying why, without it."""
    exe = shutil.which("cibuildwheel", path=os.path.dirname(sys.executable)) or shutil.which("cibuildwheel")
    if exe is None:
        pytest.skip("cibuildwheel is not installed (the test extra installs it on Python 3.11+)")
    return [exe]


def substitute(value: str, entry: dict[str, object]) -> str:
    """``value`` with each ``${{ matrix.NAME }}`` replaced by the matrix entry's NAME."""
    return re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: str(entry[m.group(1)]), value)


def workflow_jobs() -> list[tuple[str, str, dict[str, str]]]:
    """(job name, cibuildwheel platform, environment) of every matrix entry of every cibuildwheel job."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    found = []
    for name, job in workflow["jobs"].items():
        steps = [s for s in job.get("steps", ()) if str(s.get("uses", "")).startswith("pypa/cibuildwheel@")]
        if not steps:
            continue
        (step,) = steps
        for entry in job["strategy"]["matrix"]["include"]:
            platform = next(p for prefix, p in PLATFORMS.items() if entry["os"].startswith(prefix))
            env = {key: substitute(str(value), entry) for key, value in (step.get("env") or {}).items()}
            found.append((f"{name} {entry['os']} {entry.get('archs', '')}", platform, env))
    return found


def identifiers(platform: str, env: dict[str, str], project: Path) -> list[str]:
    """The builds cibuildwheel selects for ``project`` on ``platform`` with ``env`` set."""
    return list(_identifiers(platform, tuple(sorted(env.items())), project))


@functools.cache
def _identifiers(platform: str, env_items: tuple[tuple[str, str], ...], project: Path) -> tuple[str, ...]:
    env = dict(env_items)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    result = subprocess.run(
        [*cibuildwheel(), "--platform", platform, "--print-build-identifiers", str(project)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"cibuildwheel refused the job's settings: {result.stderr.strip()}"
    return tuple(result.stdout.split())


def versions(builds: list[str]) -> set[tuple[int, str]]:
    """(minor version, "t" or "") of each CPython build identifier."""
    out = set()
    for build in builds:
        match = IDENTIFIER.match(build)
        assert match, f"not a CPython build: {build}"
        out.add((int(match.group(1)), match.group(2)))
    return out


def test_the_workflow_has_cibuildwheel_jobs_of_the_installed_version() -> None:
    assert workflow_jobs(), f"{WORKFLOW} has no job running pypa/cibuildwheel"
    cibuildwheel()  # skips, saying so, when it is not installed
    pins = set(re.findall(r"pypa/cibuildwheel@v([\d.]+)", WORKFLOW.read_text(encoding="utf-8")))
    installed = importlib.metadata.version("cibuildwheel")
    assert pins and all(installed.startswith(pin + ".") or installed == pin for pin in pins), (
        f"the workflow runs cibuildwheel {sorted(pins)}, these tests ask {installed}: pin the test extra to match"
    )


@pytest.mark.parametrize("job", workflow_jobs(), ids=lambda job: job[0])
def test_every_job_builds_the_newest_cpython_and_its_free_threaded_build(
    job: tuple[str, str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    name, platform, env = job
    builds = identifiers(platform, env, REPO)
    assert builds, f"{name}: cibuildwheel selects no build with this job's settings"
    # what cibuildwheel knows for this platform and these archs, with no selection of ours
    probe = tmp_path_factory.getbasetemp() / "cibuildwheel-probe"
    probe.mkdir(exist_ok=True)
    (probe / "pyproject.toml").write_text('[project]\nname = "probe"\nversion = "0"\nrequires-python = ">=3.8"\n')
    known = versions(identifiers(platform, {k: v for k, v in env.items() if k == "CIBW_ARCHS"}, probe))
    newest = max(minor for minor, _ in known)
    got = versions(builds)
    assert (newest, "") in got, f"{name}: CPython 3.{newest} (the newest cibuildwheel knows) is not built: {builds}"
    newest_free = max((minor for minor, t in known if t), default=None)
    if newest_free is not None:
        assert (newest_free, "t") in got, f"{name}: free-threaded 3.{newest_free}t is not built: {builds}"


def test_classifiers_and_requires_python_name_exactly_the_built_versions() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    built: set[tuple[int, str]] = set()
    for _, platform, env in workflow_jobs():
        built |= versions(identifiers(platform, env, REPO))
    minors = {minor for minor, _ in built}
    classified = {
        int(m.group(1))
        for c in project["classifiers"]
        if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    }
    assert classified == minors, f"classifiers name 3.{sorted(classified)}, the wheels cover 3.{sorted(minors)}"
    assert project["requires-python"] == f">=3.{min(minors)}"
    free_threaded = any(t for _, t in built)
    assert free_threaded == any(
        c.startswith("Programming Language :: Python :: Free Threading") for c in project["classifiers"]
    )
