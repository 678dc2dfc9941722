"""Server evidence read back (issue 35): ``server-metrics.parquet`` of real runs against
``loadgen-server`` (its saturation gauges scraped with ``--server-metrics``) as the tidy
frame :func:`loadgen_analysis.server_metrics` returns, a sharded run's samples merged on one
time base, failed scrapes apart; and ``--trace``: the trace ids ``explain`` and ``report``
list are the rows' own."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la
from loadgen_analysis.reductions.traces import traced_requests
from loadgen_analysis.report.html import build_report
from loadgen_analysis.testing import harness

from .conftest import Binaries, run_cli


@pytest.fixture(scope="module")
def evidence_runs(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A traced run scraping the server and a dead endpoint; two shards scraping the server."""
    root = tmp_path_factory.mktemp("evidence")
    with harness.Server(
        ("--workers", "2", "--service-time", "5ms", "--error-rate", "0.05"),
        binary=binaries.server,
    ) as server:
        url = server.url + "/"
        scrape = ("--server-metrics", server.url + "/metrics")
        dead = ("--server-metrics", "http://127.0.0.1:9/metrics")
        single = ("-c", "4", "-d", "1500ms", "--trace", *scrape, *dead)
        harness.run_together(url, [(root / "single", single)], binary=binaries.loadgen)
        start = ("--start-at", str(harness.start_at_ms(1.0)))
        shards = [
            (root / "sharded" / f"shard-{i}", ("-c", "4", "-d", "1500ms", "--shard", f"{i}/2"))
            for i in range(2)
        ]
        harness.run_together(
            url, [(out, (*args, *start, *scrape)) for out, args in shards], binary=binaries.loadgen
        )
    return {"single": root / "single", "sharded": root / "sharded"}


def test_the_samples_are_a_tidy_frame_with_the_servers_gauges(
    evidence_runs: dict[str, Path],
) -> None:
    frame = la.server_metrics(evidence_runs["single"])
    assert list(frame.columns) == ["time_s", "source", "metric", "labels", "value"]
    busy = la.server_metrics(evidence_runs["single"], metric="loadgen_server_workers_busy")
    # Four workers against two: the server's two are busy at some scrape, never more.
    assert busy["value"].max() == 2.0
    limit = la.server_metrics(evidence_runs["single"], metric="loadgen_server_workers_limit")
    assert set(limit["value"]) == {2.0}
    requests = frame[frame["metric"] == "loadgen_server_requests_total"]
    assert (requests["labels"].str.contains('route="', regex=False)).all()
    assert frame["time_s"].is_monotonic_increasing and frame["time_s"].min() >= 0
    assert frame["time_s"].max() <= 3.0


def test_failed_scrapes_are_apart_and_counted(evidence_runs: dict[str, Path]) -> None:
    failures = la.scrape_failures(evidence_runs["single"])
    assert list(failures.columns) == ["time_s", "source", "error", "scrape_s"]
    assert set(failures["source"]) == {"http://127.0.0.1:9/metrics"}
    assert len(failures) >= 2 and failures["error"].str.startswith("connect").all()
    samples = la.server_metrics(evidence_runs["single"])
    assert "http://127.0.0.1:9/metrics" not in set(samples["source"])
    warnings = json.loads((evidence_runs["single"] / "run.json").read_text())["warnings"]
    assert any(f"{len(failures)} of {len(failures)} scrapes" in w for w in warnings), warnings


def test_a_sharded_runs_samples_are_merged_on_one_time_base(
    evidence_runs: dict[str, Path],
) -> None:
    run = la.load_run(evidence_runs["sharded"])
    assert len(run.server_metrics_files) == 2
    frame = la.server_metrics(run)
    assert set(frame["shard"]) == {0, 1}
    # Both shards started at one --start-at: their first scrapes are within a second.
    first = frame.groupby("shard")["time_s"].min()
    assert first.max() - first.min() < 1.0
    per_file = sum(
        pq.read_table(f).filter(pq.read_table(f).column("error").is_null()).num_rows
        for f in run.server_metrics_files
    )
    assert len(frame) == per_file


def test_explain_and_report_list_the_rows_trace_ids(evidence_runs: dict[str, Path]) -> None:
    single = evidence_runs["single"]
    rows = pq.read_table(single / "requests", columns=["trace_id", "error", "latency_ns"])
    ids = set(rows.column("trace_id").to_pylist())
    assert None not in ids and len(ids) == rows.num_rows
    table = traced_requests(single)
    assert set(table["kind"]) == {"slowest", "failed"}
    assert set(table["trace_id"]) <= ids
    slowest = table[table["kind"] == "slowest"]["latency_ms"].max()
    assert slowest == pytest.approx(max(rows.column("latency_ns").to_pylist()) / 1e6)
    assert table[table["kind"] == "failed"]["error"].notna().all()

    explained = run_cli("explain", single, "--json")
    assert explained.returncode == 0, explained.stderr
    traces = json.loads(explained.stdout)["traces"]
    assert {t["trace_id"] for t in traces} == set(table["trace_id"])
    html = build_report(single)
    assert all(trace_id in html for trace_id in table["trace_id"])
    # Without --trace: nothing to list.
    assert traced_requests(evidence_runs["sharded"]).empty
