"""The testbeds of the client models beyond the closed one: open, thread-groups, phased and
producer-buffer runs (and HTTP/2 streams beyond the server's limit), each recorded in an
environment whose limit is known and judged by ``loadgen-analyze explain --json``, as
:mod:`.testbeds` does for the closed model.

Each run is a few seconds against the same server of known capacity (8 workers × 10 ms, at most
800 req/s), or a fast server with the client in a CPU quota. Responsible for the recordings and
the truths; the assertions on them live in ``analysis/tests/test_model_testbeds.py`` and the
table in :mod:`.testbed_table`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from . import harness
from .testbeds import (
    CAPACITY_RPS,
    CAPACITY_SERVER,
    ONE_LEVEL,
    ONE_LEVEL_SAYS,
    QUOTA_CORES,
    Binaries,
    Recording,
    Testbed,
    favoured,
    loadgen_json,
)

#: Open model: a rate the capacity server keeps up with, and one half again above its capacity.
OPEN_KEPT_UP_RPS = 300
OPEN_OVER_RPS = 1200
#: Open model in a CPU quota: a rate a quarter of a core cannot schedule on time.
OPEN_LAGGING_RPS = 4000
#: Open-rate sweep: two rates the capacity server keeps up with and one twice its capacity
#: (at most 64 in flight, so that level drops sends at once); its knee is the middle one.
RATE_SWEEP_RPS = (100, 200, 1600)
#: HTTP/2: streams each connection carries, against a server that allows one at a time.
H2_STREAMS = 8


def _sets(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


#: The built-in course scenarios, shrunk to a few seconds against the capacity server.
SCENARIOS = {
    "thread-groups": (
        "albums",
        {
            "model.groups": "3",
            "model.group_size": "20",
            "model.delay": "'500ms'",
            "model.iterations": "10",
            "model.startup.workers": "2",
            "model.startup.iterations": "2",
        },
    ),
    "phased": ("stepcounter", {"model.max_workers": "32", "model.iterations_per_step": "1"}),
    "producer-buffer": (
        "skiers",
        {
            "model.total": "2000",
            "model.buffer": "100",
            "model.initial_workers": "16",
            "model.requests_per_worker": "50",
            "model.max_workers": "32",
        },
    ),
}


def _record(
    binaries: Binaries,
    out: Path,
    args: Sequence[str],
    server_args: Sequence[str] = CAPACITY_SERVER,
    client_prefix: Sequence[str] | None = None,
) -> Recording:
    """``loadgen run ARGS… --url`` against ``loadgen-server SERVER_ARGS…``; the client runs in
    ``client_prefix`` (a CPU quota) when given, else favoured like the server."""
    with (
        favoured() as prefix,
        harness.Server(server_args, binary=binaries.server, prefix=prefix) as server,
    ):
        command = ["run", *args, "--url", server.url + "/", "--out", str(out)]
        summary = loadgen_json(
            binaries, command, prefix if client_prefix is None else client_prefix
        )
    return Recording(out, summary, {"measured": _measured(summary["summary"])})


def _measured(summary: dict) -> str:
    text = f"{summary['throughput_rps']:.0f} req/s"
    schedule = summary.get("open")
    if schedule:
        lag = (schedule.get("send_lag") or {}).get("p99_ns", 0) / 1e6
        text += (
            f" of {schedule.get('offered_rps', 0):.0f} offered, {schedule['dropped']} dropped, "
            f"{schedule['late']} late, p99 send lag {lag:.1f} ms"
        )
    workers = summary.get("workers")
    if workers and workers.get("alive_ns"):
        text += f"; workers busy {workers['busy_ns'] / workers['alive_ns']:.0%} of their time"
    return text


def record_open(rate: int) -> Callable[[Binaries, Path], Recording]:
    def record(binaries: Binaries, out: Path) -> Recording:
        return _record(binaries, out, ["--rate", str(rate), "-d", "2s"])

    return record


def record_rate_sweep(binaries: Binaries, out: Path) -> Recording:
    """``loadgen sweep --rate-levels 100,200,1600`` against the capacity server."""
    rates = ",".join(map(str, RATE_SWEEP_RPS))
    with (
        favoured() as prefix,
        harness.Server(CAPACITY_SERVER, binary=binaries.server, prefix=prefix) as server,
    ):
        args = ["sweep", "--rate-levels", rates, "-d", "1500ms", "--max-in-flight", "64"]
        summary = loadgen_json(
            binaries, [*args, "--url", server.url + "/", "--out", str(out)], prefix
        )
    measured = ", ".join(
        f"{level['throughput_rps']:.0f} of {level['level']:.0f} req/s"
        for level in summary["levels"]
    )
    return Recording(out, summary, {"measured": measured})


def record_scenario(model: str) -> Callable[[Binaries, Path], Recording]:
    scenario, values = SCENARIOS[model]

    def record(binaries: Binaries, out: Path) -> Recording:
        return _record(binaries, out, ["--scenario", scenario, *_sets(values)])

    return record


def record_in_quota(binaries: Binaries, out: Path, args: Sequence[str]) -> Recording:
    """``loadgen run ARGS…`` in a quarter of one core against a fast server outside it."""
    with harness.CpuCgroup(QUOTA_CORES) as quota:
        return _record(binaries, out, args, server_args=(), client_prefix=quota.prefix())


def record_producer_buffer_in_quota(binaries: Binaries, out: Path) -> Recording:
    scenario, values = SCENARIOS["producer-buffer"]
    values = {**values, "model.total": "20000", "model.requests_per_worker": "500"}
    return record_in_quota(binaries, out, ["--scenario", scenario, *_sets(values)])


def record_open_lagging(binaries: Binaries, out: Path) -> Recording:
    return record_in_quota(binaries, out, ["--rate", str(OPEN_LAGGING_RPS), "-d", "3s"])


def record_http2_streams(binaries: Binaries, out: Path) -> Recording:
    """8 streams on one HTTP/2 connection to a server that allows one at a time (2 ms each).
    The streams opened before the server's SETTINGS frame arrives may be refused (a few
    ``reset`` rows in the first round trip: HTTP/2's rule); 3 s keeps them well under 1 %."""
    args = ["--http2", "-c", "1", "--streams-per-connection", str(H2_STREAMS), "-d", "3s"]
    server = ("--service-time", "2ms", "--h2-max-streams", "1")
    return _record(binaries, out, args, server_args=server)


