"""``loadgen run --metrics-addr``: the live endpoint read with Prometheus' own text parser
while a real run goes on, and its counts held against the rows the run recorded."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
from prometheus_client.parser import text_string_to_metric_families

from loadgen_analysis.testing import harness

from .conftest import Binaries

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "loadgen-dashboard.json"


def scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def total(samples: list, **labels: str) -> float:
    return sum(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


def test_live_metrics_parse_as_prometheus_text_and_agree_with_the_rows(
    binaries: Binaries, tmp_path: Path
):
    out = tmp_path / "run"
    with harness.Server(("--service-time", "5ms"), binary=binaries.server) as server:
        process = subprocess.Popen(
            [
                str(binaries.loadgen),
                "run",
                "--url",
                server.url + "/",
                "-c",
                "4",
                "-d",
                "4s",
                "--no-progress",
                "--metrics-addr",
                "127.0.0.1:0",
                "--out",
                str(out),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = None
            for line in process.stderr:
                match = re.search(r"http://(\S+)/metrics", line)
                if match:
                    url = f"http://{match.group(1)}/metrics"
                    break
            assert url, "loadgen did not say where its metrics are"
            time.sleep(1.0)
            first = scrape(url)
            time.sleep(1.0)
            second = scrape(url)
        finally:
            rest = process.communicate(timeout=60)[1]
    assert process.returncode == 0, rest

    requests = first["loadgen_requests"]  # the parser drops the counter's _total suffix
    ok_first = total(requests, outcome="ok", op="GET /")
    ok_second = total(second["loadgen_requests"], outcome="ok", op="GET /")
    assert 0 < ok_first < ok_second
    assert all(s.labels["shard"] == "0/1" and s.labels["run_id"] for s in requests)
    in_flight = second["loadgen_in_flight"][0].value
    assert 0 <= in_flight <= 4
    assert second["loadgen_workers"][0].value == 4
    # A run without extraction skips nothing; the family is there, one series per op.
    assert [(s.labels["op"], s.value) for s in second["loadgen_skipped"]] == [("GET /", 0)]

    # The latency histogram: cumulative buckets ending in +Inf == _count; 5 ms of service
    # time puts nothing at or below 1 ms.
    histogram = second["loadgen_request_duration_seconds"]
    buckets = [s for s in histogram if s.name.endswith("_bucket")]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts)
    assert buckets[-1].labels["le"] == "+Inf"
    count = next(s.value for s in histogram if s.name.endswith("_count"))
    assert buckets[-1].value == count
    assert next(s.value for s in buckets if s.labels["le"] == "0.001") == 0
    mean_s = next(s.value for s in histogram if s.name.endswith("_sum")) / count
    assert mean_s >= 0.005

    assert_dashboard_reads(second)

    # Live counts are a prefix of what the run recorded.
    rows = sum(pq.read_metadata(p).num_rows for p in (out / "requests").glob("*.parquet"))
    assert ok_second <= rows


def assert_dashboard_reads(families: dict[str, list]) -> None:
    """Every series the Grafana dashboard queries is one the endpoint serves, with the labels
    the query groups by: a renamed metric or label breaks the dashboard and this test."""
    labels_by_sample: dict[str, set[str]] = {}
    for samples in families.values():
        for s in samples:
            labels_by_sample.setdefault(s.name, set()).update(s.labels)
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    assert len(exprs) >= 6
    for expr in exprs:
        selectors = re.findall(r"\b(loadgen_[a-z_]+)\{([^}]*)\}", expr)
        assert selectors, expr
        grouped = {x.strip() for g in re.findall(r"by \(([^)]*)\)", expr) for x in g.split(",")}
        for name, matchers in selectors:
            assert name in labels_by_sample, f"{name} (in {expr!r}) is not served"
            matched = set(re.findall(r"([a-z_]+)\s*(?:=~|!=|=)", matchers))
            for label in grouped | matched:
                assert label in labels_by_sample[name], f"{name} has no label {label}: {expr!r}"
