"""The network check: per direction (a link is full duplex), the busiest second's bytes
against the link capacity — from the target interface's counters when client-metrics has
them, else the rows' bytes summed over phases — and sending the request (``send_ns``) or
receiving the body dominating latency."""

from __future__ import annotations

from typing import Any

from .client_evidence import is_loopback_interface
from .findings import Evidence, Finding, Thresholds, max_of, mean_share, pct


def _peak_traffic(ev: Evidence) -> tuple[float | None, float | None, str]:
    """The busiest second's (tx, rx) bytes/s and where they were read: the target interface's
    counters when client-metrics has them, else the request rows' bytes."""
    tx = max_of(ev.clients, "interface_tx_bytes_per_s")
    rx = max_of(ev.clients, "interface_rx_bytes_per_s")
    if tx is not None or rx is not None:
        names = sorted({c.target_interface for c in ev.clients if c.target_interface})
        return tx, rx, f"interface {', '.join(names)}"
    if ev.traffic is None or ev.traffic.empty:
        return None, None, ""
    source = "request rows"
    if any(is_loopback_interface(c.target_interface) for c in ev.clients):
        source += (
            "; the target is on lo, whose counters hold both ends of every local flow and "
            "other processes' traffic, so the rows' bytes are the measure"
        )
    return (
        float(ev.traffic["sent_bytes_per_s"].max()),
        float(ev.traffic["received_bytes_per_s"].max()),
        source,
    )


def _link_reasons(
    ev: Evidence, t: Thresholds, capacity_bps: float | None, evidence: dict[str, Any]
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
                    f"{pct(utilisation)} of the {capacity_bps / 1e6:g} Mbit/s link ({source})"
                )
    if source:
        evidence["traffic_source"] = source
    if capacity_bps and (tx is not None or rx is not None):
        evidence["link_capacity_bps"] = capacity_bps
        evidence["link_utilisation"] = max(
            evidence.get("tx_link_utilisation", 0.0), evidence.get("rx_link_utilisation", 0.0)
        )
    return reasons


def check_network(ev: Evidence, t: Thresholds, link_capacity_bps: float | None) -> Finding:
    evidence: dict[str, Any] = {}
    capacity = link_capacity_bps or max_of(ev.clients, "link_capacity_bps")
    reasons = _link_reasons(ev, t, capacity, evidence)
    measured = "link_utilisation" in evidence
    if ev.components is not None and not ev.components.empty:
        measured = True
        transfer, share = mean_share(ev.components, "transfer_ms")
        evidence.update(transfer_share=share, transfer_ms=transfer)
        if share >= t.max_transfer_share:
            reasons.append(
                f"receiving response bodies took {pct(share)} of latency ({transfer:.2f} ms)"
            )
        # Over HTTP/2 send_ns is mostly the client's wait for a stream slot (the client check).
        if ev.components["send_ms"].notna().any() and not ev.http2:
            send, send_share = mean_share(ev.components, "send_ms")
            evidence.update(send_share=send_share, send_ms=send)
            link_idle = evidence.get("tx_link_utilisation", 1.0) < t.max_link_utilisation
            if send_share >= t.max_transfer_share and not (capacity and link_idle):
                reasons.append(
                    f"sending requests took {pct(send_share)} of latency ({send:.2f} ms)"
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
            f"link {pct(evidence['link_utilisation'])} used in the busiest second, the busier "
            f"direction of {source}"
        )
    elif "peak_tx_bytes_per_s" in evidence:
        tx = evidence["peak_tx_bytes_per_s"] * 8 / 1e6
        rx = evidence.get("peak_rx_bytes_per_s", 0.0) * 8 / 1e6
        parts.append(
            f"peak tx {tx:.2f} / rx {rx:.2f} Mbit/s ({source}; give --link-capacity to compare)"
        )
    if "send_share" in evidence:
        parts.append(f"sending {pct(evidence['send_share'])} of latency")
    if "transfer_share" in evidence:
        parts.append(f"transfer {pct(evidence['transfer_share'])} of latency")
    return "; ".join(parts)
