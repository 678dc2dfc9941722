"""USL fit: the published Cisco benchmark (as usl4j's tests use it) and parameter recovery."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen_analysis.models.usl import USLFit, fit_usl, usl_throughput
from loadgen_analysis.reference import read_cisco

# The book's fitted model (Practical Scalability Analysis with the USL), as usl4j checks it.
BOOK = {"sigma": 0.02671591, "kappa": 7.690945e-4, "lambda": 995.6486, "n_max": 35, "x_max": 12341}


def test_cisco_fit_matches_the_published_model() -> None:
    cisco = read_cisco()
    assert len(cisco) == 32
    fit = fit_usl(cisco["connections"], cisco["throughput_rps"])
    # usl4j asserts 0.02 % of the book's values; hold the fit to the same.
    assert fit.sigma == pytest.approx(BOOK["sigma"], rel=2e-4)
    assert fit.kappa == pytest.approx(BOOK["kappa"], rel=2e-4)
    assert fit.lam == pytest.approx(BOOK["lambda"], rel=2e-4)
    assert fit.n_max == BOOK["n_max"]
    assert fit.x_max == pytest.approx(BOOK["x_max"], rel=2e-4)
    assert fit.is_contention_constrained and not fit.is_coherency_constrained
    assert fit.r_squared > 0.99
    assert all(math.isfinite(s) and s > 0 for s in fit.stderr)


def test_latency_follows_littles_law() -> None:
    cisco = read_cisco()
    fit = fit_usl(cisco["connections"], cisco["throughput_rps"])
    for n in (1, 20, 35):
        assert fit.latency_s(n) == pytest.approx(n / fit.throughput(n))


@pytest.mark.parametrize(
    ("lam", "sigma", "kappa"), [(100.0, 0.05, 0.002), (2000.0, 0.3, 0.0), (50.0, 0.0, 0.01)]
)
def test_fit_recovers_parameters_of_noiseless_points(
    lam: float, sigma: float, kappa: float
) -> None:
    n = np.array([1, 2, 4, 8, 16, 32, 64], dtype=float)
    fit = fit_usl(n, usl_throughput(n, lam, sigma, kappa))
    assert fit.lam == pytest.approx(lam, rel=1e-6)
    assert fit.sigma == pytest.approx(sigma, rel=1e-5, abs=1e-6)
    assert fit.kappa == pytest.approx(kappa, rel=1e-5, abs=1e-8)


def test_without_coherency_the_peak_is_far_away_at_the_asymptote() -> None:
    n = np.array([1, 2, 4, 8, 16])
    fit = fit_usl(n, usl_throughput(n, 100.0, 0.25, 0.0))
    assert fit.n_max > 1e4  # κ fits to (nearly) 0: no peak within reach
    assert fit.x_max == pytest.approx(100.0 / 0.25, rel=1e-3)


def test_kappa_zero_means_no_peak() -> None:
    fit = USLFit(100.0, 0.25, 0.0, 1.0, 0.0, (0.0, 0.0, 0.0), 5)
    assert math.isinf(fit.n_max)
    assert fit.x_max == 400.0


def test_too_few_points_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 3 points"):
        fit_usl([1, 2], [10.0, 20.0])
    with pytest.raises(ValueError, match="at least 3 points"):
        fit_usl([4, 4, 4], [10.0, 11.0, 12.0])
