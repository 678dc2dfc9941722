"""Whether a capacity fit says something about the measured range, or only extrapolates.

A fit of the USL or the bounds model to a sweep that never reached its knee still returns
numbers: three levels that all rise give a USL "knee" at N = 5.8e11 and X_max 9.1e12 req/s.
Those parameters are not identified by the data — any knee far enough beyond the last level
fits as well — so they are neither drawn nor used; the report and ``explain`` say the model is
*not identifiable* and why.

The rule, with its numbers: a fit is not identifiable when

- its knee N lies beyond :data:`MAX_KNEE_BEYOND_N` × the largest N measured (4×: a sweep up to
  16 workers may place a knee up to N = 64, not further), or
- its X_max lies beyond :data:`MAX_XMAX_BEYOND_X` × the largest throughput measured (1.5×: the
  model may say the server would give half again what was seen, not more), or
- it is the bounds model with fewer than :data:`MIN_PLATEAU_POINTS` (2) levels on its plateau
  (every level still on the rising line makes X_max only the largest rate seen, a lower bound;
  one level under the line is noise as much as a plateau), or
- either is not a finite number, or X_max not positive (the USL without coherency has no
  peak; a USL peak below one worker, N_max = 0, is a peak the first level already passed).

Responsible for that rule only; the fits are :mod:`.usl` and :mod:`.bounds`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..units import count
from .bounds import BoundsFit
from .usl import USLFit

#: A knee beyond this multiple of the largest measured N is not identified by the sweep.
MAX_KNEE_BEYOND_N = 4.0
#: An X_max beyond this multiple of the largest measured throughput is not identified either.
MAX_XMAX_BEYOND_X = 1.5
#: The bounds model's plateau must hold at least this many measured points.
MIN_PLATEAU_POINTS = 2


def not_identifiable(
    fit: USLFit | BoundsFit,
    connections: Sequence[float] | np.ndarray,
    throughput: Sequence[float] | np.ndarray,
) -> str | None:
    """Why ``fit``'s knee is not identified by the measured (N, X) points, or None when it is."""
    top_n = float(np.nanmax(np.asarray(connections, dtype=float)))
    top_x = float(np.nanmax(np.asarray(throughput, dtype=float)))
    n_max, x_max = fit.n_max, fit.x_max
    if not (math.isfinite(n_max) and math.isfinite(x_max)) or n_max < 0 or x_max <= 0:
        return (
            f"the {fit.name} fit has no finite knee (N_max {n_max:.3g}, X_max {x_max:.3g} "
            "req/s): the sweep did not reach one"
        )
    if isinstance(fit, BoundsFit) and fit.plateau_points < MIN_PLATEAU_POINTS:
        return (
            f"the bounds fit has {count(fit.plateau_points, 'point')} on its plateau, fewer than "
            f"{MIN_PLATEAU_POINTS}: its X_max {x_max:.0f} req/s is not a plateau the sweep "
            "reached"
        )
    if n_max > MAX_KNEE_BEYOND_N * top_n:
        return (
            f"the {fit.name} knee N = {n_max:.3g} is beyond {MAX_KNEE_BEYOND_N:g}× the largest "
            f"N measured ({top_n:g}): the sweep did not reach it"
        )
    if x_max > MAX_XMAX_BEYOND_X * top_x:
        return (
            f"the {fit.name} X_max {x_max:.3g} req/s is beyond {MAX_XMAX_BEYOND_X:g}× the "
            f"largest throughput measured ({top_x:.0f} req/s): the sweep did not reach it"
        )
    return None
