"""Regression tests of issue 45's analysis findings: paths read literally, the history gate
judged against the series' level before its regressions, the pairwise gate that cannot tell,
history of shard sets and capacity folders, and the crashes on valid input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .conftest import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def _figures(summary_json: str) -> list[dict]:
    """A ``summary --json``'s rows without the run's label."""
    return [{k: v for k, v in row.items() if k != "run"} for row in json.loads(summary_json)]


def test_a_path_with_glob_characters_means_itself(tmp_path: Path) -> None:
    """``hc[1]`` must read hc[1], not hc1 (DuckDB reads a path as a pattern)."""
    literal, other = tmp_path / "hc[1]", tmp_path / "hc1"
    shutil.copytree(DATA / "overview", literal)
    shutil.copytree(DATA / "regression" / "candidate-8ms" / "r1", other)
    mine = run_cli("summary", literal, "--json")
    theirs = run_cli("summary", other, "--json")
    assert mine.returncode == 0 and theirs.returncode == 0, mine.stderr + theirs.stderr
    expected = run_cli("summary", DATA / "overview", "--json")
    assert _figures(mine.stdout) == _figures(expected.stdout) != _figures(theirs.stdout)
    # A history store whose folder name holds a pattern reads its own files only.
    for store, run in (("st[1]", literal), ("st1", other)):
        added = run_cli("history", "add", run, "--store", tmp_path / store)
        assert added.returncode == 0, added.stderr
    shown = run_cli("history", "show", "--store", tmp_path / "st[1]", "--json")
    assert shown.returncode == 0, shown.stderr
    own = run_cli("history", "show", "--store", tmp_path / "st1", "--json")
    assert shown.stdout != own.stdout
