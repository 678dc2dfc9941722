"""What issue 30 asked of the published outputs: ``report --plots DIR`` writes every figure of
the report as SVG and PNG, and the compare page's main table is an HTML table, not a
``<pre>`` dump; an open-model report has a section on its schedule. On the sample runs in
``data/runs``, and one open-model run recorded here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

import loadgen_analysis as la
from loadgen_analysis.testing import harness

from .conftest import run_cli

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def test_report_plots_writes_each_figure_as_svg_and_png(tmp_path: Path) -> None:
    proc = run_cli("report", DATA / "sweep-w8-10ms", "-o", tmp_path / "r.html", "--plots", tmp_path)
    assert proc.returncode == 0, proc.stderr
    images = len(re.findall(r"<img ", (tmp_path / "r.html").read_text()))
    svgs = sorted(tmp_path.glob("*.svg"))
    pngs = sorted(tmp_path.glob("*.png"))
    assert images >= 4 and len(svgs) == len(pngs) == images, (images, svgs, pngs)
    assert [p.stem for p in svgs] == [p.stem for p in pngs]
    assert all(p.read_text().lstrip().startswith("<?xml") for p in svgs)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_the_compare_page_is_an_html_table(tmp_path: Path) -> None:
    regression = DATA / "regression"
    page = tmp_path / "c.html"
    args = (regression / "baseline-5ms", regression / "candidate-8ms", "--html", page)
    proc = run_cli("compare", *args)
    assert proc.returncode == 1, proc.stderr  # 5 ms → 8 ms fails the default limits
    text = page.read_text()
    assert "<pre>" not in text
    assert "<th>CI of Δ</th>" in text
    # One marked cell per metric beyond its limit (throughput at least: -37 %).
    failed = _failed_metrics(regression)
    assert "throughput" in failed and text.count("class='status-limit'") == len(failed)


def _failed_metrics(regression: Path) -> set[str]:
    """What ``compare --json`` fails on the regression sample: a crossed limit (``fail``) or
    one it cannot tell from noise (``noisy``, which fails the gate asking for more runs). The
    p99 of three 1 s runs on a shared machine may be either; the throughput drop always fails."""
    proc = run_cli("compare", regression / "baseline-5ms", regression / "candidate-8ms", "--json")
    metrics = json.loads(proc.stdout)["metrics"]
    return {m["metric"] for m in metrics if m["verdict"] in ("fail", "noisy")}


def test_an_open_model_report_shows_offered_against_achieved(binaries, tmp_path: Path) -> None:
    with harness.Server(binary=binaries.server) as server:
        out = tmp_path / "open"
        command = [binaries.loadgen, "run", "--url", server.url + "/", "--rate", "200"]
        command += ["-d", "1s", "--no-progress", "--out", out]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    table = la.open_model_table(out)
    (row,) = table.itertuples(index=False)
    assert row.scheduled == row.sent + row.dropped
    assert 150 < row.offered_rps < 250 and row.lag_p50_ms <= row.lag_p99_ms <= row.lag_max_ms
    proc = run_cli("report", out, "-o", tmp_path / "r.html")
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text()
    assert "Open model: the schedule" in page and "send lag p99 (ms)" in page
    assert la.open_model_table(DATA / "overview").empty  # a phased run has no schedule


def test_compare_junit_has_a_case_per_judged_metric_and_fails_the_crossed_ones(
    tmp_path: Path,
) -> None:
    regression = DATA / "regression"
    junit = tmp_path / "compare.xml"
    args = (regression / "baseline-5ms", regression / "candidate-8ms", "--junit", junit)
    proc = run_cli("compare", *args)
    assert proc.returncode == 1, proc.stderr
    root = ElementTree.parse(junit).getroot()
    (suite,) = root.findall("./testsuite")
    # Named after the two folders, so two gates in one CI run are told apart.
    assert suite.get("name") == "candidate-8ms vs baseline-5ms: GET /"
    cases = suite.findall("testcase")
    # One op: throughput, p99 and error rate have limits by default; p50, p90 and p99.9 do
    # not, so they are properties (measured, not judged), not passing tests.
    assert [c.get("name") for c in cases] == ["throughput", "p99", "error rate"]
    assert int(root.get("tests")) == int(suite.get("tests")) == 3
    properties = {p.get("name"): p.get("value") for p in suite.findall("./properties/property")}
    assert set(properties) == {"p50", "p90", "p99.9"}
    assert properties["p50"].startswith("p50: baseline ") and "limit" in properties["p50"]
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == _failed_metrics(regression) and root.get("failures") == str(len(failed))
    message = next(c.find("failure").get("message") for c in cases if c.get("name") == "throughput")
    assert "limit -5%" in message, message
    # The time is the candidate runs' duration (three repeated runs), from their run.json.
    runs = la.load_runs([regression / "candidate-8ms"])
    wall_s = sum(run.summary["wall_time_ns"] for run in runs) / 1e9
    assert float(suite.get("time")) == pytest.approx(wall_s, abs=1e-3) and wall_s > 0


def test_compare_junit_name_names_the_suites(tmp_path: Path) -> None:
    regression = DATA / "regression"
    junit = tmp_path / "compare.xml"
    args = (regression / "baseline-5ms", regression / "candidate-8ms", "--junit", junit)
    proc = run_cli("compare", *args, "--max-p50-increase", "off", "--junit-name", "pr-12")
    assert proc.returncode == 1, proc.stderr
    (suite,) = ElementTree.parse(junit).getroot().findall("./testsuite")
    assert suite.get("name") == "pr-12: GET /"
    # Without --junit there are no suites to name: said, not ignored.
    proc = run_cli("compare", *args[:2], "--junit-name", "pr-12")
    assert proc.returncode == 2 and "give --junit too" in proc.stderr, proc.stderr
