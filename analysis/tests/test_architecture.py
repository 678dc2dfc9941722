"""The package's shape: modules import each other in one direction, no module is long, and the
test helpers stay out of the production code.

Every relative import (``from ..io.run import …``, ``from . import s3``, also inside functions)
is an arrow between modules (``io.load``, ``reductions.summary``, …). A cycle between modules
— or between subpackages (``io``, ``reductions``, ``models``, ``verdict``, ``report``) — fails
here with the cycle named; so does a module over :data:`MAX_LINES` lines and any import of
``loadgen_analysis.testing`` from the package proper (the wheel leaves ``testing`` out).
"""

from __future__ import annotations

import ast
from pathlib import Path

import loadgen_analysis

PACKAGE = Path(loadgen_analysis.__file__).parent

#: The longest a module may be; past it, split it by what its parts do.
MAX_LINES = 500


def module_name(path: Path) -> str:
    """``io/load.py`` → ``io.load``; a subpackage's ``__init__.py`` is the subpackage."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (the package's own ``__init__`` is ``""``)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports, by dotted name."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)]
        target = [*base, *(node.module.split(".") if node.module else [])]
        for alias in node.names:
            submodule = ".".join([*target, alias.name])
            found.add(submodule if submodule in known else ".".join(target))
    return found - {name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) & found.keys() for name, path in found.items()}


def subpackage_graph() -> dict[str, set[str]]:
    """Arrows between top-level parts (a subpackage, or a module directly in the package)."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        top = name.split(".")[0]
        edges.setdefault(top, set()).update(t.split(".")[0] for t in targets)
    return {top: targets - {top} for top, targets in edges.items()}


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


def test_subpackages_import_each_other_in_one_direction():
    cycle = find_cycle(subpackage_graph())
    assert cycle is None, "import cycle between subpackages: " + " → ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"io": {"s3"}, "s3": {"errors", "io"}, "errors": set()}) == ["io", "s3", "io"]
    assert find_cycle({"io": {"errors"}, "s3": {"errors"}, "errors": set()}) is None


def test_imports_are_resolved_to_modules():
    edges = graph()
    assert {"io.run", "io.shards", "io.contract", "io.s3", "errors"} <= edges["io.load"]
    assert "reductions.cache" in edges["reductions.summary"]
    assert "report.plots" in edges["report.html"]


def test_io_and_s3_share_the_error_from_a_leaf():
    edges = graph()
    assert "io.s3" in edges["io.load"] and "io.load" not in edges["io.s3"]
    assert edges["errors"] == set()


def test_no_module_is_over_the_line_limit():
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


def test_the_package_proper_never_imports_the_test_helpers():
    edges = graph()
    assert "testing.harness" in edges["testing.testbeds"]  # the check sees these imports
    offenders = {
        name: sorted(t for t in targets if t.split(".")[0] == "testing")
        for name, targets in edges.items()
        if name.split(".")[0] != "testing"
    }
    offenders = {name: targets for name, targets in offenders.items() if targets}
    assert offenders == {}, f"production modules importing loadgen_analysis.testing: {offenders}"


#: The longest a production function may be without a reason on its ``def`` line (a
#: ``# noqa: PLR0915`` comment saying why); ruff's PLR0915 holds the statement count.
MAX_FUNCTION_LINES = 80


def test_no_production_function_is_over_the_line_limit_without_a_reason():
    long = []
    for name, path in modules().items():
        if name.split(".")[0] == "testing":
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and "noqa: PLR0915" not in lines[node.lineno - 1]:
                long.append(f"{name}.{node.name}: {length} lines")
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines (name their stages): {long}"
