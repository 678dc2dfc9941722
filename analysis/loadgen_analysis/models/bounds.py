"""Operational-law bounds: the capacity model of a fixed number of servers.

A closed system with no think time obeys X(N) ≤ min(N / R(1), X_max) (Denning & Buzen, *The
Operational Analysis of Queueing Network Models*, 1978; Lazowska et al., *Quantitative System
Performance*, ch. 5): below the knee every worker adds one worker's rate 1/R(1); above it the
bottleneck's capacity X_max caps throughput and the extra workers only queue. The knee is at
N* = R(1) · X_max. This is the shape of a server with a fixed pool (8 workers × 10 ms = 800/s),
where the USL, a smooth curve for contention and coherency, overshoots the corner and bends
down where the data is flat.

Responsible for fitting the two parameters to a sweep (least squares on X), the fit's quality,
and choosing between this model and the USL by that quality. Not responsible for what the fit
means for a run (see :mod:`loadgen_analysis.verdict`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .usl import USLFit


@dataclass(frozen=True)
class BoundsFit:
    """X(N) = min(λ·N, X_max) fitted to a sweep, λ = 1 / R(1) (req/s per worker)."""

    lam: float
    x_max: float
    r_squared: float
    rmse: float
    points: int
    #: Observed minus fitted X at each point, in the order given (req/s).
    residuals: tuple[float, ...] = ()
    #: Points on the flat part (N above the knee); 0 when every level was still on the rising
    #: line, and X_max is only the largest rate seen (a lower bound of the capacity).
    plateau_points: int = 0

    name = "bounds"

    @property
    def r1_ms(self) -> float:
        """Latency of one worker alone, R(1) = 1/λ, in ms."""
        return 1e3 / self.lam

    @property
    def n_max(self) -> float:
        """The knee N* = R(1) · X_max: the concurrency at which the bottleneck saturates."""
        return self.x_max / self.lam

    def throughput(self, n: float | np.ndarray) -> float | np.ndarray:
        x = np.minimum(self.lam * np.asarray(n, dtype=float), self.x_max)
        return float(x) if x.ndim == 0 else x

    def latency_s(self, n: float | np.ndarray) -> float | np.ndarray:
        """R(N) = N / X(N): flat at R(1) below the knee, N / X_max above it."""
        n_arr = np.asarray(n, dtype=float)
        r = n_arr / np.asarray(self.throughput(n_arr))
        return float(r) if np.ndim(r) == 0 else r

    def label(self) -> str:
        return (
            f"bounds min(N/R(1), X_max) (R(1)={self.r1_ms:.3g} ms, X_max={self.x_max:,.0f}/s, "
            f"R²={self.r_squared:.3f})"
        )

    def as_dict(self) -> dict[str, float | str | list[float]]:
        return {
            "name": self.name,
            "lambda": self.lam,
            "r1_ms": self.r1_ms,
            "x_max": self.x_max,
            "n_max": self.n_max,
            "r_squared": self.r_squared,
            "rmse": self.rmse,
            "points": self.points,
            "residuals": list(self.residuals),
            "plateau_points": self.plateau_points,
        }


def fit_bounds(
    connections: Sequence[float] | np.ndarray, throughput: Sequence[float] | np.ndarray
) -> BoundsFit:
    """Least-squares fit of min(λN, X_max) to (N, X) points.

    The model is linear on each side of the knee, so the fit is exact per split: for every
    split of the sorted levels into a rising part (λ by least squares through the origin) and a
    flat part (X_max their mean), the split with the smallest squared error of the whole
    min() curve wins. Needs 3 points at 2 or more levels, like the USL fit.
    """
    n = np.asarray(connections, dtype=float)
    x = np.asarray(throughput, dtype=float)
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0)
    n, x = n[keep], x[keep]
    levels = np.unique(n)
    if len(n) < 3 or len(levels) < 2:
        raise ValueError(
            f"a bounds fit needs at least 3 points at 2 or more concurrency levels, got {len(n)}"
        )
    best: tuple[float, float, float, int] | None = None
    for knee in levels:  # the last level still on the rising line
        low, high = n <= knee, n > knee
        lam = float(np.sum(x[low] * n[low]) / np.sum(n[low] ** 2))
        x_max = float(np.mean(x[high])) if high.any() else math.inf
        sse = float(np.sum((x - np.minimum(lam * n, x_max)) ** 2))
        if best is None or sse < best[0]:
            best = (sse, lam, x_max, int(high.sum()))
    assert best is not None
    sse, lam, x_max, plateau_points = best
    if not math.isfinite(x_max):  # no plateau: the line's end is the largest rate seen
        x_max = float(lam * levels.max())
    fitted = np.minimum(lam * n, x_max)
    ss_tot = float(np.sum((x - x.mean()) ** 2))
    return BoundsFit(
        lam=lam,
        x_max=x_max,
        r_squared=1.0 - sse / ss_tot if ss_tot > 0 else float("nan"),
        rmse=math.sqrt(sse / len(n)),
        points=len(n),
        residuals=tuple(float(v) for v in x - fitted),
        plateau_points=plateau_points,
    )


def better_fit(usl: USLFit | None, bounds: BoundsFit | None) -> USLFit | BoundsFit | None:
    """The model whose R² on the sweep is higher (the USL on a tie: it has the richer story).

    R² compares fairly here: both are least-squares fits of X to the same points, and the bounds
    model has fewer parameters (2 against 3), so it never wins by flexibility alone.
    """
    fits = [f for f in (usl, bounds) if f is not None and math.isfinite(f.r_squared)]
    if not fits:
        return usl or bounds
    return max(fits, key=lambda f: (f.r_squared, f is usl))
