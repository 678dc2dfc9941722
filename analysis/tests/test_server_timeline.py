"""The server under the timeline (issue 35, part 3): a real run scraping loadgen-server's own
``/metrics`` (its saturation gauges) and, where Debian's ``prometheus-node-exporter`` is
installed, node_exporter on a free loopback port (the host's ``node_cpu_seconds_total``).
The reductions of :mod:`loadgen_analysis.reductions.server_timeline` read them back, the
timeline draws a CPU panel and a saturation panel under throughput and latency, and a run
without ``server-metrics.parquet`` gets neither."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen_analysis.reductions.server_timeline import cpu_busy, saturation
from loadgen_analysis.report import plots
from loadgen_analysis.report.html import build_report
from loadgen_analysis.testing import harness

from .conftest import Binaries
from .test_figures import cut_texts

DATA = Path(__file__).resolve().parents[2] / "data" / "runs"
NODE_EXPORTER = shutil.which("prometheus-node-exporter")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def node_exporter() -> Iterator[str | None]:
    """node_exporter with only its CPU collector on 127.0.0.1, for the module; its URL (None
    where it is not installed)."""
    if NODE_EXPORTER is None:
        yield None
        return
    url = f"http://127.0.0.1:{_free_port()}/metrics"
    command = [NODE_EXPORTER, "--collector.disable-defaults", "--collector.cpu"]
    command.append(f"--web.listen-address={url.split('/')[2]}")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"node_exporter did not answer at {url}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.fixture(scope="module")
def scraped_run(
    binaries: Binaries, node_exporter: str | None, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """8 workers against 4 server workers of 5 ms for 2.5 s, scraping the server's /metrics
    and node_exporter (when installed)."""
    out = tmp_path_factory.mktemp("server-timeline") / "run"
    with harness.Server(("--workers", "4", "--service-time", "5ms"), binary=binaries.server) as s:
        scrape = ("--server-metrics", s.url + "/metrics")
        if node_exporter is not None:
            scrape += ("--server-metrics", node_exporter)
        harness.run_loadgen(s.url + "/", out, 8, "2500ms", extra=scrape, binary=binaries.loadgen)
    return out


_NO_EXPORTER = "prometheus-node-exporter is not installed (scripts/test.sh installs it)"


@pytest.mark.skipif(NODE_EXPORTER is None, reason=_NO_EXPORTER)
def test_the_cpu_busy_share_is_per_core_and_in_total(scraped_run: Path) -> None:
    cpu = cpu_busy(scraped_run)
    assert not cpu.empty
    assert cpu["busy_share"].between(0, 1).all()
    cores = sorted(set(cpu["cpu"]) - {"all"})
    assert cores and "all" in set(cpu["cpu"])
    # One share per core and in total for each interval between the ~1 s scrapes.
    per_interval = cpu.groupby("time_s")["cpu"].nunique()
    assert (per_interval == len(cores) + 1).all() and len(per_interval) >= 1
    # The total is the cores' mean when each core counts the same seconds.
    first = cpu[cpu["time_s"] == cpu["time_s"].min()]
    mean = first[first["cpu"] != "all"]["busy_share"].mean()
    assert first[first["cpu"] == "all"]["busy_share"].iloc[0] == pytest.approx(mean, abs=0.02)


def test_the_saturation_gauges_show_4_of_4_workers_busy_and_a_queue(scraped_run: Path) -> None:
    gauges = saturation(scraped_run)
    assert len(gauges) >= 2
    assert set(gauges["workers_limit"]) == {4.0}
    assert gauges["workers_busy"].max() == 4.0
    # 8 client workers against 4 server ones: the other 4 wait in its queue.
    assert gauges["queue_length"].max() >= 1


def test_the_timeline_has_the_server_panels_only_when_the_run_scraped_them(
    scraped_run: Path,
) -> None:
    fig = plots.plot_timeline(scraped_run)
    cpu = ["target CPU busy (%)"] if NODE_EXPORTER else []
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["requests/s", "latency (ms)", *cpu, "workers and queue"]
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"workers busy", "workers limit", "queued"} <= legend
    assert ("CPU, all cores" in legend) == bool(NODE_EXPORTER)
    assert cut_texts(fig) == []
    assert "--server-metrics" in build_report(scraped_run)
    bare = plots.plot_timeline(DATA / "overview")
    assert [ax.get_ylabel() for ax in bare.axes] == ["requests/s", "latency (ms)"]
    assert cpu_busy(DATA / "overview").empty and saturation(DATA / "overview").empty
