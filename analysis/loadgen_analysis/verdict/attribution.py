"""Bottleneck attribution: where did throughput stop — errors, client, network or server?

Responsible for gathering the evidence from runs (or from a published sweep table) and
checking it in a fixed order, the first check that finds a limit giving the verdict:

1. **errors** — a failing run measures the failure path (:mod:`.errors_check`).
2. **client** — the load generator did not keep its workers busy, or its CPU or CPU quota was
   the limit (:mod:`.client_check`, from :mod:`.client_evidence`). When the server runs on the
   same cores (embedded, or a loopback target), a saturated CPU is shared by both, and the
   verdict says so.
3. **network** — a direction of the link near its capacity, or moving bytes dominating
   latency (:mod:`.network_check`).
4. **server** — a throughput plateau while latency grows ∝ N over a sweep, or waiting for the
   first byte dominating one run's latency while its workers were busy, or an open run falling
   behind its schedule (:mod:`.server_check`).

When no check finds a limit and the workload as configured set the pace — an open run that
kept up with its schedule, workers that spent their time thinking as configured — the verdict
is ``none``. Each model is judged from the facts the engine wrote (:mod:`.model_facts`,
:mod:`.pacing`): thread groups and phases on the workers alive in them, one verdict per phase,
the run's being that of the phase with the most workers alive.

Not responsible for computing the reductions or the fits (:mod:`loadgen_analysis.reductions`,
:mod:`loadgen_analysis.models`); this subpackage only reads them and explains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from ..jsonable import jsonable
from ..models.bounds import BoundsFit
from ..models.rate_sweep import RateSweep, is_rate_sweep, rate_sweep
from ..models.usl import USLFit
from ..reductions.gap_tables import gap_summary
from ..reductions.summary import error_breakdown, latency_components, run_table
from ..reductions.timeline import timeline
from .client_check import check_client
from .client_evidence import client_evidence
from .errors_check import check_errors
from .findings import Check, Evidence, Finding, Thresholds, Verdict
from .model_facts import run_facts
from .network_check import check_network
from .pacing import judged_phase, phase_verdicts
from .server_check import CapacityModel, check_server


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
    #: Thread groups and phases: a verdict per phase, on the workers alive in it.
    phases: tuple[dict[str, Any], ...] = ()
    #: Several open-model runs: achieved against offered rate per level, and the knee.
    rate_sweep: RateSweep | None = None

    def finding(self, check: Check) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["usl"] = self.usl.as_dict() if self.usl else None
        out["bounds"] = self.bounds.as_dict() if self.bounds else None
        out["capacity_model"] = self.capacity_model.as_dict() if self.capacity_model else None
        out["rate_sweep"] = self.rate_sweep.as_dict() if self.rate_sweep else None
        return jsonable(out)

    def explain_dict(self, run: str) -> dict[str, Any]:
        """The object ``loadgen-analyze explain --json`` prints; its keys are this method's,
        held by tests/test_explain.py."""
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
            "phases": list(self.phases),
        }
        if self.capacity_model is not None:
            out["capacity_model"] = {
                **self.capacity_model.as_dict(),
                "usl": self.usl.as_dict() if self.usl else None,
                "bounds": self.bounds.as_dict() if self.bounds else None,
            }
        if self.rate_sweep is not None:
            out["rate_sweep"] = self.rate_sweep.as_dict()
        return jsonable(out)

    def to_text(self) -> str:
        lines = [f"Verdict: {self.verdict} ({self.confidence}) — {self.headline}"]
        for f in self.findings:
            lines.append(f"  [{f.status:>12}] {f.check:<7} {f.summary}")
        lines.extend(
            f"  phase {p['phase']}: {p['verdict']} (workers alive {p['workers_alive']:g}, busy "
            f"{p['busy_share']:.0%}, waiting {p['waiting_share']:.0%})"
            for p in self.phases
        )
        lines.extend(f"  note: {c}" for c in self.caveats)
        return "\n".join(lines)


# --------------------------------------------------------------------------- evidence


def _row_traffic(runs: list[Run]) -> pd.DataFrame:
    """Per run, the busiest second's bytes sent and received, every phase of the second summed
    (concurrent groups share the link). Buckets less than half inside the run are left out:
    a sliver of a second is not a rate."""
    tl = timeline(runs, by_phase=False, latency=False)
    full = tl[tl["covered_s"] >= 0.5]
    columns = ["sent_bytes_per_s", "received_bytes_per_s"]
    return (full if not full.empty else tl).groupby("run", sort=False)[columns].max()


def _evidence_from_runs(runs: list[Run]) -> Evidence:
    return Evidence(
        models=tuple(r.model for r in runs),
        rate_sweep=rate_sweep(runs) if is_rate_sweep(runs) else None,
        sweep=run_table(runs),
        errors=error_breakdown(runs),
        gaps=gap_summary(runs),
        components=latency_components(runs),
        traffic=_row_traffic(runs),
        clients=client_evidence(runs),
        facts=run_facts(runs),
        http2=any(str(r.config.get("protocol", "")).upper() == "HTTP/2" for r in runs),
    )


# --------------------------------------------------------------------------- entry point


def attribute(
    source: RunsArg | pd.DataFrame,
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
        ev = Evidence(sweep=sweep)
    else:
        ev = _evidence_from_runs(as_runs(source))

    errors = check_errors(ev, t)
    client = check_client(ev, t)
    network = check_network(ev, t, link_capacity_bps)
    server, capacity, models = check_server(ev, t)
    findings = (errors, client, network, server)
    verdict, confidence, headline = _verdict(findings, capacity)
    phases = _phases(ev, t, server)
    if phases and verdict not in ("errors", "network"):
        judged = judged_phase(ev.facts[-1])
        headline += f" (judged on {judged.phase}, the phase with the most workers alive)"
    return Attribution(
        verdict=verdict,
        headline=headline,
        confidence=confidence,
        findings=findings,
        capacity_rps=capacity,
        usl=models.usl,
        bounds=models.bounds,
        capacity_model=models.chosen,
        caveats=_caveats(client, network, ev) + models.notes,
        phases=tuple(phases),
        rate_sweep=ev.rate_sweep,
    )


def _phases(ev: Evidence, t: Thresholds, server: Finding) -> list[dict[str, Any]]:
    """A verdict per phase for a run of several (thread groups, phases)."""
    if len(ev.facts) != 1 or len(ev.facts[0].phases) < 2:
        return []
    wait = server.evidence.get("server_wait_share", server.evidence.get("ttfb_share"))
    return phase_verdicts(ev.facts[0], t, wait)


def _verdict(
    findings: tuple[Finding, ...], capacity: float | None
) -> tuple[Verdict, Literal["strong", "weak"], str]:
    """The first check that found a limit decides. When the server ran on the client's cores
    (embedded, or a loopback target) a client or server verdict says so whatever decided it:
    the two took CPU from each other, so neither was measured alone (and when the CPU was
    saturated, the cores, not the client alone, are the limit)."""
    limit = next((f for f in findings if f.status == "limit"), None)
    server = findings[-1]
    paced = server.evidence.get("kept_up") or server.evidence.get("paced_by_workload")
    if limit is None and paced:
        verdict: Verdict = "none"
        strength: Literal["strong", "weak"] = "strong"
        headline = f"nothing limited it — {server.summary}"
    elif limit is None:
        verdict = "inconclusive"
        strength = "weak"
        headline = server.summary
    else:
        verdict, headline = limit.check, limit.summary
        direct = capacity is not None or "offered_rps" in limit.evidence
        direct = direct or "rate_sweep" in limit.evidence
        strength = "strong" if limit.check != "server" or direct else "weak"
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


def _caveats(client: Finding, network: Finding, ev: Evidence) -> tuple[str, ...]:
    caveats: list[str] = [note for f in ev.facts for note in f.notes]
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
