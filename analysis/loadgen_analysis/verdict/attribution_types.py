"""The :class:`Attribution` every verdict is shown as — the engine's on a run or a capacity
search (:mod:`.engine`), the analysis's on a sweep (:mod:`.attribution`) — with its text,
``explain --json`` object and dictionary forms. A leaf of :mod:`loadgen_analysis.verdict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ..jsonable import jsonable
from ..models.bounds import BoundsFit
from ..models.rate_sweep import RateSweep
from ..models.usl import USLFit
from .findings import Check, Finding, Verdict

CapacityModel = USLFit | BoundsFit


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
    #: The engine's rule that decided (run.json ``verdict.rule``); None for a sweep's verdict.
    rule: str | None = None
    #: The numbers behind the engine's evidence (run.json ``verdict.numbers``).
    numbers: dict[str, float] = field(default_factory=dict)
    #: What the server's own metrics said (run.json ``verdict.server``), when scraped.
    server: dict[str, Any] | None = None
    #: The run was recorded before the engine decided verdicts.
    not_measured: bool = False
    #: The engine's one line (run.json ``verdict.headline``: cause, strength, what it found,
    #: the next step; at most 120 characters), shown as it is; None for a sweep's verdict and
    #: runs recorded before it.
    line: str | None = None

    def with_notes(self, notes: tuple[str, ...]) -> Attribution:
        return replace(self, caveats=(*self.caveats, *notes))

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
            "line": self.line,
            "checks": [
                {"name": f.check, "status": f.status, "evidence": f.summary, "values": f.evidence}
                for f in self.findings
            ],
            "notes": list(self.caveats),
            "phases": list(self.phases),
            "rule": self.rule,
            "numbers": self.numbers,
            "server": self.server,
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
        lines = (
            [f"Verdict: {self.line}", f"  why: {self.headline}"]
            if self.line
            else [f"Verdict: {self.verdict} ({self.confidence}) — {self.headline}"]
        )
        for f in self.findings:
            lines.append(f"  [{f.status:>12}] {f.check:<7} {f.summary}")
        lines.extend(
            f"  phase {p['phase']}: {p['verdict']} (workers alive {p['workers_alive']:.1f}, "
            f"busy {p['busy_share']:.0%}, waiting {p['waiting_share']:.0%})"
            for p in self.phases
        )
        lines.extend(f"  {_labelled(c)}" for c in dict.fromkeys(self.caveats))
        return "\n".join(lines)


#: The labels a caveat may already carry (a run's warnings are written ``warning: …``).
_LABELS = ("note:", "warning:", "error:")


def _labelled(caveat: str) -> str:
    """``note: …`` for a caveat, once: one that already says ``warning:`` keeps its own label."""
    return caveat if caveat.lower().startswith(_LABELS) else f"note: {caveat}"
