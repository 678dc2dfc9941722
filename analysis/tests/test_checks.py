"""Checks and chaining as the analysis sees them: a real run of the chained albums scenario
against ``loadgen-server`` in which one check fails on every POST (so every chained GET is
skipped), read back by the package and, independently, by pyarrow."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from loadgen_analysis.io.load import load_run
from loadgen_analysis.reductions.checks import check_failures, checks_evaluated, skipped_requests
from loadgen_analysis.report.html import build_report
from loadgen_analysis.testing import harness

from .conftest import Binaries, Recorded

#: 10 startup workers × 2 iterations + 1 group of 10 × 3 iterations.
ITERATIONS = 10 * 2 + 10 * 3


@pytest.fixture(scope="module")
def failing_run(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("checks") / "run"
    with harness.Server((), binary=binaries.server) as server:
        subprocess.run(
            [
                str(binaries.loadgen),
                "run",
                "-s",
                "albums-chained",
                "--url",
                server.url + "/",
                *("--set", "model.startup.iterations=2", "--set", "model.groups=1"),
                *("--set", "model.iterations=3", "--set", 'model.delay="0s"'),
                # The image is 2000 bytes: this check fails on every POST.
                *("--set", 'requests.new_album.check=[{json="/imageSize", equals="2048"}]'),
                *("--no-progress", "--json", "--out", str(out)),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    return out


def test_failures_per_check_match_the_rows(failing_run: Path) -> None:
    table = pq.read_table(sorted((failing_run / "requests").glob("*.parquet")))
    named = table.filter(pc.is_valid(table["check"]))
    assert named.num_rows == ITERATIONS
    assert set(named["check"].to_pylist()) == {'json /imageSize == "2048"'}
    failures = check_failures(load_run(failing_run))
    failed = failures[failures["failed"] > 0]
    assert failed[["op", "check", "failed"]].values.tolist() == [
        ["POST /albums", 'json /imageSize == "2048"', ITERATIONS]
    ]
    assert failed["share"].tolist() == [1.0]
    # The checks that never ran to a failure are listed too, with 0.
    passed = set(failures.loc[failures["failed"] == 0, "check"])
    assert passed == {"extract album_id", 'header content-type ~ "json"', "json /artist present"}


def test_skipped_requests_come_from_run_json(failing_run: Path) -> None:
    skipped = skipped_requests(load_run(failing_run))
    assert skipped[["op", "skipped"]].values.tolist() == [["GET /albums/{album_id}", ITERATIONS]]
    summary = json.loads((failing_run / "run.json").read_text())["summary"]
    assert summary["skipped"] == ITERATIONS
    assert summary["errors"] == {"check": ITERATIONS}


def test_the_report_has_a_checks_section(failing_run: Path) -> None:
    page = build_report([load_run(failing_run)])
    assert "<h3>Checks</h3>" in page
    assert f"{ITERATIONS} responses failed a check" in page
    assert "Requests not sent because a value they use was not extracted" in page


def test_runs_without_checks_give_empty_frames(error_run: Recorded) -> None:
    run = load_run(error_run.path)
    assert check_failures(run).empty
    assert skipped_requests(run).empty
    assert "<h3>Checks</h3>" not in build_report([run])


def test_the_summary_command_lists_failed_checks_and_skipped(failing_run: Path) -> None:
    from .conftest import run_cli

    result = run_cli("summary", failing_run)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    failed_line = next(line for line in lines if '"2048"' in line)
    assert "POST /albums" in failed_line and f" {ITERATIONS} " in f"{failed_line} "
    assert "skipped (a value they use was not extracted)" in result.stdout


def test_checks_not_evaluated_when_every_response_is_an_error(
    binaries: Binaries, tmp_path: Path
) -> None:
    # Issue 25: every response a 500 evaluated no check; "all passed" would be a lie.
    out = tmp_path / "run"
    with harness.Server(("--error-rate", "1"), binary=binaries.server) as server:
        subprocess.run(
            [
                str(binaries.loadgen),
                *("run", "-s", "albums-chained", "--url", server.url + "/"),
                *("--set", "model.startup.iterations=1", "--set", "model.groups=1"),
                *("--set", "model.iterations=1", "--set", 'model.delay="0s"'),
                *("--no-progress", "--json", "--out", str(out)),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    run = load_run(out)
    assert checks_evaluated(run) == 0
    assert json.loads((out / "run.json").read_text())["summary"]["checks_evaluated"] == 0
    page = build_report([run])
    assert "Checks not evaluated" in page and "Every check passed" not in page
    from .conftest import run_cli

    result = run_cli("summary", out)
    assert "not evaluated: no response had an expected status" in result.stdout
