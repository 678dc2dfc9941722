"""The verdicts the engine decided, shown as they are: a capacity search's (``capacity.json``:
``limited_by``, the answer and the deciding level's evidence) and a capacity level's (its
``run.json`` ``verdict``). ``explain`` presents these instead of judging the same rows again,
so ``loadgen capacity`` and ``loadgen-analyze explain`` say the same by construction; the
checks of :mod:`.attribution` judge only what the engine did not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io.capacity import is_capacity_dir, read_capacity
from .attribution import Attribution
from .findings import Verdict

#: capacity.json's ``limited_by`` as a verdict: ``max_rate`` means nothing stopped the search
#: below its ceiling.
_LIMITED_BY: dict[str, Verdict] = {
    "errors": "errors",
    "client": "client",
    "server": "server",
    "max_rate": "none",
}


def decided(path: str | Path) -> Attribution | None:
    """The engine's verdict on ``path`` (a capacity directory, or a run directory whose
    ``run.json`` carries one); ``None`` when the engine decided none there."""
    if is_capacity_dir(path):
        return _capacity_verdict(read_capacity(path))
    run_json = Path(path) / "run.json"
    if not run_json.is_file():
        return None
    document = json.loads(run_json.read_text(encoding="utf-8"))
    verdict = document.get("verdict") if isinstance(document, dict) else None
    return _level_verdict(verdict) if isinstance(verdict, dict) else None


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
        caveats=tuple(notes),
    )


def _level_verdict(verdict: dict[str, Any]) -> Attribution:
    decided_by = verdict.get("decided_by", "the engine")
    if not verdict.get("judged", True):
        headline = "not judged: the level was cut short by Ctrl-C or SIGTERM"
        return Attribution("inconclusive", headline, "weak", (), caveats=(decided_by,))
    if verdict.get("passed"):
        headline = "the level met every SLO and kept up with its schedule"
        return Attribution("none", headline, "strong", (), caveats=(f"decided by {decided_by}",))
    crossed = verdict.get("slos_crossed") or []
    headline = "; ".join(verdict.get("evidence") or ["failed"])
    if crossed:
        headline = f"crossed {', '.join(crossed)} — {headline}"
    cause: Verdict = _LIMITED_BY.get(verdict.get("cause") or "", "inconclusive")
    return Attribution(cause, headline, "strong", (), caveats=(f"decided by {decided_by}",))
