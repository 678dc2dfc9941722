"""Student's t quantile for Welch's interval (:mod:`loadgen_analysis.regression`), from mpmath.

Welch–Satterthwaite's degrees of freedom are fractional and small (one value per run), so the
quantile must be a t quantile, not a normal one. mpmath (pure Python, no dependency) has the
regularized incomplete beta function, which is the t distribution's tail, and a bracketing root
finder: together they give SciPy's ``stats.t.ppf`` without SciPy, which was a sixth of
``pip install ./`` for this one call (issue 61).
"""

from __future__ import annotations

import mpmath


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``dof`` > 0 degrees of freedom.

    P(|T| > t) = I_x(dof/2, 1/2) with x = dof / (dof + t²): the x whose tail is 2(1 − p),
    found in (0, 1) by the Illinois method, gives t = √(dof (1 − x) / x)."""
    if not 0.5 < p < 1 or not dof > 0:
        raise ValueError(f"a t quantile needs 0.5 < p < 1 and dof > 0, got p={p}, dof={dof}")
    tail = 2.0 * (1.0 - p)

    def excess(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.betainc(dof / 2.0, 0.5, 0, x, regularized=True) - tail

    with mpmath.workdps(30):
        x = mpmath.findroot(excess, (mpmath.mpf("1e-300"), mpmath.mpf(1)), solver="illinois")
        return float(mpmath.sqrt(dof * (1 - x) / x))
