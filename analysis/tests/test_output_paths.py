"""Regression tests for issue 36, finding 1: an output path on a run's own files destroyed
the run with exit 0 (``report rr -o rr/run.json``, ``compare … --junit
rr/requests/part-00000.parquet``; ``summary`` then said "not a readable Parquet file"). Every
output of every command is now refused before anything is written when it is a RUN or lies
inside one (symbolic links followed), or when two outputs name one path: exit 2, one line,
every file as it was. Copies of the sample runs in ``data/runs``, so a failure harms no data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadgen_analysis.cli import main

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Copies of a run, a baseline and a candidate and a capacity directory, a link to the
    run, and the working directory set to the folder holding them."""
    copies = {
        "run": DATA / "overview",
        "base": DATA / "regression" / "baseline-5ms" / "r1",
        "cand": DATA / "regression" / "baseline-5ms" / "r2",
        "cap": DATA / "capacity-w8-10ms",
    }
    paths = {name: tmp_path / name for name in copies}
    for name, source in copies.items():
        shutil.copytree(source, paths[name])
    (tmp_path / "link").symlink_to(paths["run"])
    monkeypatch.chdir(tmp_path)
    return {**paths, "tmp": tmp_path, "link": tmp_path / "link"}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("report", "{run}", "-o", "{run}/run.json"), "-o {run}/run.json is inside {run}"),
        (("report", "{run}", "-o", "{run}/requests/part-00000.parquet"), "is inside {run}"),
        (("report", "{run}", "-o", "r.html", "--plots", "{run}"), "--plots {run} is {run}"),
        (("report", "{run}", "-o", "{link}/run.json"), "is inside {run}"),
        (("report", "{run}", "-o", "{tmp}/x/../run/run.json"), "is inside {run}"),
        (("report", "{cap}", "-o", "{cap}/capacity.json"), "is inside {cap}"),
        (("report", "{tmp}", "-o", "{tmp}/index.html"), "is inside {tmp}"),
        (
            ("compare", "{base}", "{cand}", "--junit", "{cand}/requests/part-00000.parquet"),
            "--junit {cand}/requests/part-00000.parquet is inside {cand}",
        ),
        (("compare", "{base}", "{cand}", "--html", "{base}/run.json"), "is inside {base}"),
        (
            ("compare", "{base}", "{cand}", "--html", "c.xml", "--junit", "./c.xml"),
            "--html and --junit both name c.xml",
        ),
        (("report", "{run}", "-o", "f", "--plots", "{tmp}/f"), "-o and --plots both name"),
        (("notebook", "01", "{run}", "-o", "{run}/01.html"), "is inside {run}"),
    ],
)
def test_an_output_on_a_run_is_refused_before_anything_is_written(
    runs: dict[str, Path], args: tuple[str, ...], said: str, capsys: pytest.CaptureFixture
) -> None:
    before = _snapshot(runs["tmp"])
    code = main([a.format(**runs) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("loadgen-analyze: error:") and len(err.strip().splitlines()) == 1, err
    assert said.format(**runs) in err, err
    assert _snapshot(runs["tmp"]) == before


def test_the_default_notebook_output_inside_a_run_is_refused(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(runs["run"])
    before = _snapshot(runs["tmp"])
    assert main(["notebook", "01", "."]) == 2
    assert "-o 01-run-overview.html is inside ." in capsys.readouterr().err
    assert _snapshot(runs["tmp"]) == before


def test_an_output_beside_the_runs_is_written(
    runs: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    code = main(["compare", str(runs["base"]), str(runs["cand"]), "--junit", "c.xml"])
    assert code in (0, 1), capsys.readouterr().err
    assert (runs["tmp"] / "c.xml").is_file()
