"""The testbeds of the server's side (issues 34 and 35): one closed level against the capacity
server (8 workers × 10 ms) at half its capacity and far over it, the second with the server's
own metrics scraped (loadgen-server's saturation gauges, node_exporter's CPU where it is
installed), and a CPU-bound server (``loadgen-server --cpu-time``) whose host CPU node_exporter
shows full. Each is recorded with the binaries and judged like :mod:`.testbeds`' — the truth
is the engine's verdict, held the same by every command (:mod:`.agreement`).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from . import harness, node_exporter
from .testbeds import (
    CAPACITY_SERVER,
    Binaries,
    Recording,
    Testbed,
    favoured,
)

#: Half the capacity server's workers, and four times them.
HALF_WORKERS = 4
OVER_WORKERS = 32
#: CPU each request burns on the CPU-bound server: two cores give it ~1000 req/s at most.
CPU_TIME = "2ms"


def _record(
    binaries: Binaries,
    out: Path,
    server_args: tuple[str, ...],
    workers: int,
    scrape: bool,
    with_node_exporter: bool = False,
) -> Recording:
    """``loadgen run -c WORKERS -d 2s`` against ``loadgen-server SERVER_ARGS``, scraping its
    /metrics (``scrape``) and node_exporter (``with_node_exporter``, when it can start)."""
    with ExitStack() as stack:
        prefix = stack.enter_context(favoured())
        server = stack.enter_context(
            harness.Server(server_args, binary=binaries.server, prefix=prefix)
        )
        extra: list[str] = ["--server-metrics", server.url + "/metrics"] if scrape else []
        if with_node_exporter and node_exporter.why_not() is None:
            extra += ["--server-metrics", stack.enter_context(node_exporter.NodeExporter()).url]
        summary = harness.run_loadgen(
            server.url + "/albums/1", out, workers, "2s", extra=extra, binary=binaries.loadgen
        )
    numbers = summary.get("verdict", {}).get("numbers", {})
    measured = f"{summary['summary']['throughput_rps']:.0f} req/s"
    if "server_host_cpu_share" in numbers:
        measured += f"; target host CPU {numbers['server_host_cpu_share']:.0%} busy"
    return Recording(out, summary, {"measured": measured, "numbers": numbers})


def record_half_capacity(binaries: Binaries, out: Path) -> Recording:
    return _record(binaries, out, CAPACITY_SERVER, HALF_WORKERS, scrape=False)


def record_over_capacity_scraped(binaries: Binaries, out: Path) -> Recording:
    return _record(binaries, out, CAPACITY_SERVER, OVER_WORKERS, True, with_node_exporter=True)


def record_cpu_bound(binaries: Binaries, out: Path) -> Recording:
    server_args = ("--cpu-time", CPU_TIME)
    return _record(binaries, out, server_args, 8, scrape=True, with_node_exporter=True)


SERVER_TESTBEDS = (
    # One level at half the capacity: never "server" without evidence (issue 34, part 4).
    # Nothing queues at the server (the median response is its fastest): the connections set
    # the pace, said weakly (none.no_queue, issue 44).
    Testbed(
        f"closed at half capacity: -c {HALF_WORKERS}, server of 8 workers × 10 ms",
        "none",
        record_half_capacity,
        summary_says="nothing queued at the server",
    ),
    # The same server far over its capacity, its gauges scraped: they show it saturated.
    Testbed(
        f"closed over capacity: -c {OVER_WORKERS}, the server's gauges scraped",
        "server",
        record_over_capacity_scraped,
        summary_says="8 of 8 workers busy",
    ),
    Testbed(
        f"CPU-bound server: --cpu-time {CPU_TIME}, node_exporter scraped",
        "server",
        record_cpu_bound,
        why_not=node_exporter.why_not,
        summary_says="cores on the target",
    ),
)
