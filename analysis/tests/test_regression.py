"""The regression gate end to end through the CLI: a slower server fails the p99 gate, the
same configuration twice passes it, bad input exits 2."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

import loadgen_analysis as la

from .conftest import Recorded, run_cli


def _rows(stdout: str) -> dict[str, dict]:
    data = json.loads(stdout)
    return {m["metric"]: m for m in data["metrics"]}


def test_5ms_vs_50ms_fails_the_p99_gate(service_time_runs: dict[str, list[Path]]) -> None:
    base, cand = service_time_runs["5ms"][0], service_time_runs["50ms"][0]
    proc = run_cli("compare", base, cand, "--max-p99-increase", "10%", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows(proc.stdout)
    assert rows["p99"]["verdict"] == "fail", rows
    # 50 ms against 5 ms of service time is +900 % on a quiet machine; a busy one inflates the
    # 5 ms runs' tail too, so what must hold is the gate's own limit being crossed.
    assert rows["p99"]["delta"] > 0.10
    # The interval excludes "no change" (that is what makes it a fail, not noise); how far
    # its low end sits above zero depends on how busy the machine was.
    assert rows["p99"]["ci_low"] > 0.0
    assert rows["throughput"]["verdict"] == "fail"  # 16 workers: X = 16 / R drops too
    # The table form says the same.
    text = run_cli("compare", base, cand)
    assert text.returncode == 1
    assert "FAIL" in text.stdout and "p99" in text.stdout


def test_same_configuration_twice_passes(service_time_runs: dict[str, list[Path]]) -> None:
    # The 50 ms runs: a busy machine's scheduling delays (a millisecond or two per request)
    # are a few per cent of 50 ms but a fifth of 5 ms, where two runs of one configuration
    # minutes apart on a loaded CI machine really differed beyond the gate's 5 % and 10 %.
    # Even at 50 ms, one run that a busy moment stalled read p99 +12 % (its interval 6-15 %):
    # that run is really slower, so the gate is held to passing a pair of the three runs that
    # no stall set apart, and to never reading noise as a throughput change.
    runs = service_time_runs["50ms"]
    passed = []
    for first, second in itertools.combinations(runs, 2):
        proc = run_cli("compare", first, second, "--json")
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        rows = _rows(proc.stdout)
        # Same server, same client: throughput within run-to-run noise of a shared machine.
        assert abs(rows["throughput"]["delta"]) < 0.15, rows["throughput"]
        assert rows["p99"]["ci_low"] < rows["p99"]["delta"] < rows["p99"]["ci_high"]
        if proc.returncode == 0:
            assert rows["p99"]["verdict"] != "fail"
            passed.append((first.name, second.name))
    assert passed, "every pair of three runs of one configuration failed the gate"


def test_repeated_runs_use_run_to_run_intervals(service_time_runs: dict[str, list[Path]]) -> None:
    base_dir = service_time_runs["5ms"][0].parent
    cand_dir = service_time_runs["50ms"][0].parent
    result = la.compare(la.load_runs([base_dir]), la.load_runs([cand_dir]))
    assert result.method.startswith("repeated runs (3 baseline, 3 candidate)")
    table = result.table.set_index("metric")
    # Throughput (16 workers / R) is averaged over whole runs: three repeats call it surely.
    assert table.loc["throughput", "verdict"] == "fail", table
    # A tail percentile from 2-second runs can be noisy on a busy machine: beyond the limit,
    # and never passed, but "noisy" rather than "fail" when one repeat had a hiccup.
    assert table.loc["p99", "delta"] > 0.3, table
    assert table.loc["p99", "verdict"] in ("fail", "noisy"), table
    proc = run_cli("compare", base_dir, cand_dir)
    assert proc.returncode == 1
    assert "repeated runs" in proc.stdout


def test_error_rate_limit_is_absolute(
    service_time_runs: dict[str, list[Path]], error_run: Recorded
) -> None:
    proc = run_cli(
        "compare", service_time_runs["5ms"][0], error_run.path, "--max-error-rate", "1%", "--json"
    )
    assert proc.returncode == 1
    rows = _rows(proc.stdout)
    assert rows["error rate"]["verdict"] == "fail"
    assert rows["error rate"]["candidate"] == pytest.approx(0.1, abs=0.05)


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "/nonexistent/base", "/nonexistent/cand"),
        ("compare", "{base}", "{base}", "--max-p99-increase", "ten percent"),
        ("compare", "{base}", "{base}", "--windows", "1"),
        ("report", "/nonexistent/run", "--out", "{tmp}/r.html"),
    ],
)
def test_bad_input_exits_2(
    args: tuple[str, ...], service_time_runs: dict[str, list[Path]], tmp_path: Path
) -> None:
    base = service_time_runs["5ms"][0]
    proc = run_cli(*(a.format(base=base, tmp=tmp_path) for a in args))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error" in proc.stderr


def test_html_comparison_report(service_time_runs: dict[str, list[Path]], tmp_path: Path) -> None:
    out = tmp_path / "gate.html"
    proc = run_cli(
        "compare", service_time_runs["5ms"][0], service_time_runs["50ms"][0], "--html", out
    )
    assert proc.returncode == 1
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 2
    assert "FAIL" in text
