"""The rules both languages need, read from the contract shipped as package data
(``contract/sustainability.json``: when an open-model level kept up, the rule an open-rate
sweep's older runs are marked by; ``contract/verdict.json``: the verdict's thresholds).
loadgen compiles the same files in. Nothing here judges: the modules that must read a number
read it from here instead of writing their own.
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


@cache
def verdict_rules() -> dict[str, Any]:
    """``contract/verdict.json``: the thresholds the engine decides every verdict by (the
    analysis reads only its ``published_tables`` keys, for published tables no engine judged)."""
    path = files("loadgen_analysis.io") / "verdict.json"
    return json.loads(path.read_text(encoding="utf-8"))
