"""Regression tests for issue 13: every failure of ``loadgen-analyze`` that is not a verdict
is one line on stderr and exit 2 (never a traceback, never 1, which means "limit exceeded"
for ``compare``), and the small output fixes. They use the sample runs in ``data/runs``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .conftest import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
RUN = DATA / "overview"
BASELINE = DATA / "regression" / "baseline-5ms" / "r1"
CANDIDATE = DATA / "regression" / "baseline-5ms" / "r2"


def _assert_one_line_exit_2(proc) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("loadgen-analyze: error:"), proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("report", "{run}", "-o", "/proc/r.html"),
        ("report", "{run}", "-o", "{tmp}"),
        ("report", "{run}", "-o", "{tmp}/a-file/r.html"),
        ("compare", "{base}", "{cand}", "--html", "/proc/x.html"),
        ("compare", "{base}", "{cand}", "--html", "{tmp}/a-file/x.html"),
    ],
)
def test_analyze_io_errors_are_one_line_and_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    values = {"run": RUN, "base": BASELINE, "cand": CANDIDATE, "tmp": tmp_path}
    proc = run_cli(*(a.format(**values) for a in args))
    _assert_one_line_exit_2(proc)


def test_summary_of_a_non_utf8_directory_names_the_path(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/run-\xff"))
    shutil.copytree(RUN, odd)
    proc = run_cli("summary", odd)
    if proc.returncode == 0:  # read fine: as good as it gets
        assert "GET" in proc.stdout or "POST" in proc.stdout, proc.stdout
        return
    _assert_one_line_exit_2(proc)
    assert "UTF-8" in proc.stderr, proc.stderr
    assert "not a readable Parquet" not in proc.stderr, proc.stderr


def test_compare_shows_a_dash_for_limits_not_set() -> None:
    proc = run_cli("compare", BASELINE, CANDIDATE)
    assert proc.returncode in (0, 1), proc.stderr
    assert "nan" not in proc.stdout.lower(), proc.stdout


def test_compare_help_prints_a_single_percent_sign() -> None:
    proc = run_cli("compare", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Δ%%" not in proc.stdout and "Δ%" in proc.stdout, proc.stdout


def test_compare_takes_an_increase_limit_above_100_percent() -> None:
    # Found by the docs' CI example (issue 30): the flag parsed `200%` to 2.0, which Limits
    # then refused as a bare number ("did you mean 2%?").
    proc = run_cli("compare", BASELINE, CANDIDATE, "--max-p99-increase", "200%")
    assert proc.returncode in (0, 1), proc.stderr
    assert "+200%" in proc.stdout, proc.stdout
