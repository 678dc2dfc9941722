"""The course reports' Little's-Law tables (package data, reference_data/): recompute their
derived columns from their raw ones, and read the Twinder table's limit correctly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loadgen_analysis.models.littles_law import littles_law_table
from loadgen_analysis.reference import default_reference_dir, read_course_table
from loadgen_analysis.testing import unavailable
from loadgen_analysis.verdict.attribution import attribute

REFERENCE = default_reference_dir()


def test_reference_copies_match_the_shared_originals() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "reference"
    if not shared.is_dir():
        unavailable.missing(
            "shared", f"{shared} is not beside this checkout (it is on the developers' machines)"
        )
    for name in ("twinder-littles-law.csv", "skier-littles-law.csv"):
        assert (REFERENCE / name).read_bytes() == (shared / name).read_bytes(), name


@pytest.mark.parametrize("name", ["twinder", "skier"])
def test_littles_law_reproduces_the_reports_predictions(name: str) -> None:
    table = read_course_table(REFERENCE / f"{name}-littles-law.csv")
    assert table.calibration.workers == 1
    out = littles_law_table(table.sweep, table.calibration, rounding=table.rounding)
    # The predicted column, from the calibration row alone.
    np.testing.assert_array_equal(out["predicted_rps"], table.sweep["reported_predicted_rps"])
    # The observed column, from requests and wall time.
    observed = out["throughput_rps"]
    if table.observed_decimals is not None:
        observed = observed.round(table.observed_decimals)
    np.testing.assert_allclose(observed, table.sweep["reported_observed_rps"], rtol=1e-12)


def test_twinder_calibration_is_the_one_thread_row() -> None:
    cal = read_course_table(REFERENCE / "twinder-littles-law.csv").calibration
    assert cal.requests == 10_000
    assert cal.wall_s == pytest.approx(161.642)
    assert cal.r1_s == pytest.approx(0.0161414)
    assert cal.throughput_rps == pytest.approx(61.865, abs=1e-3)
    # 1 / R(1) = 61.95 req/s; the report truncated the per-thread rate to 61.
    assert cal.per_worker_rps("latency", "floor") == 61
    assert cal.per_worker_rps("throughput", "floor") == 61


def test_skier_calibration_rounds_to_68() -> None:
    cal = read_course_table(REFERENCE / "skier-littles-law.csv").calibration
    assert cal.r1_s == pytest.approx(0.0147462)  # no mean latency reported: wall / requests
    assert cal.per_worker_rps("latency", "round") == 68


def test_twinder_effective_concurrency_matches_configured() -> None:
    table = read_course_table(REFERENCE / "twinder-littles-law.csv")
    out = littles_law_table(table.sweep, table.calibration, rounding=table.rounding)
    # N_eff = X · R̄ ≈ N for every level: the client kept every thread busy.
    np.testing.assert_allclose(out["n_eff"], out["connections"], rtol=0.01)


def test_twinder_table_is_attributed_to_the_server_side_not_the_client() -> None:
    table = read_course_table(REFERENCE / "twinder-littles-law.csv")
    result = attribute(table.sweep)
    assert result.verdict in ("server", "network"), result.to_text()
    assert result.finding("client").status == "ok"
    server = result.finding("server")
    plateau = server.evidence["plateau"]
    # ~2,290 req/s from 50 threads on, while latency grows ∝ N.
    assert result.capacity_rps == pytest.approx(2290, rel=0.01)
    assert plateau["plateau_from_n"] == 50
    assert plateau["latency_slope"] == pytest.approx(1.0, abs=0.1)
    assert result.finding("client").evidence["n_eff_ratio"] == pytest.approx(1.0, abs=0.01)
