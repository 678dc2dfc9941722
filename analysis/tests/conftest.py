"""Shared fixtures: real runs recorded by the real binaries against ``loadgen-server`` on
127.0.0.1. Each fixture is session-scoped, short (1–2 s of load) and bounded in time.

The binaries come from ``LOADGEN_BIN`` / ``LOADGEN_SERVER_BIN``, defaulting to
``<repo>/target/debug/``; when one is missing every test that needs it fails (never skips)
with a message telling the user to run ``cargo build``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loadgen_analysis import harness

#: Ground truth: 8 requests in service at 10 ms each, so at most 800 req/s.
CAPACITY_SERVER = ("--workers", "8", "--service-time", "10ms")
CAPACITY_RPS = 800.0
SWEEP_LEVELS = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Binaries:
    loadgen: Path
    server: Path


@dataclass(frozen=True)
class Recorded:
    """A run directory and the summary loadgen printed for it (``--json``)."""

    path: Path
    summary: dict[str, Any]


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    try:
        return Binaries(loadgen=harness.loadgen_bin(), server=harness.server_bin())
    except harness.BinaryNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)


def record(
    binaries: Binaries,
    server_args: tuple[str, ...],
    out: Path,
    connections: int,
    duration: str,
    extra: tuple[str, ...] = (),
) -> Recorded:
    with harness.Server(server_args, binary=binaries.server) as server:
        summary = harness.run_loadgen(
            server.url + "/",
            out,
            connections,
            duration=duration,
            extra=extra,
            binary=binaries.loadgen,
        )
    return Recorded(out, summary)


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def capacity_sweep(binaries: Binaries, runs_root: Path) -> list[Path]:
    """A sweep of ``-c`` levels against the 800 req/s server, one server for all levels."""
    with harness.Server(CAPACITY_SERVER, binary=binaries.server) as server:
        return harness.sweep(
            server.url + "/",
            runs_root / "sweep",
            SWEEP_LEVELS,
            duration="1500ms",
            binary=binaries.loadgen,
        )


@pytest.fixture(scope="session")
def error_run(binaries: Binaries, runs_root: Path) -> Recorded:
    """10 % of requests answered 500, so failures are real rows."""
    return record(
        binaries, ("--service-time", "1ms", "--error-rate", "0.1"), runs_root / "errors", 8, "1s"
    )


@pytest.fixture(scope="session")
def think_time_run(binaries: Binaries, runs_root: Path) -> Recorded:
    """A client that paces itself: 30 ms of think time after every 10 ms request."""
    return record(
        binaries,
        CAPACITY_SERVER,
        runs_root / "think-time",
        8,
        "1500ms",
        extra=("--think-time", "30ms"),
    )


@pytest.fixture(scope="session")
def service_time_runs(binaries: Binaries, runs_root: Path) -> dict[str, list[Path]]:
    """Three runs against a 5 ms server and three against an 8 ms one, same client settings
    (three, not two: a run-to-run interval from two runs has one degree of freedom and is too
    wide to call even a 60 % change)."""
    out: dict[str, list[Path]] = {"5ms": [], "8ms": []}
    for service_time in ("5ms", "8ms"):
        for i in (1, 2, 3):
            path = runs_root / f"service-{service_time}" / f"r{i}"
            record(binaries, ("--service-time", service_time), path, 16, "2s")
            out[service_time].append(path)
    return out
