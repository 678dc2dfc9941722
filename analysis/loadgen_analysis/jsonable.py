"""One clean-up for every JSON document the package prints: NumPy scalars become Python
numbers, NaN and infinities become null (JSON has neither), tuples become lists and keys
become strings. A leaf: it imports nothing from the package."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """``value`` (nested dicts, lists and tuples of scalars) as :func:`json.dumps` takes it."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return value
