"""Attribution against ground truth: a server of known capacity, a client that paces itself,
and a server that fails requests."""

from __future__ import annotations

from pathlib import Path

import pytest

import loadgen_analysis as la

from .conftest import CAPACITY_RPS, Recorded


def test_sweep_against_a_capacity_limited_server_is_server_bound(
    capacity_sweep: list[Path],
) -> None:
    result = la.attribute(capacity_sweep)
    assert result.verdict == "server", result.to_text()
    assert result.confidence == "strong"
    assert result.capacity_rps is not None
    # 8 workers × 10 ms: X_max = 800 req/s.
    assert result.capacity_rps == pytest.approx(CAPACITY_RPS, rel=0.10), result.to_text()
    assert result.finding("client").status == "ok"
    assert result.finding("errors").status == "ok"
    plateau = result.finding("server").evidence["plateau"]
    # From N = 8 (the true knee); a slow debug build can blur it to the next level.
    assert plateau["plateau_from_n"] in (8, 16)
    assert plateau["latency_slope"] == pytest.approx(1.0, abs=0.25)
    assert result.usl is not None


def test_client_with_think_time_is_client_bound(think_time_run: Recorded) -> None:
    result = la.attribute(think_time_run.path)
    assert result.verdict == "client", result.to_text()
    client = result.finding("client")
    # 10 ms of service, 30 ms of thinking: a worker is busy about a quarter of the time.
    assert client.evidence["n_eff_ratio"] == pytest.approx(0.25, abs=0.1)
    assert client.evidence["idle_share"] == pytest.approx(0.75, abs=0.1)


def test_failing_server_is_judged_by_its_errors_first(error_run: Recorded) -> None:
    result = la.attribute(error_run.path)
    assert result.verdict == "errors", result.to_text()
    errors = result.finding("errors")
    assert errors.evidence["error_rate"] == pytest.approx(0.1, abs=0.05)
    assert set(errors.evidence["classes"]) == {"http_status"}
    assert "http_status" in errors.summary


def test_link_capacity_is_compared_when_given(error_run: Recorded) -> None:
    # A link this slow is saturated by the run's own traffic.
    run = la.load_run(error_run.path)
    peak = la.timeline(run)["bytes_per_s"].max()
    result = la.attribute(run, link_capacity_bps=peak * 8 / 0.9)
    network = result.finding("network")
    assert network.status == "limit"
    assert network.evidence["link_utilisation"] == pytest.approx(0.9, rel=1e-6)
    roomy = la.attribute(run, link_capacity_bps=peak * 8 * 100).finding("network")
    assert roomy.status == "ok"


def test_attribution_serialises(capacity_sweep: list[Path]) -> None:
    data = la.attribute(capacity_sweep).as_dict()
    assert data["verdict"] == "server"
    assert [f["check"] for f in data["findings"]] == ["errors", "client", "network", "server"]
