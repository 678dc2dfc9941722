"""HTTP/3 (issue 47) against a server the project did not write: aioquic's, from PyPI
(analysis/zoo.lock; :mod:`loadgen_analysis.testing.h3_counter`). The server counts every request
it is handed; ``loadgen run --http3`` must record one row per request it counted, its stream
resets as ``reset`` rows, a connection it closed and a handshake it refused as ``closed`` and
``handshake`` rows (error classes of contract/files.json), and the analysis commands must read
the run directory. Skips with the reason when aioquic is not installed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen_analysis.io import contract
from loadgen_analysis.testing import harness, unavailable

from .conftest import Binaries, run_cli

REQUESTS = 300


def _counter(**knobs: int) -> Iterator[object]:
    try:
        import aioquic  # noqa: F401
    except ImportError:
        unavailable.missing("zoo", "aioquic is not installed (analysis/zoo.lock)")
    from loadgen_analysis.testing.h3_counter import H3Counter

    server = H3Counter(**knobs)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def counter() -> Iterator[object]:
    yield from _counter()


def _error_classes() -> set[str]:
    """The error classes the contract's ``error`` column lists."""
    column = next(c for c in contract.file("requests")["columns"] if c["name"] == "error")
    listed = column["meaning"].removeprefix("error class (").split(")")[0]
    return {name.strip() for name in listed.split(",")}


def _run(
    binaries: Binaries, server: object, out: Path, requests: int, *flags: str, connections: int = 2
) -> list[dict]:
    harness.run_loadgen(
        server.url,  # type: ignore[attr-defined]
        out,
        connections,
        duration=None,
        requests=requests,
        extra=("--http3", "--cacert", str(server.ca), *flags),  # type: ignore[attr-defined]
        binary=binaries.loadgen,
        timeout_s=120,
    )
    return pq.read_table(out / "requests").to_pylist()


def test_every_request_is_a_row_and_the_analysis_reads_the_run(
    binaries: Binaries, counter: object, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    rows = _run(binaries, counter, run, REQUESTS, "--streams-per-connection", "4")
    # The server also answered the probe at one connection after the level, if it ran.
    served = counter.requests - harness.probe_requests(run)  # type: ignore[attr-defined]
    assert len(rows) == served == REQUESTS
    assert Counter((r["error"], r["status"]) for r in rows) == {(None, 200): REQUESTS}
    # 2 connections × 4 streams, each connection's handshake in its first row's connect_ns.
    assert len({r["worker"] for r in rows}) == 8
    assert sum(r["connect_ns"] is not None for r in rows) == 2
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"]["protocol"] == "HTTP/3"
    assert meta["client"].get("tcp") is None
    for command in (
        ("summary", run),
        ("explain", run),
        ("report", run, "-o", tmp_path / "report.html"),
    ):
        done = run_cli(*command)
        assert done.returncode == 0, f"{command[0]}: {done.stderr}"


def test_a_stream_the_server_resets_is_a_reset_row(binaries: Binaries, tmp_path: Path) -> None:
    for server in _counter(reset_every=5):
        rows = _run(binaries, server, tmp_path / "run", REQUESTS)
        served = server.requests - harness.probe_requests(tmp_path / "run")  # type: ignore[attr-defined]
        assert len(rows) == served == REQUESTS
        outcomes = Counter(r["error"] for r in rows)
        assert outcomes == {None: REQUESTS - server.resets, "reset": server.resets}  # type: ignore[attr-defined]
        assert set(outcomes) - {None} <= _error_classes()


def test_a_closed_connection_and_a_refused_handshake_are_classified_rows(
    binaries: Binaries, tmp_path: Path
) -> None:
    # Connection 1 is loadgen's probe, connection 2 carries 10 requests and is closed; every
    # handshake after it is refused.
    for server in _counter(close_after=10, refuse_after=2):
        rows = _run(binaries, server, tmp_path / "run", 40, connections=1)
        assert len(rows) == 40
        outcomes = Counter(r["error"] for r in rows)
        # The server closes at once after its 10th answer (CONNECTION_CLOSE is abrupt: an
        # answer still in flight is lost with it), so each request it was handed is an ok row
        # or a `closed` one.
        assert server.requests == 10  # type: ignore[attr-defined]
        assert outcomes[None] <= 10 <= outcomes[None] + outcomes["closed"], outcomes
        assert outcomes["handshake"] > 0 and server.refused > 0, outcomes  # type: ignore[attr-defined]
        assert set(outcomes) - {None} <= {"handshake", "closed"}, outcomes
        assert set(outcomes) - {None} <= _error_classes()
