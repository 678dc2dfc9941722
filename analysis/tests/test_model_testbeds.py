"""Testbeds of the client models beyond the closed one (issue 25): open, thread-groups, phased
and producer-buffer runs, and HTTP/2 streams beyond the server's limit, each recorded with the
real debug binaries against a server whose capacity is known (8 workers × 10 ms: at most 800
req/s) or with the client in a CPU quota, and judged by ``loadgen-analyze explain --json`` —
with the environment checked to be what it claims. The quota testbeds skip with the reason
where no cgroup can be made. Recordings: :mod:`loadgen_analysis.testing.model_testbeds`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen_analysis.testing import harness, unavailable
from loadgen_analysis.testing import model_testbeds as mt
from loadgen_analysis.testing import testbeds as tb

from .conftest import Binaries


@pytest.fixture
def bins(binaries: Binaries) -> tb.Binaries:
    return tb.Binaries(loadgen=binaries.loadgen, server=binaries.server)


@pytest.fixture
def cgroups() -> None:
    reason = harness.why_no_cpu_cgroup()
    if reason:
        unavailable.missing("cgroup", reason)


def _summary(recording: tb.Recording) -> dict:
    return json.loads((recording.path / "run.json").read_text())["summary"]


def _show(verdict: dict) -> str:
    return json.dumps(verdict, indent=1)[:4000]


def test_open_keeping_up_is_none(bins: tb.Binaries, tmp_path: Path) -> None:
    recording = mt.record_open(mt.OPEN_KEPT_UP_RPS)(bins, tmp_path / "open")
    schedule = _summary(recording)["open"]
    # The environment: 300 req/s is well inside 800; nothing was dropped.
    assert schedule["dropped"] == 0 and schedule["offered_rps"] == mt.OPEN_KEPT_UP_RPS, schedule
    verdict = tb.explain(recording)
    assert verdict["verdict"] == "none", _show(verdict)
    assert "kept up" in verdict["summary"], _show(verdict)


def test_open_above_capacity_is_server(bins: tb.Binaries, tmp_path: Path) -> None:
    recording = mt.record_open(mt.OPEN_OVER_RPS)(bins, tmp_path / "open")
    summary = _summary(recording)
    # The environment: no more than the server's capacity got through.
    assert summary["throughput_rps"] <= tb.CAPACITY_RPS * 1.05, summary
    verdict = tb.explain(recording)
    assert verdict["verdict"] == "server", _show(verdict)
    assert "fell behind the schedule" in verdict["summary"], _show(verdict)


def test_open_run_whose_sends_lag_is_client_and_its_percentiles_are_the_consoles(
    bins: tb.Binaries, tmp_path: Path, cgroups: None
) -> None:
    recording = mt.record_open_lagging(bins, tmp_path / "lagging")
    summary = _summary(recording)
    # The environment: the quota held the client back, its sends lagged their schedule.
    assert summary["open"]["late"] > 0.05 * summary["open"]["scheduled"], summary["open"]
    verdict = tb.explain(recording)
    assert verdict["verdict"] == "client", _show(verdict)
    # One latency definition: `loadgen-analyze summary` (exact, from the intended send time)
    # equals the console's run.json percentiles (HDR, 3 significant digits) within 1 %.
    command = [sys.executable, "-m", "loadgen_analysis.cli", "summary", "--json"]
    proc = subprocess.run([*command, str(recording.path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (python,) = json.loads(proc.stdout)
    (console,) = summary["ops"]
    assert python["latency_from"] == "intended send"
    for name in ("p50", "p90", "p99"):
        ours, theirs = python[f"{name}_ms"] * 1e6, console["latency"][f"{name}_ns"]
        assert ours == pytest.approx(theirs, rel=0.01), (name, ours, theirs)
        # … and the from-actual-send figure beside it is the console's uncorrected one.
        ours = python[f"{name}_from_send_ms"] * 1e6
        assert ours == pytest.approx(console["uncorrected_latency"][f"{name}_ns"], rel=0.01)


@pytest.mark.parametrize("model", ["thread-groups", "phased", "producer-buffer"])
def test_course_models_against_a_server_of_known_capacity_say_one_level_cannot_tell(
    bins: tb.Binaries, tmp_path: Path, model: str
) -> None:
    recording = mt.record_scenario(model)(bins, tmp_path / model)
    summary = _summary(recording)
    # The environment: more workers than the server's 8, and no more than its capacity.
    assert summary["workers"]["started"] > 8, summary["workers"]
    assert summary["throughput_rps"] <= tb.CAPACITY_RPS * 1.05, summary
    verdict = tb.explain(recording)
    # Issue 34: one level shows where the time goes, not that the server is at its capacity.
    assert verdict["verdict"] == "inconclusive", _show(verdict)
    assert tb.ONE_LEVEL_SAYS in verdict["summary"], _show(verdict)
    # A verdict per phase, each on the workers alive in it; the run's is the biggest phase's.
    phases = {p["phase"]: p for p in verdict["phases"]}
    assert set(phases) == {p["phase"] for p in summary["workers"]["phases"]}, _show(verdict)
    assert "the phase with the most workers alive" in verdict["summary"], _show(verdict)


def test_producer_buffer_in_a_cpu_quota_is_client(
    bins: tb.Binaries, tmp_path: Path, cgroups: None
) -> None:
    recording = mt.record_producer_buffer_in_quota(bins, tmp_path / "skiers")
    verdict = tb.explain(recording)
    assert verdict["verdict"] == "client", _show(verdict)
    assert "quota" in verdict["summary"], _show(verdict)


def test_http2_streams_beyond_the_servers_limit_wait_in_the_client(
    bins: tb.Binaries, tmp_path: Path
) -> None:
    recording = mt.record_http2_streams(bins, tmp_path / "h2")
    verdict = tb.explain(recording)
    assert verdict["verdict"] == "client", _show(verdict)
    assert "stream slot" in verdict["summary"], _show(verdict)
    assert verdict["rule"] == "client.http2_streams", _show(verdict)
    # Over HTTP/2 the send time is the wait for a stream, not the network's.
    assert not any(note.startswith("sending requests") for note in verdict["notes"])
