"""The layers hold: the engine core imports no Kafka client, Faust, Spark, service or topic
module; services sit above topics above the core; the language layer imports no engine; the
archive imports nothing of the offline planner built on it; and no
module imports itself through others (an import circle), function-level imports included.

The contracts are import-linter's, in ``pyproject.toml`` (``make lint`` runs them); the circle
check is below, since import-linter checks circles only between sibling packages. Both read
imports statically, so an import inside a function counts: such an import is how
``situflow/cli.py`` once reached ``workers/`` unseen.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
PACKAGES = ("situflow", "workers", "topics")


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of :data:`PACKAGES` under ``root``."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its code, except under ``if
    TYPE_CHECKING:`` (annotations only: no import at run time)."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [base])])
            for alias in node.names:  # ``from package import module`` imports the module
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    targets = set()
    for module in found:
        while module and module not in modules:  # ``import a.b.f`` of a function f: a.b
            module = module.rpartition(".")[0]
        if module and module != name:
            targets.add(module)
    return targets


def import_circles(root: Path) -> Iterator[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    modules = project_modules(root)
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[frozenset[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(frozenset(component))

    for module in graph:
        if module not in index:
            connect(module)
    yield from circles


def test_no_import_circle() -> None:
    circles = set(import_circles(REPO))
    assert circles == set(), "import circle"


def test_the_archive_imports_nothing_of_the_offline_planner_above_it() -> None:
    modules = project_modules(REPO)
    upward = {(name, target) for name, path in modules.items() if name.startswith("situflow.archive")
              for target in imported_modules(name, path, modules) if target.startswith("situflow.offline")}
    assert upward == set()


LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the project at ``root``, in a process of its own: its command
    configures logging with ``dictConfig``, which would disable this process's loggers (and the
    log records later tests look for)."""
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": ""}, capture_output=True,
                          text=True, timeout=300)


def test_the_layer_contracts_hold() -> None:
    run = lint_imports(REPO)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the project with one back-edge per contract and one circle, each made by an
    import inside a function."""
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "examples"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    plants = {
        "situflow/planted_core.py": "def f():\n    import workers.app\n",
        "topics/planted_layer.py": "def f():\n    from workers import cli\n",
        "situflow/lang/planted_engine.py": "def f():\n    import situflow.nfa\n",
        "situflow/planted_a.py": "def f():\n    from situflow import planted_b\n",
        "situflow/planted_b.py": "import situflow.planted_a\n",
    }
    for file, text in plants.items():
        (tmp_path / file).write_text(text)
    return tmp_path


def test_a_planted_back_edge_breaks_each_contract(planted: Path) -> None:
    run = lint_imports(planted)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Contracts: 0 kept, 3 broken." in run.stdout
    for edge in ("situflow.planted_core -> workers.app", "topics.planted_layer -> workers.cli",
                 "situflow.lang.planted_engine -> situflow.nfa"):
        assert edge in run.stdout


def test_a_planted_circle_is_found(planted: Path) -> None:
    assert frozenset({"situflow.planted_a", "situflow.planted_b"}) in set(import_circles(planted))
