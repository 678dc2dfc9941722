"""The rules both languages judge by, read from the contract shipped as package data
(``contract/sustainability.json``: when an open-model level kept up, and when its sends were on
time). loadgen compiles the same file in; both hold its test vectors. Nothing here judges: the
judging modules read their numbers from here instead of writing their own.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def sustainability() -> dict[str, Any]:
    """``contract/sustainability.json`` as a dictionary."""
    path = files("loadgen_analysis.io") / "sustainability.json"
    return json.loads(path.read_text(encoding="utf-8"))


def schedule_kept(late_share: float, lag_share_of_latency: float | None) -> bool:
    """Whether an open-model run's sends were on time: few late, or the lag does not explain
    the latency (the contract's rule and numbers)."""
    rule = sustainability()
    if late_share <= rule["late_share"]:
        return True
    return lag_share_of_latency is None or lag_share_of_latency < rule["lag_share_of_latency"]
