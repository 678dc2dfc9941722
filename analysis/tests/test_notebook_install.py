"""Every notebook from a ``pip install ./`` in a fresh venv, run from a scratch directory
(issue 39): ``loadgen-analyze notebook`` of the installed package, given only the runs on its
command line, must not reach for the checkout (it once looked for ``data/runs`` beside
``site-packages``).

The venv is new and gets the package by ``pip install --no-deps ./`` of a copy of the
checkout (so nothing of the checkout's own build dirs or editable install leaks in); its
dependencies are this interpreter's, made visible by a ``.pth`` line — the equivalent of
``--system-site-packages`` for a venv, offline and in seconds. The runs: a real one recorded
with ``--server-metrics`` (notebook 01's server section), the others copies of the samples.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from loadgen_analysis import notebook

from .conftest import EvidenceRun, notebook_outputs

REPO = Path(__file__).resolve().parents[2]
#: Left out of the copy the package is built from: big, or made by builds and tests.
_NOT_COPIED_AT_TOP = {".git", ".venv", "target", "runs", "bench"}
_NOT_COPIED = {"__pycache__", "build", ".ipynb_checkpoints"}


def _ignore(directory: str, names: list[str]) -> set[str]:
    top = _NOT_COPIED_AT_TOP if Path(directory) == REPO else set()
    return {n for n in names if n in top or n in _NOT_COPIED or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with ``pip install --no-deps ./`` of a copy of the checkout."""
    root = tmp_path_factory.mktemp("install")
    source, venv = root / "source", root / "venv"
    shutil.copytree(REPO, source, ignore=_ignore, symlinks=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    ours = sysconfig.get_paths()
    (Path(site) / "_dependencies.pth").write_text(f"{ours['purelib']}\n{ours['platlib']}\n")
    install = ["install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, *install, source],
        check=True,
        timeout=300,
    )
    where = subprocess.run(
        [python, "-c", "import loadgen_analysis; print(loadgen_analysis.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=root,
    ).stdout
    assert where.startswith(site), f"the package imported is not the installed one: {where}"
    return venv


def _samples(scratch: Path, *names: str) -> list[Path]:
    """Copies of ``data/runs/NAME`` (or ``data/history/NAME`` for ``history/NAME``)."""
    copies = []
    for name in names:
        source = REPO / "data" / name if name.startswith("history/") else REPO / "data/runs" / name
        copy = scratch / "copies" / name
        shutil.copytree(source, copy)
        copies.append(copy)
    return copies


#: Each notebook: the samples it gets (None: the recorded evidence run), and what its page
#: must say — the runs it was given, and a sentence for each optional one left out.
CASES = {
    "01-run-overview": (None, ["scraped http://127.0.0.1:", "failed scrapes: 0"]),
    "02-littles-law": (["sweep-w8-10ms"], ["sweep-w8-10ms", "No capacity folder given"]),
    "03-bottleneck-attribution": (
        ["sweep-w8-10ms"],
        ["sweep-w8-10ms", "site-packages/loadgen_analysis/samples/think-time"],
    ),
    "04-regression": (
        ["regression/baseline-5ms/r1", "regression/candidate-8ms/r1", "history/step"],
        ["comparing single runs", "history:", "exit code:"],
    ),
}


def test_every_notebook_has_a_case() -> None:
    shipped = sorted(p.stem for p in (REPO / "analysis" / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    assert shipped == sorted(spec.name for spec in notebook.NOTEBOOKS) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_notebook_runs_from_a_pip_install_in_any_directory(
    name: str, venv: Path, evidence_run: EvidenceRun, tmp_path: Path
) -> None:
    samples, said = CASES[name]
    runs = _samples(tmp_path, *samples) if samples else [evidence_run.path]
    scratch = tmp_path / "elsewhere"
    scratch.mkdir()
    bin_dir = venv / "bin"
    # The kernel papermill starts is the venv's Python (the one on the PATH); nbconvert's HTML
    # templates are data files beside the dependencies, in this interpreter's share/jupyter.
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "JUPYTER_PATH": str(Path(sysconfig.get_paths()["data"]) / "share" / "jupyter"),
    }
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [bin_dir / "loadgen-analyze", "notebook", name[:2], *runs, "-o", "page.html"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (scratch / "page.html").read_text()
    printed = notebook_outputs(page)
    assert "Traceback" not in printed and "<img" in page
    missing = [text for text in said if text not in printed]
    assert not missing, f"{name}'s page lacks {missing}"
    if name == "01-run-overview":
        # The server section drew the gauges, and the CPU when node_exporter was scraped.
        assert "No saturation gauges" not in printed
        no_cpu = "No node_cpu_seconds_total among the scrapes" in printed
        assert no_cpu == bool(evidence_run.no_node_exporter), printed


def test_the_newcomers_jobs_run_from_a_pip_install_in_any_directory(
    venv: Path, tmp_path: Path
) -> None:
    """Issue 39's path from a fresh venv, outside the repository: capacity and why (explain on
    a capacity search and on one of its levels), a report with plots, a regression gate with
    JUnit for CI — the commands the docs show, on copies of the samples."""
    capacity, base, cand = _samples(
        tmp_path, "capacity-w8-10ms", "regression/baseline-5ms", "regression/candidate-8ms"
    )
    scratch = tmp_path / "elsewhere"
    scratch.mkdir()
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)

    def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
        command = [venv / "bin" / "loadgen-analyze", *map(str, args)]
        return subprocess.run(
            command, cwd=scratch, env=env, capture_output=True, text=True, timeout=300
        )

    why = cli("explain", capacity)
    assert why.returncode == 0 and why.stdout.startswith("Verdict: server (strong)"), why
    assert "not measured" not in why.stdout
    level = next(p for p in sorted(capacity.glob("level-*")) if p.is_dir())
    assert cli("explain", level).stdout.startswith("Verdict: "), level
    report = cli("report", capacity, "-o", "capacity.html", "--plots", "figures")
    assert report.returncode == 0, report.stderr
    assert (scratch / "capacity.html").is_file() and list((scratch / "figures").glob("*.svg"))
    gate = cli("compare", base, cand, "--junit", "gate.xml")
    assert gate.returncode == 1, gate.stdout + gate.stderr  # the 8 ms candidate regressed
    assert "<testsuite" in (scratch / "gate.xml").read_text()


def test_the_docs_example_server_runs_from_the_installed_package(
    venv: Path, tmp_path: Path
) -> None:
    """docs/scenarios.md's first gRPC command, from the wheel (issue 61: ModuleNotFoundError)."""
    done = subprocess.run(
        [venv / "bin" / "python", "-m", "loadgen_analysis.examples.grpc_greeter", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0 and "--proto" in done.stdout, done.stderr
