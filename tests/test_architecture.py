"""The house's rules, read from the code (docs/architecture.md):

* no import circle in the package — function-level imports count, since they tie modules as
  surely as top-level ones (only ``if TYPE_CHECKING:`` imports, which never run, are left out);
* the model (``semantics/``) imports nothing of the search (``engines/``), not even for types;
* no module is past 700 lines.

Each rule is also checked against a small package built here that breaks it, so that a test
that could never fail does not pass for the wrong reason."""

from __future__ import annotations

import ast
import pathlib

import networkx as nx
import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "syncverify"
MAX_LINES = 700


def _modules(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of ``package`` (a package is its __init__)."""
    root = package.parent
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path], *, types: bool) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its body; ``if TYPE_CHECKING:``
    blocks only when ``types``. ``from . import x`` names the module x when there is one, else
    the package it comes from; importing a submodule does not count as importing its parents
    (that is Python's doing, not the module's)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child) and not types:
                for orelse in child.orelse:
                    visit(orelse)
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for alias in child.names:
                    if f"{target}.{alias.name}" in modules:
                        found.add(f"{target}.{alias.name}")
                    elif target in modules:
                        found.add(target)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name in modules)
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    found.discard(name)
    return found


def import_graph(package: pathlib.Path, *, types: bool = False) -> nx.DiGraph:
    modules = _modules(package)
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        graph.add_edges_from((name, target) for target in _imported(name, path, modules, types=types))
    return graph


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """Each strongly connected component of more than one module, with one loop through it."""
    found = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            loop = nx.find_cycle(graph.subgraph(component))
            found.append([*sorted(component), "loop: " + " -> ".join(a for a, _ in loop)])
    return found


def model_imports_of_search(graph: nx.DiGraph, top: str) -> list[tuple[str, str]]:
    return sorted((a, b) for a, b in graph.edges
                  if a.startswith(f"{top}.semantics") and b.startswith(f"{top}.engines"))


def long_modules(package: pathlib.Path) -> list[tuple[str, int]]:
    return sorted((str(path.relative_to(package.parent)), n) for path in package.rglob("*.py")
                  if (n := len(path.read_text().splitlines())) > MAX_LINES)


def test_the_package_has_no_import_circle():
    assert circles(import_graph(PACKAGE)) == []


def test_the_model_imports_nothing_of_the_search():
    assert model_imports_of_search(import_graph(PACKAGE, types=True), PACKAGE.name) == []


def test_no_module_is_past_700_lines():
    assert long_modules(PACKAGE) == []


@pytest.fixture
def toy(tmp_path: pathlib.Path) -> pathlib.Path:
    """A package that breaks each rule once."""
    package = tmp_path / "toy"
    (package / "engines").mkdir(parents=True)
    (package / "semantics").mkdir()
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from . import b\n",
        "b.py": "from .a import f\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n",
        "d.py": "from . import c\n",
        "engines/__init__.py": "",
        "engines/search.py": "from ..semantics import model\n",
        "semantics/__init__.py": "",
        "semantics/model.py": "from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from ..engines.search import x\n",
        "long.py": "x = 1\n" * (MAX_LINES + 1),
    }
    for relative, text in files.items():
        (package / relative).write_text(text)
    return package


def test_the_rules_fail_where_they_should(toy: pathlib.Path):
    graph = import_graph(toy)
    assert [c[:-1] for c in circles(graph)] == [["toy.a", "toy.b"]]  # a function-level import closes it;
    # c -> d only under TYPE_CHECKING: no circle
    assert model_imports_of_search(import_graph(toy, types=True), "toy") == [("toy.semantics.model",
                                                                             "toy.engines.search")]
    assert model_imports_of_search(graph, "toy") == []
    assert long_modules(toy) == [("toy/long.py", MAX_LINES + 1)]
