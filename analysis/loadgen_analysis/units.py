"""Units on the command line: link capacities (``1Gbit``, ``200mbit``, ``25MB/s``) as bits per
second, for ``--link-capacity``, and timeline bucket widths (``100ms``, ``1s``) as seconds, for
``report --bucket``. Argparse types: bad text is an ``ArgumentTypeError`` that says what to
write instead. And counts as people write them: ``1 run``, ``3 runs``."""

from __future__ import annotations

import argparse
import re

_RATE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)"
    r"([bB][iI][tT](?:/s)?|bps|b/s|B/s|Bps|B)?\s*$"
)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: ``count(1, "run")`` is ``1 run``, ``count(3,
    "run")`` is ``3 runs``; ``plural`` for a noun that takes more than an ``s``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def parse_bits_per_second(text: str) -> float:
    """``1Gbit``, ``100Mbit/s``, ``200mbit``, ``10g``, ``200e6`` → bits per second; a capital
    ``B`` means bytes (``25MB/s`` = 200e6 bits/s). k/m/g/t are powers of 1000."""
    match = _RATE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a link capacity; use e.g. 1Gbit, 200mbit, 200e6 (bits per second) "
            "or 25MB/s (bytes per second)"
        )
    number, prefix, unit = float(match.group(1)), match.group(2).lower(), match.group(3) or ""
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[prefix]
    scale *= 8 if unit.startswith("B") and unit[:3].lower() != "bit" else 1
    if number <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': the link capacity must be positive")
    return number * scale


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
