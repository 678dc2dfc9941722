"""The client check: did the load generator keep its workers busy?

Effective concurrency N_eff = X · R̄ against the configured N, idle gaps between a worker's
consecutive requests (and whether they grow), time waiting on the producer
(``queue_wait_ns``), client CPU near saturation against its limit, and CFS throttling under a
CPU quota for a material share of the run (:mod:`.client_evidence`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .client_evidence import QUOTA_SATURATION, ClientEvidence
from .findings import Evidence, Finding, Thresholds, max_of, mean_share, pct, top_level
from .pacing import fell_behind, late_sends, worker_time


def check_client(ev: Evidence, t: Thresholds) -> Finding:
    reasons: list[str] = []
    evidence: dict[str, Any] = {}
    top = top_level(ev.sweep)
    engine = worker_time(ev.facts, t, reasons, evidence)
    measured = [
        engine or _rows_worker_use(ev, top, t, reasons, evidence),
        not engine and _producer_wait(ev.sweep, top, t, reasons, evidence),
        _client_resources(ev.clients, t, reasons, evidence),
        _schedule_kept(ev, t, reasons, evidence),
        _http2_wait(ev, t, reasons, evidence),
    ]
    if not any(measured):
        text = evidence.get("worker_use_note", "no worker-level data to check the client")
        return Finding("client", "not measured", text, evidence)
    if reasons:
        return Finding("client", "limit", "; ".join(reasons), evidence)
    return Finding("client", "ok", _client_ok_text(evidence), evidence)


def _rows_worker_use(
    ev: Evidence, top: pd.DataFrame, t: Thresholds, reasons: list[str], evidence: dict
) -> bool:
    """Without the engine's worker clocks: N_eff against the workers and the idle gaps between
    a worker's requests, from the rows. For a published table they decide as before; for a run
    recorded before the engine wrote the workers' time (request schema ≤ 3), idle workers are
    "not measured": the rows cannot tell think time or a schedule from a client holding its
    workers back, and an open model's workers wait for the schedule by design."""
    if any(f.open is not None for f in ev.facts):
        return False
    found: list[str] = []
    measured = _busy_workers(ev.sweep, top, t, found, evidence)
    measured = _idle_gaps(ev.gaps, top, t, found, evidence) or measured
    if found and ev.facts:
        evidence["worker_use_note"] = (
            "; ".join(found) + ", but the run was recorded before loadgen wrote the workers' "
            "time (request schema ≤ 3): think time, a schedule or the client — not measured"
        )
        return False
    reasons.extend(found)
    return measured


def _schedule_kept(ev: Evidence, t: Thresholds, reasons: list[str], evidence: dict) -> bool:
    """Open model: sends that started late are the client's own queue — unless the server fell
    behind the schedule at the same time (drops, latency growing): then the late sends are
    noted, and the server check decides (a saturated client has decided already)."""
    measured = False
    for facts in ev.facts:
        if facts.open is None:
            continue
        measured = True
        late = late_sends(facts, t, evidence)
        if late and fell_behind(facts.open, t, {}):
            evidence["late_note"] = late + ", while the server fell behind (see server)"
        elif late:
            reasons.append(late)
    return measured


def _http2_wait(ev: Evidence, t: Thresholds, reasons: list[str], evidence: dict) -> bool:
    """HTTP/2: ``send_ns`` holds the request's wait inside the client for a stream slot or the
    server's flow-control window (request schema 4) — the client's time, not the network's."""
    if not ev.http2 or ev.components is None or not ev.components["send_ms"].notna().any():
        return False
    send, share = mean_share(ev.components, "send_ms")
    evidence.update(http2_send_share=share, http2_send_ms=send)
    if share >= t.max_transfer_share:
        reasons.append(
            f"over HTTP/2 requests waited {send:.2f} ms ({pct(share)} of latency) inside the "
            "client for a stream slot or flow-control window: more streams per connection than "
            "the server allows (lower --streams-per-connection or open more connections)"
        )
    return True


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
            f"workers sat idle {pct(idle)} of the time between their requests "
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
            f"({pct(share)} of their time): the producer is the limit"
        )
    return True


