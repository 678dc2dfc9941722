"""What a sweep's checks share: the thresholds they decide by, the :class:`Finding` each
returns, the :class:`Evidence` they read (reductions of the runs, or a published sweep
table) and a few helpers over it. A leaf of :mod:`loadgen_analysis.verdict`: the checks
import it, it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..io.rules import verdict_rules
from ..models.rate_sweep import RateSweep

Check = Literal["errors", "client", "network", "server"]


Status = Literal["limit", "ok", "not measured"]


Verdict = Literal["errors", "client", "network", "server", "none", "inconclusive"]


def _sweep_rule(name: str) -> float:
    return float(verdict_rules()["sweep"][name])


@dataclass(frozen=True)
class Thresholds:
    """Where a sweep's checks decide, every number the contract's (``contract/verdict.json``):
    a plateau over N (``sweep``, held by its ``sweep_vectors``), and what a published table is
    judged by (no engine judged it: ``published_tables``)."""

    #: Error rate above which a published table's sweep is judged by its failures first.
    max_error_rate: float = field(
        default_factory=lambda: float(verdict_rules()["published_tables"]["max_error_rate"])
    )
    #: A level is on the plateau when its throughput is at least this share of the peak.
    plateau_share: float = field(default_factory=lambda: _sweep_rule("plateau_share"))
    #: The plateau must span at least this ratio of concurrency (highest N / lowest N on it).
    plateau_span: float = field(default_factory=lambda: _sweep_rule("plateau_span"))
    #: Minimum log-log slope of latency against N on the plateau (1 = latency ∝ N).
    min_latency_slope: float = field(default_factory=lambda: _sweep_rule("min_latency_slope"))


@dataclass(frozen=True)
class Finding:
    """The outcome of one check, with the numbers behind it."""

    check: Check
    status: Status
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


@dataclass
class Evidence:
    """What a sweep's checks read: one row per run (or a published table's level)."""

    sweep: pd.DataFrame  # one row per run / level
    errors: pd.DataFrame | None = None
    components: pd.DataFrame | None = None
    #: Each run's model (run.json ``config``), in order; empty for a published table.
    models: tuple[str | None, ...] = ()
    #: Several open-model runs: the sweep over the offered rate (never modelled over N).
    rate_sweep: RateSweep | None = None

    @property
    def mixed_models(self) -> bool:
        """Runs of different models: their workers are not one axis of N."""
        return len(set(self.models)) > 1

    @property
    def over_n(self) -> bool:
        """Whether the levels may be modelled over N (Little's Law, bounds, USL): runs of one
        model in which workers wait for their responses — not the open model, whose workers
        are what the schedule needed in flight."""
        return not self.mixed_models and "open" not in self.models


def top_level(sweep: pd.DataFrame) -> pd.DataFrame:
    """The runs at the highest configured concurrency: where the limit is reached."""
    if "connections" not in sweep or sweep["connections"].isna().all():
        return sweep
    top = sweep["connections"].max()
    return sweep[sweep["connections"] == top]


def mean_share(comp: pd.DataFrame, column: str) -> tuple[float, float]:
    """Response-weighted mean of a component (ms) and its share of mean latency."""
    weights = comp["responses"]
    value = float(np.average(comp[column].fillna(0.0), weights=weights))
    latency = float(np.average(comp["mean_latency_ms"], weights=weights))
    return value, (value / latency if latency > 0 else 0.0)
