"""``loadgen-analyze report RUN --dashboard``: the live dashboard's saved page, built from a run
directory afterwards.

The page and its script are the engine's own (``loadgen/assets/dashboard.html`` and the uPlot
it inlines, shipped in this package as ``dashboard_assets``, a link to that folder): this
module only fills in the data the engine's ``--dashboard-out`` fills in — one event per second
and the final one. The final event is run.json's ``summary``, ``verdict``, ``client`` and
``thresholds`` verbatim. The seconds come from the rows: a second ends at each client-metrics
sample (``client-metrics.parquet``'s ``t_ns``, one a second from the run's start; without that
file, at each whole second from the anchor; the last second runs to the last row's end) and
counts the requests that *ended* in it, as the
live counters do. Its percentiles are the live page's: over the answered requests (a status
came back) of that second (``p*_ms``) and of the run so far (``total_p*_ms``), from the
intended send under the open model, each the ⌈q·n⌉-th smallest latency at 3 significant digits
(the live page reads HDR buckets of that precision). In flight, workers, the client's CPU and
the open model's scheduled, dropped and late sends are the client-metrics samples'.
"""

from __future__ import annotations

import html
import json
import math
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..io.engine import REPORTED_LATENCY, connect
from ..io.parquet import footer, read_frame
from ..io.run import Run

_ASSETS = files(__package__) / "dashboard_assets"
#: The uPlot version the engine vendors (its folder under loadgen/assets).
UPLOT_DIR = "uplot-1.6.32"

#: run.json's objects the final event carries, as the engine's ``--dashboard-out`` has them.
FINAL_FIELDS = ("run_id", "exit_reason", "summary", "verdict", "client", "thresholds")
_QUANTILES = (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99))


def _bounds_ns(run: Run, last_end_ns: int) -> tuple[np.ndarray, pd.DataFrame | None]:
    """Where each second ends (ns since the anchor) and the client-metrics samples there."""
    samples = None
    if len(run.client_metrics_files) == 1:
        columns = ["t_ns", "cpu_utilisation", "requests_in_flight", "workers_alive"]
        names = footer(run.client_metrics_files[0]).columns
        columns += [c for c in ("scheduled", "dropped", "late") if c in names]
        samples = read_frame(run.client_metrics_files[0], columns)
        samples = samples.sort_values("t_ns").reset_index(drop=True)
        bounds = samples["t_ns"].to_numpy(dtype=np.int64).copy()
    else:
        bounds = np.arange(1, math.ceil(last_end_ns / 1e9) + 1, dtype=np.int64) * 1_000_000_000
    if len(bounds) == 0:
        bounds = np.array([last_end_ns], dtype=np.int64)
    elif bounds[-1] < last_end_ns:  # the last rows ended after the last sample: its second
        bounds[-1] = last_end_ns  # (a sliver of its own would make a rate of a few rows)
    return bounds, samples


def _rows_by_second(run: Run) -> tuple[np.ndarray, pd.DataFrame | None, list[pd.DataFrame]]:
    """The seconds' bounds, the client-metrics samples, and per second (the index of its
    bound): requests and failures, errors by class, answered latencies at 3 significant
    digits — over all rows (warm-up included, as the live counters count them), reduced in
    DuckDB so only the per-second counts reach Python."""
    with connect(run) as con:
        con.execute(
            f"CREATE TEMP VIEW ended AS SELECT start_ns + latency_ns AS end_ns, error_class, "
            f"status, {REPORTED_LATENCY} AS latency_ns FROM records_all"
        )
        ((last_end_ns,),) = con.execute("SELECT max(end_ns) FROM ended").fetchall()
        if last_end_ns is None:
            raise ValueError(f"{run.location}: the run has no requests, so no seconds to show")
        bounds, samples = _bounds_ns(run, int(last_end_ns))
        seconds = pd.DataFrame({"second": np.arange(len(bounds)), "t_ns": bounds})
        con.register("seconds", seconds)
        con.execute(
            "CREATE TEMP VIEW timed AS SELECT s.second, e.* FROM ended e "
            "ASOF JOIN seconds s ON e.end_ns <= s.t_ns"
        )
        frames = [
            con.execute(query).df()
            for query in (
                "SELECT second, count(*) AS n, count(error_class) AS failed FROM timed "
                "GROUP BY second",
                "SELECT second, error_class, count(*) AS n FROM timed "
                "WHERE error_class IS NOT NULL GROUP BY ALL",
                "SELECT second, CASE WHEN latency_ns <= 0 THEN 0 ELSE round(latency_ns, "
                "2 - CAST(floor(log10(latency_ns)) AS INTEGER)) END AS latency_ns, "
                "count(*) AS n FROM timed WHERE status <> 0 GROUP BY ALL",
            )
        ]
    return bounds, samples, frames


def _rank_value(values: np.ndarray, counts: np.ndarray, q: float) -> float | None:
    """The ⌈q·n⌉-th smallest (at least the first) of ``values`` (sorted) weighted by counts."""
    n = int(counts.sum())
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    return float(values[int(np.searchsorted(np.cumsum(counts), rank, side="left"))])


