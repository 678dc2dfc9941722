"""The verdicts the engine decided, shown as they are: a run's (run.json ``verdict``: cause,
strength, the rule that decided, the evidence with its numbers, a verdict per phase), a
capacity level's (the same object, its cause the search's judgement of the level) and a
capacity search's (``capacity.json``: ``limited_by``, the answer). ``explain``, ``summary``,
``report`` and the notebooks present these instead of judging the same rows again, so the
console, ``loadgen capacity`` and ``loadgen-analyze`` say the same by construction.

A run that ``loadgen run`` spread over several processes has its verdict decided once, by the
engine, on every process's aggregates (its run.json at the top of the folder): that one is
shown. Shards started by hand each decided their own; the merged run's verdict is the first
cause, in the checks' fixed order (the contract's ``cause_order``: errors, client, network,
server, inconclusive, none), among its shards' — a shard that failed or whose client was the
limit speaks for the set. A run recorded before the engine decided verdicts (request schema
≤ 5) is "not measured".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io.capacity import is_capacity_dir, read_capacity
from ..io.rules import verdict_rules
from ..io.run import Run
from .attribution_types import Attribution
from .findings import Verdict

#: capacity.json's ``limited_by`` as a verdict: ``max_rate`` means nothing stopped the search
#: below its ceiling.
_LIMITED_BY: dict[str, Verdict] = {
    "errors": "errors",
    "client": "client",
    "network": "network",
    "server": "server",
    "max_rate": "none",
}

#: The checks' order (``contract/verdict.json`` ``cause_order``, the order the engine's checks
#: run in): the first cause in it among a shard set's verdicts is the set's.
ORDER: tuple[Verdict, ...] = tuple(verdict_rules()["cause_order"])

NOT_MEASURED = (
    "not measured: the run was recorded before loadgen decided a run's verdict (request "
    "schema ≤ 5); record it again with today's loadgen"
)


def decided(path: str | Path) -> Attribution | None:
    """The engine's verdict on a capacity directory (capacity.json); ``None`` for anything
    else (a run is read with :func:`run_verdict`)."""
    if is_capacity_dir(path):
        return _capacity_verdict(read_capacity(path))
    return None


def run_verdict(run: Run) -> Attribution:
    """The engine's verdict on one run (its shards' combined for a shard set)."""
    whole = run.meta.get("verdict") if run.shards else None
    if isinstance(whole, dict) and "cause" in whole:
        return _present(whole)
    verdicts = [p.meta.get("verdict") for p in run.parts]
    if not verdicts or not all(isinstance(v, dict) and "cause" in v for v in verdicts):
        return Attribution("inconclusive", NOT_MEASURED, "weak", (), not_measured=True)
    if len(verdicts) == 1:
        return _present(verdicts[0])
    first = min(verdicts, key=lambda v: ORDER.index(_cause(v)))
    shown = _present(first)
    notes = tuple(
        f"shard {i + 1}/{len(verdicts)}: {_cause(v)} — {v.get('summary', '')}"
        for i, v in enumerate(verdicts)
    )
    return shown.with_notes(
        (*notes, "a shard set's verdict is the first cause, in the checks' order, of its shards'")
    )


def _cause(verdict: dict[str, Any]) -> Verdict:
    cause = verdict.get("cause")
    if cause is None and verdict.get("passed") and verdict.get("judged", True):
        return "none"  # a capacity level recorded before request schema 6 that passed
    return cause if cause in ORDER else "inconclusive"


def _present(verdict: dict[str, Any]) -> Attribution:
    evidence = [str(e) for e in verdict.get("evidence") or []]
    summary = str(verdict.get("summary") or _old_level_summary(verdict, evidence))
    notes = [e for e in evidence if e != summary]
    slos = verdict.get("slos")
    if isinstance(slos, dict) and slos.get("crossed"):
        notes.insert(0, f"SLOs crossed: {', '.join(slos['crossed'])}")
    notes.append(f"decided by {verdict.get('decided_by', 'loadgen')} (run.json verdict)")
    return Attribution(
        verdict=_cause(verdict),
        headline=summary,
        confidence="strong"
        if verdict.get("strength", _old_strength(verdict)) == "strong"
        else "weak",
        findings=(),
        caveats=tuple(dict.fromkeys(notes)),
        phases=tuple(
            {
                "phase": p.get("phase"),
                "verdict": p.get("cause"),
                "rule": p.get("rule"),
                "workers_alive": p.get("workers_alive", 0.0),
                "busy_share": p.get("busy_share", 0.0),
                "waiting_share": p.get("waiting_share", 0.0),
            }
            for p in verdict.get("phases") or []
        ),
        rule=verdict.get("rule"),
        numbers=dict(verdict.get("numbers") or {}),
        server=verdict.get("server"),
        line=verdict.get("headline"),
    )


def _old_strength(verdict: dict[str, Any]) -> str:
    """A capacity level recorded before request schema 6 was judged strongly unless cut short."""
    return "strong" if verdict.get("judged", True) else "weak"


def _old_level_summary(verdict: dict[str, Any], evidence: list[str]) -> str:
    """A capacity level's verdict as recorded before request schema 6 (``passed``,
    ``slos_crossed``, ``evidence``), in today's words."""
    if not verdict.get("judged", True):
        return "not judged: the level was cut short by Ctrl-C or SIGTERM"
    if verdict.get("passed"):
        return "the level met every SLO and kept up with its schedule"
    crossed = ", ".join(verdict.get("slos_crossed") or [])
    head = "; ".join(evidence) or "failed"
    return f"crossed {crossed} — {head}" if crossed else head


def _capacity_verdict(capacity: dict[str, Any]) -> Attribution:
    limited_by = capacity.get("limited_by")
    verdict: Verdict = _LIMITED_BY.get(limited_by or "", "inconclusive")
    notes = [*capacity.get("evidence", []), *(f"warning: {w}" for w in capacity["warnings"])]
    notes.append("decided by `loadgen capacity` (capacity.json), shown as it is")
    return Attribution(
        verdict=verdict,
        headline=capacity["answer"],
        confidence="strong" if capacity.get("converged") else "weak",
        findings=(),
        capacity_rps=capacity.get("capacity_rps"),
        caveats=tuple(dict.fromkeys(notes)),
        rule=f"capacity.{limited_by}" if limited_by else None,
    )
