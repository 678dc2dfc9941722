"""Every plot function returns a Figure with data on it and leaves pyplot untouched."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

import loadgen_analysis as la
from loadgen_analysis.report import plots

from .conftest import Recorded

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def _has_data(fig: Figure) -> bool:
    return any(ax.lines or ax.patches or ax.collections for ax in fig.axes)


def test_every_plot_returns_a_figure(
    capacity_sweep: list[Path], error_run: Recorded, service_time_runs: dict[str, list[Path]]
) -> None:
    before = plt.get_fignums()
    sweep = la.sweep_table(capacity_sweep)
    fit = la.fit_usl(sweep["connections"], sweep["throughput_rps"])
    base, cand = service_time_runs["5ms"][0], service_time_runs["50ms"][0]
    figures = [
        plots.plot_timeline(error_run.path),
        plots.plot_timeline(capacity_sweep),
        plots.plot_percentile_spectrum(error_run.path),
        plots.plot_percentile_spectrum(cand, baseline=base),
        plots.plot_throughput_vs_n(sweep, la.calibration_from_sweep(sweep), fit),
        plots.plot_throughput_vs_n(sweep),
        plots.plot_latency_vs_n(sweep, fit),
        plots.plot_n_eff(sweep),
        plots.plot_latency_components(error_run.path),
        plots.plot_comparison(la.compare(base, cand)),
    ]
    for fig in figures:
        assert isinstance(fig, Figure)
        assert _has_data(fig)
        assert fig.axes[0].get_title()
    assert plt.get_fignums() == before  # no pyplot state: nothing to show or leak


def test_timeline_keeps_the_sliver_off_the_line_and_draws_it_as_a_marker(
    error_run: Recorded,
) -> None:
    # A 1 s run ends a few ms into its second bucket. Divided by the whole second, those few
    # requests plotted as a drop (issue 11: 10.003 s of run); left out, the requests that
    # ended there were missing (issue 30). The line keeps to buckets at least half inside the
    # run; the sliver is a hollow marker, per second of its part, at the middle of that part.
    tl = la.timeline(error_run.path, by_phase=False)
    assert tl["covered_s"].iloc[-1] < 0.5, tl  # the recording does have a sliver
    fig = plots.plot_timeline(error_run.path)
    ok_line, partial = fig.axes[0].lines[:2]
    assert list(ok_line.get_xdata()) == list(tl[tl["covered_s"] >= 0.5]["t_s"] + 0.5)
    assert min(ok_line.get_ydata()) > 0.5 * max(ok_line.get_ydata())
    last = tl.iloc[-1]
    assert partial.get_linestyle() == "None"
    assert list(partial.get_xdata()) == [last["t_s"] + last["covered_s"] / 2]
    assert list(partial.get_ydata()) == [last["ok"] / last["covered_s"]]


def test_the_capacity_search_is_drawn_from_the_sample_capacity_directory() -> None:
    """The sample of ``data/runs/capacity-w8-10ms`` (notebook 02's capacity section): both
    capacity figures have data, and the search's table has one row per level run."""
    from loadgen_analysis.report.capacity import (
        levels_frame,
        plot_capacity,
        plot_capacity_search,
        read_capacity,
    )

    before = plt.get_fignums()
    sample = Path(__file__).parents[2] / "data" / "runs" / "capacity-w8-10ms"
    capacity = read_capacity(sample)
    frame = levels_frame(capacity)
    assert len(frame) == len(capacity["levels"]) > 1
    assert frame["passed"].any()
    for fig in (plot_capacity(capacity), plot_capacity_search(capacity)):
        assert isinstance(fig, Figure)
        assert _has_data(fig)
    assert plt.get_fignums() == before


def test_the_spectrum_stops_where_the_sample_does_and_labels_plain_milliseconds() -> None:
    # Issue 30: a 352-request run's spectrum ran to 99.999 % (its maximum), and the log axis
    # read `6×10⁰`. Shown only while n·(1−q) ≥ 10; ticks like 2, 5, 10.
    run = DATA / "think-time"
    spectrum = la.percentile_spectrum(run, by_op=False)
    n = int(spectrum["responses"].iloc[0])
    assert set(spectrum[spectrum["supported"]]["percentile"]) == {
        q for q in spectrum["percentile"] if q == 0 or n * (1 - q) >= 10
    }
    fig = plots.plot_percentile_spectrum(run, by_op=False)
    (ax,) = fig.axes
    drawn = 1 - 10 ** -max(ax.lines[0].get_xdata())
    assert n * (1 - drawn) >= 10 - 1e-6
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all(label.replace(".", "").isdigit() for label in labels), labels


def test_a_capacity_search_that_ran_no_level_is_reported_not_a_keyerror(tmp_path: Path) -> None:
    """Issue 36: a search stopped before its first level (Ctrl-C in the calibration) writes a
    capacity.json with no level; the report says so instead of failing on a missing column.
    The document is the sample's with its levels taken away and the search's words for that."""
    import json

    from loadgen_analysis.report.capacity import build_capacity_report

    sample = Path(__file__).parents[2] / "data" / "runs" / "capacity-w8-10ms"
    capacity = json.loads((sample / "capacity.json").read_text())
    answer = "no level ran, because the search was interrupted (Ctrl-C or SIGTERM)"
    empty = {**capacity, "levels": [], "capacity_rps": None, "interval": None}
    empty |= {"ended": "interrupted", "converged": False, "verdict": None, "limited_by": None}
    empty |= {"first_failing_level": None, "evidence": [], "answer": answer}
    (tmp_path / "capacity.json").write_text(json.dumps(empty))
    text = build_capacity_report(tmp_path)
    assert "No level ran" in text and answer in text
