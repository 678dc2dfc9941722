"""The server's panels of the timeline, under its throughput and latency: the target's CPU busy
share (the host in total, and each core thin when one run is drawn) and the service's
saturation gauges (busy workers, their limit dashed, the queue dotted). Drawn only for runs
recorded with ``--server-metrics`` whose endpoints gave those metrics; the numbers are
:mod:`loadgen_analysis.reductions.server_series`'s (the notebook's too).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..io.run import Run
from ..reductions.server_series import TOTAL_CPU, server_cpu_busy, server_saturation
from .figures import colour


@dataclass(frozen=True)
class ServerSeries:
    """What the server panels draw: CPU busy shares and saturation gauges (either may be
    empty)."""

    cpu: pd.DataFrame
    saturation: pd.DataFrame

    @property
    def panels(self) -> int:
        """How many panels they need: one per non-empty frame."""
        return int(not self.cpu.empty) + int(not self.saturation.empty)


def server_series(runs: list[Run]) -> ServerSeries:
    """The server series of ``runs`` (empty frames for runs without server metrics)."""
    scraped = [run for run in runs if run.server_metrics_files]
    if not scraped:
        empty = pd.DataFrame()
        return ServerSeries(empty, empty)
    cpu = [server_cpu_busy(run).assign(run=run.label) for run in scraped]
    gauges = [server_saturation(run).assign(run=run.label) for run in scraped]
    return ServerSeries(pd.concat(cpu, ignore_index=True), pd.concat(gauges, ignore_index=True))


def _run_colours(runs: list[Run]) -> dict[str, str]:
    return {run.label: colour(i) for i, run in enumerate(runs)}


def draw_cpu(ax, cpu: pd.DataFrame, runs: list[Run]) -> None:
    """Busy share of the host's CPU in % (thick), and of each core (thin) for one run."""
    colours = _run_colours(runs)
    single = cpu["run"].nunique() == 1
    for (run, _source, core), series in cpu.groupby(["run", "source", "cpu"], sort=False):
        shown = 100 * series["busy_share"]
        if core == TOTAL_CPU:
            label = "CPU, all cores" if single else f"{run} CPU"
            ax.plot(series["time_s"], shown, color=colours[run], marker=".", label=label)
        elif single:
            ax.plot(series["time_s"], shown, color=colours[run], alpha=0.35, linewidth=0.8)
    if single and (cpu["cpu"] != TOTAL_CPU).any():
        ax.plot([], [], color=colours[cpu["run"].iloc[0]], alpha=0.35, label="CPU, each core")
    ax.set_ylim(0, 105)
    ax.set_ylabel("target CPU busy (%)")


#: The gauges: column, line style, colour when one run is drawn, label.
_GAUGES = (
    ("workers_busy", "-", "#4c72b0", "workers busy"),
    ("workers_limit", "--", "#222222", "workers limit"),
    ("queue_length", ":", "#dd8452", "queued"),
)


def draw_saturation(ax, gauges: pd.DataFrame, runs: list[Run]) -> None:
    """Busy workers (solid), their limit (dashed) and the queue (dotted): each its own colour
    for one run, the run's colour for several."""
    colours = _run_colours(runs)
    single = gauges["run"].nunique() == 1
    for run, series in gauges.groupby("run", sort=False):
        for column, style, own, name in _GAUGES:
            if series[column].notna().any():
                ax.plot(
                    series["time_s"],
                    series[column],
                    color=own if single else colours[run],
                    linestyle=style,
                    marker="." if style == "-" else None,
                    label=name if single else f"{run} {name}",
                )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("workers and queue")
