"""The package's shape: modules import each other in one direction, down the documented
layers; no module is long, and the test helpers stay out of the production code.

Every import of the package's own modules (``from ..io.run import …``, ``from . import s3``,
``from loadgen_analysis.io import …``, also inside functions) is an arrow between modules
(``io.load``, ``reductions.summary``, …). Between top-level modules (a subpackage, or a module
directly in the package) the arrows point down :data:`LAYERS`, which docs/architecture.md
("analysis") writes out for people: an import up or sideways fails here with its file and
line, and so does a table that differs from :data:`LAYERS`. A cycle between modules fails
with the cycle named; so does a module over :data:`MAX_LINES` lines and any import of
``loadgen_analysis.testing`` from the package proper (the wheel leaves ``testing`` out).
"""

from __future__ import annotations

import ast
from pathlib import Path

import loadgen_analysis

PACKAGE = Path(loadgen_analysis.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

#: Top to bottom: a top-level module imports only modules of later rows. ``__init__`` is the
#: package's own (its public names, imported on first use).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "examples", "testing"),  # public names; the docs' servers; test helpers
    ("cli",),  # loadgen-analyze
    ("cli_history", "cli_report"),  # loadgen-analyze history's subcommands; report
    ("export", "history"),  # CSV, JSON lines, hlog; the run history store and its gate
    ("notebook", "report"),  # notebooks run headless; plots, HTML, JUnit
    ("regression",),  # baseline against candidate
    ("reference", "thresholds", "verdict"),  # published figures; thresholds; the attribution
    ("models",),  # Little's Law, USL, bounds
    ("reductions",),  # DuckDB reductions of the records; the server's timeline
    ("io",),  # runs, shards, S3, the contract
    ("errors", "jsonable", "units"),  # leaves
)

#: The longest a module may be; past it, split it by what its parts do.
MAX_LINES = 500


def module_name(path: Path) -> str:
    """``io/load.py`` → ``io.load``; a subpackage's ``__init__.py`` is the subpackage."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (the package's own ``__init__`` is ``""``)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def import_lines(name: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """Each import of a package module by module ``name`` (at ``path``): its line and the
    imported module's dotted name."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE.name:
                    found.append((node.lineno, ".".join(parts[1:])))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        parts = node.module.split(".") if node.module else []
        if node.level > 0:
            target = [*package[: len(package) - (node.level - 1)], *parts]
        elif parts[0] == PACKAGE.name:
            target = parts[1:]
        else:
            continue
        for alias in node.names:
            submodule = ".".join([*target, alias.name])
            found.append((node.lineno, submodule if submodule in known else ".".join(target)))
    return [(line, target) for line, target in found if target != name]


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports, by dotted name."""
    return {target for _, target in import_lines(name, path, known)}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) & found.keys() for name, path in found.items()}


def top_level(name: str) -> str:
    """The top-level module a module counts for: ``io.load`` → ``io``; the package's own
    ``__init__`` (dotted name ``""``) is ``__init__``."""
    return name.split(".")[0] or "__init__"


def upward_imports(
    layers: tuple[tuple[str, ...], ...], imports: dict[str, list[tuple[int, str]]]
) -> list[str]:
    """The imports (``{module: [(line, imported module), …]}``) that point up or sideways
    between top-level modules, or into one without a layer, as messages."""
    layer_of = {module: i for i, row in enumerate(layers) for module in row}
    found = []
    for name, targets in sorted(imports.items()):
        source = top_level(name)
        for line, target in targets:
            to = top_level(target)
            if to == source:
                continue
            unplaced = [m for m in (source, to) if m not in layer_of]
            if unplaced:
                found.append(f"{name}:{line} imports {target}, and {unplaced[0]} has no layer")
            elif layer_of[to] <= layer_of[source]:
                where = "sideways" if layer_of[to] == layer_of[source] else "up"
                found.append(
                    f"{name}:{line} imports {target}: {to} (layer {layer_of[to] + 1}) is {where} "
                    f"from {source} (layer {layer_of[source] + 1})"
                )
    return found


def docs_layers(markdown: str, heading: str = "### analysis") -> tuple[tuple[str, ...], ...]:
    """The layers of the ``| layer | module | …`` table under ``heading``: rows of one layer
    number make one layer; ``io/`` and ``cli.py`` are ``io`` and ``cli``."""
    lines = markdown.splitlines()
    assert heading in lines, f"docs/architecture.md has no heading {heading!r}"
    lines = lines[lines.index(heading) :]
    start = next(i for i, line in enumerate(lines) if line.startswith("| layer | module |"))
    layers: list[list[str]] = []
    for row in lines[start + 2 :]:  # past the header and the |---| line
        if not row.startswith("|"):
            break
        number, modules = (cell.strip() for cell in row.split("|")[1:3])
        if int(number) == len(layers) + 1:
            layers.append([])
        assert int(number) == len(layers), f"layer numbers out of order at {row!r}"
        for module in modules.split(","):
            layers[-1].append(module.strip().strip("`").removesuffix("/").removesuffix(".py"))
    return tuple(tuple(layer) for layer in layers)


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


def test_every_module_has_a_place_in_the_layers():
    tops = {top_level(name) for name in modules()}
    placed = {module for layer in LAYERS for module in layer}
    assert tops - placed == set(), f"modules without a place in LAYERS: {sorted(tops - placed)}"
    assert placed - tops == set(), f"LAYERS names modules that do not exist: {placed - tops}"


def test_imports_point_down_the_layers():
    found = modules()
    lines = {name: import_lines(name, path, set(found)) for name, path in found.items()}
    upward = upward_imports(LAYERS, lines)
    assert upward == [], "imports against the layers (docs/architecture.md):\n" + "\n".join(upward)


def test_the_docs_name_the_same_layers_in_the_same_order():
    assert docs_layers(DOCS.read_text()) == LAYERS, (
        "docs/architecture.md's analysis table (left) differs from LAYERS (right)"
    )


def test_an_upward_or_sideways_import_is_seen():
    layers = (("report",), ("verdict", "thresholds"), ("io",))
    imports = {
        "io.load": [(3, "errors"), (4, "verdict.findings"), (5, "io.run")],
        "thresholds": [(7, "verdict"), (8, "io.contract")],
    }
    assert upward_imports(layers, imports) == [
        "io.load:3 imports errors, and errors has no layer",
        "io.load:4 imports verdict.findings: verdict (layer 2) is up from io (layer 3)",
        "thresholds:7 imports verdict: verdict (layer 2) is sideways from thresholds (layer 2)",
    ]
    table = "### analysis\n\n| layer | module | what |\n|---|---|---|\n"
    table += "| 1 | `report/` | x |\n| 2 | `verdict/` | x |\n| 2 | `thresholds.py` | x |\n"
    table += "| 3 | `io/` | x |\n\nafter\n"
    assert docs_layers(table) == layers


def test_absolute_imports_of_the_package_are_arrows_too(tmp_path: Path):
    path = tmp_path / "load.py"
    path.write_text(
        "from loadgen_analysis.report import plots\n"
        "import loadgen_analysis.verdict.findings\n"
        "import numpy\nfrom . import run\n"
    )
    assert import_lines("io.load", path, set(modules())) == [
        (1, "report.plots"),
        (2, "verdict.findings"),
        (4, "io.run"),
    ]


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
    assert "io.server_metrics" in edges["reductions.server_series"]
    assert "reductions.server_series" in edges["report.server_plots"]


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
#: noqa comment for PLR0915 saying why); ruff's PLR0915 holds the statement count.
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