def _percentiles(latencies: pd.DataFrame, bounds: np.ndarray) -> list[dict[str, float | None]]:
    """Per second: the window's and the run-so-far's percentiles, in ms."""
    values = np.sort(latencies["latency_ns"].unique()) if len(latencies) else np.array([])
    position = np.searchsorted(values, latencies["latency_ns"].to_numpy())
    second = latencies["second"].to_numpy()
    total = np.zeros(len(values), dtype=np.int64)
    out = []
    for s in range(len(bounds)):
        mine = second == s
        window = np.zeros(len(values), dtype=np.int64)
        np.add.at(window, position[mine], latencies["n"].to_numpy()[mine])
        total += window
        event: dict[str, float | None] = {}
        for name, q in _QUANTILES:
            for key, counts in ((name, window), (f"total_{name}", total)):
                value = _rank_value(values, counts, q)
                event[key] = None if value is None else value / 1e6
        out.append(event)
    return out


def per_second_events(run: Run) -> list[dict[str, Any]]:
    """The per-second events of ``run`` (module docs), in the keys of the live page's."""
    bounds, samples, (ends, errors, latencies) = _rows_by_second(run)
    second = ends["second"].to_numpy()
    requests = np.bincount(second, ends["n"].to_numpy(), minlength=len(bounds)).astype(np.int64)
    failed = np.bincount(second, ends["failed"].to_numpy(), minlength=len(bounds)).astype(np.int64)
    by_class = errors.pivot_table(index="second", columns="error_class", values="n", aggfunc="sum")
    by_class = by_class.reindex(range(len(bounds))).fillna(0).cumsum()
    pcts = _percentiles(latencies, bounds)
    events, before = [], 0
    for s, bound in enumerate(bounds):
        seconds = max((int(bound) - before) / 1e9, 1e-3)
        event = {
            "t_s": int(bound) / 1e9,
            "requests": int(requests[: s + 1].sum()),
            "failures": int(failed[: s + 1].sum()),
            "rps": float(requests[s]) / seconds,
            **pcts[s],
            "errors": {str(c): int(n) for c, n in by_class.iloc[s].items() if n > 0},
            **_sampled(samples, s),
        }
        events.append(event)
        before = int(bound)
    return events


def _sampled(samples: pd.DataFrame | None, s: int) -> dict[str, Any]:
    """In flight, workers, CPU and the open model's counts at the ``s``-th sample (or None)."""
    if samples is None or s >= len(samples):
        return {"in_flight": None, "workers": None, "client_cpu_percent": None}
    row = samples.iloc[s]
    cpu = row["cpu_utilisation"]
    out: dict[str, Any] = {
        "in_flight": int(row["requests_in_flight"]),
        "workers": int(row["workers_alive"]),
        "client_cpu_percent": None if pd.isna(cpu) else float(cpu) * 100.0,
    }
    if "scheduled" in samples and samples["scheduled"].sum() > 0:  # a run with a schedule
        for name in ("scheduled", "dropped", "late"):
            out[name] = int(samples[name].iloc[: s + 1].sum())
    return out


def final_event(run: Run) -> dict[str, Any]:
    """run.json's figures as the engine's final event has them, with where the run is."""
    if run.summary is None and run.shard_count:
        raise ValueError(
            f"{run.location}: no run.json summary (a sharded run's shards each have their own); "
            "give one run directory to report --dashboard"
        )
    if run.summary is None:
        raise ValueError(
            f"{run.location}: no run.json summary (the run was killed before it wrote its "
            "run.json); its rows are still read by summary and report without --dashboard"
        )
    return {"run_id": run.meta.get("run_id"), "location": run.location} | {
        name: run.meta.get(name) for name in FINAL_FIELDS[1:]
    }


def _asset(*parts: str) -> str:
    return _ASSETS.joinpath(*parts).read_text(encoding="utf-8")


def build_dashboard(run: Run, title: str | None = None) -> str:
    """The page (module docs): the engine's template with this run's data inlined, as
    ``--dashboard-out`` fills it."""
    data = {"history": per_second_events(run), "last": final_event(run)}
    url = run.config.get("url") or "its scenario's target"
    if title is None:
        settings = sorted(run.model_config.items())
        model = ", ".join(
            f"{k}={v}" for k, v in settings if k != "kind" and not isinstance(v, list | dict)
        )
        title = f"{run.model_config.get('kind', 'run')} model ({model}), against {url}"
    text = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")
    return (
        _asset("dashboard.html")
        .replace("/*UPLOT_CSS*/", _asset(UPLOT_DIR, "uPlot.min.css"))
        .replace("/*UPLOT_JS*/", _asset(UPLOT_DIR, "uPlot.iife.min.js"))
        .replace("__TITLE__", html.escape(title, quote=False))
        .replace("/*DATA*/null", text)
    )


def write_dashboard(run: Run, out: Path, title: str | None = None) -> Path:
    """Write :func:`build_dashboard` to ``out``."""
    text = build_dashboard(run, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
