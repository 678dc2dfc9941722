"""The DuckDB reductions agree with what loadgen printed for the same run."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import loadgen_analysis as la
from loadgen_analysis.io.load import load_run
from loadgen_analysis.reductions.timeline import PHASE_PERCENTILES
from loadgen_analysis.report.html import build_report
from loadgen_analysis.testing import harness
from loadgen_analysis.thresholds import judge, parse_threshold

from .conftest import Binaries, Recorded, record

# An HDR histogram with 3 significant digits reports a value within 1/1024 of the exact one.
HDR_REL = 1e-3


def test_op_summary_matches_the_rust_summary(error_run: Recorded) -> None:
    printed = error_run.summary["summary"]
    ours = la.op_summary(error_run.path)
    assert int(ours["requests"].sum()) == printed["requests"]
    assert int(ours["failed"].sum()) == printed["failed"]
    assert int(ours["ok"].sum()) == printed["ok"]
    assert printed["failed"] > 0, "the error-rate server must have produced failures"
    errors = la.error_breakdown(error_run.path)
    assert dict(zip(errors["error"], errors["count"], strict=True)) == printed["errors"]
    assert int(ours["bytes_sent"].sum()) == printed["bytes_sent"]
    assert int(ours["bytes_received"].sum()) == printed["bytes_received"]

    for op in printed["ops"]:
        row = ours[ours["op"] == op["op"]].iloc[0]
        assert row["requests"] == op["requests"]
        assert row["failed"] == op["failed"]
        assert row["throughput_rps"] == pytest.approx(op["throughput_rps"], rel=1e-9)
        lat = op["latency"]
        assert row["responses"] == lat["count"]
        for name, key in [
            ("p50_ms", "p50_ns"),
            ("p90_ms", "p90_ns"),
            ("p99_ms", "p99_ns"),
            ("p999_ms", "p999_ns"),
            ("mean_ms", "mean_ns"),
            ("min_ms", "min_ns"),
            ("max_ms", "max_ns"),
        ]:
            assert row[name] * 1e6 == pytest.approx(lat[key], rel=HDR_REL), name


def test_run_table_wall_time_and_throughput_match(error_run: Recorded) -> None:
    printed = error_run.summary["summary"]
    table = la.run_table(error_run.path)
    row = table.iloc[0]
    assert row["wall_s"] * 1e9 == pytest.approx(printed["wall_time_ns"], abs=1)
    assert row["throughput_rps"] == pytest.approx(printed["throughput_rps"], rel=1e-9)
    assert row["ok_throughput_rps"] == pytest.approx(printed["ok_throughput_rps"], rel=1e-9)
    assert row["connections"] == 8
    assert row["workers_seen"] == 8
    # Little's Law on the client: N_eff = X · R̄ cannot exceed the workers that exist.
    assert 0 < row["n_eff"] <= 8 + 1e-9
    assert row["n_eff"] == pytest.approx(row["throughput_rps"] * row["mean_busy_ms"] / 1e3)


def test_timeline_counts_every_request_once(error_run: Recorded) -> None:
    run = la.load_run(error_run.path)
    for by_phase in (True, False):
        tl = la.timeline(run, bucket_s=0.25, by_phase=by_phase)
        assert int(tl["requests"].sum()) == run.rows
        assert int(tl["errors"].sum()) == error_run.summary["summary"]["failed"]
    tl = la.timeline(run, bucket_s=0.25, by_phase=False)
    assert (tl["p99_ms"] >= tl["p50_ms"]).all()
    assert tl["t_s"].is_monotonic_increasing
    # A 1 s run in 0.25 s buckets: 4 buckets, maybe a 5th for the last requests.
    assert 4 <= len(tl) <= 6
    with pytest.raises(ValueError, match="bucket_s"):
        la.timeline(run, bucket_s=0)


def test_a_partial_last_bucket_is_not_a_drop_in_throughput(error_run: Recorded) -> None:
    # Regression: the last second of a 1.5 s run was divided by a whole second, so the
    # report's throughput-over-time plot showed every run halving at its end.
    run = la.load_run(error_run.path)
    tl = la.timeline(run, bucket_s=0.4, by_phase=False)
    steady = error_run.summary["summary"]["throughput_rps"]
    assert tl["covered_s"].iloc[-1] < 0.4
    # Whole buckets between the first (which starts at the first request) and the last.
    assert tl["covered_s"].iloc[1:-1].to_numpy() == pytest.approx(0.4)
    assert tl["covered_s"].iloc[0] <= 0.4
    assert tl["throughput_rps"].iloc[-1] == pytest.approx(steady, rel=0.35), tl


def test_worker_gaps_are_small_without_think_time(error_run: Recorded) -> None:
    gaps = la.worker_gaps(error_run.path)
    assert sorted(gaps["worker"]) == list(range(8))
    assert int(gaps["requests"].sum()) == error_run.summary["summary"]["requests"]
    assert (gaps["gap_p50_ms"] >= 0).all()
    assert (gaps["gap_p50_ms"] < 2.0).all()  # back to back: well under a millisecond or two
    summary = la.gap_summary(error_run.path).iloc[0]
    assert summary["idle_share"] < 0.2


def test_latency_components_add_up(error_run: Recorded) -> None:
    comp = la.latency_components(error_run.path)
    # Record schema 2 splits sending (send_ms) from the wait for the first byte.
    assert comp["send_ms"].notna().all()
    total = comp["connect_ms"] + comp["send_ms"] + comp["first_byte_ms"] + comp["transfer_ms"]
    np.testing.assert_allclose(total, comp["mean_latency_ms"], rtol=1e-9)
    assert (comp["connects"] >= 1).all()  # every worker opened its connection once
    assert ((comp["ttfb_share"] > 0) & (comp["ttfb_share"] <= 1)).all()


def test_percentile_spectrum_is_monotonic_and_exact(error_run: Recorded) -> None:
    spectrum = la.percentile_spectrum(error_run.path)
    for _, curve in spectrum.groupby(["run", "op"]):
        assert curve["latency_ms"].is_monotonic_increasing
    summary = la.op_summary(error_run.path).iloc[0]
    p99 = spectrum[np.isclose(spectrum["percentile"], 0.99)]["latency_ms"].iloc[0]
    assert p99 == summary["p99_ms"]
    assert math.isclose(
        spectrum[spectrum["percentile"] == 0.0]["latency_ms"].iloc[0], summary["min_ms"]
    )


@pytest.fixture(scope="module")
def stepcounter_run(binaries: Binaries, runs_root: Path) -> Path:
    """The built-in StepCounter client, shrunk: 8 max workers (1/4/8/2), 2 iterations per
    time interval, phases one after the other."""
    out = runs_root / "stepcounter"
    with harness.Server(("--service-time", "1ms"), binary=binaries.server) as server:
        proc = subprocess.run(
            [
                str(binaries.loadgen),
                "run",
                "--scenario",
                "stepcounter",
                "--set",
                "model.max_workers=8",
                "--set",
                "model.iterations_per_step=2",
                "--url",
                server.url,
                "--no-progress",
                "--json",
                "--out",
                str(out),
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return out


def test_phase_table_reports_each_phases_workers_wall_time_and_exact_percentiles(
    stepcounter_run: Path,
) -> None:
    table = la.phase_table(stepcounter_run)
    assert list(table["phase"]) == ["warmup", "loading", "peak", "cooldown"]
    assert list(table["workers"]) == [1, 4, 8, 2]
    # workers × intervals × 2 iterations × 5 calls
    assert list(table["requests"]) == [1 * 3 * 10, 4 * 5 * 10, 8 * 11 * 10, 2 * 5 * 10]
    assert (table["failed"] == 0).all()
    # One phase after the other: each starts after the previous one's last response.
    assert (table["start_s"].iloc[1:].to_numpy() >= table["end_s"].iloc[:-1].to_numpy()).all()
    rows = pq.read_table(stepcounter_run / "requests").to_pandas()
    for _, phase in table.iterrows():
        latency = np.sort(rows.loc[rows["phase"] == phase["phase"], "latency_ns"].to_numpy())
        for name, q in PHASE_PERCENTILES:
            exact = latency[math.ceil(q * len(latency)) - 1] / 1e6
            assert phase[f"{name}_ms"] == pytest.approx(exact), (phase["phase"], name)
        starts = rows.loc[rows["phase"] == phase["phase"], "start_ns"]
        ends = starts + rows.loc[rows["phase"] == phase["phase"], "latency_ns"]
        assert phase["wall_s"] == pytest.approx((ends.max() - starts.min()) / 1e9)


def test_a_warmup_is_left_out_as_loadgen_leaves_it_out(binaries: Binaries, runs_root: Path) -> None:
    """``--warmup``: the analysis leaves out exactly the rows labelled with the contract's
    warm-up phase, and its tables, thresholds and wall time agree with loadgen's summary."""
    run = record(
        binaries,
        ("--service-time", "2ms", "--error-rate", "0.05"),
        runs_root / "warmup",
        4,
        "1500ms",
        extra=("--warmup", "500ms", "--threshold", "throughput>1/s"),
    )
    phases = pq.read_table(run.path / "requests", columns=["phase"]).column("phase").to_pylist()
    warmup, judged = phases.count("warmup"), len(phases) - phases.count("warmup")
    printed = run.summary["summary"]
    assert warmup > 0 and judged > 0
    assert printed["warmup_requests"] == warmup
    assert printed["requests"] == judged
    ours = la.op_summary(run.path)
    assert int(ours["requests"].sum()) == judged
    assert int(ours["failed"].sum()) == printed["failed"]
    table = la.run_table(run.path).iloc[0]
    assert table["wall_s"] * 1e9 == pytest.approx(printed["wall_time_ns"], abs=1)
    assert table["throughput_rps"] == pytest.approx(printed["throughput_rps"], rel=1e-9)
    (ours_judged,) = judge(load_run(run.path), [parse_threshold("throughput>1/s")])
    (loadgens,) = json.loads((run.path / "run.json").read_text())["thresholds"]
    assert ours_judged.observed == pytest.approx(loadgens["observed"], rel=1e-9)
    assert f"{warmup} warm-up requests" in build_report(run.path)
