"""A ``loadgen capacity`` directory: its ``capacity.json`` (contract ``capacity_json``), read as
the engine wrote it. The search's judgements are the engine's; nothing here recomputes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CAPACITY_FILE = "capacity.json"


def is_capacity_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory written by ``loadgen capacity``."""
    return (Path(path) / CAPACITY_FILE).is_file()


def read_capacity(path: str | Path) -> dict[str, Any]:
    """The ``capacity.json`` of a capacity directory."""
    return json.loads((Path(path) / CAPACITY_FILE).read_text(encoding="utf-8"))
