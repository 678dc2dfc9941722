"""A run that ``loadgen run`` spread over several processes (issue 46): with the open-files
limit lowered to 1,700, 3,000 connections run as two processes of loadgen into one folder,
whose top-level run.json — the engine's summary and verdict of the run as one — is read per
the contract and is what the analysis shows; the rows it reads are the summary's, also when one
process was killed (issue 58: the engine reads its closed segments back)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
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


def _children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a spread run's: the shell exec'd into loadgen)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == str(parent):
            found.append(int(entry.name))
    return sorted(found)


def _closed_segments(out: Path) -> list[int]:
    """Closed segments per shard directory of a spread run."""
    shards = sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []
    return [len(list(s.glob("requests/part-*.parquet"))) for s in shards]


def test_a_killed_processs_rows_are_in_the_engines_summary_and_the_analysis_alike(
    binaries: Binaries, tmp_path: Path
) -> None:
    """One process ``kill -9``'d once both have closed a segment, the run ended by Ctrl-C:
    ``loadgen-analyze summary`` counts the rows of every closed segment, and run.json's summary
    is the same count (it was the surviving process's alone)."""
    out = tmp_path / "spread"
    with harness.Server((), binary=binaries.server) as server:
        command = [
            *UNDER_1700_FILES,
            str(binaries.loadgen),
            "run",
            "--url",
            server.url + "/albums/1",
            "-c",
            "3000",
            "-d",
            "60s",
            "--think-time",
            "500ms",
            "--connect-rate",
            "6000/s",
            "--segment-interval",
            "1s",
            "--no-progress",
            "--json",
            "--out",
            str(out),
        ]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                children, closed = _children(proc.pid), _closed_segments(out)
                if len(children) == 2 and len(closed) == 2 and min(closed) > 0:
                    break
                time.sleep(0.1)
            assert len(children) == 2 and min(closed) > 0, (children, closed)
            os.kill(children[0], signal.SIGKILL)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 130, stderr.decode()
    run_json = json.loads((out / "run.json").read_text())
    assert [s["handed_over"] for s in run_json["spread"]["shards"]].count(False) == 1
    total = run_json["summary"]["requests"]
    assert json.loads(stdout)["summary"]["requests"] == total > 0
    shown = run_cli("summary", out, "--json")
    assert shown.returncode == 0, shown.stderr
    assert sum(op["requests"] for op in json.loads(shown.stdout)) == total
    assert la.load_run(out).rows == run_json["records"]["rows"] == total
