"""The package's modules import each other in one direction: no cycles.

Every relative import (``from .io import …``, ``from . import s3``, also inside functions) is
an arrow; a cycle (io ↔ s3 once did, for an error class) fails here with the cycle named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import loadgen_analysis

PACKAGE = Path(loadgen_analysis.__file__).parent


def imports(path: Path) -> set[str]:
    """The package modules ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found - {path.stem}


def graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {name: imports(path) & modules.keys() for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path of module names, or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt, [*path, nxt])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for start in sorted(edges):
        if start not in state:
            cycle = visit(start, [start])
            if cycle:
                return cycle
    return None


def test_package_imports_form_no_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"io": {"s3"}, "s3": {"errors", "io"}, "errors": set()}) == ["io", "s3", "io"]
    assert find_cycle({"io": {"errors"}, "s3": {"errors"}, "errors": set()}) is None


def test_io_and_s3_share_the_error_from_a_leaf():
    edges = graph()
    assert "s3" in edges["io"] and "io" not in edges["s3"]
    assert edges["errors"] == set()
