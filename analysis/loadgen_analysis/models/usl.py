"""The Universal Scalability Law (Gunther): fitting it to a sweep and reading its limits.

X(N) = λN / (1 + σ(N−1) + κN(N−1)), with λ the throughput of one worker alone, σ contention
(the serial fraction: queueing on a shared resource) and κ coherency (crosstalk: the cost of
keeping workers consistent, which makes throughput fall past a peak). The peak is at
N_max = ⌊√((1−σ)/κ)⌋ and X_max = X(N_max), the convention of Baron Schwartz's *Practical
Scalability Analysis with the Universal Scalability Law* and of usl4j.

Responsible for the fit (bounded nonlinear least squares, by MINUIT's MIGRAD through
``iminuit``: numpy is its only dependency, where SciPy was a sixth of the install) and the
model's predictions, not for deciding what a fit means for a run (see
:mod:`loadgen_analysis.verdict`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from iminuit import Minuit
from iminuit.cost import LeastSquares


def usl_throughput(
    n: float | np.ndarray, lam: float, sigma: float, kappa: float
) -> float | np.ndarray:
    """X(N) under the USL with parameters λ, σ, κ."""
    n = np.asarray(n, dtype=float)
    x = lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
    return float(x) if x.ndim == 0 else x


@dataclass(frozen=True)
class USLFit:
    """A fitted model with its goodness of fit."""

    lam: float
    sigma: float
    kappa: float
    #: Coefficient of determination of X over the fitted points.
    r_squared: float
    #: Root-mean-square error of X (same unit as the throughputs).
    rmse: float
    #: Standard errors of (λ, σ, κ) from the Jacobian at the optimum (NaN when singular).
    stderr: tuple[float, float, float]
    points: int
    #: Observed minus fitted X at each point, in the order given (req/s).
    residuals: tuple[float, ...] = ()

    name = "usl"

    def label(self) -> str:
        return (
            f"USL (σ={self.sigma:.3g}, κ={self.kappa:.3g}, λ={self.lam:.4g}, "
            f"R²={self.r_squared:.3f})"
        )

    @property
    def n_max(self) -> float:
        """Concurrency of peak throughput, ⌊√((1−σ)/κ)⌋; infinity when κ = 0 — and when κ is
        so small (a subnormal such as 5e-324, where an optimizer's last digits can land) that
        the quotient overflows: a peak beyond every float is no peak. 0 when σ ≥ 1."""
        if not self.kappa > 0:  # 0, negative or NaN
            return math.inf
        ratio = (1.0 - self.sigma) / self.kappa
        if math.isnan(ratio):
            return math.inf
        root = math.sqrt(max(ratio, 0.0))
        return float(math.floor(root)) if math.isfinite(root) else math.inf

    @property
    def x_max(self) -> float:
        """Throughput at N_max; without coherency (κ = 0), the asymptote λ/σ (or ∞). Computed
        as λ / (1/N + σ(1 − 1/N) + κ(N − 1)), which neither overflows nor underflows for a
        huge N_max (κ N² would)."""
        n = self.n_max
        if math.isinf(n):
            return self.lam / self.sigma if self.sigma > 0 else math.inf
        n = max(n, 1.0)
        return float(self.lam / (1.0 / n + self.sigma * (1.0 - 1.0 / n) + self.kappa * (n - 1.0)))

    def throughput(self, n: float | np.ndarray) -> float | np.ndarray:
        """Predicted X(N)."""
        return usl_throughput(n, self.lam, self.sigma, self.kappa)

    def latency_s(self, n: float | np.ndarray) -> float | np.ndarray:
        """Predicted mean latency R(N) = N / X(N) in seconds (Little's Law, closed model)."""
        n_arr = np.asarray(n, dtype=float)
        r = n_arr / np.asarray(self.throughput(n_arr))
        return float(r) if np.ndim(r) == 0 else r

    @property
    def is_contention_constrained(self) -> bool:
        return self.sigma > self.kappa

    @property
    def is_coherency_constrained(self) -> bool:
        return self.kappa > self.sigma

    def as_dict(self) -> dict[str, float | str | list[float]]:
        return {
            "name": self.name,
            "lambda": self.lam,
            "sigma": self.sigma,
            "kappa": self.kappa,
            "n_max": self.n_max,
            "x_max": self.x_max,
            "r_squared": self.r_squared,
            "rmse": self.rmse,
            "points": self.points,
            "residuals": list(self.residuals),
        }


#: The fit's precision, relative to the largest throughput (see :func:`fit_usl`).
_PRECISION = 1e-8


def fit_usl(
    connections: Sequence[float] | np.ndarray, throughput: Sequence[float] | np.ndarray
) -> USLFit:
    """Fit λ, σ, κ to (N, X) points by nonlinear least squares on X.

    Bounds: λ > 0, 0 ≤ σ ≤ 1, κ ≥ 0. Needs at least three points with N > 0 and at least two
    distinct N. Several points at the same N (repeated runs) are all used.
    """
    n = np.asarray(connections, dtype=float)
    x = np.asarray(throughput, dtype=float)
    if n.shape != x.shape:
        raise ValueError("connections and throughput must have the same length")
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0)
    n, x = n[keep], x[keep]
    if len(n) < 3 or len(np.unique(n)) < 2:
        raise ValueError(
            f"a USL fit needs at least 3 points at 2 or more concurrency levels, got {len(n)}"
        )
    if np.any(x < 0):
        raise ValueError("throughput must not be negative")

    # Start λ at the best per-worker rate seen among the smallest levels; σ, κ small.
    smallest = n <= np.min(n) * 1.0 + 1e-9
    lam0 = float(np.max(x[smallest] / n[smallest]))
    lam0 = lam0 if lam0 > 0 else 1.0
    scale = float(np.max(x)) or 1.0

    def model(n: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
        return np.asarray(usl_throughput(n, lam, sigma, kappa))

    def gradient(n: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
        return _jacobian(n, lam, sigma, kappa).T

    # MIGRAD stops when the expected decrease of the cost is a small part of one unit: residuals
    # in units of 1e-8 of the largest X make that the fit's precision, not a statistical error
    # the points do not have.
    cost = LeastSquares(n, x, scale * _PRECISION, model, grad=gradient)
    best = None
    for sigma0, kappa0 in ((0.01, 1e-4), (0.1, 1e-3), (0.5, 1e-2), (0.001, 1e-6)):
        fit = Minuit(cost, lam=lam0, sigma=sigma0, kappa=kappa0)
        fit.limits = [(1e-12, None), (0.0, 1.0), (0.0, None)]
        fit.migrad(ncall=20000)
        if best is None or fit.fval < best.fval:
            best = fit
    assert best is not None
    lam, sigma, kappa = (float(v) for v in best.values)
    fitted = usl_throughput(n, lam, sigma, kappa)
    ss_res = float(np.sum((x - fitted) ** 2))
    ss_tot = float(np.sum((x - np.mean(x)) ** 2))
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    rmse = math.sqrt(ss_res / len(n))
    stderr = _stderr(_jacobian(n, lam, sigma, kappa), ss_res, len(n))
    return USLFit(
        lam=lam,
        sigma=sigma,
        kappa=kappa,
        r_squared=r_squared,
        rmse=rmse,
        stderr=stderr,
        points=len(n),
        residuals=tuple(float(v) for v in x - fitted),
    )


def _jacobian(n: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
    """∂X/∂(λ, σ, κ) at each N: the model's own derivatives, one row per point."""
    denominator = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
    x = lam * n / denominator
    return np.column_stack(
        [n / denominator, -x * (n - 1.0) / denominator, -x * n * (n - 1.0) / denominator]
    )


def _stderr(jac: np.ndarray, ss_res: float, points: int) -> tuple[float, float, float]:
    dof = points - 3
    if dof <= 0:
        return (math.nan, math.nan, math.nan)
    try:
        cov = np.linalg.inv(jac.T @ jac) * (ss_res / dof)
    except np.linalg.LinAlgError:
        return (math.nan, math.nan, math.nan)
    diag = np.diag(cov)
    return tuple(float(math.sqrt(v)) if v >= 0 else math.nan for v in diag)  # type: ignore[return-value]
