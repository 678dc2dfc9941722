"""Welch's t quantile without SciPy (issue 61): mpmath's incomplete beta and root finder give
SciPy's ``stats.t.ppf`` at the fractional, small degrees of freedom Welch–Satterthwaite yields
from a few runs a side, and at the large ones where t meets the normal quantile."""

from __future__ import annotations

from statistics import NormalDist

import pytest
from scipy import stats

from loadgen_analysis.models.student_t import t_quantile


@pytest.mark.parametrize("dof", [1.0, 1.37, 2.0, 2.5, 3.9, 4.0, 7.25, 12.0, 30.0, 1e3, 1e6])
@pytest.mark.parametrize("p", [0.6, 0.9, 0.95, 0.975, 0.995, 0.9995])
def test_the_t_quantile_is_scipys(p: float, dof: float) -> None:
    assert t_quantile(p, dof) == pytest.approx(stats.t.ppf(p, dof), rel=1e-9)


def test_many_degrees_of_freedom_give_the_normal_quantile() -> None:
    assert t_quantile(0.975, 1e9) == pytest.approx(NormalDist().inv_cdf(0.975), rel=1e-7)


@pytest.mark.parametrize(("p", "dof"), [(0.5, 3.0), (1.0, 3.0), (0.4, 3.0), (0.95, 0.0)])
def test_outside_its_domain_it_says_so(p: float, dof: float) -> None:
    with pytest.raises(ValueError, match="0.5 < p < 1 and dof > 0"):
        t_quantile(p, dof)
