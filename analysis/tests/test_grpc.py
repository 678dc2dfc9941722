"""gRPC calls (issue 47) against a server the project did not write: grpcio's, from PyPI
(analysis/zoo.lock; :mod:`loadgen_analysis.examples.grpc_greeter`). The server counts every call
it is handed; ``loadgen run --grpc`` must record one row per call it counted, the non-OK
statuses it returns (``context.abort``) as ``grpc_status`` rows with its code and message, and
the analysis commands must read the run directory. Skips with the reason when grpcio is not
installed. Bad gRPC input is one sentence and exit 2 before anything is sent.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen_analysis.examples import grpc_greeter
from loadgen_analysis.testing import harness, unavailable

from .conftest import Binaries, run_cli

CALLS = 400


@pytest.fixture
def greeter() -> Iterator[grpc_greeter.Greeter]:
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError as missing:
        unavailable.missing("zoo", f"{missing.name} is not installed (pip install './[examples]')")
    server = grpc_greeter.Greeter()
    try:
        yield server
    finally:
        server.stop()


def _run(binaries: Binaries, greeter: grpc_greeter.Greeter, out: Path, body: str) -> list[dict]:
    proto = out.parent / "demo.proto"
    proto.write_text(grpc_greeter.PROTO)
    flags = ("--grpc", grpc_greeter.METHOD, "--proto", str(proto), "-b", body)
    harness.run_loadgen(
        greeter.url,
        out,
        2,
        duration=None,
        requests=CALLS,
        extra=(*flags, "--streams-per-connection", "4", "-H", "x-test: yes"),
        binary=binaries.loadgen,
        timeout_s=120,
    )
    return pq.read_table(out / "requests").to_pylist()


def test_every_call_is_a_row_and_the_analysis_reads_the_run(
    binaries: Binaries, greeter: grpc_greeter.Greeter, tmp_path: Path
) -> None:
    rows = _run(binaries, greeter, tmp_path / "run", '{"name": "ann"}')
    # The server also answered the probe at one connection after the level, if it ran.
    assert len(rows) == greeter.calls - harness.probe_requests(tmp_path / "run") == CALLS
    outcomes = Counter((r["error"], r["grpc_status"], r["status"]) for r in rows)
    assert outcomes == {(None, 0, 200): CALLS}
    for command in (
        ("summary", tmp_path / "run"),
        ("explain", tmp_path / "run"),
        ("report", tmp_path / "run", "-o", tmp_path / "report.html"),
    ):
        done = run_cli(*command)
        assert done.returncode == 0, f"{command[0]}: {done.stderr}"


def test_a_non_ok_status_is_a_grpc_status_row_with_the_servers_code_and_message(
    binaries: Binaries, greeter: grpc_greeter.Greeter, tmp_path: Path
) -> None:
    rows = _run(binaries, greeter, tmp_path / "run", '{"name": "bob", "failWith": 5}')
    assert len(rows) == greeter.calls - harness.probe_requests(tmp_path / "run") == CALLS
    outcomes = Counter((r["error"], r["grpc_status"], r["grpc_message"]) for r in rows)
    assert outcomes == {("grpc_status", 5, "no bob, ever"): CALLS}
    # Named by its code's name and message, not a bare number that reads as HTTP 200 (issue 61).
    named = '5 NOT_FOUND "no bob, ever"'
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["summary"]["failed_grpc"] == {named: CALLS}
    assert named in " ".join(run_json["verdict"]["evidence"]), run_json["verdict"]["evidence"]
    summary = run_cli("summary", tmp_path / "run")
    assert f"{named} × {CALLS:,}" in summary.stdout, summary.stdout


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--grpc", "demo.Greeter/Shout"), "it has: demo.Greeter/Hello"),
        (("--grpc", grpc_greeter.METHOD, "-b", '{"nam": 1}'), "not a demo.HelloRequest message"),
        # The hint shows the fields of the user's message, not a made-up one.
        (("--grpc", grpc_greeter.METHOD, "-b", '{"nam": 1}'), 'e.g. {"name":"","failWith":0}'),
        (("--grpc", grpc_greeter.METHOD, "--proto", "missing.proto"), "--proto missing.proto: "),
        (
            (
                "--streams-per-connection",
                "2",
            ),
            "add --http2 (or --proto for gRPC)",
        ),
    ],
)
def test_bad_grpc_input_is_one_sentence_and_exit_2(
    binaries: Binaries, tmp_path: Path, flags: tuple[str, ...], said: str
) -> None:
    proto = tmp_path / "demo.proto"
    proto.write_text(grpc_greeter.PROTO)
    given = ("--proto", str(proto)) if "--grpc" in flags and "--proto" not in flags else ()
    done = subprocess.run(
        [str(binaries.loadgen), "run", "--url", "http://127.0.0.1:9", "-n", "1", *given, *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
