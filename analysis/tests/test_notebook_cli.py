"""``loadgen-analyze notebook``: the package's notebooks against any run, from any directory
(issue 30; from a pip install: test_notebook_install.py). Notebook 04 once threw
``ValueError: not enough values to unpack`` given two single runs; it now takes two runs or two
folders of repeats and says which it got."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen_analysis import notebook

from .conftest import notebook_outputs

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def _run(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadgen_analysis.cli", "notebook", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _outputs(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join(
        "".join(out.get("text", "")) for cell in cells for out in cell.get("outputs", [])
    )


@pytest.mark.parametrize(
    ("base", "cand", "said"),
    [
        ("baseline-5ms/r1", "candidate-8ms/r1", "comparing single runs"),
        ("baseline-5ms", "candidate-8ms", "comparing repeated runs"),
    ],
)
def test_notebook_04_takes_two_runs_or_two_folders_and_says_which(
    tmp_path: Path, base: str, cand: str, said: str
) -> None:
    regression = DATA / "regression"
    proc = _run(tmp_path, "04", regression / base, regression / cand, "-o", "out.ipynb")
    assert proc.returncode == 0, proc.stderr
    text = _outputs(tmp_path / "out.ipynb")
    assert said in text, text
    assert "FAIL" in text  # 5 ms → 8 ms is a regression either way


def test_notebook_01_says_how_to_get_the_servers_side_when_the_run_has_none(
    tmp_path: Path,
) -> None:
    proc = _run(tmp_path, "run-overview", DATA / "think-time", "-o", "overview.html")
    assert proc.returncode == 0, proc.stderr
    # The kernel talks over Unix sockets in the scratch folder, so ipykernel has no TCP
    # warning to print (issue 49), and nothing is left in the working directory.
    assert "without encryption" not in proc.stdout + proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["overview.html"]
    page = (tmp_path / "overview.html").read_text()
    assert "think-time" in page and "<img" in page
    printed = notebook_outputs(page)
    assert "This run has no server metrics: record it with --server-metrics URL" in printed
    assert "No node_cpu_seconds_total" not in printed and "No saturation gauges" not in printed


def test_a_notebook_is_found_by_name_or_number_and_refuses_the_wrong_run_count() -> None:
    assert notebook.find("1").name == notebook.find("01-run-overview.ipynb").name
    assert notebook.find("littles-law").name == "02-littles-law"
    with pytest.raises(ValueError, match="the notebooks are"):
        notebook.find("05")
    with pytest.raises(
        ValueError, match=r"takes 2–3 runs \(baseline candidate \[history_store\]\)"
    ):
        notebook.parameters(notebook.find("04"), ["a"])
    with pytest.raises(ValueError, match=r"takes 1–2 runs \(sweep_dir \[capacity_dir\]\), not 3"):
        notebook.parameters(notebook.find("02"), ["a", "b", "c"])
    assert notebook.parameters(notebook.find("02"), ["s"]) == {
        "sweep_dir": str(Path("s").resolve())
    }


def test_an_unknown_notebook_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = _run(tmp_path, "no-such", DATA / "overview")
    assert proc.returncode == 2
    assert proc.stderr.startswith("loadgen-analyze: error: no notebook"), proc.stderr
