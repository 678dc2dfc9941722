"""Bottleneck attribution: where did throughput stop — errors, client, network or server?

Responsible for gathering the evidence from runs (or from a published sweep table) and
checking it in a fixed order, the first check that finds a limit giving the verdict:

1. **errors** — a failing run measures the failure path, so its other numbers mean little:
   error classes, their share, and where in time they happened.
2. **client** — the load generator did not keep its workers busy: effective concurrency
   N_eff = X · R̄ well below the configured N, idle gaps between a worker's consecutive requests
   (and whether they grow), time waiting on the producer (``queue_wait_ns``), client CPU near
   saturation against its limit, or CFS throttling under a CPU quota for a material share of
   the run (:mod:`.client`). When the server runs on the same cores (embedded, or a loopback
   target), a saturated CPU is shared by both, and the verdict says so.
3. **network** — per direction (a link is full duplex), the busiest second's bytes near the
   link capacity (``--link-capacity``, else run.json ``client.link_capacity_bps``), from the
   target interface's counters when known, else the rows' bytes summed over phases; or sending
   the request (``send_ns``) or receiving the body dominating latency.
4. **server** — over a sweep, throughput on a plateau while latency grows ∝ N (requests queue
   behind a fixed capacity; the capacity model that fits better — the USL or the
   operational-law bounds — gives X_max and the knee); for one run, the wait between the last
   request byte sent and the first response byte dominating latency.

Not responsible for computing the reductions (summary, client) or the fits (usl, bounds); this
module only reads them and explains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..io.load import as_runs
from ..io.run import Run
from ..models.bounds import BoundsFit, better_fit, fit_bounds
from ..models.usl import USLFit, fit_usl
from ..reductions.gap_tables import gap_summary
from ..reductions.summary import error_breakdown, latency_components, run_table
from ..reductions.timeline import timeline
from .client_evidence import ClientEvidence, client_evidence

Check = Literal["errors", "client", "network", "server"]
Status = Literal["limit", "ok", "not measured"]
Verdict = Literal["errors", "client", "network", "server", "inconclusive"]
CapacityModel = USLFit | BoundsFit


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
    #: Client CPU utilisation (p90 of 1 s samples, fraction of its CPU limit: cores or quota)
    #: above which the client is saturated.
    max_client_cpu: float = 0.9
    #: Share of CFS periods in which a CPU quota throttled the client, or share of the run's
    #: wall time it was held back, above which the quota is the limit (a material share of
    #: the run, not a burst; the same rule as the console's Client line).
    max_throttled_share: float = 0.10
    max_throttled_wall_share: float = 0.05
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


@dataclass(frozen=True)
class Attribution:
    """A verdict with its evidence, checks in order errors, client, network, server."""

    verdict: Verdict
    headline: str
    confidence: Literal["strong", "weak"]
    findings: tuple[Finding, ...]
    #: Throughput the limit allows, when it could be measured (plateau mean), req/s.
    capacity_rps: float | None = None
    usl: USLFit | None = None
    bounds: BoundsFit | None = None
    #: The model that fits the sweep better (``usl`` or ``bounds``); the plots draw this one.
    capacity_model: CapacityModel | None = None
    caveats: tuple[str, ...] = ()

    def finding(self, check: Check) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usl"] = self.usl.as_dict() if self.usl else None
        out["bounds"] = self.bounds.as_dict() if self.bounds else None
        out["capacity_model"] = self.capacity_model.as_dict() if self.capacity_model else None
        return _jsonable(out)

    def explain_dict(self, run: str) -> dict[str, Any]:
        """The object ``loadgen-analyze explain --json`` prints (AGREED-11's contract)."""
        out: dict[str, Any] = {
            "run": run,
            "verdict": self.verdict,
            "strength": self.confidence,
            "summary": self.headline,
            "checks": [
                {"name": f.check, "status": f.status, "evidence": f.summary, "values": f.evidence}
                for f in self.findings
            ],
            "notes": list(self.caveats),
        }
        if self.capacity_model is not None:
            out["capacity_model"] = {
                **self.capacity_model.as_dict(),
                "usl": self.usl.as_dict() if self.usl else None,
                "bounds": self.bounds.as_dict() if self.bounds else None,
            }
        return _jsonable(out)

    def to_text(self) -> str:
        lines = [f"Verdict: {self.verdict} ({self.confidence}) — {self.headline}"]
        for f in self.findings:
            lines.append(f"  [{f.status:>12}] {f.check:<7} {f.summary}")
        lines.extend(f"  note: {c}" for c in self.caveats)
        return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return value


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


# --------------------------------------------------------------------------- evidence


@dataclass
class _Evidence:
    sweep: pd.DataFrame  # one row per run / level
    errors: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    components: pd.DataFrame | None = None
    #: Per run: the busiest second's bytes sent and received by the rows (all phases summed).
    traffic: pd.DataFrame | None = None
    clients: list[ClientEvidence] = field(default_factory=list)


def _row_traffic(runs: list[Run]) -> pd.DataFrame:
    """Per run, the busiest second's bytes sent and received, every phase of the second summed
    (concurrent groups share the link). Buckets less than half inside the run are left out:
    a sliver of a second is not a rate."""
    tl = timeline(runs, by_phase=False, latency=False)
    full = tl[tl["covered_s"] >= 0.5]
    columns = ["sent_bytes_per_s", "received_bytes_per_s"]
    return (full if not full.empty else tl).groupby("run", sort=False)[columns].max()


def _evidence_from_runs(runs: list[Run]) -> _Evidence:
    return _Evidence(
        sweep=run_table(runs),
        errors=error_breakdown(runs),
        gaps=gap_summary(runs),
        components=latency_components(runs),
        traffic=_row_traffic(runs),
        clients=client_evidence(runs),
    )


# --------------------------------------------------------------------------- checks


def _check_errors(ev: _Evidence, t: Thresholds) -> Finding:
    sweep = ev.sweep
    if "failed" not in sweep or "requests" not in sweep:
        return Finding("errors", "not measured", "the table has no failure counts")
    requests = int(sweep["requests"].sum())
    failed = int(sweep["failed"].sum())
    rate = failed / requests if requests else 0.0
    worst = sweep.assign(rate=sweep["failed"] / sweep["requests"]).sort_values("rate").iloc[-1]
    evidence: dict[str, Any] = {
        "requests": requests,
        "failed": failed,
        "error_rate": rate,
        "worst_run": worst.get("run"),
        "worst_error_rate": float(worst["rate"]),
    }
    detail = ""
    if ev.errors is not None and not ev.errors.empty:
        classes = ev.errors.groupby("error")["count"].sum().sort_values(ascending=False)
        evidence["classes"] = {str(k): int(v) for k, v in classes.items()}
        parts = []
        for err, count in classes.items():
            rows = ev.errors[ev.errors["error"] == err]
            first, last = rows["first_s"].min(), rows["last_s"].max()
            peak = rows.sort_values("peak_count").iloc[-1]
            parts.append(
                f"{err} {count} (from {first:.1f}s to {last:.1f}s, "
                f"peak {int(peak['peak_count'])} in the second at {peak['peak_t_s']:.0f}s"
                + (f" of {peak['run']}" if len(sweep) > 1 else "")
                + ")"
            )
        evidence["where"] = ev.errors.to_dict("records")
        detail = ": " + "; ".join(parts)
    if float(worst["rate"]) > t.max_error_rate:
        where = f" in {worst['run']}" if len(sweep) > 1 and "run" in worst else ""
        return Finding(
            "errors",
            "limit",
            f"{_pct(float(worst['rate']))} of requests failed{where}, above "
            f"{_pct(t.max_error_rate)}{detail}",
            evidence,
        )
    if failed:
        return Finding("errors", "ok", f"{failed} of {requests} requests failed{detail}", evidence)
    return Finding("errors", "ok", f"no failures in {requests} requests", evidence)


def _top_level(sweep: pd.DataFrame) -> pd.DataFrame:
    """The runs at the highest configured concurrency: where the limit is reached."""
    if "connections" not in sweep or sweep["connections"].isna().all():
        return sweep
    top = sweep["connections"].max()
    return sweep[sweep["connections"] == top]


def _check_client(ev: _Evidence, t: Thresholds) -> Finding:
    reasons: list[str] = []
    evidence: dict[str, Any] = {}
    top = _top_level(ev.sweep)
    measured = [
        _busy_workers(ev.sweep, top, t, reasons, evidence),
        _idle_gaps(ev.gaps, top, t, reasons, evidence),
        _producer_wait(ev.sweep, top, t, reasons, evidence),
        _client_resources(ev.clients, t, reasons, evidence),
    ]
    if not any(measured):
        return Finding("client", "not measured", "no worker-level data to check the client")
    if reasons:
        return Finding("client", "limit", "; ".join(reasons), evidence)
    return Finding("client", "ok", _client_ok_text(evidence), evidence)


def _busy_workers(
    sweep: pd.DataFrame, top: pd.DataFrame, t: Thresholds, reasons: list[str], evidence: dict
) -> bool:
    """N_eff = X·R̄ against the configured N at the top level."""
    if not ("n_eff" in sweep and "connections" in sweep and sweep["connections"].notna().all()):
        return False
    ratio = float((top["n_eff"] / top["connections"]).mean())
    n_eff = float(top["n_eff"].mean())
    n = int(top["connections"].iloc[0])
    evidence.update(n_eff=n_eff, connections=n, n_eff_ratio=ratio)
    evidence["n_eff_by_level"] = {
        int(r.connections): float(r.n_eff) for r in sweep.itertuples() if pd.notna(r.n_eff)
    }
    if ratio < t.min_n_eff_ratio:
        reasons.append(
            f"only {n_eff:.1f} of {n} workers were busy on average (N_eff/N = {ratio:.2f})"
        )
    return True


def _idle_gaps(
    gaps: pd.DataFrame | None,
    top: pd.DataFrame,
    t: Thresholds,
    reasons: list[str],
    evidence: dict,
) -> bool:
    """Time a worker sat idle between its requests, and whether the gaps grew."""
    if gaps is None or gaps.empty:
        return False
    gaps = gaps[gaps["run"].isin(top["run"])] if "run" in top else gaps
    idle = float(gaps["idle_share"].mean())
    first = float(gaps["gap_first_half_ms"].mean())
    second = float(gaps["gap_second_half_ms"].mean())
    evidence.update(
        idle_share=idle,
        gap_mean_ms=float(gaps["gap_mean_ms"].mean()),
        gap_p99_ms=float(gaps["gap_p99_ms"].max()),
        gap_first_half_ms=first,
        gap_second_half_ms=second,
    )
    if idle > t.max_idle_share:
        reasons.append(
            f"workers sat idle {_pct(idle)} of the time between their requests "
            f"(mean gap {evidence['gap_mean_ms']:.2f} ms)"
        )
    if second > 1.0 and second > 2 * max(first, 1e-9):
        reasons.append(f"the gap between requests grew from {first:.2f} to {second:.2f} ms")
    return True


def _producer_wait(
    sweep: pd.DataFrame, top: pd.DataFrame, t: Thresholds, reasons: list[str], evidence: dict
) -> bool:
    """Time workers waited on the producer's buffer (``queue_wait_ns``)."""
    if "mean_queue_wait_ms" not in sweep or not sweep["mean_queue_wait_ms"].notna().any():
        return False
    wait = float(top["mean_queue_wait_ms"].mean())
    latency = float(top["mean_latency_ms"].mean())
    share = wait / (wait + latency) if wait + latency > 0 else 0.0
    evidence["queue_wait_share"] = share
    if share > t.max_queue_wait_share:
        reasons.append(
            f"workers waited {wait:.2f} ms per request on the producer's buffer "
            f"({_pct(share)} of their time): the producer is the limit"
        )
    return True


def _client_ok_text(evidence: dict[str, Any]) -> str:
    parts = []
    if "n_eff_ratio" in evidence:
        parts.append(f"N_eff/N = {evidence['n_eff_ratio']:.2f} at N = {evidence['connections']}")
    if "idle_share" in evidence:
        parts.append(f"workers idle {_pct(evidence['idle_share'])} between requests")
    if "client_cpu_p90" in evidence:
        parts.append(f"client CPU p90 {_pct(evidence['client_cpu_p90'])} of its limit")
    else:
        parts.append("client CPU not measured")
    if evidence.get("throttled_share") is not None:
        parts.append(f"throttled in {_pct(evidence['throttled_share'])} of CFS periods")
    return "; ".join(parts)


def _max_of(clients: list[ClientEvidence], name: str) -> float | None:
    values = [getattr(c, name) for c in clients if getattr(c, name) is not None]
    return max(values) if values else None


def _client_resources(
    clients: list[ClientEvidence], t: Thresholds, reasons: list[str], evidence: dict[str, Any]
) -> bool:
    """The client's CPU against its limit and its CFS throttling; True when either was read."""
    quota = _max_of(clients, "cpu_quota_cores")
    evidence["server_shares_cores"] = any(c.server_shares_cores for c in clients)
    evidence.update(cpu_quota_cores=quota, cpu_limit_cores=_max_of(clients, "cpu_limit_cores"))
    throttled = _throttling(clients, t, evidence)
    if throttled:
        reasons.append(f"CPU quota{f' of {quota:g} cores' if quota else ''}: {throttled}")
    # The console's "saturated by its quota" is the throttling reason when there is one.
    cpu = _cpu(clients, t, evidence, console_quota_counts=not throttled)
    if cpu:
        reasons.append(cpu)
    return "client_cpu_p90" in evidence or "throttled_share" in evidence


def _throttling(clients: list[ClientEvidence], t: Thresholds, evidence: dict[str, Any]) -> str:
    """Why the quota held the client back ('' when it did not): throttled in a material share
    of the CFS periods or of the wall time."""
    share = _max_of(clients, "throttled_share")
    wall = _max_of(clients, "throttled_wall_share")
    if share is None and wall is None:
        return ""
    seconds = _max_of(clients, "throttled_s")
    evidence.update(throttled_share=share, throttled_wall_share=wall, throttled_s=seconds)
    if (share or 0.0) <= t.max_throttled_share and (wall or 0.0) <= t.max_throttled_wall_share:
        return ""
    text = "the client was throttled"
    if share is not None:
        text += f" in {_pct(share)} of CFS periods"
    if seconds is not None:
        text += f" ({seconds:.2f} s held back"
        text += f", {_pct(wall)} of the run)" if wall is not None else ")"
    return text


def _cpu(
    clients: list[ClientEvidence],
    t: Thresholds,
    evidence: dict[str, Any],
    console_quota_counts: bool = True,
) -> str:
    """Why the client's CPU was the limit ('' when it was not): its p90 over the limit, or the
    console's own verdict (run.json ``client.saturation``), so the two never disagree."""
    cpu = _max_of(clients, "cpu_p90")
    console = next((c.console_saturation for c in clients if c.console_saturation), None)
    if cpu is None:
        return ""
    quota, limit = evidence["cpu_quota_cores"], evidence["cpu_limit_cores"]
    saturated = (
        cpu > t.max_client_cpu
        or console == "cpu"
        or (console == "cpu-quota" and console_quota_counts)
    )
    evidence.update(client_cpu_p90=cpu, client_cpu_saturated=saturated, console_saturation=console)
    if not saturated:
        return ""
    of = f"its {limit:g} cores" if limit else "its cores"
    if quota and limit == quota:
        of = f"its CPU quota of {quota:g} cores"
    text = f"client CPU at {_pct(cpu)} of {of} (p90 of 1 s samples)"
    return text + ("; the run's console judged it saturated" if console else "")


def _peak_traffic(ev: _Evidence) -> tuple[float | None, float | None, str]:
    """The busiest second's (tx, rx) bytes/s and where they were read: the target interface's
    counters when client-metrics has them, else the request rows' bytes."""
    tx = _max_of(ev.clients, "interface_tx_bytes_per_s")
    rx = _max_of(ev.clients, "interface_rx_bytes_per_s")
    if tx is not None or rx is not None:
        names = sorted({c.target_interface for c in ev.clients if c.target_interface})
        return tx, rx, f"interface {', '.join(names)}"
    if ev.traffic is None or ev.traffic.empty:
        return None, None, ""
    return (
        float(ev.traffic["sent_bytes_per_s"].max()),
        float(ev.traffic["received_bytes_per_s"].max()),
        "request rows",
    )


def _mean_share(comp: pd.DataFrame, column: str) -> tuple[float, float]:
    """Response-weighted mean of a component (ms) and its share of mean latency."""
    weights = comp["responses"]
    value = float(np.average(comp[column].fillna(0.0), weights=weights))
    latency = float(np.average(comp["mean_latency_ms"], weights=weights))
    return value, (value / latency if latency > 0 else 0.0)


def _link_reasons(
    ev: _Evidence, t: Thresholds, capacity_bps: float | None, evidence: dict[str, Any]
) -> list[str]:
    """Each direction's busiest second against the link (full duplex: never their sum)."""
    tx, rx, source = _peak_traffic(ev)
    reasons = []
    for direction, peak in (("tx", tx), ("rx", rx)):
        if peak is None:
            continue
        evidence[f"peak_{direction}_bytes_per_s"] = peak
        if capacity_bps:
            utilisation = peak * 8 / capacity_bps
            evidence[f"{direction}_link_utilisation"] = utilisation
            if utilisation >= t.max_link_utilisation:
                reasons.append(
                    f"{direction} {peak * 8 / 1e6:.1f} Mbit/s in the busiest second is "
                    f"{_pct(utilisation)} of the {capacity_bps / 1e6:g} Mbit/s link ({source})"
                )
    if source:
        evidence["traffic_source"] = source
    if capacity_bps and (tx is not None or rx is not None):
        evidence["link_capacity_bps"] = capacity_bps
        evidence["link_utilisation"] = max(
            evidence.get("tx_link_utilisation", 0.0), evidence.get("rx_link_utilisation", 0.0)
        )
    return reasons


def _check_network(ev: _Evidence, t: Thresholds, link_capacity_bps: float | None) -> Finding:
    evidence: dict[str, Any] = {}
    capacity = link_capacity_bps or _max_of(ev.clients, "link_capacity_bps")
    reasons = _link_reasons(ev, t, capacity, evidence)
    measured = "link_utilisation" in evidence
    if ev.components is not None and not ev.components.empty:
        measured = True
        transfer, share = _mean_share(ev.components, "transfer_ms")
        evidence.update(transfer_share=share, transfer_ms=transfer)
        if share >= t.max_transfer_share:
            reasons.append(
                f"receiving response bodies took {_pct(share)} of latency ({transfer:.2f} ms)"
            )
        if ev.components["send_ms"].notna().any():
            send, send_share = _mean_share(ev.components, "send_ms")
            evidence.update(send_share=send_share, send_ms=send)
            link_idle = evidence.get("tx_link_utilisation", 1.0) < t.max_link_utilisation
            if send_share >= t.max_transfer_share and not (capacity and link_idle):
                reasons.append(
                    f"sending requests took {_pct(send_share)} of latency ({send:.2f} ms)"
                )
    if not measured:
        return Finding(
            "network",
            "not measured",
            "no byte counts or timing components (and no link capacity given)",
            evidence,
        )
    if reasons:
        return Finding("network", "limit", "; ".join(reasons), evidence)
    return Finding("network", "ok", _network_ok_text(evidence), evidence)


def _network_ok_text(evidence: dict[str, Any]) -> str:
    parts = []
    source = evidence.get("traffic_source", "")
    if "link_utilisation" in evidence:
        parts.append(
            f"link {_pct(evidence['link_utilisation'])} used in the busiest second, the busier "
            f"direction of {source}"
        )
    elif "peak_tx_bytes_per_s" in evidence:
        tx = evidence["peak_tx_bytes_per_s"] * 8 / 1e6
        rx = evidence.get("peak_rx_bytes_per_s", 0.0) * 8 / 1e6
        parts.append(
            f"peak tx {tx:.2f} / rx {rx:.2f} Mbit/s ({source}; give --link-capacity to compare)"
        )
    if "send_share" in evidence:
        parts.append(f"sending {_pct(evidence['send_share'])} of latency")
    if "transfer_share" in evidence:
        parts.append(f"transfer {_pct(evidence['transfer_share'])} of latency")
    return "; ".join(parts)


def _plateau(sweep: pd.DataFrame, t: Thresholds) -> dict[str, Any] | None:
    columns = ["throughput_rps"] + (["mean_latency_ms"] if "mean_latency_ms" in sweep else [])
    levels = sweep.groupby("connections", as_index=False)[columns].mean().sort_values("connections")
    if len(levels) < 3:
        return None
    peak = float(levels["throughput_rps"].max())
    peak_n = int(levels.loc[levels["throughput_rps"].idxmax(), "connections"])
    on = levels[levels["throughput_rps"] >= t.plateau_share * peak]
    # The plateau is the run of levels from the first that reaches it to the top.
    first_n = float(on["connections"].min())
    on = levels[levels["connections"] >= first_n]
    span = float(on["connections"].max()) / first_n
    info: dict[str, Any] = {
        "peak_rps": peak,
        "peak_at_n": peak_n,
        "plateau_from_n": int(first_n),
        "plateau_to_n": int(on["connections"].max()),
        "plateau_levels": len(on),
        "plateau_rps": float(on["throughput_rps"].mean()),
        "plateau_span": span,
        "holds": len(on) >= 2 and span >= t.plateau_span,
    }
    if "mean_latency_ms" in sweep and len(on) >= 2:
        slope = float(
            np.polyfit(np.log(on["connections"]), np.log(on["mean_latency_ms"].astype(float)), 1)[0]
        )
        info["latency_slope"] = slope
        first_r = float(on["mean_latency_ms"].iloc[0])
        last_r = float(on["mean_latency_ms"].iloc[-1])
        info["latency_growth"] = last_r / first_r
    return info


@dataclass(frozen=True)
class _Models:
    usl: USLFit | None = None
    bounds: BoundsFit | None = None

    @property
    def chosen(self) -> CapacityModel | None:
        return better_fit(self.usl, self.bounds)


def _fit_models(sweep: pd.DataFrame) -> _Models:
    fits: dict[str, Any] = {}
    for name, fit in (("usl", fit_usl), ("bounds", fit_bounds)):
        try:
            fits[name] = fit(sweep["connections"], sweep["throughput_rps"])
        except ValueError:
            fits[name] = None
    return _Models(**fits)


def model_text(models: _Models) -> str:
    """Which capacity model fits better, with both fits' quality."""
    chosen = models.chosen
    if chosen is None:
        return ""
    other = models.bounds if chosen is models.usl else models.usl
    if isinstance(chosen, BoundsFit):
        text = (
            f"bounds model fits best: X_max {chosen.x_max:.0f} req/s, knee N* = R(1)·X_max = "
            f"{chosen.n_max:.1f} (R² {chosen.r_squared:.3f})"
        )
    elif math.isfinite(chosen.n_max):
        text = (
            f"USL fits best: X_max {chosen.x_max:.0f} req/s at N_max {chosen.n_max:.0f} "
            f"(R² {chosen.r_squared:.3f})"
        )
    else:
        text = f"USL fits best: no peak (κ = 0; R² {chosen.r_squared:.3f})"
    if other is not None:
        text += f"; {other.name} R² {other.r_squared:.3f}"
    return text


def _plateau_text(plateau: dict[str, Any]) -> str:
    text = (
        f"throughput stopped at {plateau['plateau_rps']:.0f} req/s from N = "
        f"{plateau['plateau_from_n']} to {plateau['plateau_to_n']}"
    )
    slope = plateau.get("latency_slope")
    if slope is not None:
        text += f" while mean latency grew {plateau['latency_growth']:.1f}× (∝ N^{slope:.2f})"
    return text


def _server_wait(ev: _Evidence, evidence: dict[str, Any]) -> None:
    """Time to first byte, and the server's share of it: first byte minus sending (send_ns)."""
    if ev.components is None or ev.components.empty:
        return
    comp = ev.components
    _, evidence["ttfb_share"] = _mean_share(comp, "mean_ttfb_ms")
    if comp["send_ms"].notna().any():
        _, evidence["server_wait_share"] = _mean_share(comp, "first_byte_ms")


def _check_sweep(
    ev: _Evidence, t: Thresholds, evidence: dict[str, Any]
) -> tuple[Finding, float | None, _Models]:
    sweep = ev.sweep
    models = _fit_models(sweep)
    for name in ("usl", "bounds"):
        if getattr(models, name) is not None:
            evidence[name] = getattr(models, name).as_dict()
    if models.chosen is not None:
        evidence["capacity_model"] = models.chosen.name
    plateau = _plateau(sweep, t)
    if plateau is not None:
        evidence["plateau"] = plateau
        slope = plateau.get("latency_slope")
        if plateau["holds"] and (slope is None or slope >= t.min_latency_slope):
            reasons = [_plateau_text(plateau), model_text(models)]
            if "ttfb_share" in evidence:
                reasons.append(f"time to first byte is {_pct(evidence['ttfb_share'])} of latency")
            text = "; ".join(r for r in reasons if r)
            return Finding("server", "limit", text, evidence), plateau["plateau_rps"], models
    top = int(_top_level(sweep)["connections"].iloc[0])
    text = f"throughput still grows with N (no plateau up to N = {top})"
    return Finding("server", "ok", text, evidence), None, models


def _check_server(ev: _Evidence, t: Thresholds) -> tuple[Finding, float | None, _Models]:
    evidence: dict[str, Any] = {}
    _server_wait(ev, evidence)
    levels = ev.sweep["connections"].nunique() if "connections" in ev.sweep else 0
    if levels >= 3:
        return _check_sweep(ev, t, evidence)
    wait = evidence.get("server_wait_share", evidence.get("ttfb_share", 0.0))
    if wait >= t.min_ttfb_share:
        what = "after the request was sent " if "server_wait_share" in evidence else ""
        text = (
            f"waiting for the first byte {what}is {_pct(wait)} of latency: requests spend "
            "their time waiting on the server (one level only: run a sweep to see its capacity)"
        )
        return Finding("server", "limit", text, evidence), None, _Models()
    return Finding("server", "ok", "no sign of a server-side limit", evidence), None, _Models()


# --------------------------------------------------------------------------- entry point


def attribute(
    source: Run | str | Sequence[Run | str] | pd.DataFrame,
    link_capacity_bps: float | None = None,
    thresholds: Thresholds | None = None,
) -> Attribution:
    """Say where throughput stopped, with the evidence for and against each place.

    ``source`` is a run, several runs (a sweep: levels of ``-c``, or repeats), or a sweep
    table (a DataFrame with ``connections``, ``throughput_rps`` and, when known,
    ``mean_latency_ms``, ``requests``, ``failed``, ``n_eff``) such as a published report's.
    ``link_capacity_bps`` (bits/s) lets the network check compare traffic to the link.
    """
    t = thresholds or Thresholds()
    if isinstance(source, pd.DataFrame):
        sweep = source.copy()
        if "throughput_rps" not in sweep:
            sweep["throughput_rps"] = sweep["requests"] / sweep["wall_s"]
        if "n_eff" not in sweep and "mean_latency_ms" in sweep:
            sweep["n_eff"] = sweep["throughput_rps"] * sweep["mean_latency_ms"] / 1e3
        ev = _Evidence(sweep=sweep)
    else:
        ev = _evidence_from_runs(as_runs(source))

    errors = _check_errors(ev, t)
    client = _check_client(ev, t)
    network = _check_network(ev, t, link_capacity_bps)
    server, capacity, models = _check_server(ev, t)
    findings = (errors, client, network, server)
    verdict, confidence, headline = _verdict(findings, capacity)
    return Attribution(
        verdict=verdict,
        headline=headline,
        confidence=confidence,
        findings=findings,
        capacity_rps=capacity,
        usl=models.usl,
        bounds=models.bounds,
        capacity_model=models.chosen,
        caveats=_caveats(client, network),
    )


def _verdict(
    findings: tuple[Finding, ...], capacity: float | None
) -> tuple[Verdict, Literal["strong", "weak"], str]:
    """The first check that found a limit decides. When the server ran on the client's cores
    (embedded, or a loopback target) a client or server verdict says so whatever decided it:
    the two took CPU from each other, so neither was measured alone (and when the CPU was
    saturated, the cores, not the client alone, are the limit)."""
    limit = next((f for f in findings if f.status == "limit"), None)
    if limit is None:
        server = findings[-1]
        verdict: Verdict = "inconclusive"
        strength: Literal["strong", "weak"] = "weak"
        headline = server.summary if server.status == "ok" else "no check found a limit"
    else:
        verdict, headline = limit.check, limit.summary
        strength = "strong" if limit.check != "server" or capacity is not None else "weak"
    client = next(f for f in findings if f.check == "client")
    if verdict in ("client", "server", "inconclusive") and client.evidence.get(
        "server_shares_cores"
    ):
        saturated = client.evidence.get("client_cpu_saturated")
        headline = (
            "client and server share the cores (embedded server or loopback target)"
            f"{', and they were saturated' if saturated else ''}: {headline}"
        )
    return verdict, strength, headline


def _caveats(client: Finding, network: Finding) -> tuple[str, ...]:
    caveats: list[str] = []
    if client.status != "limit" and "client_cpu_p90" not in client.evidence:
        caveats.append(
            "client CPU was not measured: a saturated client also shows a plateau with "
            "latency ∝ N; check the client machine's CPU"
        )
    if "link_utilisation" not in network.evidence:
        caveats.append(
            "link utilisation not measured (no link capacity given): a server-side verdict "
            "may also be a network limit"
        )
    return tuple(caveats)
