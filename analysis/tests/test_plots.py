"""Every plot function returns a Figure with data on it and leaves pyplot untouched."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

import loadgen_analysis as la
from loadgen_analysis.report import plots

from .conftest import Recorded


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


def test_timeline_leaves_out_the_sliver_after_the_last_whole_second(error_run: Recorded) -> None:
    # A 1 s run ends a few ms into its second bucket; those few requests divided by a tenth of
    # a second plotted as a drop (issue 11: the README's first command, 10.003 s of run).
    tl = la.timeline(error_run.path, by_phase=False)
    assert tl["covered_s"].iloc[-1] < 0.5, tl  # the recording does have a sliver
    fig = plots.plot_timeline(error_run.path)
    ok_line = fig.axes[0].lines[0]
    drawn_t = list(ok_line.get_xdata())
    assert drawn_t == list(tl[tl["covered_s"] >= 0.5]["t_s"] + 0.5)
    assert min(ok_line.get_ydata()) > 0.5 * max(ok_line.get_ydata())


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
