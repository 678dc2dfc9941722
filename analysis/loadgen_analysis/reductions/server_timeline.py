"""The server's side of the timeline, from ``server-metrics.parquet`` (``--server-metrics``):
the target's CPU busy share between scrapes (node_exporter's ``node_cpu_seconds_total`` by
mode), in total and per core, and the service's saturation gauges (busy workers against
their limit, the queue) at each scrape.

Responsible for turning the tidy samples of :mod:`loadgen_analysis.io.server_metrics` into
series over the run's time. Not responsible for judging them (the verdict's) nor for
drawing them (:mod:`loadgen_analysis.report.server_plots`). A run scraped without these
metrics gives empty frames.
"""

from __future__ import annotations

import re

import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.server_metrics import server_metrics

#: node_exporter's CPU time counter, one series per core and mode.
CPU_SECONDS = "node_cpu_seconds_total"
#: loadgen-server's saturation gauges (the conventional names ``--server-saturation`` reads).
SATURATION_GAUGES = {
    "loadgen_server_workers_busy": "workers_busy",
    "loadgen_server_workers_limit": "workers_limit",
    "loadgen_server_queue_length": "queue_length",
}
CPU_COLUMNS = ("run", "source", "cpu", "time_s", "busy_share")
SATURATION_COLUMNS = ("run", "source", "time_s", *SATURATION_GAUGES.values())

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _label(labels: str, name: str) -> str | None:
    return dict(_LABEL.findall(labels)).get(name)


def _cpu_of_run(label: str, samples: pd.DataFrame) -> pd.DataFrame:
    """One run's busy share per source, core and interval between consecutive scrapes."""
    samples = samples.assign(
        cpu=[_label(text, "cpu") for text in samples["labels"]],
        idle=[_label(text, "mode") == "idle" for text in samples["labels"]],
    )
    per_scrape = (
        samples.assign(idle_s=samples["value"].where(samples["idle"], 0.0))
        .groupby(["source", "cpu", "time_s"], as_index=False)
        .agg(total_s=("value", "sum"), idle_s=("idle_s", "sum"))
    )
    frames = []
    for (source, cpu), core in per_scrape.groupby(["source", "cpu"], sort=False):
        core = core.sort_values("time_s")
        frames.append(
            pd.DataFrame(
                {
                    "source": source,
                    "cpu": cpu,
                    # The interval's middle: the share is the mean over it.
                    "time_s": (core["time_s"] + core["time_s"].shift()) / 2,
                    "total_s": core["total_s"].diff(),
                    "idle_s": core["idle_s"].diff(),
                }
            ).dropna()
        )
    if not frames:
        return pd.DataFrame(columns=list(CPU_COLUMNS))
    cores = pd.concat(frames, ignore_index=True)
    cores = cores[cores["total_s"] > 0]
    total = cores.groupby(["source", "time_s"], as_index=False)[["total_s", "idle_s"]].sum()
    both = pd.concat([cores, total.assign(cpu="all")], ignore_index=True)
    busy = (1 - both["idle_s"] / both["total_s"]).clip(0.0, 1.0)
    both = both.assign(run=label, busy_share=busy)
    return both[list(CPU_COLUMNS)]


def cpu_busy(runs: RunsArg) -> pd.DataFrame:
    """The target's CPU busy share (0…1) between consecutive scrapes, per run, source (the
    node_exporter URL), core (``cpu``: node_exporter's core id, or ``all`` for the whole
    host) and interval: 1 − the idle mode's share of all modes' CPU seconds, at the
    interval's middle (``time_s``, seconds from the run's start). Empty without
    ``node_cpu_seconds_total`` samples."""
    frames = [
        _cpu_of_run(run.label, server_metrics(run, CPU_SECONDS))
        for run in as_runs(runs)
        if run.server_metrics_files
    ]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(CPU_COLUMNS))
    return pd.concat(frames, ignore_index=True).sort_values(["run", "source", "cpu", "time_s"])


def saturation(runs: RunsArg) -> pd.DataFrame:
    """The service's saturation gauges at each scrape, per run and source: ``workers_busy``,
    ``workers_limit`` (NaN when the service has no limit) and ``queue_length``. Empty
    without any of them."""
    frames = []
    for run in as_runs(runs):
        if not run.server_metrics_files:
            continue
        samples = server_metrics(run)
        samples = samples[samples["metric"].isin(list(SATURATION_GAUGES))]
        if samples.empty:
            continue
        wide = samples.pivot_table(
            index=["source", "time_s"], columns="metric", values="value", aggfunc="sum"
        ).rename(columns=SATURATION_GAUGES)
        wide.columns.name = None
        frames.append(wide.reset_index().assign(run=run.label))
    if not frames:
        return pd.DataFrame(columns=list(SATURATION_COLUMNS))
    frame = pd.concat(frames, ignore_index=True)
    for column in SATURATION_GAUGES.values():
        if column not in frame:
            frame[column] = float("nan")
    return frame[list(SATURATION_COLUMNS)]
