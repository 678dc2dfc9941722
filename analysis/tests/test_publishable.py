"""Figures, tables and explain's words fit to publish (issue 49), on the sample runs in
``data/``: capacity's p99 figure says why each failed level failed, in the engine's reasons
(capacity.json); a log axis labels every gridline it draws; history trend figures in human
units, an error-rate axis from 0, titled by what was tested, change-point labels inside the
frame; ``summary`` a table for people (``--json``/``--csv`` for scripts); report tables with
yes/no and human column names; ``explain`` labels once, points to ``loadgen-analyze
glossary`` (the glossary shipped with the package), and ``--markdown`` formats every number."""

from __future__ import annotations

import json
import re
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg

from loadgen_analysis.history import changes, store, trend
from loadgen_analysis.report.capacity import build_capacity_report, plot_capacity, short_reasons

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
CAPACITY = REPO / "data" / "runs" / "capacity-w8-10ms"
STEP = REPO / "data" / "history" / "step"


def _unlabelled_gridlines(ax) -> list[float]:
    """The y values of gridlines ``ax`` draws (in view) whose tick has no label."""
    FigureCanvasAgg(ax.figure).draw()
    low, high = ax.get_ylim()
    missing = []
    for tick in [*ax.yaxis.get_major_ticks(), *ax.yaxis.get_minor_ticks()]:
        value = tick.get_loc()
        if low <= value <= high and tick.gridline.get_visible() and not tick.label1.get_text():
            missing.append(value)
    return missing


def test_failed_capacity_levels_say_why_in_the_engines_words() -> None:
    capacity = json.loads((CAPACITY / "capacity.json").read_text())
    fig = plot_capacity(capacity)
    (ax,) = fig.axes
    labels = [" ".join(t.get_text().split()) for t in ax.texts]
    failed = [level for level in capacity["levels"] if not level["passed"]]
    assert len(labels) == len(failed) >= 1
    for level, label in zip(failed, labels, strict=True):
        assert label == short_reasons(level["reasons"]), (label, level["reasons"])
    # The sample's failed levels all grew their latency, and the label says so in the
    # words' short form, not the engine's sentence.
    assert all("latency growing" in lb for lb in labels), labels
    reasons = ["over its SLO", "latency from intended time grew 3 ms", "12 sends dropped"]
    assert short_reasons(reasons).endswith("latency growing, sends dropped"), reasons
    # A reason the words do not know is kept, to its first colon: nothing is invented.
    assert short_reasons(["a new rule: its text"]) == "a new rule"


def test_a_log_axis_labels_every_gridline_it_draws() -> None:
    capacity = json.loads((CAPACITY / "capacity.json").read_text())
    (ax,) = plot_capacity(capacity).axes
    assert _unlabelled_gridlines(ax) == []
    # A short span (the 40 ms of the issue): the minor gridlines are drawn, and labelled.
    (ax,) = plot_capacity(
        {**capacity, "levels": [lv for lv in capacity["levels"] if lv["passed"]]}
    ).axes
    FigureCanvasAgg(ax.figure).draw()
    shown = {t.label1.get_text() for t in ax.yaxis.get_minor_ticks() if t.label1.get_text()}
    assert shown and _unlabelled_gridlines(ax) == [], shown


def test_history_trend_figures_speak_units_and_stay_in_frame() -> None:
    history = store.read(str(STEP))
    ((_, rows),) = changes.series(history).items()
    for metric, label in (
        ("throughput_rps", "throughput (req/s)"),
        ("error_rate", "error rate (%)"),
    ):
        points = changes.change_points(rows, metric)
        fig = trend.plot_trend(rows, metric, points)
        (ax,) = fig.axes
        assert ax.get_ylabel() == label
        assert ax.get_ylim()[0] >= 0, ax.get_ylim()
        title = ax.get_title()
        assert "GET /" in title or "/ (closed" in title, title
        assert not re.search(r"\b[0-9a-f]{12}\b", title), title  # no hash as the title
        renderer = FigureCanvasAgg(fig).get_renderer()
        FigureCanvasAgg(fig).draw()
        frame = ax.get_window_extent(renderer)
        for text in ax.texts:
            box = text.get_window_extent(renderer)
            assert frame.y0 <= box.y0 and box.y1 <= frame.y1 + 1, text.get_text()
            assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, text.get_text()
        if metric == "throughput_rps":
            assert ax.texts, "the step's change point is labelled"


def test_summary_is_a_table_for_people_and_json_or_csv_for_scripts() -> None:
    proc = run_cli("summary", str(REPO / "data/runs/overview"))
    assert proc.returncode == 0, proc.stderr
    header, *lines = proc.stdout.splitlines()
    assert header.split()[:4] == ["op", "requests", "failed", "errors"] and "p99 ms" in header
    assert "bytes_sent" not in proc.stdout and "throughput_rps" not in proc.stdout
    assert len(header) <= 140 and len(lines) == 3
    assert re.search(r"\b\d{1,3},\d{3}\b", proc.stdout)  # thousands separated
    csv = run_cli("summary", str(REPO / "data/runs/overview"), "--csv")
    assert csv.stdout.splitlines()[0].startswith("run,op,requests,ok,failed,error_rate,")
    assert (
        len(json.loads(run_cli("summary", str(REPO / "data/runs/overview"), "--json").stdout)) == 3
    )
    both = run_cli("summary", str(REPO / "data/runs/overview"), "--csv", "--json")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_report_tables_say_yes_or_no_under_human_names() -> None:
    page = build_capacity_report(CAPACITY)
    assert "<td>yes</td>" in page and "<td>no</td>" in page
    assert "<td>True</td>" not in page and "<td>False</td>" not in page
    assert "<th>offered (req/s)</th>" in page and "<th>p99 (ms)</th>" in page
    assert "offered_rps" not in page
    assert "loadgen-analyze glossary" in page


def test_explain_labels_once_and_points_to_the_shipped_glossary() -> None:
    proc = run_cli("explain", str(CAPACITY))
    assert proc.returncode == 0, proc.stderr
    assert "note: warning:" not in proc.stdout
    assert "\n  warning: the server ran on this machine's cores" in proc.stdout
    assert proc.stdout.rstrip().endswith("terms: loadgen-analyze glossary")
    glossary = run_cli("glossary")
    assert glossary.returncode == 0
    assert glossary.stdout == (REPO / "docs" / "glossary.md").read_text()


def test_explain_markdown_formats_every_number() -> None:
    for run in (
        str(REPO / "data/runs/overview"),
        str(REPO / "data/runs/think-time"),
        str(CAPACITY),
    ):
        proc = run_cli("explain", run, "--markdown")
        assert proc.returncode == 0, proc.stderr
        rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
        raw = [row for row in rows if re.search(r"\|\s*-?\d+\.\d{4,}\s*\|", row)]
        assert not raw, raw
        assert not any(re.search(r"\|\s*\w+_(ns|share|peak)\s*\|", row) for row in rows), rows
    overview = run_cli("explain", str(REPO / "data/runs/overview"), "--markdown").stdout
    assert re.search(r"\| client cpu peak \| \d+\.\d% \|", overview), overview
    assert re.search(r"\| mean latency \| \d+\.\d\d ms \|", overview), overview
