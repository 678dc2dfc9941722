"""What a figure calls a run and its target: a sweep's or capacity search's level by its load
(``N=8``, ``400 req/s``) rather than its directory (``level-0008``), and the URL the runs were
sent to, for a single-run figure's title. Names only: the frames keep the run's label.
"""

from __future__ import annotations

import re
from typing import Any

from ..io.load import RunsArg, as_runs

#: A directory a sweep or a capacity search names after its level's number.
_LEVEL_DIR = re.compile(r"^level-\d+")


def level_name(model: dict[str, Any]) -> str | None:
    """``N=8`` for a closed level, ``400 req/s`` for an open one, from run.json's model;
    None for a model with neither."""
    if model.get("kind") == "closed" and model.get("workers") is not None:
        return f"N={model['workers']:g}"
    if model.get("kind") == "open" and model.get("rate") is not None:
        return f"{model['rate']:g} req/s"
    return None


def figure_names(runs: RunsArg) -> dict[str, str]:
    """Each run's label → what its figures call it: a level directory by its load (``N=8``),
    any other run by its label."""
    names = {}
    for run in as_runs(runs):
        model = ((run.meta.get("config") or {}).get("definition") or {}).get("model") or {}
        level = level_name(model) if _LEVEL_DIR.match(run.label) else None
        names[run.label] = level or run.label
    return names


def target_of(runs: RunsArg) -> str | None:
    """The URL the runs were sent to when they share one (a single run's), else None."""
    urls = {(run.meta.get("config") or {}).get("url") for run in as_runs(runs)}
    urls.discard(None)
    return str(urls.pop()) if len(urls) == 1 else None
