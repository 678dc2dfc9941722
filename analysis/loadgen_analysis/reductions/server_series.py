"""The server's side over time, from the samples ``--server-metrics`` scraped
(:func:`loadgen_analysis.server_metrics`): the target's CPU busy share per core and in total
(node_exporter's ``node_cpu_seconds_total``) and the service's saturation gauges (busy
workers, their limit, the queue).

Responsible for turning the counters into shares between consecutive scrapes and the gauges
into one row per scrape, for the notebooks and reports to draw under the client's throughput
and latency. Not responsible for judging them (what a busy CPU says about the run is the
verdict's), nor for drawing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..io.run import Run
from ..io.server_metrics import server_metrics

#: node_exporter's CPU time counter: seconds per core (label ``cpu``) and mode (``mode``).
NODE_CPU_METRIC = "node_cpu_seconds_total"
#: The ``cpu`` of the rows over all cores together.
TOTAL_CPU = "total"
#: The frame :func:`server_cpu_busy` returns (plus ``shard`` for a sharded run).
CPU_COLUMNS = ("from_s", "time_s", "source", "cpu", "busy_share")
#: The saturation gauges ``loadgen-server`` exposes on its ``/metrics``, under the column
#: names :func:`server_saturation` gives them.
LOADGEN_SERVER_GAUGES: Mapping[str, str] = {
    "loadgen_server_workers_busy": "workers_busy",
    "loadgen_server_workers_limit": "workers_limit",
    "loadgen_server_queue_length": "queue_length",
}


def _label(labels: pd.Series, name: str) -> pd.Series:
    """The value of label ``name`` in each ``a="1",b="2"`` string (NaN where it is absent)."""
    return labels.str.extract(f'(?:^|,){name}="([^"]*)"', expand=False)


def _series_keys(frame: pd.DataFrame) -> list[str]:
    """What one series of scrapes is: an endpoint, and in a sharded run the shard scraping it."""
    return ["source", "shard"] if "shard" in frame else ["source"]


def server_cpu_busy(run: Run | str | Path) -> pd.DataFrame:
    """The target's CPU busy share between consecutive scrapes of node_exporter, per core and
    over all cores: 1 − (idle seconds ÷ all seconds) of ``node_cpu_seconds_total``, the
    seconds being the counters' own (the sum of every mode), so a late scrape does not skew
    the share. ``iowait`` counts as busy, as in ``1 − rate(idle)``.

    Columns: ``from_s`` and ``time_s`` (the interval: the earlier and the later scrape,
    seconds from the run's start), ``source`` (the scraped URL), ``cpu`` (``"0"``, ``"1"``,
    … and ``"total"``) and ``busy_share`` (0–1) — plus ``shard`` for a sharded run. An
    interval over which a counter went back (node_exporter restarted) is left out. Empty
    when the run scraped no node_exporter.
    """
    samples = server_metrics(run, metric=NODE_CPU_METRIC)
    keys = _series_keys(samples)
    if samples.empty:
        return pd.DataFrame(columns=[*CPU_COLUMNS, *keys[1:]])
    samples = samples.assign(
        cpu=_label(samples["labels"], "cpu"), mode=_label(samples["labels"], "mode")
    )
    samples["idle_s"] = samples["value"].where(samples["mode"] == "idle", 0.0)
    per_scrape = (
        samples.groupby([*keys, "cpu", "time_s"])[["value", "idle_s"]]
        .sum()
        .rename(columns={"value": "all_s"})
        .reset_index()
    )
    series = per_scrape.groupby([*keys, "cpu"], sort=False)
    per_scrape["from_s"] = series["time_s"].shift()
    per_scrape[["all_s", "idle_s"]] = series[["all_s", "idle_s"]].diff()
    delta = per_scrape.dropna(subset=["from_s"])
    delta = delta[(delta["all_s"] > 0) & (delta["idle_s"] >= 0)]
    total = delta.groupby([*keys, "from_s", "time_s"], as_index=False)[["all_s", "idle_s"]].sum()
    both = pd.concat([delta, total.assign(cpu=TOTAL_CPU)], ignore_index=True)
    both["busy_share"] = (1.0 - both["idle_s"] / both["all_s"]).clip(0.0, 1.0)
    both["core"] = pd.to_numeric(both["cpu"], errors="coerce")
    both = both.sort_values([*keys, "time_s", "core"], na_position="last", kind="stable")
    return both[[*CPU_COLUMNS, *keys[1:]]].reset_index(drop=True)


def server_saturation(
    run: Run | str | Path, gauges: Mapping[str, str] = LOADGEN_SERVER_GAUGES
) -> pd.DataFrame:
    """The service's saturation gauges at each scrape, one column per gauge: by default
    ``loadgen-server``'s ``workers_busy``, ``workers_limit`` and ``queue_length``; ``gauges``
    maps another service's metric names to column names. A gauge with several label sets
    (one per pool, say) is their sum.

    Columns: ``time_s``, ``source``, then one per gauge (NaN at a scrape that did not return
    it) — plus ``shard`` for a sharded run. Empty when no scrape returned any of them.
    """
    samples = server_metrics(run)
    keys = _series_keys(samples)
    columns = ["time_s", "source", *gauges.values(), *keys[1:]]
    samples = samples[samples["metric"].isin(list(gauges))]
    if samples.empty:
        return pd.DataFrame(columns=columns)
    wide = samples.pivot_table(
        index=[*keys, "time_s"], columns="metric", values="value", aggfunc="sum"
    )
    wide = wide.rename(columns=dict(gauges)).reindex(columns=list(gauges.values()))
    wide = wide.reset_index().sort_values([*keys, "time_s"], kind="stable")
    return wide[columns].rename_axis(columns=None).reset_index(drop=True)
