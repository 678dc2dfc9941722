"""Units on the command line: timeline bucket widths (``100ms``, ``1s``) as seconds, for
``report --bucket`` (an argparse type: bad text is an ``ArgumentTypeError`` that says what to
write instead); and counts as people write them: ``1 run``, ``3 runs``."""

from __future__ import annotations

import argparse
import re


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: ``count(1, "run")`` is ``1 run``, ``count(3,
    "run")`` is ``3 runs``; ``plural`` for a noun that takes more than an ``s``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)\s*$")


def parse_bucket_seconds(text: str) -> float:
    """A timeline bucket width: ``100ms``, ``0.5s``, ``1s`` → seconds (at least 1 ms)."""
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a bucket width; use e.g. 100ms, 250ms or 1s"
        )
    seconds = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
    if seconds < 0.001:
        raise argparse.ArgumentTypeError(f"'{text}': a bucket must be at least 1ms")
    return seconds


#: Column names whose human name is not the rule's (:func:`human_name`).
_NAMES = {
    "throughput_rps": "throughput (req/s)",
    "error_rate": "error rate",
    "p999_ms": "p99.9 (ms)",
    "p999_low_ms": "p99.9 low (ms)",
    "p999_high_ms": "p99.9 high (ms)",
    "run_id": "run id",
}

#: A column's unit suffix → how a person writes the unit.
_UNITS = (
    ("_rps", "req/s"),
    ("_ms", "ms"),
    ("_ns", "ns"),
    ("_s", "s"),
    ("_pct", "%"),
    ("_bytes", "bytes"),
)


def human_name(column: str) -> str:
    """A column's name for a table people read: ``throughput_rps`` → ``throughput (req/s)``,
    ``p99_low_ms`` → ``p99 low (ms)``, ``passed`` → ``passed`` (units from the name's suffix,
    underscores as spaces)."""
    if column in _NAMES:
        return _NAMES[column]
    for suffix, unit in _UNITS:
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")
