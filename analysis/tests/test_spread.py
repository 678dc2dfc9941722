"""A run that ``loadgen run`` spread over several processes (issue 46): with the open-files
limit lowered to 1,700, 3,000 connections run as two processes of loadgen into one folder,
whose top-level run.json — the engine's summary and verdict of the run as one — is read per
the contract and is what the analysis shows; the rows it reads are the summary's."""

from __future__ import annotations

from pathlib import Path

import loadgen_analysis as la
from loadgen_analysis.testing import harness
from loadgen_analysis.verdict.engine import run_verdict

from .conftest import Binaries, run_cli

# The limit goes down before loadgen starts, as in a container that allows no more.
UNDER_1700_FILES = ("sh", "-c", 'ulimit -n 1700; exec "$0" "$@"')


def test_a_spread_run_reads_as_one_run_with_the_engines_summary_and_verdict(
    binaries: Binaries, tmp_path: Path
) -> None:
    out = tmp_path / "spread"
    with harness.Server((), binary=binaries.server) as server:
        doc = harness.run_loadgen(
            server.url + "/albums/1",
            out,
            3000,
            duration="2s",
            extra=("--think-time", "500ms", "--connect-rate", "6000/s"),
            binary=binaries.loadgen,
            prefix=UNDER_1700_FILES,
        )
    assert doc["spread"]["processes"] == 2
    run = la.load_run(out)
    assert run.shard_count == 2 and len(run.shards) == 2
    # The top-level run.json, held to the contract by the loader, is the merged run's.
    assert run.meta["spread"]["processes"] == 2
    assert run.meta["summary"] == doc["summary"]
    assert run.rows == doc["summary"]["requests"] == run.meta["records"]["rows"]
    assert int(la.op_summary(out)["requests"].sum()) == run.rows
    # One verdict: the engine's, decided once, not a choice among the shards'.
    shown = run_verdict(run)
    assert shown.verdict == doc["verdict"]["cause"]
    assert shown.headline == doc["verdict"]["summary"]
    assert not any(c.startswith("shard ") for c in shown.caveats)
    explained = run_cli("explain", out)
    assert explained.returncode == 0, explained.stderr
    assert doc["verdict"]["summary"] in explained.stdout
