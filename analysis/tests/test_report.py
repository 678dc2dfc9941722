"""`loadgen-analyze report`: one self-contained HTML file with every plot."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

from .conftest import Recorded, run_cli


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
