"""`loadgen-analyze report`: one self-contained HTML file with every plot."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

from loadgen_analysis.report.html import build_report
from loadgen_analysis.testing import harness

from .conftest import Binaries, Recorded, run_cli


def _report(out: Path, *runs: Path) -> subprocess.CompletedProcess[str]:
    # The installed console script, so the entry point is tested too.
    script = Path(sys.executable).parent / "loadgen-analyze"
    assert script.is_file(), f"{script} missing: install the package (pip install -e .)"
    return subprocess.run(
        [str(script), "report", *map(str, runs), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _assert_self_contained(text: str) -> None:
    assert "<script" not in text
    assert "<link" not in text
    for src in re.findall(r'src="([^"]*)"', text):
        assert src.startswith("data:image/png;base64,"), src[:40]


def test_report_on_a_sweep_has_every_section_and_plot(
    capacity_sweep: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "sweep.html"
    proc = _report(out, capacity_sweep[0].parent)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    _assert_self_contained(text)
    # X vs N, latency vs N, N_eff, timeline, spectrum, components.
    assert text.count("data:image/png;base64,") == 6
    for heading in (
        "Where throughput stops",
        "Summary per op",
        "Little's Law",
        "Capacity model: USL and operational-law bounds",
    ):
        assert heading in text, heading
    assert "Verdict: server" in text


def test_report_shows_the_verdict_and_checks_explain_prints(
    capacity_sweep: list[Path], tmp_path: Path
) -> None:
    # One function computes the verdict: the report's lines are explain's.
    out = tmp_path / "sweep.html"
    assert _report(out, capacity_sweep[0].parent).returncode == 0
    text = html.unescape(out.read_text())
    explained = json.loads(run_cli("explain", capacity_sweep[0].parent, "--json").stdout)
    assert f"Verdict: {explained['verdict']}" in text
    assert explained["summary"] in text
    for check in explained["checks"]:
        assert check["evidence"] in text, check["name"]


def test_report_on_one_run_has_no_sweep_sections(error_run: Recorded, tmp_path: Path) -> None:
    out = tmp_path / "one.html"
    proc = _report(out, error_run.path)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    _assert_self_contained(text)
    assert text.count("data:image/png;base64,") == 3
    assert "Capacity model" not in text
    assert "Failures" in text and "http_status" in text
    assert "Verdict: errors" in text


def test_report_lists_thresholds_and_which_were_crossed(binaries: Binaries, tmp_path: Path):
    """A real run with one threshold that holds and one no server meets (1 ns): loadgen exits
    99, and the report shows both with what the run observed."""
    out = tmp_path / "run"
    with harness.Server(("--service-time", "2ms"), binary=binaries.server) as server:
        done = subprocess.run(
            [
                str(binaries.loadgen),
                "run",
                "--url",
                server.url + "/",
                "-c",
                "2",
                "-n",
                "40",
                "--no-progress",
                "--threshold",
                "p99<1ns",
                "--threshold",
                "error_rate<=0%",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 99, done.stderr
    page = build_report(str(out))
    section = page[page.index("<h2>Thresholds</h2>") :]
    section = section[: section.index("<h2>", 5)]
    assert "1 threshold crossed" in section
    assert "<code>p99&lt;1ns</code>" in section and "CROSSED" in section
    assert "<code>error_rate&lt;=0%</code>" in section and "passed" in section
    assert "0.00 %" in section  # the observed error rate


def test_report_on_a_capacity_directory_draws_latency_against_the_offered_rate(
    binaries: Binaries, tmp_path: Path
) -> None:
    """A real two-level capacity search (a 50 req/s ceiling the server meets), reported: the
    answer, the plot with the SLO line, and the levels' table."""
    out = tmp_path / "capacity"
    with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
        subprocess.run(
            [
                str(binaries.loadgen),
                "capacity",
                "--url",
                server.url + "/",
                "--slo",
                "p99<100ms",
                "--max-rate",
                "50",
                "--level-duration",
                "1s",
                "--warmup",
                "300ms",
                "--confirm-levels",
                "1",
                "--cool-down",
                "0s",
                "--no-progress",
                "--json",
                "--out",
                str(out),
            ],
            capture_output=True,
            timeout=60,
            check=True,
        )
    done = run_cli("report", out, "-o", tmp_path / "capacity.html")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "capacity.html").read_text()
    assert "sustains at least 50 req/s with p99&lt;100ms" in page
    assert "Latency from intended send vs offered rate." in page
    # The header and a row per level: two on a quiet host (50 req/s and its confirmation),
    # more where a busy host made a level be extended or measured again (issue 59).
    levels = json.loads((out / "capacity.json").read_text())["levels"]
    assert len(levels) >= 2
    assert page.count("<tr>") == 1 + len(levels)
