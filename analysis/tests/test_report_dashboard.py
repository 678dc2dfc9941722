"""``loadgen-analyze report RUN --dashboard`` (issue 48): the engine's dashboard page built from
a run directory afterwards, against the page the engine saved with ``--dashboard-out`` for the
same real run, and opened in headless Chromium with no network.

The final event must be run.json's figures exactly, as the engine's is. The seconds cannot be
equal number for number: the engine's sampler ticks on its own timer (its ``t_s``, started a
few ms after the run's anchor, is not written anywhere the analysis reads), while the rebuilt
page cuts the rows at the client-metrics samples. So the test holds what must agree: every
request counted once (the last second's total is run.json's), the same seconds within one, and
each aligned second's throughput and p50 within what a few milliseconds of shifted boundary
can move under a steady rate.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from loadgen_analysis import cli
from loadgen_analysis.testing import harness

from .conftest import Binaries
from .test_dashboard_browser import NO_NETWORK, _dump, _figures
from .test_report_browser import DATA, _chromium

#: The open model's rate: steady seconds, so a boundary shifted by δ moves ~RATE·δ requests.
RATE = 200


def page_data(page: Path) -> dict:
    """The data a dashboard page inlines (the engine's or the analysis')."""
    found = re.search(r"const DATA = (\{.*?\});\n", page.read_text(), re.S)
    assert found, f"{page} inlines no data"
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def dashboard_run(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One 4-second open-model run at RATE/s against a 2 ms server, with the engine's saved
    page, and the page `report --dashboard` builds from its directory."""
    root = tmp_path_factory.mktemp("dashboard")
    run, saved, rebuilt = root / "run", root / "saved.html", root / "rebuilt.html"
    with harness.Server(("--service-time", "2ms"), binary=binaries.server) as server:
        command = [str(binaries.loadgen), "run", "--url", server.url + "/", "--rate", str(RATE)]
        command += ["-d", "4s", "--no-progress", "--out", str(run), "--dashboard-out", str(saved)]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    # In this process: a command's imports would cost seconds.
    assert cli.main(["report", str(run), "--dashboard", "-o", str(rebuilt)]) == 0
    return {"run": run, "saved": saved, "rebuilt": rebuilt}


def test_the_final_figures_are_run_jsons_as_the_engines_page_has_them(dashboard_run: dict):
    saved, rebuilt = page_data(dashboard_run["saved"]), page_data(dashboard_run["rebuilt"])
    run_json = json.loads((dashboard_run["run"] / "run.json").read_text())
    for key in ("run_id", "exit_reason", "summary", "verdict", "client", "thresholds"):
        assert rebuilt["last"][key] == saved["last"][key] == run_json[key], key
    assert rebuilt["last"]["location"] == str(dashboard_run["run"])


def test_the_seconds_agree_with_the_engines(dashboard_run: dict) -> None:
    saved = page_data(dashboard_run["saved"])["history"]
    rebuilt = page_data(dashboard_run["rebuilt"])["history"]
    summary = json.loads((dashboard_run["run"] / "run.json").read_text())["summary"]
    # Every row once: the rebuilt page's last second holds them all (the engine's sampler
    # stops when the run ends, so its last tick may come before the last rows).
    assert rebuilt[-1]["requests"] == summary["requests"]
    assert saved[-1]["requests"] <= summary["requests"]
    assert abs(len(rebuilt) - len(saved)) <= 1, (len(rebuilt), len(saved))
    same_keys = {"t_s", "requests", "failures", "rps", "p50_ms", "total_p99_ms", "in_flight"}
    assert same_keys <= set(rebuilt[0]) and same_keys <= set(saved[0])
    assert {"scheduled", "dropped", "late"} <= set(rebuilt[0])
    for ours, theirs in zip(rebuilt[1:-1], saved[1:-1], strict=False):
        assert abs(ours["t_s"] - theirs["t_s"]) < 0.1, (ours, theirs)
        # A steady second: RATE requests, give or take those a few ms of boundary move.
        assert abs(ours["rps"] - theirs["rps"]) <= 0.05 * RATE + 2, (ours, theirs)
        assert ours["p50_ms"] == pytest.approx(theirs["p50_ms"], rel=0.25), (ours, theirs)
        assert ours["failures"] == theirs["failures"] == 0


def test_the_rebuilt_page_opens_offline_with_run_jsons_figures(dashboard_run: dict) -> None:
    _chromium()
    summary = json.loads((dashboard_run["run"] / "run.json").read_text())["summary"]
    dom = _dump(dashboard_run["rebuilt"].as_uri(), NO_NETWORK)
    shown = _figures(dom)
    assert shown["state"] == "final", shown
    assert shown["requests"] == summary["requests"], shown
    assert shown["charts"] >= 2, shown
    assert len(shown["seen"]) == len(page_data(dashboard_run["rebuilt"])["history"]), shown
    # The verdict the engine wrote, in its words.
    verdict = json.loads((dashboard_run["run"] / "run.json").read_text())["verdict"]
    assert verdict["cause"] in dom


def test_bad_input_is_one_sentence_and_exit_2(dashboard_run: dict, tmp_path: Path, capsys) -> None:
    for args in (
        ("report", dashboard_run["run"], DATA / "overview", "--dashboard"),
        ("report", dashboard_run["run"], "--dashboard", "--plots", tmp_path / "figures"),
        ("report", tmp_path / "missing", "--dashboard"),
    ):
        assert cli.main([*map(str, args), "-o", str(tmp_path / "page.html")]) == 2, args
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "page.html").exists()  # nothing half-written


def test_a_killed_run_without_run_json_is_not_said_to_be_a_shard(tmp_path: Path, capsys) -> None:
    """A single-process run killed before its run.json: the refusal says so, not that "a
    sharded run's shards each have their own" (issue 58)."""
    import shutil
    import warnings

    killed = tmp_path / "killed"
    shutil.copytree(DATA / "overview", killed)
    (killed / "run.json").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = cli.main(["report", str(killed), "--dashboard", "-o", str(tmp_path / "p.html")])
    assert code == 2
    err = capsys.readouterr().err
    assert "killed before it wrote its run.json" in err, err
    assert "shard" not in err, err
    assert not (tmp_path / "p.html").exists()
