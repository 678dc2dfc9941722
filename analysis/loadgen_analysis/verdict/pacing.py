"""How each model's run was paced, judged from the facts the engine wrote (:mod:`.model_facts`)
— never from the model's configuration.

- **Workers' time** (every model): of the time a worker was alive, the share in a request
  (busy), waiting for its next request (the pacing the model asked for: think time, the
  schedule, the producer's buffer) and in the client's own work between requests. Too much own
  work is the client's limit; much waiting is the workload setting the pace. Thread groups and
  phases are judged on the workers alive *in* them, so the gaps between groups are not idleness;
  the run is judged on the phase with the most workers alive (the longer one on a tie).
- **Producer-buffer**: consumers waiting on an empty buffer (``queue_wait_ns``) are starved by
  the producer — the client.
- **Open model**: sends starting late are the client falling behind its own schedule; drops at
  the in-flight cap, achieved below offered, or latency from the intended time growing are the
  system falling behind; neither is a run that kept up (the verdict ``none``).
"""

from __future__ import annotations

from typing import Any

from ..io.rules import schedule_kept
from .findings import Thresholds, pct
from .model_facts import OpenFacts, PhaseTime, RunFacts


def judged_phase(facts: RunFacts) -> PhaseTime | None:
    """The phase the run is judged on: the only one, or the one with the most workers alive."""
    return facts.phases[0] if len(facts.phases) == 1 else facts.deciding_phase()


def worker_time(
    all_facts: list[RunFacts], t: Thresholds, reasons: list[str], evidence: dict[str, Any]
) -> bool:
    """The client's part of the workers' time: own work, and starvation by the producer. True
    when the engine measured the workers' time of every run judged."""
    if not all_facts or not all(f.measured for f in all_facts):
        return False
    facts = all_facts[-1]
    phase = judged_phase(facts)
    assert phase is not None
    evidence.update(
        judged_phase=phase.phase,
        workers_alive=phase.workers_alive,
        busy_share=phase.busy_share,
        waiting_share=phase.waiting_share,
        own_share=phase.own_share,
        n_eff=phase.busy_s / phase.span_s if phase.span_s > 0 else 0.0,
    )
    where = _where(facts, phase)
    if phase.own_share > t.max_own_share:
        reasons.append(
            f"workers spent {pct(phase.own_share)} of their time{where} in the client's own "
            "work between requests (neither in a request nor waiting for the next)"
        )
    starved = _starved(facts, t, evidence)
    if starved:
        reasons.append(starved)
    return True


def _where(facts: RunFacts, phase: PhaseTime) -> str:
    if len(facts.phases) <= 1:
        return ""
    return f" in {phase.phase} (the phase with the most workers alive, {phase.workers_alive:.1f})"


def _starved(facts: RunFacts, t: Thresholds, evidence: dict[str, Any]) -> str:
    """Consumers waiting on an empty buffer for a material share of their time."""
    total = facts.total()
    if facts.queue_wait_s is None or total is None or total.alive_s <= 0:
        return ""
    share = facts.queue_wait_s / total.alive_s
    evidence["empty_buffer_share"] = share
    if facts.buffer_wait_s is not None and total.sent:
        evidence["mean_buffer_wait_ms"] = facts.buffer_wait_s / total.sent * 1e3
    if share <= t.max_queue_wait_share:
        return ""
    return (
        f"consumers waited on an empty buffer {pct(share)} of their time: the producer "
        "(the client) is the limit"
    )


def paced_by_workload(facts: RunFacts, t: Thresholds) -> str:
    """Why the workload as configured set the pace ('' when it did not): workers spent a
    material share of their time waiting for their next request (think time), not on a
    producer's empty buffer."""
    phase = judged_phase(facts)
    if phase is None or facts.open is not None or phase.waiting_share <= t.min_paced_share:
        return ""
    total = facts.total()
    if facts.queue_wait_s and total and facts.queue_wait_s / total.alive_s > t.max_queue_wait_share:
        return ""
    return (
        f"workers thought {phase.waiting_share:.0%} of the time, as configured "
        f"(busy {phase.busy_share:.0%}{_where(facts, phase)})"
    )


