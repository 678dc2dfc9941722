"""Bottleneck attribution: where did throughput stop — errors, client, network or server?

One run's verdict is the engine's (run.json ``verdict``, :mod:`.engine`): it decided it once,
from every fact it held, and this package shows it — a shard set's by the fixed order of the
checks. What needs several runs is decided here:

- **a sweep of runs**: a run whose engine verdict is errors, client or network speaks for the
  sweep, in that order (a failing, saturated or link-bound level measures that, not the
  server); otherwise the server check over the levels (:mod:`.server_check`): a plateau over N
  with the capacity model that fits, or an open-rate sweep's knee;
- **a published sweep table** (no engine judged it): the errors check on its counts and the
  same server check, by the contract's ``published_tables`` keys; client and network are not
  measured, and workers that were not kept busy (N_eff/N under ``min_n_eff_share``: the
  engine's ``inconclusive.idle_workers``) leave the table inconclusive.

Not responsible for computing the reductions or the fits (:mod:`loadgen_analysis.reductions`,
:mod:`loadgen_analysis.models`); this subpackage only reads them and explains.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.rules import verdict_rules
from ..io.run import Run
from ..models.rate_sweep import is_rate_sweep, rate_sweep
from ..reductions.summary import error_breakdown, latency_components, run_table
from .attribution_types import Attribution
from .engine import ORDER, run_verdict
from .errors_check import check_errors
from .findings import Evidence, Finding, Thresholds, Verdict, top_level
from .server_check import check_server

__all__ = ["Attribution", "attribute"]


def attribute(source: RunsArg | pd.DataFrame, thresholds: Thresholds | None = None) -> Attribution:
    """Say where throughput stopped, with the evidence.

    ``source`` is a run (its verdict is the engine's), several runs (a sweep: levels of ``-c``
    or of ``--rate``, or repeats), or a sweep table (a DataFrame with ``connections``,
    ``throughput_rps`` and, when known, ``mean_latency_ms``, ``requests``, ``failed``,
    ``n_eff``) such as a published report's.
    """
    t = thresholds or Thresholds()
    if isinstance(source, pd.DataFrame):
        return _table(source, t)
    runs = as_runs(source)
    if len(runs) == 1:
        return run_verdict(runs[0])
    return _sweep(runs, t)


def _table(source: pd.DataFrame, t: Thresholds) -> Attribution:
    """A published sweep table: its failures, then its plateau."""
    sweep = source.copy()
    if "throughput_rps" not in sweep:
        sweep["throughput_rps"] = sweep["requests"] / sweep["wall_s"]
    if "n_eff" not in sweep and "mean_latency_ms" in sweep:
        sweep["n_eff"] = sweep["throughput_rps"] * sweep["mean_latency_ms"] / 1e3
    ev = Evidence(sweep=sweep)
    workers = _table_workers(sweep)
    findings = (
        check_errors(ev, t),
        workers,
        Finding("network", "not measured", "not measured in a published table"),
    )
    decided = _decide(findings, ev, t, ())
    if workers.evidence.get("idle") and decided.verdict != "errors":
        headline = (
            f"{workers.summary} — one published table cannot tell what held them (the client, "
            "think time, or a limit before the server); the engine's verdict on such a run is "
            "inconclusive (inconclusive.idle_workers): record the sweep with loadgen to know"
        )
        return replace(decided, verdict="inconclusive", headline=headline, confidence="weak")
    return decided


def _table_workers(sweep: pd.DataFrame) -> Finding:
    """A published table's workers: N_eff = X·R̄ against N at the top level, by the contract's
    ``published_tables.min_n_eff_share`` (the engine's ``min_busy_share``, with its meaning:
    below it the workers were not kept busy, which one table cannot explain)."""
    if not ("n_eff" in sweep and "connections" in sweep and sweep["connections"].notna().all()):
        return Finding("client", "not measured", "the table has no N_eff")
    top = top_level(sweep)
    ratio = float((top["n_eff"] / top["connections"]).mean())
    evidence = {"n_eff_ratio": ratio, "connections": int(top["connections"].iloc[0])}
    text = f"N_eff/N = {ratio:.2f} at N = {evidence['connections']}"
    if ratio < float(verdict_rules()["published_tables"]["min_n_eff_share"]):
        evidence["idle"] = True
        return Finding("client", "not measured", f"workers were not kept busy: {text}", evidence)
    return Finding("client", "ok", text, evidence)


def _sweep(runs: list[Run], t: Thresholds) -> Attribution:
    """Several runs: the first level verdict, in the checks' order, that is not the server's
    to decide; else the server check over the levels."""
    verdicts = [run_verdict(r) for r in runs]
    notes = (
        "each run's own verdict (the engine's): "
        + ", ".join(f"{r.label} {v.verdict}" for r, v in zip(runs, verdicts, strict=True)),
    )
    for cause in ORDER[:3]:
        hits = [(r, v) for r, v in zip(runs, verdicts, strict=True) if v.verdict == cause]
        if hits:
            run, verdict = hits[-1]
            headline = f"{run.label}: {verdict.headline}"
            return Attribution(cause, headline, verdict.confidence, (), caveats=notes)
    ev = Evidence(
        sweep=run_table(runs),
        errors=error_breakdown(runs),
        components=latency_components(runs),
        models=tuple(r.model for r in runs),
        rate_sweep=rate_sweep(runs) if is_rate_sweep(runs) else None,
    )
    findings = (
        Finding("errors", "ok", "no run's verdict is errors"),
        Finding("client", "ok", "no run's verdict is client"),
        Finding("network", "ok", "no run's verdict is network"),
    )
    not_measured = [r.label for r, v in zip(runs, verdicts, strict=True) if v.not_measured]
    if not_measured:
        notes += (f"{', '.join(not_measured)}: not measured (recorded before request schema 6)",)
    return _decide(findings, ev, t, notes)


def _decide(
    findings: tuple[Finding, ...], ev: Evidence, t: Thresholds, notes: tuple[str, ...]
) -> Attribution:
    """The first check that found a limit decides; else the server check over the levels."""
    server, capacity, models = check_server(ev, t)
    findings = (*findings, server)
    limit = next((f for f in findings if f.status == "limit"), None)
    verdict: Verdict
    strength: Literal["strong", "weak"]
    if limit is not None:
        verdict, headline, strength = limit.check, limit.summary, "strong"
    elif server.evidence.get("kept_up"):
        verdict, headline, strength = "none", f"nothing limited it — {server.summary}", "strong"
    else:
        verdict, headline, strength = "inconclusive", server.summary, "weak"
    return Attribution(
        verdict=verdict,
        headline=headline,
        confidence=strength,
        findings=findings,
        capacity_rps=capacity,
        usl=models.usl,
        bounds=models.bounds,
        capacity_model=models.chosen,
        caveats=(*notes, *models.notes),
        rate_sweep=ev.rate_sweep,
    )
