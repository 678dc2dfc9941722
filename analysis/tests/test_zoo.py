"""The zoo's tested rows (issue 44; ``zoo_testbeds.TESTED``, one per stack and cause, and every
row once strongly wrong — ``bench/zoo.sh`` runs them all): servers the project did not write —
nginx, CPython's ``http.server``, gunicorn, Node's ``http``, the JDK's
``com.sun.net.httpserver``, Go's ``net/http`` — each recorded for two seconds with the real
binaries and judged by ``explain``.
Each must get its true cause or an honest ``inconclusive``, never a wrong cause; and each
environment must be what it claims (the server's own count agrees with loadgen's, and nothing
got through faster than its limit by construction); and the console, run.json and ``explain``
must give the row one cause (``report`` too on the rows below; in-process). The
rows the verdict once got strongly wrong (network.transfer on a 64-byte body a server sent
late) are held to it by name.
Rows whose stack is not installed skip with the reason. Recordings:
:mod:`loadgen_analysis.testing.zoo_testbeds` (``bench/zoo.sh`` runs the long rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen_analysis.testing import agreement, harness
from loadgen_analysis.testing import testbeds as tb
from loadgen_analysis.testing import zoo_testbeds as zoo

from .conftest import Binaries

#: The rows the verdict got strongly wrong before the transfer rule asked the link to explain
#: moving bytes (issue 44): each must now be right or inconclusive, never network.
WERE_STRONGLY_WRONG = (
    zoo.GIL + ", open 100 r/s",
    "JDK HttpServer 8 threads × 10 ms, 3-byte body, Nagle on, -c 4",
    "Go, headers flushed 10 ms before a 64-byte body, 8 slots, -c 4",
)

#: The rows whose rule is known (issue 59): the JDK pool's small bodies wait for the client's
#: delayed ACK of their headers under the server's Nagle.
RULES = {"JDK HttpServer 8 threads × 10 ms, 3-byte body, Nagle on, -c 4": "server.nagle"}


@pytest.fixture
def bins(binaries: Binaries) -> tb.Binaries:
    return tb.Binaries(loadgen=binaries.loadgen, server=binaries.server)


def _param(testbed: zoo.ZooTestbed) -> object:
    return pytest.param(testbed, id=testbed.name)


def _environment_holds(testbed: zoo.ZooTestbed, recording_path: Path, server: dict) -> None:
    """The server's own count agrees with loadgen's; nothing beat the limit by construction."""
    run_json = json.loads((recording_path / "run.json").read_text())
    summary = run_json["summary"]
    # The probe at one connection after a closed level (run.json `probe`) is the server's too.
    sent = summary["ok"] + summary["failed"] + harness.probe_requests(recording_path)
    assert abs(server["requests"] - sent) <= max(64, 0.02 * sent), (server, summary["ok"])
    if testbed.limit_rps is not None:
        ok_rps = server.get("ok_rps", summary["throughput_rps"])
        assert ok_rps <= 1.1 * testbed.limit_rps + 20, (testbed.limit_rps, server, summary)


@pytest.mark.parametrize("testbed", [_param(t) for t in zoo.IN_TESTS])
def test_zoo_row_gets_its_cause_or_inconclusive(
    testbed: zoo.ZooTestbed, bins: tb.Binaries, tmp_path: Path
) -> None:
    reason = testbed.why_not()
    if reason:
        pytest.skip(reason)
    recording = testbed.record(bins, tmp_path / "run")
    _environment_holds(testbed, recording.path, recording.facts["server"])
    # The engine's decision (run.json), which every command shows: the console, run.json and
    # explain give one cause, and report too on the rows once strongly wrong (in this
    # interpreter; a report is ~1.6 s of CPU, so bench/zoo.sh holds it on every row).
    with_report = testbed.name in WERE_STRONGLY_WRONG
    agreed = agreement.check_in_process(recording.path, recording.summary, with_report)
    verdict = zoo.engine_verdict(recording.path) or tb.explain(recording)
    assert set(agreed.values()) == {verdict.get("verdict")}, agreed
    verdict["path"] = str(recording.path)
    grade = testbed.grade(verdict)
    shown = f"{verdict.get('verdict')} ({verdict.get('strength')}): {verdict.get('summary')}"
    assert grade in ("right", "inconclusive"), f"{testbed.truth} — got {grade}: {shown}"
    if testbed.name in RULES:
        assert verdict.get("rule") == RULES[testbed.name], shown
    if testbed.name in WERE_STRONGLY_WRONG:
        # A late body is time at the server, and the verdict says so.
        assert verdict.get("verdict") != "network", shown
        assert any("the body came late" in e for e in verdict.get("evidence", [])), shown


def test_the_rows_once_strongly_wrong_are_all_tested_rows() -> None:
    tested = {t.name for t in zoo.IN_TESTS}
    assert set(WERE_STRONGLY_WRONG) | set(RULES) <= tested
    assert tested <= {t.name for t in zoo.QUICK}


def test_grades_tell_an_honest_inconclusive_from_a_strong_wrong_cause() -> None:
    (go,) = [t for t in zoo.ZOO_TESTBEDS if t.name.startswith("Go net/http") and t.quick]
    assert go.grade({"verdict": "server", "strength": "strong"}) == "right"
    assert go.grade({"verdict": "inconclusive", "strength": "weak"}) == "inconclusive"
    assert go.grade({"verdict": "network", "strength": "weak"}) == "weak-wrong"
    assert go.grade({"verdict": "network", "strength": "strong"}) == "STRONG-WRONG"
    (sweep,) = [t for t in zoo.ZOO_TESTBEDS if t.name.startswith("Go net/http") and not t.quick]
    model = {"verdict": "server", "strength": "strong", "capacity_model": {"x_max_rps": 790.0}}
    assert sweep.grade(model) == "right"
    assert sweep.grade({**model, "capacity_model": {"x_max_rps": 600.0}}) == "x_max-off"