MODEL_TESTBEDS = (
    Testbed(
        f"open: {OPEN_KEPT_UP_RPS} req/s, server of 8 workers × 10 ms",
        "none",
        record_open(OPEN_KEPT_UP_RPS),
    ),
    Testbed(
        f"open: {OPEN_OVER_RPS} req/s, above the server's {CAPACITY_RPS:.0f}",
        "server",
        record_open(OPEN_OVER_RPS),
    ),
    Testbed(
        f"open in a CPU quota: {OPEN_LAGGING_RPS} req/s, 25 % of one core",
        "client",
        record_open_lagging,
        why_not=harness.why_no_cpu_cgroup,
    ),
    Testbed(
        f"open-rate sweep: {', '.join(map(str, RATE_SWEEP_RPS))} req/s, server of 8 workers "
        "× 10 ms",
        "server",
        record_rate_sweep,
        summary_says=f"kept up to {RATE_SWEEP_RPS[1]} req/s",
        no_n_model=True,
    ),
    # One level of a server-bound run: the time is spent at the server, but one level cannot
    # tell a server at its capacity from one with room to spare (issue 34), and says so.
    Testbed(
        "thread-groups: albums, 3 × 20 workers",
        ONE_LEVEL,
        record_scenario("thread-groups"),
        summary_says=ONE_LEVEL_SAYS,
    ),
    Testbed(
        "phased: stepcounter, up to 32 workers",
        ONE_LEVEL,
        record_scenario("phased"),
        summary_says=ONE_LEVEL_SAYS,
    ),
    Testbed(
        "producer-buffer: skiers, 16 → 32 consumers",
        ONE_LEVEL,
        record_scenario("producer-buffer"),
        summary_says=ONE_LEVEL_SAYS,
    ),
    Testbed(
        "producer-buffer in a CPU quota: 25 % of one core",
        "client",
        record_producer_buffer_in_quota,
        why_not=harness.why_no_cpu_cgroup,
    ),
    Testbed(
        f"HTTP/2: {H2_STREAMS} streams, the server allows 1",
        "client",
        record_http2_streams,
    ),
)


def by_name(prefix: str) -> Testbed:
    """The model testbed whose name starts with ``prefix``."""
    return next(t for t in MODEL_TESTBEDS if t.name.startswith(prefix))
