"""No import circles anywhere in fxctl/ (issues 16 #4, 26 #4).

Every import of an fxctl module is an edge, whatever its form: `import fxctl.x.y`, `from fxctl.x import y`
(y a module or a name in x's __init__), `from fxctl.x.y import name`, relative imports, at module level or
inside a function (an import deferred into a function still makes the two modules depend on each other; it
only hides the circle from Python). The whole tree is one graph, so a circle through two packages counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fxctl"


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `root` (a package's __init__ is the package)."""
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that `module` (at `path`) imports, in any form."""
    def known(name: str) -> str | None:
        while name and name not in modules:   # from fxctl.x.y import name: the module is fxctl.x.y
            name = name.rpartition(".")[0]
        return name or None

    top = module.split(".")[0]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(known(alias.name) for alias in node.names if alias.name.split(".")[0] == top)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != top:
                continue
            for alias in node.names:   # from fxctl.serve import deploy: an edge to the module fxctl.serve.deploy
                name = f"{source}.{alias.name}"
                found.add(name if name in modules else known(source))
    found.discard(None)
    found.discard(module)
    return found  # type: ignore[return-value]


def graph_of(root: Path) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imported(name, path, modules) for name, path in modules.items()}


def cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_cycle_in_fxctl():
    graph = graph_of(PACKAGE)
    packages = {name.split(".")[1] for name in graph if name.count(".") >= 1}
    assert {"serve", "cli", "lab", "kvtier", "provision", "net"} <= packages   # the walk sees the whole tree
    assert cycle(graph) == []


@pytest.mark.parametrize("form", [
    "from pkg.b import thing",          # a name from a module
    "from pkg import b",                # a module through its package
    "import pkg.b",                     # a plain import
    "from . import b",                  # relative, the module
    "from .b import thing",             # relative, a name
    "def later():\n    from pkg.b import thing\n",   # deferred into a function
])
def test_every_import_form_is_an_edge(tmp_path, form):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text(form + "\n")
    (root / "b.py").write_text("from pkg.a import x\n")
    graph = graph_of(root)
    assert "pkg.b" in graph["pkg.a"]
    assert cycle(graph) in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])


def test_a_name_from_a_package_init_is_an_edge_to_the_package(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from pkg.sub.impl import helper\n")
    (root / "sub" / "impl.py").write_text("from pkg.sub import helper\n")
    assert cycle(graph_of(root)) == ["pkg.sub", "pkg.sub.impl", "pkg.sub"]
