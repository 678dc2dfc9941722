"""What the checks share: the thresholds they decide by, the :class:`Finding` each returns,
the :class:`Evidence` they read (reductions of the runs, or a published sweep table) and a few
helpers over it. A leaf of :mod:`loadgen_analysis.verdict`: the checks import it, it imports
none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..models.rate_sweep import RateSweep
from .client_evidence import ClientEvidence
from .model_facts import RunFacts

Check = Literal["errors", "client", "network", "server"]


Status = Literal["limit", "ok", "not measured"]


Verdict = Literal["errors", "client", "network", "server", "none", "inconclusive"]


@dataclass(frozen=True)
class Thresholds:
    """Where each check decides it has found the limit. Defaults are deliberately coarse:
    they separate a client that paces the load from one that does not, not 5 % effects."""

    #: Error rate above which the run is judged by its failures first.
    max_error_rate: float = 0.01
    #: N_eff / N below which the client did not keep its workers busy.
    min_n_eff_ratio: float = 0.8
    #: Share of worker time spent idle between requests above which the client paces the load.
    max_idle_share: float = 0.2
    #: Share of latency spent waiting on the producer's buffer above which the producer limits.
    max_queue_wait_share: float = 0.2
    #: Share of the workers' alive time spent in the client's own work between requests
    #: (neither in a request nor waiting for the next) above which the client is the limit.
    max_own_share: float = 0.2
    #: Share of the workers' alive time spent waiting for their next request (think time)
    #: above which the workload, as configured, set the pace.
    min_paced_share: float = 0.2
    #: Open model: share dropped, and achieved / offered, below which the system fell behind
    #: its schedule. (Whether the client kept it — late sends — is the contract's rule,
    #: contract/sustainability.json, which loadgen capacity judges by too.)
    max_dropped_share: float = 0.001
    min_achieved_share: float = 0.9
    #: Open model: growth of the median latency from the intended time, second half of the
    #: schedule over the first, above which the server fell behind (and by at least 5 ms).
    max_latency_growth: float = 2.0
    #: Link utilisation (peak per-second bytes / capacity) above which the network limits.
    max_link_utilisation: float = 0.8
    #: Transfer (or send) time share of latency above which moving bytes dominates.
    max_transfer_share: float = 0.5
    #: A level is on the plateau when its throughput is at least this share of the peak.
    plateau_share: float = 0.9
    #: The plateau must span at least this ratio of concurrency (highest N / lowest N on it).
    plateau_span: float = 1.5
    #: Minimum log-log slope of latency against N on the plateau (1 = latency ∝ N).
    min_latency_slope: float = 0.6
    #: Share of latency waiting on the first byte (after the request was sent) above which the
    #: wait is server-side.
    min_ttfb_share: float = 0.8


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
    sweep: pd.DataFrame  # one row per run / level
    errors: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    components: pd.DataFrame | None = None
    #: Per run: the busiest second's bytes sent and received by the rows (all phases summed).
    traffic: pd.DataFrame | None = None
    clients: list[ClientEvidence] = field(default_factory=list)
    #: What the engine knew of each run's pacing (workers' time, schedule); empty for a table.
    facts: list[RunFacts] = field(default_factory=list)
    #: Whether each run went over HTTP/2 (run.json ``config.protocol``).
    http2: bool = False
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


def max_of(clients: list[ClientEvidence], name: str) -> float | None:
    values = [getattr(c, name) for c in clients if getattr(c, name) is not None]
    return max(values) if values else None


def mean_share(comp: pd.DataFrame, column: str) -> tuple[float, float]:
    """Response-weighted mean of a component (ms) and its share of mean latency."""
    weights = comp["responses"]
    value = float(np.average(comp[column].fillna(0.0), weights=weights))
    latency = float(np.average(comp["mean_latency_ms"], weights=weights))
    return value, (value / latency if latency > 0 else 0.0)
