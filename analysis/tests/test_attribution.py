"""Attribution against ground truth: a server of known capacity, a client that paces itself,
and a server that fails requests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import loadgen_analysis as la
from loadgen_analysis.testing import harness

from .conftest import CAPACITY_SERVER, SWEEP_CAPACITY_RPS, Binaries, Recorded

OVERVIEW = Path(__file__).resolve().parents[2] / "data" / "runs" / "overview"


def test_sweep_against_a_capacity_limited_server_is_server_bound(
    capacity_sweep: list[Path],
) -> None:
    result = la.attribute(capacity_sweep)
    assert result.verdict == "server", result.to_text()
    assert result.confidence == "strong"
    assert result.capacity_rps is not None
    # 8 workers × 40 ms: X_max = 200 req/s, never more. A busy machine stretches every
    # request alike (each of the 8 takes longer than 40 ms), so what holds however busy it is
    # is the knee: N* = R(1) · X_max = the 8 workers. (The capacity within 10 % of 800 is
    # asserted on the recorded sample in test_bounds.py.)
    assert result.capacity_rps <= SWEEP_CAPACITY_RPS * 1.05, result.to_text()
    assert result.bounds is not None
    assert result.bounds.n_max == pytest.approx(8, abs=1.0), result.to_text()
    assert result.finding("client").status == "ok"
    assert result.finding("errors").status == "ok"
    plateau = result.finding("server").evidence["plateau"]
    # From N = 8 (the true knee); a slow debug build can blur it to the next level.
    assert plateau["plateau_from_n"] in (8, 16)
    assert plateau["latency_slope"] == pytest.approx(1.0, abs=0.25)
    assert result.usl is not None
    # A fixed pool of 8 workers is a hard limit: the bounds model fits it better than the USL.
    assert result.capacity_model is result.bounds, result.to_text()
    assert "bounds model fits best" in result.headline


def test_think_time_is_none_the_workload_set_the_pace(think_time_run: Recorded) -> None:
    # Issue 25: think time is the workload as configured, not the client's resources.
    result = la.attribute(think_time_run.path)
    assert result.verdict == "none", result.to_text()
    assert result.rule == "none.paced_by_workload", result.to_text()
    # 10 ms of service, 30 ms of thinking: a worker is busy about a quarter of the time, by the
    # engine's own clocks.
    assert result.numbers["busy_share"] == pytest.approx(0.25, abs=0.1)
    assert result.numbers["waiting_share"] == pytest.approx(0.75, abs=0.1)
    assert "as configured" in result.headline


def test_failing_server_is_judged_by_its_errors_first(error_run: Recorded) -> None:
    result = la.attribute(error_run.path)
    assert result.verdict == "errors", result.to_text()
    assert result.numbers["error_rate"] == pytest.approx(0.1, abs=0.05)
    assert "http_status" in result.headline and "500 ×" in result.headline


def test_link_capacity_is_compared_per_direction(binaries: Binaries, runs_root: Path) -> None:
    """The engine compares the busier direction's busiest second with the link the run knew
    (`loadgen run --link-capacity`); the two directions are never added (a link is full
    duplex). One run per capacity against the same server."""

    def run(capacity: str) -> la.Attribution:
        out = runs_root / f"link-{capacity}"
        with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
            url = server.url + "/albums/1"
            flags = ("--link-capacity", capacity, "--no-progress", "--out", str(out))
            subprocess.run(
                [str(binaries.loadgen), "run", "--url", url, "-c", "4", "-d", "2s", *flags],
                check=True,
                capture_output=True,
                timeout=60,
            )
        return la.attribute(out)

    tight = run("100kbit")
    assert tight.verdict == "network" and tight.rule == "network.link", tight.to_text()
    tx, rx = tight.numbers["tx_link_utilisation"], tight.numbers["rx_link_utilisation"]
    assert max(tx, rx) >= 0.8 and "of the 0 Mbit/s link" not in tight.headline
    roomy = run("10gbit")
    assert roomy.verdict != "network", roomy.to_text()
    assert roomy.numbers["tx_link_utilisation"] < 0.01


def test_row_bytes_are_summed_over_phases_per_second() -> None:
    # Phases (and concurrent groups) share the link: a second's bytes are all phases' together,
    # not the busiest phase's (issue 11: three groups showed a third each).
    run = la.load_run(OVERVIEW)
    by_phase = la.timeline(run, by_phase=True)
    assert by_phase.groupby("t_s")["phase"].nunique().max() > 1  # seconds shared by phases
    together = la.timeline(run, by_phase=False).set_index("t_s")
    for column in ("sent_bytes_per_s", "received_bytes_per_s"):
        summed = by_phase.groupby("t_s")[column].sum()
        assert summed.to_numpy() == pytest.approx(together[column].to_numpy())
        assert together[column].max() > by_phase[column].max() * 0.999
    totals = la.op_summary(run)[["bytes_sent", "bytes_received"]].sum()
    sent = (together["sent_bytes_per_s"] * together["covered_s"]).sum()
    assert sent == pytest.approx(totals["bytes_sent"])


def test_regression_client_check_reads_the_real_client_metrics(error_run: Recorded) -> None:
    # Issue 11: the check read `cpu_utilization`, the file has `cpu_utilisation`, and every
    # run's client CPU was "not measured". The engine's verdict reads its own sampler.
    assert la.load_run(error_run.path).has_client_metrics
    result = la.attribute(error_run.path)
    assert 0.0 < result.numbers["client_cpu_peak"] <= 1.5
    # The target is on 127.0.0.1: the server ran on the client's cores, and the note says so.
    assert any("shares these" in note for note in result.caveats), result.to_text()


def test_attribution_serialises(capacity_sweep: list[Path]) -> None:
    data = la.attribute(capacity_sweep).as_dict()
    assert data["verdict"] == "server"
    assert data["capacity_model"]["name"] == "bounds"
    assert [f["check"] for f in data["findings"]] == ["errors", "client", "network", "server"]


def test_a_ramp_of_workers_gets_a_verdict_per_stage(binaries: Binaries, runs_root: Path) -> None:
    """``--ramp``: each stage is a phase of the rows and of the workers' time, so the verdict
    judges each stage on the workers alive in it, as it does a phased run's phases."""
    out = runs_root / "ramp"
    with harness.Server(CAPACITY_SERVER, binary=binaries.server) as server:
        subprocess.run(
            [
                str(binaries.loadgen),
                *("run", "--url", server.url + "/", "--ramp", "1s:16,1s:0"),
                *("--no-progress", "--out", str(out)),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    result = la.attribute(out)
    assert [p["phase"] for p in result.phases] == ["stage1", "stage2"], result.to_text()
    assert all(p["verdict"] for p in result.phases), result.to_text()
    assert "phase stage1:" in result.to_text()
