"""Operational-law bounds min(N / R(1), X_max) beside the USL: the sample sweep against a fixed
pool of 8 workers × 10 ms (a hard limit, where the bounds must win) and the Cisco data set
(contention, where the USL must still win)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import loadgen_analysis as la
from loadgen_analysis.models.bounds import better_fit, fit_bounds
from loadgen_analysis.models.usl import fit_usl
from loadgen_analysis.reference import read_cisco

SAMPLE_SWEEP = Path(__file__).resolve().parents[2] / "data" / "runs" / "sweep-w8-10ms"


def test_sample_sweep_bounds_give_the_true_capacity_and_knee() -> None:
    sweep = la.run_table(la.load_runs([SAMPLE_SWEEP]))
    bounds = fit_bounds(sweep["connections"], sweep["throughput_rps"])
    usl = fit_usl(sweep["connections"], sweep["throughput_rps"])
    # True capacity 800/s, knee N = 8; the USL puts its peak at 852/s at N = 18.
    assert bounds.x_max == pytest.approx(800, rel=0.10)
    assert round(bounds.n_max) == 8
    assert bounds.r1_ms == pytest.approx(10.0, rel=0.10)
    assert bounds.r_squared > 0.99 > usl.r_squared
    assert better_fit(usl, bounds) is bounds
    assert len(bounds.residuals) == len(sweep)


def test_cisco_usl_still_wins() -> None:
    cisco = read_cisco()
    usl = fit_usl(cisco["connections"], cisco["throughput_rps"])
    bounds = fit_bounds(cisco["connections"], cisco["throughput_rps"])
    assert usl.r_squared > bounds.r_squared
    assert better_fit(usl, bounds) is usl


def test_noiseless_bounds_are_recovered_exactly() -> None:
    n = np.array([1, 2, 3, 4, 6, 8, 12, 16])
    x = np.minimum(100.0 * n, 500.0)
    fit = fit_bounds(n, x)
    assert fit.lam == pytest.approx(100.0)
    assert fit.x_max == pytest.approx(500.0)
    assert fit.n_max == pytest.approx(5.0)
    assert fit.latency_s(16) == pytest.approx(16 / 500.0)


def test_too_few_points_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 3 points"):
        fit_bounds([1, 2], [10, 20])
