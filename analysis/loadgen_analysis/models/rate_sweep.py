"""The open-rate sweep (``loadgen sweep --rate-levels``): achieved against offered rate and
latency against rate, and the knee — the highest offered rate the system kept up with, the
same definition as ``loadgen capacity``'s.

An open run's workers are not a concurrency level (the engine starts as many as the schedule
needs in flight), so Little's Law over N, the bounds model and the USL are never fitted to it.
Instead each level is marked with what the engine recorded: sends dropped at --max-in-flight,
sends late beyond --max-lateness, and the responses completed in the schedule's second half
against the sends intended in it
(:func:`~loadgen_analysis.reductions.open_model.steady_completions`).
A level *kept up* when the engine's verdict on it (run.json ``verdict``, the rule every
open run and capacity level is judged by) is ``none``; for a run recorded before the engine
decided verdicts, when nothing was dropped and completions fell short of sends by no more
than the shared tolerance ``achieved_shortfall`` of ``contract/sustainability.json``.
Late sends are shown, not judged: a late client is the engine verdict's business.

Responsible for the per-level table and the knee; not for what they mean for the run's cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.rules import sustainability
from ..io.run import Run
from ..reductions.open_model import open_model_table, steady_completions
from ..reductions.summary import run_table


@cache
def achieved_shortfall() -> float:
    """The share by which completions may fall short of sends in a level that kept up
    (``contract/sustainability.json``)."""
    return float(sustainability()["achieved_shortfall"])


def kept_up(dropped: int, sent: int, completed: int) -> bool:
    """Whether a level kept up: nothing dropped, and completions in the steady window at least
    (1 − achieved_shortfall) of the sends intended in it (a window with no send did not)."""
    return dropped == 0 and sent > 0 and completed + achieved_shortfall() * sent >= sent


def is_rate_sweep(runs: list[Run]) -> bool:
    """Two runs or more, every one of the open model."""
    return len(runs) >= 2 and all(r.model == "open" for r in runs)


def rate_sweep_table(runs: RunsArg) -> pd.DataFrame:
    """One row per open-model run, by offered rate: run, offered_rps (run.json), achieved_rps
    (completions per second of the steady window), achieved_share (completed / sent in it),
    dropped, late, late_share, mean_ms, p50_ms, p99_ms (latency from the intended send time),
    kept (bool) and why_not (a sentence, empty when kept)."""
    runs = [r for r in as_runs(runs) if r.model == "open"]
    if not runs:
        return pd.DataFrame()
    schedule = open_model_table(runs).set_index("run")
    steady = steady_completions(runs).set_index("run")
    latency = run_table(runs).set_index("run")
    rows = []
    for run in runs:
        s, w, lat = schedule.loc[run.label], steady.loc[run.label], latency.loc[run.label]
        offered = float((run.summary or {}).get("open", {}).get("offered_rps") or s.offered_rps)
        share = w.completed / w.sent if w.sent else float("nan")
        kept, why_not = _kept(run, int(s.dropped), int(w.sent), int(w.completed))
        rows.append(
            {
                "run": run.label,
                "offered_rps": offered,
                "achieved_rps": w.completed / w.window_s if w.window_s > 0 else float("nan"),
                "achieved_share": share,
                "dropped": int(s.dropped),
                "late": int(s.late),
                "late_share": float(s.late_share),
                "mean_ms": float(lat.mean_latency_ms),
                "p50_ms": float(lat.p50_ms),
                "p99_ms": float(lat.p99_ms),
                "kept": kept,
                "why_not": why_not,
            }
        )
    return pd.DataFrame(rows).sort_values("offered_rps", kind="stable").reset_index(drop=True)


def _kept(run: Run, dropped: int, sent: int, completed: int) -> tuple[bool, str]:
    """Whether the level kept up, and why not: the engine's verdict on the run (run.json
    ``verdict``: ``none`` is kept, and its summary says why not); for a run recorded before the
    engine decided verdicts, the contract's rule on its counts."""
    verdict = run.meta.get("verdict")
    if isinstance(verdict, dict) and verdict.get("cause"):
        kept = verdict["cause"] == "none"
        return kept, "" if kept else f"{verdict['cause']}: {verdict.get('summary', '')}"
    kept = kept_up(dropped, sent, completed)
    return kept, "" if kept else _why_not(dropped, completed / sent if sent else float("nan"))


def _why_not(dropped: int, share: float) -> str:
    reasons = []
    if dropped:
        reasons.append(f"{dropped} sends dropped at --max-in-flight")
    if not share >= 1 - achieved_shortfall():
        reasons.append(
            f"completions {share:.1%} of sends in the schedule's second half (below "
            f"{1 - achieved_shortfall():.0%})"
        )
    return "; ".join(reasons)


@dataclass(frozen=True)
class RateSweep:
    """An open-rate sweep's levels and its knee."""

    levels: pd.DataFrame

    @property
    def knee_rps(self) -> float | None:
        """The highest offered rate kept up with; None when no level was."""
        kept = self.levels[self.levels["kept"]]
        return float(kept["offered_rps"].max()) if not kept.empty else None

    @property
    def first_failed(self) -> pd.Series | None:
        """The lowest level that did not keep up, or None when every level did."""
        failed = self.levels[~self.levels["kept"]]
        return failed.iloc[0] if not failed.empty else None

    def summary(self) -> str:
        """One sentence: the knee and the level above it that did not keep up."""
        top = float(self.levels["offered_rps"].max())
        failed = self.first_failed
        if failed is None:
            return f"kept up at every offered rate up to {top:g} req/s (the knee is above it)"
        knee = self.knee_rps
        head = (
            f"kept up to {knee:g} req/s (the highest rate kept)"
            if knee is not None
            else "no offered rate was kept up"
        )
        return (
            f"{head}; at {failed.offered_rps:g} req/s it achieved {failed.achieved_rps:.0f} "
            f"req/s: {failed.why_not}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "model": "open-rate sweep",
            "knee_rps": self.knee_rps,
            "achieved_shortfall": achieved_shortfall(),
            "levels": self.levels.to_dict(orient="records"),
        }


def rate_sweep(runs: RunsArg) -> RateSweep:
    """The open-rate sweep of ``runs``' open-model runs."""
    return RateSweep(rate_sweep_table(runs))
