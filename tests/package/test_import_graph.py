"""The package's rooms call down only: no import cycle, the CLI imported from nowhere below it.

The import graph is built from the source with :mod:`ast`, not by importing anything: every
``import`` and ``from ... import`` anywhere in a module counts (module level, inside functions,
under ``if TYPE_CHECKING``, in ``try`` blocks), because a lazy import inside a function is still
a dependency the module cannot be read or moved without.

What an edge is. A statement of module ``m`` that names module ``t`` gives the edge ``m -> t``:

* ``import a.b.c`` and ``from a.b.c import x`` name ``a.b.c``; relative imports are resolved
  against ``m``'s package (``from ..x import y`` in ``p.q.r`` names ``p.x``);
* ``from pkg import name`` names ``pkg.name`` when that is a module, and ``pkg`` itself when
  ``name`` is an attribute of ``pkg``'s ``__init__``;
* importing ``a.b.c`` also runs the ``__init__`` of each package on the way (``a``, ``a.b``), so
  those are edges too, except for ``m``'s own enclosing packages: Python has started those
  before ``m`` runs, so reaching them again adds nothing. ``from . import arrow`` in
  ``bucketcore.hashing`` therefore is an edge to ``bucketcore.arrow`` only, not to
  ``bucketcore``; ``import bucketcore`` or ``from bucketcore import murmur3_32`` there would be
  an edge to ``bucketcore`` (it needs the ``__init__``'s names).

What a cycle is. A cycle is a closed path of such edges between two or more modules: modules
that cannot be understood, tested or loaded one before the other. A package ``__init__``
importing its own submodules is an edge like any other, so it is a cycle only when a path leads
back to that ``__init__`` (a submodule that imports names from it, ``import bucketcore`` in a
library module); a submodule merely living inside its package is not an edge, so it is not a
cycle by itself. Dynamic imports (``importlib.import_module`` of a computed name, as
``bucketcore.__getattr__`` and the CLI's command table do) are not seen; they load modules that
must obey the same rules, which the graph checks for their own static imports.

Also checked: no module under ``bucketcore/`` outside ``cli/`` and ``__main__`` imports
``bucketcore.cli`` (the library never depends on its command line), and no kernel source in
``_bucketcore/`` imports ``bucketcore`` (kernels never call up into the Python layer).

The graph and cycle functions are tested on small synthetic packages below, so the checks on the
real tree are known to fail when they should.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

Graph = dict[str, dict[str, int]]  # module -> {imported module: first line that imports it}


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its ``__init__``)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _enclosing(module: str, is_package: bool) -> list[str]:
    """The packages Python has entered before ``module`` runs (itself too, for an ``__init__``)."""
    parts = module.split(".")
    stop = len(parts) if is_package else len(parts) - 1
    return [".".join(parts[:i]) for i in range(1, stop + 1)]


def _with_parents(target: str) -> list[str]:
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The modules of ``known`` that one import statement names (see the module docstring)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    names = []
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        names.append(sub if sub in known else source)
    return names


def import_graph(root: Path, package: str) -> Graph:
    """The import graph of ``package``'s modules under ``root``, built from their source."""
    modules = module_names(root, package)
    known = set(modules)
    graph: Graph = {}
    for module, path in modules.items():
        is_package = _is_package(path)
        entered = set(_enclosing(module, is_package))
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _imported(node, module, is_package, known):
                for target in _with_parents(name):
                    if target in known and target != module and (target == name or target not in entered):
                        edges.setdefault(target, node.lineno)
        graph[module] = dict(sorted(edges.items(), key=lambda kv: kv[1]))
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The graph's strongly connected components of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def shortest_cycle(graph: Graph, start: str) -> list[str]:
    """A shortest closed path of imports from ``start`` back to it ([] if there is none)."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in graph.get(v, {}):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    return []


def describe_cycles(graph: Graph) -> list[str]:
    """One line per import cycle: its modules, and one closed path with the line of each import."""
    lines = []
    for component in strongly_connected(graph):
        path = shortest_cycle(graph, component[0])
        steps = " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:], strict=False))
        lines.append(f"cycle among {component}: {steps} -> {path[-1]}")
    return lines


def cli_imports_from_below(graph: Graph, package: str) -> list[str]:
    """Imports of ``package.cli`` from a module outside ``cli/`` and ``__main__``, as text."""
    cli = f"{package}.cli"
    allowed = (cli, f"{package}.__main__")
    return [
        f"{module} line {line} imports {target}"
        for module, edges in graph.items()
        if not any(module == a or module.startswith(a + ".") for a in allowed)
        for target, line in edges.items()
        if target == cli or target.startswith(cli + ".")
    ]


# an import statement of Python or Cython (import, cimport, from ... [c]import), its module names
_KERNEL_IMPORT = re.compile(r"^\s*(?:from\s+(?P<source>[\w.]+)\s+c?import\b|c?import\s+(?P<names>[\w., ]+))")
_DYNAMIC_IMPORT = re.compile(r"""(?:import_module|__import__)\(\s*['"](?P<name>[\w.]+)""")


def kernel_imports_of(root: Path, kernels: str, package: str) -> list[str]:
    """Lines of the kernel sources (``.pyx``, ``.pxd``, ``.py``) that import ``package``."""
    found = []
    for path in sorted((root / kernels).iterdir()):
        if path.suffix not in (".pyx", ".pxd", ".py"):
            continue
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            names = []
            if m := _KERNEL_IMPORT.match(text):
                names = [m["source"]] if m["source"] else [n.split()[0] for n in m["names"].split(",") if n.strip()]
            names += [d["name"] for d in _DYNAMIC_IMPORT.finditer(text)]
            if any(n == package or n.startswith(package + ".") for n in names):
                found.append(f"{path.name}:{number}: {text.strip()}")
    return found


# --- the rules on the real tree -----------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(SRC, "bucketcore")


def test_the_graph_sees_the_package(graph: Graph) -> None:
    # a graph that found no modules or no edges would pass every rule below
    assert {"bucketcore", "bucketcore.hashing", "bucketcore.cli", "bucketcore.cli.plan"} <= set(graph)
    assert "bucketcore.hashing" in graph["bucketcore"]
    assert "bucketcore.arrow" in graph["bucketcore.hashing"]


def test_no_import_cycle(graph: Graph) -> None:
    assert describe_cycles(graph) == []


def test_the_library_does_not_import_the_command_line(graph: Graph) -> None:
    assert cli_imports_from_below(graph, "bucketcore") == []


def test_kernels_do_not_import_the_python_layer() -> None:
    assert list((SRC / "_bucketcore").glob("*.pyx")), "no kernel sources found"
    assert kernel_imports_of(SRC, "_bucketcore", "bucketcore") == []


# --- the functions, on synthetic packages -------------------------------------------------------


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_an_init_importing_its_submodules_is_not_a_cycle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import f\nfrom . import b\nimport pkg.sub.c\n",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "X = 1\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from ..a import f\nfrom .. import b\n",
        },
    )
    graph = import_graph(root, "pkg")
    assert graph == {
        "pkg": {"pkg.a": 1, "pkg.b": 2, "pkg.sub": 3, "pkg.sub.c": 3},
        "pkg.a": {"pkg.b": 1},
        "pkg.b": {},
        "pkg.sub": {},
        "pkg.sub.c": {"pkg.a": 1, "pkg.b": 2},
    }
    assert describe_cycles(graph) == []