def _client_ok_text(evidence: dict[str, Any]) -> str:
    parts = []
    if "busy_share" in evidence:
        parts.append(
            f"workers busy {pct(evidence['busy_share'])}, waiting for their next request "
            f"{pct(evidence['waiting_share'])}, own work {pct(evidence['own_share'])} of the "
            "time they were alive"
        )
    if "worker_use_note" in evidence:
        parts.append(evidence["worker_use_note"])
    if "late_note" in evidence:
        parts.append(evidence["late_note"])
    elif "late_share" in evidence:
        parts.append(f"{pct(evidence['late_share'])} of sends late")
    if "n_eff_ratio" in evidence and "busy_share" not in evidence:
        parts.append(f"N_eff/N = {evidence['n_eff_ratio']:.2f} at N = {evidence['connections']}")
    if "idle_share" in evidence and "worker_use_note" not in evidence:
        parts.append(f"workers idle {pct(evidence['idle_share'])} between requests")
    if "client_cpu_p90" in evidence:
        parts.append(f"client CPU p90 {pct(evidence['client_cpu_p90'])} of its limit")
    else:
        parts.append("client CPU not measured")
    if evidence.get("throttled_share") is not None:
        parts.append(f"throttled in {pct(evidence['throttled_share'])} of CFS periods")
    return "; ".join(parts)


def _client_resources(
    clients: list[ClientEvidence], t: Thresholds, reasons: list[str], evidence: dict[str, Any]
) -> bool:
    """The client's CPU against its limit and its CFS throttling, as evidence; whether they
    held the client back is the engine's verdict (run.json ``client.saturation``, the
    console's Client line), shown here, never judged again; True when either was read."""
    quota = max_of(clients, "cpu_quota_cores")
    evidence["server_shares_cores"] = any(c.server_shares_cores for c in clients)
    evidence.update(cpu_quota_cores=quota, cpu_limit_cores=max_of(clients, "cpu_limit_cores"))
    saturation = next((c.console_saturation for c in clients if c.console_saturation), None)
    throttled = _throttling(clients, evidence)
    cpu = _cpu(clients, evidence)
    evidence.update(console_saturation=saturation, client_cpu_saturated=saturation is not None)
    if saturation == QUOTA_SATURATION and throttled:
        reasons.append(f"CPU quota{f' of {quota:g} cores' if quota else ''}: {throttled}")
    if saturation is not None:
        what = cpu or "the client's CPU"
        reasons.append(f"{what}; the run's console judged it saturated")
    return "client_cpu_p90" in evidence or "throttled_share" in evidence


def _throttling(clients: list[ClientEvidence], evidence: dict[str, Any]) -> str:
    """How much the quota held the client back ('' when it never throttled it)."""
    share = max_of(clients, "throttled_share")
    wall = max_of(clients, "throttled_wall_share")
    if share is None and wall is None:
        return ""
    seconds = max_of(clients, "throttled_s")
    evidence.update(throttled_share=share, throttled_wall_share=wall, throttled_s=seconds)
    if not (share or wall):
        return ""
    text = "the client was throttled"
    if share is not None:
        text += f" in {pct(share)} of CFS periods"
    if seconds is not None:
        text += f" ({seconds:.2f} s held back"
        text += f", {pct(wall)} of the run)" if wall is not None else ")"
    return text


def _cpu(clients: list[ClientEvidence], evidence: dict[str, Any]) -> str:
    """The client's CPU against its limit ('' when not sampled)."""
    cpu = max_of(clients, "cpu_p90")
    if cpu is None:
        return ""
    quota, limit = evidence["cpu_quota_cores"], evidence["cpu_limit_cores"]
    evidence["client_cpu_p90"] = cpu
    of = f"its {limit:g} cores" if limit else "its cores"
    if quota and limit == quota:
        of = f"its CPU quota of {quota:g} cores"
    return f"client CPU at {pct(cpu)} of {of} (p90 of 1 s samples)"