def late_sends(facts: RunFacts, t: Thresholds, evidence: dict[str, Any]) -> str:
    """Open model: the client falling behind its own schedule ('' when it kept it)."""
    schedule = facts.open
    if schedule is None:
        return ""
    late_share = schedule.late / schedule.scheduled if schedule.scheduled else 0.0
    lag, latency = schedule.lag_p99_ms, schedule.latency_p99_ms
    lag_share = lag / max(latency, 1e-6) if lag is not None and latency is not None else None
    evidence.update(late_share=late_share, send_lag_p99_ms=lag, lag_share_of_latency=lag_share)
    # The contract's rule, the one capacity's levels are judged by: few late sends, or a lag
    # that does not explain the latency (the server's queue does), is a schedule kept.
    if schedule_kept(late_share, lag_share):
        return ""
    lag = f" (p99 send lag {schedule.lag_p99_ms:.1f} ms)" if schedule.lag_p99_ms else ""
    return (
        f"the client fell behind its own schedule: {pct(late_share)} of sends started more "
        f"than {schedule.max_lateness_ms:g} ms after their intended time{lag}"
    )


def fell_behind(schedule: OpenFacts, t: Thresholds, evidence: dict[str, Any]) -> list[str]:
    """Open model: how the system fell behind the schedule (empty when it kept up)."""
    dropped = schedule.dropped / schedule.scheduled if schedule.scheduled else 0.0
    achieved = schedule.achieved_rps / schedule.offered_rps if schedule.offered_rps else 1.0
    first, second = schedule.first_half_p50_ms, schedule.second_half_p50_ms
    evidence.update(
        offered_rps=schedule.offered_rps,
        achieved_rps=schedule.achieved_rps,
        dropped=schedule.dropped,
        dropped_share=dropped,
        latency_first_half_p50_ms=first,
        latency_second_half_p50_ms=second,
    )
    reasons = []
    if dropped > t.max_dropped_share:
        reasons.append(f"{schedule.dropped} sends dropped at the in-flight cap ({pct(dropped)})")
    if achieved < t.min_achieved_share:
        reasons.append(
            f"{schedule.achieved_rps:.0f} req/s achieved of {schedule.offered_rps:.0f} offered"
        )
    if first and second and second > t.max_latency_growth * first and second - first > 5.0:
        reasons.append(
            f"latency from the intended send time grew from {first:.1f} to {second:.1f} ms "
            "(median, first vs second half of the schedule)"
        )
    return reasons


def kept_up_text(schedule: OpenFacts) -> str:
    lag = f", p99 send lag {schedule.lag_p99_ms:.2f} ms" if schedule.lag_p99_ms is not None else ""
    return (
        f"the system kept up with the schedule: {schedule.achieved_rps:.0f} req/s achieved of "
        f"{schedule.offered_rps:.0f} offered, {schedule.dropped} dropped{lag}"
    )


def phase_verdicts(facts: RunFacts, t: Thresholds, server_wait: float | None) -> list[dict]:
    """A verdict per phase or thread group, each on the workers alive in it: the client when
    they spent too much time in its own work, ``none`` when think time set the pace, the server
    when they were busy and the wait for the first byte dominated latency."""
    out = []
    for phase in facts.phases:
        if phase.own_share > t.max_own_share:
            verdict = "client"
        elif phase.waiting_share > t.min_paced_share:
            verdict = "none"
        elif phase.busy_share >= t.min_n_eff_ratio and (server_wait or 0.0) >= t.min_ttfb_share:
            verdict = "server"
        else:
            verdict = "inconclusive"
        out.append(
            {
                "phase": phase.phase,
                "verdict": verdict,
                "workers_alive": round(phase.workers_alive, 2),
                "busy_share": round(phase.busy_share, 3),
                "waiting_share": round(phase.waiting_share, 3),
            }
        )
    return out
