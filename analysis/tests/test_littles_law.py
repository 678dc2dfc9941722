"""Little's Law on a real sweep against a server of known capacity (8 workers × 40 ms)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import loadgen_analysis as la
from loadgen_analysis.models.littles_law import Calibration

from .conftest import SWEEP_LEVELS, SWEEP_SERVICE_S


def test_calibration_is_the_one_worker_run(capacity_sweep: list[Path]) -> None:
    calibration = Calibration.from_run(capacity_sweep[0])
    assert calibration.workers == 1
    # One worker, back to back, against a 40 ms service time: R(1) is at least 40 ms (no upper
    # bound: on a shared, loaded machine the debug client adds whatever the scheduler adds).
    assert calibration.r1_s >= SWEEP_SERVICE_S
    assert calibration.throughput_rps == pytest.approx(1 / calibration.r1_s, rel=0.05)


def test_table_predicts_n_over_r1_and_finds_n_eff_close_to_n(capacity_sweep: list[Path]) -> None:
    table = la.littles_law_table(capacity_sweep)
    assert list(table["connections"]) == list(SWEEP_LEVELS)
    calibration = la.calibration_from_sweep(la.sweep_table(capacity_sweep))
    np.testing.assert_allclose(
        table["predicted_rps"], table["connections"] / calibration.r1_s, rtol=1e-12
    )
    # Below the 8-worker capacity, Little's Law predicts the throughput: efficiency near one.
    # R(1) is the one-worker level's, and on a loaded machine a lone worker's latency grows
    # most (its wake-ups are not overlapped), so the levels after it read up to ~1.3 there.
    below = table[table["connections"] <= 8]
    assert below["efficiency"].between(0.85, 1.5).all(), below
    # …above it, throughput stays put, so the prediction overshoots by N / 8: against the
    # levels below (R(1) cancels out), 8/16 and 8/32, signals of 2× and 4×.
    efficiency = table.set_index("connections")["efficiency"]
    below_median = below["efficiency"].median()
    assert efficiency[16] / below_median == pytest.approx(8 / 16, rel=0.2)
    assert efficiency[32] / below_median == pytest.approx(8 / 32, rel=0.2)
    # The client kept every worker busy at every level.
    assert (table["n_eff_ratio"] > 0.9).all()
    # Latency grows ∝ N past the capacity: R(32) ≈ 4 × R(8).
    r = table.set_index("connections")["mean_latency_ms"]
    assert r[32] / r[8] == pytest.approx(4.0, rel=0.15)
