"""The server under the timeline (issue 35, part 3): the session's real run that scraped
loadgen-server's own ``/metrics`` (its saturation gauges) and, where Debian's
``prometheus-node-exporter`` is installed, node_exporter (the host's ``node_cpu_seconds_total``)
— ``conftest.evidence_run``. The timeline draws a CPU panel and a saturation panel under
throughput and latency from :mod:`loadgen_analysis.reductions.server_series`, the engine's
verdict names the saturation, and a run without ``server-metrics.parquet`` gets neither."""

from __future__ import annotations

import json
from pathlib import Path

import loadgen_analysis as la
from loadgen_analysis.report import plots
from loadgen_analysis.report.html import build_report

from .conftest import EvidenceRun
from .test_figures import cut_texts

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"


def test_the_timeline_has_the_server_panels_only_when_the_run_scraped_them(
    evidence_run: EvidenceRun,
) -> None:
    fig = plots.plot_timeline(evidence_run.path)
    scraped_cpu = evidence_run.no_node_exporter is None
    cpu = ["target CPU busy (%)"] if scraped_cpu else []
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["requests/s", "latency (ms)", *cpu, "workers and queue"]
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"workers busy", "workers limit", "queued"} <= legend
    assert ("CPU, all cores" in legend) == scraped_cpu
    assert cut_texts(fig) == []
    assert "--server-metrics" in build_report(evidence_run.path)
    bare = plots.plot_timeline(DATA / "think-time")  # recorded without --server-metrics
    assert [ax.get_ylabel() for ax in bare.axes] == ["requests/s", "latency (ms)"]
    assert la.server_cpu_busy(DATA / "think-time").empty
    assert la.server_saturation(DATA / "think-time").empty


def test_the_verdict_names_the_servers_saturation_from_its_gauges(
    evidence_run: EvidenceRun,
) -> None:
    """Issue 35: 4 clients on 2 server workers of 5 ms — one closed level, which alone cannot
    tell a server at its capacity; its gauges can, and the verdict names them, in run.json,
    in explain and in the report alike."""
    verdict = json.loads((evidence_run.path / "run.json").read_text())["verdict"]
    workers = verdict["server"]["workers"]
    assert (workers["busy_max"], workers["limit"]) == (2.0, 2.0)
    assert verdict["server"]["queue"]["max"] >= 1
    if verdict["cause"] == "client":  # a machine too busy to give the client its CPU
        return
    # A machine too busy to keep both workers busy in half the scrapes: the gauges do not show
    # a saturated server, and the engine must not say one strongly (nor anything else).
    contract = json.loads((DATA.parents[1] / "contract" / "verdict.json").read_text())
    if (workers.get("all_busy_share") or 0.0) < contract["saturated_scrape_share"]:
        assert verdict["strength"] == "weak", verdict
        return
    assert (verdict["cause"], verdict["rule"]) == ("server", "server.saturated"), verdict
    assert "2 of 2 workers busy" in verdict["summary"]
    explained = la.attribute(evidence_run.path)
    assert (explained.verdict, explained.headline) == ("server", verdict["summary"])
    assert "2 of 2 workers busy" in build_report(evidence_run.path)