def test_a_lazy_import_closes_a_cycle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import os\nfrom .b import g\n",
            "pkg/b.py": "def g():\n    from pkg.c import h\n    return h\n",
            "pkg/c.py": "def h():\n    try:\n        from . import a\n    except ImportError:\n        pass\n",
            "pkg/d.py": "from .a import g\n",
        },
    )
    graph = import_graph(root, "pkg")
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert describe_cycles(graph) == [
        "cycle among ['pkg.a', 'pkg.b', 'pkg.c']: pkg.a (line 2) -> pkg.b (line 2) -> pkg.c (line 3) -> pkg.a"
    ]


def test_names_from_an_init_lead_back_to_it(tmp_path: Path) -> None:
    # a submodule taking a name from its package's __init__ (which imports the submodule) is a cycle
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import f\nVERSION = 1\n",
            "pkg/a.py": "def f():\n    from pkg import VERSION\n    return VERSION\n",
        },
    )
    graph = import_graph(root, "pkg")
    assert graph["pkg.a"] == {"pkg": 2}
    assert describe_cycles(graph) == ["cycle among ['pkg', 'pkg.a']: pkg (line 1) -> pkg.a (line 2) -> pkg"]


def test_a_subpackage_init_on_the_way_is_an_edge(tmp_path: Path) -> None:
    # importing pkg.sub.c runs pkg/sub/__init__, which imports back: a cycle
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.sub.c import X\n",
            "pkg/sub/__init__.py": "from ..a import *\n",
            "pkg/sub/c.py": "X = 1\n",
        },
    )
    graph = import_graph(root, "pkg")
    assert graph["pkg.a"] == {"pkg.sub": 1, "pkg.sub.c": 1}
    assert strongly_connected(graph) == [["pkg.a", "pkg.sub"]]


def test_cli_imported_from_below_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/__main__.py": "from pkg.cli import main\n",
            "pkg/cli/__init__.py": "from ._common import E\nfrom pkg import lib\n",
            "pkg/cli/_common.py": "E = 1\n",
            "pkg/lib.py": "def f():\n    from .cli._common import E\n",
            "pkg/clinic.py": "",
        },
    )
    graph = import_graph(root, "pkg")
    assert cli_imports_from_below(graph, "pkg") == [
        "pkg.lib line 2 imports pkg.cli",
        "pkg.lib line 2 imports pkg.cli._common",
    ]


def test_a_kernel_importing_the_package_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "_k/__init__.py": "",
            "_k/_ok.pyx": "from _k._other cimport f\nimport numpy as np\n# bucketcore sets this at import\n",
            "_k/_up.pyx": "cimport numpy as cnp\n\ndef f():\n    import os, bucketcore.hashing as h\n",
            "_k/_late.pyx": 'def g():\n    return importlib.import_module("bucketcore")\n',
            "_k/_from.pxd": "from bucketcore cimport x\n",
        },
    )
    assert kernel_imports_of(root, "_k", "bucketcore") == [
        "_from.pxd:1: from bucketcore cimport x",
        '_late.pyx:2: return importlib.import_module("bucketcore")',
        "_up.pyx:4: import os, bucketcore.hashing as h",
    ]
