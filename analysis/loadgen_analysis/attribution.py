"""Bottleneck attribution: where did throughput stop — errors, client, network or server?

Responsible for gathering the evidence from runs (or from a published sweep table) and
checking it in a fixed order, the first check that finds a limit giving the verdict:

1. **errors** — a failing run measures the failure path, so its other numbers mean little:
   error classes, their share, and where in time they happened.
2. **client** — the load generator did not keep its workers busy: effective concurrency
   N_eff = X · R̄ well below the configured N, idle gaps between a worker's consecutive requests
   (and whether they grow), time waiting on the producer (``queue_wait_ns``), client CPU near
   saturation (``client-metrics.parquet``, when the run has one).
3. **network** — bytes/s near a link capacity the user gives, or transfer time (last byte minus
   first byte) dominating latency.
4. **server** — over a sweep, throughput on a plateau while latency grows ∝ N (requests queue
   behind a fixed capacity; the USL fit gives X_max and N_max); for one run, time to first byte
   dominating latency.

Not responsible for computing the reductions (summary) or the fit (usl); this module only
reads them and explains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import duckdb
import numpy as np
import pandas as pd

from .io import Run, as_runs
from .summary import error_breakdown, gap_summary, latency_components, run_table, timeline
from .usl import USLFit, fit_usl

Check = Literal["errors", "client", "network", "server"]
Status = Literal["limit", "ok", "not measured"]
Verdict = Literal["errors", "client", "network", "server", "none"]


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
    #: Client CPU utilisation (fraction of all cores) above which the client is saturated.
    max_client_cpu: float = 0.9
    #: Link utilisation (peak per-second bytes / capacity) above which the network limits.
    max_link_utilisation: float = 0.8
    #: Transfer time share of latency above which moving bytes dominates.
    max_transfer_share: float = 0.5
    #: A level is on the plateau when its throughput is at least this share of the peak.
    plateau_share: float = 0.9
    #: The plateau must span at least this ratio of concurrency (highest N / lowest N on it).
    plateau_span: float = 1.5
    #: Minimum log-log slope of latency against N on the plateau (1 = latency ∝ N).
    min_latency_slope: float = 0.6
    #: Time-to-first-byte share of latency above which the wait is server-side.
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
    caveats: tuple[str, ...] = ()

    def finding(self, check: Check) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usl"] = self.usl.as_dict() if self.usl else None
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
    peak_bytes_per_s: pd.Series | None = None
    client_cpu: pd.Series | None = None


def _client_cpu(runs: list[Run]) -> pd.Series | None:
    """Peak of the 1 Hz client CPU utilisation per run, when client-metrics.parquet has one.

    Reads a ``cpu_utilization`` column (fraction of all cores, 0–1); runs without the file
    or the column are left out. A sharded run ran on several clients: its value is the busiest
    client's, since one saturated client is enough to hold the load back.
    """
    values: dict[str, float] = {}
    con = duckdb.connect(":memory:")
    for run in runs:
        peaks = []
        for path in run.client_metrics_files:
            source = f"read_parquet('{str(path).replace(chr(39), chr(39) * 2)}')"
            columns = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
            if "cpu_utilization" not in columns:
                continue
            (peak,) = con.execute(
                f"SELECT quantile_cont(cpu_utilization, 0.9) FROM {source}"
            ).fetchone()
            if peak is not None:
                peaks.append(float(peak))
        if peaks:
            values[run.label] = max(peaks)
    return pd.Series(values, dtype=float) if values else None


def _evidence_from_runs(runs: list[Run]) -> _Evidence:
    sweep = run_table(runs)
    tl = timeline(runs)
    per_second = tl.groupby("run", sort=False)["bytes_per_s"].max()
    return _Evidence(
        sweep=sweep,
        errors=error_breakdown(runs),
        gaps=gap_summary(runs),
        components=latency_components(runs),
        peak_bytes_per_s=per_second,
        client_cpu=_client_cpu(runs),
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
    sweep = ev.sweep
    reasons: list[str] = []
    evidence: dict[str, Any] = {}
    measured = False
    top = _top_level(sweep)

    if "n_eff" in sweep and "connections" in sweep and sweep["connections"].notna().all():
        measured = True
        ratio = float((top["n_eff"] / top["connections"]).mean())
        n_eff = float(top["n_eff"].mean())
        n = int(top["connections"].iloc[0])
        evidence["n_eff"] = n_eff
        evidence["connections"] = n
        evidence["n_eff_ratio"] = ratio
        evidence["n_eff_by_level"] = {
            int(r.connections): float(r.n_eff) for r in sweep.itertuples() if pd.notna(r.n_eff)
        }
        if ratio < t.min_n_eff_ratio:
            reasons.append(
                f"only {n_eff:.1f} of {n} workers were busy on average (N_eff/N = {ratio:.2f})"
            )
    if ev.gaps is not None and not ev.gaps.empty:
        measured = True
        gaps = ev.gaps[ev.gaps["run"].isin(top["run"])] if "run" in top else ev.gaps
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
    if "mean_queue_wait_ms" in sweep and sweep["mean_queue_wait_ms"].notna().any():
        measured = True
        wait = float(top["mean_queue_wait_ms"].mean())
        latency = float(top["mean_latency_ms"].mean())
        share = wait / (wait + latency) if wait + latency > 0 else 0.0
        evidence["queue_wait_share"] = share
        if share > t.max_queue_wait_share:
            reasons.append(
                f"workers waited {wait:.2f} ms per request on the producer's buffer "
                f"({_pct(share)} of their time): the producer is the limit"
            )
    if ev.client_cpu is not None:
        measured = True
        cpu = float(ev.client_cpu.max())
        evidence["client_cpu_p90"] = cpu
        if cpu > t.max_client_cpu:
            reasons.append(f"client CPU at {_pct(cpu)} of all cores")
    if not measured:
        return Finding("client", "not measured", "no worker-level data to check the client")
    if reasons:
        return Finding("client", "limit", "; ".join(reasons), evidence)
    parts = []
    if "n_eff_ratio" in evidence:
        parts.append(f"N_eff/N = {evidence['n_eff_ratio']:.2f} at N = {evidence['connections']}")
    if "idle_share" in evidence:
        parts.append(f"workers idle {_pct(evidence['idle_share'])} between requests")
    if "client_cpu_p90" not in evidence:
        parts.append("client CPU not measured")
    return Finding("client", "ok", "; ".join(parts), evidence)


def _check_network(ev: _Evidence, t: Thresholds, link_capacity_bps: float | None) -> Finding:
    evidence: dict[str, Any] = {}
    reasons: list[str] = []
    measured = False
    if ev.peak_bytes_per_s is not None and len(ev.peak_bytes_per_s):
        peak = float(ev.peak_bytes_per_s.max())
        evidence["peak_bytes_per_s"] = peak
        if link_capacity_bps:
            measured = True
            utilisation = peak * 8 / link_capacity_bps
            evidence["link_capacity_bps"] = link_capacity_bps
            evidence["link_utilisation"] = utilisation
            if utilisation >= t.max_link_utilisation:
                reasons.append(
                    f"peak {peak * 8 / 1e6:.1f} Mbit/s is {_pct(utilisation)} of the "
                    f"{link_capacity_bps / 1e6:.0f} Mbit/s link"
                )
    if ev.components is not None and not ev.components.empty:
        measured = True
        comp = ev.components
        weights = comp["responses"]
        transfer = float(np.average(comp["transfer_ms"], weights=weights))
        latency = float(np.average(comp["mean_latency_ms"], weights=weights))
        share = transfer / latency if latency > 0 else 0.0
        evidence["transfer_share"] = share
        evidence["transfer_ms"] = transfer
        if share >= t.max_transfer_share:
            reasons.append(
                f"receiving response bodies took {_pct(share)} of latency ({transfer:.2f} ms)"
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
    parts = []
    if "link_utilisation" in evidence:
        parts.append(f"link {_pct(evidence['link_utilisation'])} used at peak")
    elif "peak_bytes_per_s" in evidence:
        parts.append(
            f"peak {evidence['peak_bytes_per_s'] * 8 / 1e6:.2f} Mbit/s "
            "(give --link-capacity to compare)"
        )
    if "transfer_share" in evidence:
        parts.append(f"transfer {_pct(evidence['transfer_share'])} of latency")
    return Finding("network", "ok", "; ".join(parts), evidence)


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


def _check_server(ev: _Evidence, t: Thresholds) -> tuple[Finding, float | None, USLFit | None]:
    sweep = ev.sweep
    evidence: dict[str, Any] = {}
    fit: USLFit | None = None
    reasons: list[str] = []
    capacity: float | None = None
    levels = sweep["connections"].nunique() if "connections" in sweep else 0
    if levels >= 3:
        try:
            fit = fit_usl(sweep["connections"], sweep["throughput_rps"])
            evidence["usl"] = fit.as_dict()
        except ValueError:
            fit = None
        plateau = _plateau(sweep, t)
        if plateau is not None:
            evidence["plateau"] = plateau
            slope = plateau.get("latency_slope")
            latency_ok = slope is None or slope >= t.min_latency_slope
            if plateau["holds"] and latency_ok:
                capacity = plateau["plateau_rps"]
                text = (
                    f"throughput stopped at {capacity:.0f} req/s from N = "
                    f"{plateau['plateau_from_n']} to {plateau['plateau_to_n']}"
                )
                if slope is not None:
                    text += (
                        f" while mean latency grew {plateau['latency_growth']:.1f}× "
                        f"(∝ N^{slope:.2f})"
                    )
                if fit is not None and math.isfinite(fit.n_max):
                    text += f"; USL: X_max {fit.x_max:.0f} req/s at N_max {fit.n_max:.0f}"
                reasons.append(text)
    if ev.components is not None and not ev.components.empty:
        comp = ev.components
        weights = comp["responses"]
        ttfb_share = float(
            np.average(comp["mean_ttfb_ms"], weights=weights)
            / np.average(comp["mean_latency_ms"], weights=weights)
        )
        evidence["ttfb_share"] = ttfb_share
    if reasons:
        if "ttfb_share" in evidence:
            reasons.append(f"time to first byte is {_pct(evidence['ttfb_share'])} of latency")
        return Finding("server", "limit", "; ".join(reasons), evidence), capacity, fit
    if levels >= 3:
        top = _top_level(sweep)
        return (
            Finding(
                "server",
                "ok",
                f"throughput still grows with N (no plateau up to N = "
                f"{int(top['connections'].iloc[0])})",
                evidence,
            ),
            None,
            fit,
        )
    if evidence.get("ttfb_share", 0.0) >= t.min_ttfb_share:
        return (
            Finding(
                "server",
                "limit",
                f"time to first byte is {_pct(evidence['ttfb_share'])} of latency: requests "
                "spend their time waiting on the server (one level only: run a sweep to see "
                "its capacity)",
                evidence,
            ),
            None,
            None,
        )
    return Finding("server", "ok", "no sign of a server-side limit", evidence), None, None


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
    server, capacity, fit = _check_server(ev, t)
    findings = (errors, client, network, server)

    caveats: list[str] = []
    if client.status != "limit" and "client_cpu_p90" not in client.evidence:
        caveats.append(
            "client CPU was not measured: a saturated client also shows a plateau with "
            "latency ∝ N; check the client machine's CPU"
        )
    if network.status == "not measured" or "link_utilisation" not in network.evidence:
        caveats.append(
            "link utilisation not measured (no link capacity given): a server-side verdict "
            "may also be a network limit"
        )

    verdict: Verdict = "none"
    confidence: Literal["strong", "weak"] = "weak"
    headline = "no limit found"
    for finding in findings:
        if finding.status == "limit":
            verdict = finding.check
            headline = finding.summary
            break
    if verdict == "server":
        confidence = "strong" if capacity is not None else "weak"
    elif verdict in ("errors", "client", "network"):
        confidence = "strong"
    if verdict == "none":
        headline = server.summary if server.status == "ok" else "no check found a limit"
    return Attribution(
        verdict=verdict,
        headline=headline,
        confidence=confidence,
        findings=findings,
        capacity_rps=capacity,
        usl=fit,
        caveats=tuple(caveats),
    )
