"""The server's side over time (issue 35, notebook 01's server section): the target's CPU busy
share from a real node_exporter's ``node_cpu_seconds_total`` and ``loadgen-server``'s
saturation gauges, both scraped with ``--server-metrics`` during a real run; checked against
``server-metrics.parquet`` read back with pyarrow."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la
from loadgen_analysis.reductions.server_series import CPU_COLUMNS
from loadgen_analysis.testing import unavailable

from .conftest import EVIDENCE_CLIENTS, EvidenceRun

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "runs"


def _raw_samples(run: Path, metric: str) -> list[dict]:
    rows = pq.read_table(run / "server-metrics.parquet").to_pylist()
    return [r for r in rows if r["metric"] == metric]


def test_the_saturation_gauges_are_one_row_per_scrape(evidence_run: EvidenceRun) -> None:
    frame = la.server_saturation(evidence_run.path)
    assert list(frame.columns) == [
        "time_s",
        "source",
        "workers_busy",
        "workers_limit",
        "queue_length",
    ]
    scrapes = {r["t_ns"] for r in _raw_samples(evidence_run.path, "loadgen_server_workers_busy")}
    assert len(frame) == len(scrapes) >= 2
    # node_exporter, scraped beside it, has none of these gauges.
    assert frame["source"].nunique() == 1
    assert (frame["workers_limit"] == 2).all()
    # Four clients against two workers: both busy at some scrape, the rest waiting.
    assert frame["workers_busy"].max() == 2 and (frame["workers_busy"] >= 0).all()
    assert frame["queue_length"].max() >= 1
    assert (frame["workers_busy"] + frame["queue_length"] <= EVIDENCE_CLIENTS).all()


def _busy_share_by_hand(run: Path) -> dict[str, float]:
    """Per core and in total, 1 − Δidle ÷ Δ(all modes) between the first two scrapes."""
    seconds: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for row in _raw_samples(run, "node_cpu_seconds_total"):
        labels = dict(pair.split("=", 1) for pair in row["labels"].split(","))
        cpu = labels["cpu"].strip('"')
        seconds[row["t_ns"]][cpu][0] += row["value"]
        seconds[row["t_ns"]][cpu][1] += row["value"] if labels["mode"] == '"idle"' else 0.0
    first, second = (seconds[t] for t in sorted(seconds)[:2])
    deltas = {cpu: [second[cpu][i] - first[cpu][i] for i in (0, 1)] for cpu in first}
    shares = {cpu: 1 - idle / all_s for cpu, (all_s, idle) in deltas.items()}
    total_all, total_idle = (sum(d[i] for d in deltas.values()) for i in (0, 1))
    return {**shares, "total": 1 - total_idle / total_all}


def test_the_cpu_busy_share_per_core_and_in_total(evidence_run: EvidenceRun) -> None:
    if evidence_run.no_node_exporter:
        unavailable.missing("node_exporter", evidence_run.no_node_exporter)
    frame = la.server_cpu_busy(evidence_run.path)
    assert list(frame.columns) == ["from_s", "time_s", "source", "cpu", "busy_share"]
    assert frame["source"].nunique() == 1 and frame["source"].iloc[0].endswith("/metrics")
    assert frame["busy_share"].between(0, 1).all()
    assert (frame["from_s"] < frame["time_s"]).all()
    # Each interval ends at a scrape after the first: one row per core and one in total.
    expected = _busy_share_by_hand(evidence_run.path)
    first = frame[frame["time_s"] == frame["time_s"].min()]
    assert list(first["cpu"]) == [*sorted(set(expected) - {"total"}, key=int), "total"]
    assert dict(zip(first["cpu"], first["busy_share"], strict=True)) == pytest.approx(expected)
    for _, at in frame.groupby("time_s"):
        cores = at[at["cpu"] != "total"]["busy_share"]
        total = at[at["cpu"] == "total"]["busy_share"].item()
        assert cores.min() - 1e-9 <= total <= cores.max() + 1e-9


def test_a_run_without_server_metrics_gives_empty_frames_with_the_columns() -> None:
    run = SAMPLES / "think-time"
    assert not (run / "server-metrics.parquet").exists()
    assert list(la.server_cpu_busy(run).columns) == list(CPU_COLUMNS)
    assert la.server_cpu_busy(run).empty and la.server_saturation(run).empty
    assert "workers_busy" in la.server_saturation(run).columns
