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
