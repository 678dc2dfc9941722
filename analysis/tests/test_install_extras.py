"""What `pip install ./` brings and what the extras add (issue 61): the command-line tool
without Jupyter or Apache Otava (the install took ~5 minutes and ~1 GB on 2 cores with them),
nor pyarrow and SciPy (a quarter and a sixth of what was left: DuckDB reads and writes the
Parquet files, iminuit fits the USL, mpmath gives Welch's t quantile); a history command
without Otava, and an s3:// URL without pyarrow, saying which extra to install; and the example
server the docs start shipped in the package. The installed wheel itself:
test_notebook_install.py."""

from __future__ import annotations

import json
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
    assert not core & {"pyarrow", "scipy"}, core
    extras = project["optional-dependencies"]
    assert "jupyter" in _names(extras["notebooks"]) and "papermill" in _names(extras["notebooks"])
    assert _names(extras["history"]) == {"apache-otava"}
    assert {"grpcio", "grpcio-tools"} <= _names(extras["examples"])
    assert _names(extras["s3"]) == {"pyarrow"}
    # The tests install every extra, from the one lock.
    assert any(
        r.startswith("loadgen-analysis[notebooks,history,examples,s3]") for r in extras["dev"]
    )
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


#: Modules the plain install has none of; the commands below must not import them.
LEFT_OUT = ("pyarrow", "scipy")


def _without(left_out: tuple[str, ...], commands: list[list[str]], cwd: Path) -> list[dict]:
    """Each command's exit code and error output in one interpreter where importing any of
    ``left_out`` fails, as after `pip install ./` (an import of it anywhere on a command's
    path makes that command fail: ``loadgen-analyze: error: unexpected ModuleNotFoundError``)."""
    code = (
        "import contextlib, io, json, sys\n"
        f"for name in {left_out!r}: sys.modules[name] = None\n"
        "from loadgen_analysis.cli import main\n"
        "done = []\n"
        f"for argv in {commands!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        exit_code = main(argv)\n"
        "    done.append({'argv': argv, 'exit': exit_code, 'stderr': err.getvalue()})\n"
        "print(json.dumps(done))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_core_commands_import_neither_pyarrow_nor_scipy(tmp_path: Path) -> None:
    """Every command of the plain install on the samples — loading and checking segments,
    the server's and the client's metrics, a sweep's USL fit, Welch's interval over repeated
    runs and the bootstrap over single ones, the exports, the history store — with pyarrow and
    SciPy made unimportable."""
    runs = REPO / "data" / "runs"
    base, cand = runs / "regression" / "baseline-5ms", runs / "regression" / "candidate-8ms"
    overview, sweep = str(runs / "overview"), str(runs / "sweep-w8-10ms")
    store = str(tmp_path / "store")
    commands = [
        ["summary", overview],
        ["explain", overview],
        ["explain", str(runs / "capacity-w8-10ms")],
        ["report", overview, "-o", "overview.html", "--plots", "figures"],
        ["report", overview, "--dashboard", "-o", "dashboard.html"],
        ["report", sweep, "-o", "sweep.html"],
        ["compare", str(base), str(cand), "--junit", "gate.xml"],
        ["compare", str(base / "r1"), str(cand / "r1")],
        ["export", overview, "--format", "csv", "-o", "rows.csv"],
        ["export", overview, "--format", "jsonl", "-o", "rows.jsonl"],
        ["export", overview, "--format", "hlog", "-o", "rows.hlog"],
        ["history", "add", str(base / "r1"), str(base / "r2"), "--store", store],
    ]
    done = _without(LEFT_OUT, commands, tmp_path)
    for result in done:
        wanted = 1 if result["argv"][0] == "compare" else 0  # the 8 ms candidate regressed
        assert result["exit"] == wanted and "error:" not in result["stderr"], result
    assert (tmp_path / "rows.csv").read_text().count("\n") > 100
    assert len(list((tmp_path / "store").glob("*.parquet"))) == 2


def test_an_s3_url_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    """s3:// is pyarrow's S3 filesystem, the [s3] extra: without it, one sentence and exit 2."""
    (done,) = _without(LEFT_OUT, [["summary", "s3://bucket/runs/first"]], tmp_path)
    assert done["exit"] == 2, done
    assert "pip install './[s3]'" in done["stderr"] and "Traceback" not in done["stderr"], done
