"""What `pip install ./` brings and what the extras add (issue 61): the command-line tool
without Jupyter or Apache Otava (the install took ~5 minutes and ~1 GB on 2 cores with them),
a history command without Otava saying which extra to install, and the example server the docs
start shipped in the package. The installed wheel itself: test_notebook_install.py."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_the_command_line_tool_needs_neither_jupyter_nor_otava() -> None:
    project = PYPROJECT["project"]
    core = _names(project["dependencies"])
    assert not core & {"jupyter", "apache-otava", "papermill", "ipykernel", "grpcio"}, core
    extras = project["optional-dependencies"]
    assert "jupyter" in _names(extras["notebooks"]) and "papermill" in _names(extras["notebooks"])
    assert _names(extras["history"]) == {"apache-otava"}
    assert {"grpcio", "grpcio-tools"} <= _names(extras["examples"])
    # The tests install every extra, from the one lock.
    assert any(r.startswith("loadgen-analysis[notebooks,history,examples]") for r in extras["dev"])
    lock = (REPO / "analysis" / "requirements.lock").read_text()
    for pinned in ("apache-otava==", "jupyter==", "grpcio-tools=="):
        assert f"\n{pinned}" in lock, pinned


def test_a_history_command_without_otava_names_the_extra(tmp_path: Path) -> None:
    """Otava blocked from import, as after `pip install ./`: one sentence, exit 2."""
    code = (
        "import sys; sys.modules['otava'] = None; sys.modules['otava.analysis'] = None\n"
        "from loadgen_analysis.cli import main\n"
        f"sys.exit(main(['history', 'check', '--store', {str(REPO / 'data/history/steady')!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install './[history]'" in done.stderr and "Traceback" not in done.stderr
    # Everything else of the tool runs without it.
    code = code.replace(
        f"['history', 'check', '--store', {str(REPO / 'data/history/steady')!r}]",
        f"['summary', {str(REPO / 'data/runs/overview')!r}]",
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_docs_example_server_is_in_the_package_they_install() -> None:
    """docs/scenarios.md starts `python -m loadgen_analysis.examples.grpc_greeter`: it is in
    the wheel (packages.find), not the tests' helpers left out of it."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    assert not any(e.startswith("loadgen_analysis.examples") for e in find["exclude"])
    pages = [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    blocks = [b for p in pages for b in re.findall(r"```sh[^\n]*\n(.*?)```", p.read_text(), re.S)]
    started = {m for b in blocks for m in re.findall(r"python3? -m (loadgen_analysis[\w.]*)", b)}
    assert "loadgen_analysis.examples.grpc_greeter" in started, started
    assert not {m for m in started if m.startswith("loadgen_analysis.testing")}, started
