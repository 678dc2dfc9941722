"""Student's t quantile for Welch's interval (:mod:`loadgen_analysis.regression`), from mpmath.

Welch–Satterthwaite's degrees of freedom are fractional and small (one value per run), so the
quantile must be a t quantile, not a normal one. mpmath (pure Python, no dependency) has the
regularized incomplete beta function, which is the t distribution's, and a bracketing root
finder: together they give SciPy's ``stats.t.ppf`` without SciPy, which was a sixth of
``pip install ./`` for this one call (issue 61).
"""

from __future__ import annotations

import mpmath

#: The degrees of freedom the quantile is computed at, at most. Welch's are at most the runs
#: of both sides less two; past 1,000 (500 runs a side) mpmath's series converge too slowly,
#: and the quantile at 1,000 is used: at most 0.12 % wider than t's at 0.95 (1.9623 against
#: 1.9600 at infinity), never narrower.
MAX_DOF = 1000.0


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``dof`` > 0 degrees of freedom
    (:data:`MAX_DOF` at most).

    P(|T| ≤ t) = I_y(1/2, dof/2) with y = t² / (dof + t²): the y where that is 2p − 1, found
    in (0, 1) by the Illinois method, gives t = √(dof y / (1 − y))."""
    if not 0.5 < p < 1 or not dof > 0:
        raise ValueError(f"a t quantile needs 0.5 < p < 1 and dof > 0, got p={p}, dof={dof}")
    dof = min(dof, MAX_DOF)
    inside = 2.0 * p - 1.0

    def excess(y: mpmath.mpf) -> mpmath.mpf:
        return mpmath.betainc(0.5, dof / 2.0, 0, y, regularized=True) - inside

    with mpmath.workdps(30):
        y = mpmath.findroot(excess, (mpmath.mpf(0), mpmath.mpf(1)), solver="illinois")
        return float(mpmath.sqrt(dof * y / (1 - y)))
