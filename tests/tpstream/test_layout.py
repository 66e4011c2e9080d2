"""The package's layering: the compiled query is data at the bottom, and no module of the
package imports, even for type checking, a module that imports it back."""

import ast
import pathlib

import situflow.tpstream

ROOT = pathlib.Path(situflow.tpstream.__file__).parent
PACKAGE = "situflow.tpstream"


def module_name(path: pathlib.Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The package's modules that ``name`` imports (``from a import b`` counts a.b if it is one)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m in MODULES and m != name}


def test_the_compiled_query_imports_nothing_of_the_engine():
    assert imports(f"{PACKAGE}.query") == set()


def test_no_module_of_the_package_is_in_an_import_circle():
    graph = {name: imports(name) for name in MODULES}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert [name for name in graph if reaches(name, name)] == []
