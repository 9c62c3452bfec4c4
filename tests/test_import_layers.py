"""No import circles in the packages that had them (issue 16 #4): net/persist <-> net/recipe and sim/cost <->
profile <-> connector (tierset), once dodged with imports inside functions. Every module-level `from fxctl.X import`
edge inside a package is collected from the source, and the graph must have no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fxctl"


def edges(package: str) -> dict[str, set[str]]:
    """module -> modules of the same package it imports, at module level or inside functions."""
    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / package).glob("*.py"):
        name = f"fxctl.{package}.{path.stem}"
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"fxctl.{package}."):
                graph[name].add(node.module)
    return graph


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


@pytest.mark.parametrize("package", ["net", "sim", "tune", "loadgen", "tierbench", "kvtier", "playbook"])
def test_no_import_cycle(package):
    assert cycle(edges(package)) == []
