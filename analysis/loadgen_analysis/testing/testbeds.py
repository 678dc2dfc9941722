"""The testbeds: environments whose limit is known, each recorded with the real binaries and
judged by ``loadgen-analyze explain --json``, so every verdict is checked against a truth.

Responsible for recording each testbed (a :class:`Testbed`'s ``record``: what it starts, with
which flags, and what the environment itself measured — link counters, the cgroup's
``cpu.stat``), for judging a verdict against the truth (:meth:`Testbed.right`) and for the table
``bench/testbeds.sh`` prints (:mod:`.testbed_table`). The environments (a
CPU-quota cgroup, a shaped link into a network namespace, the servers) come from
:mod:`.harness`; the assertions on them live in
``analysis/tests/test_testbeds.py``. It analyses nothing itself: the verdict is ``explain``'s.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import agreement, harness

#: Server capacity: 8 requests in service at 10 ms each, so at most 800 req/s.
CAPACITY_SERVER = ("--workers", "8", "--service-time", "10ms")
CAPACITY_RPS = 800.0
SWEEP_LEVELS = (1, 2, 4, 8, 16, 32, 64)
#: The client's CPU quota, in cores (a Kubernetes `limits.cpu: 250m`).
QUOTA_CORES = 0.25
#: The shaped link, in tc's spelling and in bits per second.
LINK_RATE = "200mbit"
LINK_RATE_BPS = 200e6
THINK_TIME_S = 0.030
THINK_WORKERS = 8
ERROR_RATE = 0.1


@dataclass(frozen=True)
class Binaries:
    loadgen: Path
    server: Path

    @staticmethod
    def find() -> Binaries:
        """``$LOADGEN_BIN`` / ``$LOADGEN_SERVER_BIN``, else ``target/debug``."""
        return Binaries(loadgen=harness.loadgen_bin(), server=harness.server_bin())


@dataclass(frozen=True)
class Recording:
    """A run (or sweep) directory and what the environment measured while it ran."""

    path: Path
    summary: dict[str, Any]  # loadgen's --json output
    facts: dict[str, Any] = field(default_factory=dict)
    #: What a user would tell ``explain`` about this environment (e.g. the link's capacity).
    explain_args: tuple[str, ...] = ()


def explain(recording: Recording) -> dict[str, Any]:
    """``loadgen-analyze explain --json PATH ARGS…`` (this interpreter's package), parsed, with
    ``agreement``: the cause every command gives (:mod:`.agreement` — the recording command's
    output, run.json or capacity.json, explain, report).

    Raises RuntimeError with its stderr when it exits non-zero, or when the commands disagree.
    """
    path, args = str(recording.path), recording.explain_args
    command = [sys.executable, "-m", "loadgen_analysis.cli", "explain", "--json", path, *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {proc.returncode}:\n{proc.stderr}")
    explained = json.loads(proc.stdout)
    explained["agreement"] = agreement.check(recording.path, recording.summary, explained)
    return explained


def check(verdict: dict[str, Any], name: str) -> dict[str, Any]:
    """The check called ``name`` in an ``explain --json`` answer ({} when there is none)."""
    return next((c for c in verdict.get("checks", []) if c.get("name") == name), {})


def x_max_rps(verdict: dict[str, Any]) -> float | None:
    """The capacity model's X_max (requests/s) in an ``explain --json`` answer on a sweep."""
    model = verdict.get("capacity_model") or {}
    value = model.get("x_max_rps", model.get("x_max"))
    return float(value) if value is not None else None


def loadgen_json(
    binaries: Binaries, args: Sequence[str], prefix: Sequence[str] = (), timeout_s: float = 180
) -> dict[str, Any]:
    """``PREFIX… loadgen ARGS… --no-progress --json``, bounded; its summary. RuntimeError on
    failure."""
    command = [*prefix, str(binaries.loadgen), *args, "--no-progress", "--json"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout)


@contextlib.contextmanager
def favoured() -> Iterator[list[str]]:
    """A prefix that runs a command in a cgroup with 10× the default CPU weight
    (:class:`harness.CpuCgroup`), so that on a shared machine the testbed's own limit, not the
    neighbours, decides; ``[]`` where no cgroup can be made (then neighbours may skew it)."""
    if harness.why_no_cpu_cgroup():
        yield []
        return
    with harness.CpuCgroup() as group:
        yield group.prefix()


# --------------------------------------------------------------------------- the recordings


def record_server_capacity(binaries: Binaries, out: Path) -> Recording:
    """``loadgen sweep`` 1…64 against 8 workers × 10 ms (true capacity 800 req/s)."""
    with (
        favoured() as prefix,
        harness.Server(CAPACITY_SERVER, binary=binaries.server, prefix=prefix) as server,
    ):
        levels = ",".join(map(str, SWEEP_LEVELS))
        args = ["sweep", "--url", server.url + "/", "--levels", levels, "-d", "1s"]
        summary = loadgen_json(binaries, [*args, "--out", str(out)], prefix)
    best = max(summary["levels"], key=lambda level: level["throughput_rps"])
    measured = f"peak {best['throughput_rps']:.0f} req/s at N = {best['level']:.0f}"
    return Recording(out, summary, {"measured": measured})


def record_client_quota(binaries: Binaries, out: Path, quota: harness.CpuCgroup) -> Recording:
    """A closed run, -c 50, inside ``quota`` (a quarter of one core) against a fast server
    outside it; facts: the cgroup's own ``cpu.stat`` deltas (``nr_periods``,
    ``nr_throttled``)."""
    with favoured() as prefix, harness.Server(binary=binaries.server, prefix=prefix) as server:
        before = quota.stat()
        summary = harness.run_loadgen(
            server.url + "/", out, 50, "3s", binary=binaries.loadgen, prefix=quota.prefix()
        )
        after = quota.stat()
    facts = {k: after[k] - before.get(k, 0) for k in ("nr_periods", "nr_throttled")}
    facts["cgroup"] = quota.version
    facts["measured"] = (
        f"{quota.version} throttled the client in {facts['nr_throttled']} of "
        f"{facts['nr_periods']} periods; {summary['summary']['throughput_rps']:.0f} req/s"
    )
    return Recording(out, summary, facts)


def _in_quota(binaries: Binaries, out: Path) -> Recording:
    with harness.CpuCgroup(QUOTA_CORES) as quota:
        return record_client_quota(binaries, out, quota)


class _TxSampler:
    """Samples a :class:`harness.ShapedLink`'s host-side tx counter every 100 ms in a thread,
    so the environment's own measure of the link (peak bytes/s over any 1 s) is known."""

    def __init__(self, link: harness.ShapedLink) -> None:
        self.link = link
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.link.tx_bytes()))
            self._stop.wait(0.1)

    def __enter__(self) -> _TxSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def peak_bps(self, window_s: float = 1.0) -> float:
        """The most bits per second sent over any ``window_s`` between two samples (over the
        whole span when the run was shorter)."""
        (first_t, first_b), (last_t, last_b) = self.samples[0], self.samples[-1]
        if last_t - first_t < window_s:
            return (last_b - first_b) * 8 / max(last_t - first_t, 1e-3)
        best = 0.0
        for i, (t0, b0) in enumerate(self.samples):
            later = [(t, b) for t, b in self.samples[i:] if t - t0 >= window_s]
            if later:
                t1, b1 = later[0]
                best = max(best, (b1 - b0) * 8 / (t1 - t0))
        return best


def record_albums(
    binaries: Binaries,
    out: Path,
    image: str,
    link: harness.ShapedLink,
    iterations: int = 40,
    group_size: int = 20,
    server_args: Sequence[str] = (),
) -> Recording:
    """The albums scenario (3 groups × 20 workers, ``iterations`` × POST multipart + GET)
    against a server (``loadgen-server SERVER_ARGS…``) behind ``link`` (tbf 200 Mbit/s), with an
    image of ``image`` bytes; facts: the link's own tx counter (bytes and peak bits/s toward the
    server)."""
    sets = {
        "model.groups": "3",
        "model.group_size": str(group_size),
        "model.delay": "'0s'",
        "model.iterations": str(iterations),
        "model.startup.workers": "1",
        "model.startup.iterations": "1",
        "requests.new_album.multipart.image.bytes": f"'{image}'",
    }
    overrides = [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    with (
        favoured() as prefix,
        link.server(server_args, binary=binaries.server, prefix=prefix) as server,
    ):
        tx_before = link.tx_bytes()
        with _TxSampler(link) as sampler:
            args = ["run", "--scenario", "albums", "--url", server.url, *overrides]
            args += ["--link-capacity", LINK_RATE, "--out", str(out)]
            summary = loadgen_json(binaries, args, prefix)
        facts = {
            "interface": link.host_if,
            "tx_bytes": link.tx_bytes() - tx_before,
            "peak_tx_bps": sampler.peak_bps(),
        }
    post = next(op for op in summary["summary"]["ops"] if op["op"].startswith("POST"))
    facts["measured"] = (
        f"link tx peak {facts['peak_tx_bps'] / 1e6:.0f} Mbit/s over 1 s (tc rate "
        f"{LINK_RATE_BPS / 1e6:.0f}); {post['throughput_rps']:.0f} POST/s"
    )
    # The veth reports 10 Gbit/s to the kernel; the shaping is known only to us, as a user
    # knows their link, and tells the run (`--link-capacity`).
    return Recording(out, summary, facts)


def _behind_link(
    image: str, iterations: int, server_args: Sequence[str] = ()
) -> Callable[[Binaries, Path], Recording]:
    def record(binaries: Binaries, out: Path) -> Recording:
        with harness.ShapedLink(LINK_RATE) as link:
            return record_albums(binaries, out, image, link, iterations, server_args=server_args)

    return record


def record_think_time(binaries: Binaries, out: Path) -> Recording:
    """-c 8 with 30 ms of think time after every request, against 8 workers × 10 ms."""
    server_args = CAPACITY_SERVER
    with (
        favoured() as prefix,
        harness.Server(server_args, binary=binaries.server, prefix=prefix) as server,
    ):
        extra = ("--think-time", f"{THINK_TIME_S * 1000:.0f}ms")
        summary = harness.run_loadgen(
            server.url + "/",
            out,
            THINK_WORKERS,
            "2s",
            extra=extra,
            binary=binaries.loadgen,
            prefix=prefix,
        )
    ceiling = THINK_WORKERS / THINK_TIME_S
    measured = f"{summary['summary']['throughput_rps']:.0f} req/s (≤ 8 / 30 ms = {ceiling:.0f})"
    return Recording(out, summary, {"measured": measured})


def record_errors(binaries: Binaries, out: Path) -> Recording:
    """-c 8 against a 1 ms server that answers 10 % of requests with a 500."""
    args = ("--service-time", "1ms", "--error-rate", str(ERROR_RATE))
    with (
        favoured() as prefix,
        harness.Server(args, binary=binaries.server, prefix=prefix) as server,
    ):
        summary = harness.run_loadgen(
            server.url + "/", out, 8, "2s", binary=binaries.loadgen, prefix=prefix
        )
    counts = summary["summary"]
    total = counts["ok"] + counts["failed"]
    measured = f"{counts['failed']} of {total} requests failed ({counts['failed'] / total:.1%})"
    return Recording(out, summary, {"measured": measured})


def record_demo(binaries: Binaries, out: Path) -> Recording:
    """The README's first command, shortened: ``loadgen run`` with no URL (embedded server)."""
    with favoured() as prefix:
        summary = loadgen_json(binaries, ["run", "-d", "2s", "--out", str(out)], prefix)
    client = json.loads((out / "run.json").read_text()).get("client", {})
    measured = (
        f"run.json: server_shares_cores = {client.get('server_shares_cores')}, peak CPU "
        f"{client.get('peak_cpu_utilisation', 0):.0%} of {client.get('cpu_limit_cores')} cores"
    )
    return Recording(out, summary, {"measured": measured})


# --------------------------------------------------------------------------- the testbeds


def _no_limit() -> str | None:
    return None


@dataclass(frozen=True)
class Testbed:
    """One environment with a known limit: how to record it and what ``explain`` must say."""

    name: str
    truth: str  # the verdict explain must give (a label where summary_says decides)
    record: Callable[[Binaries, Path], Recording]
    why_not: Callable[[], str | None] = _no_limit  # why it cannot run here (None: it can)
    summary_says: str | None = None  # text the verdict's summary must contain
    capacity_rps: float | None = None  # the capacity model's X_max must be within 10 % of it
    no_n_model: bool = False  # no capacity model over N may be given (an open-rate sweep)

    def right(self, verdict: dict[str, Any]) -> bool:
        """Whether ``explain --json``'s answer matches this testbed's truth."""
        if self.no_n_model and verdict.get("capacity_model") is not None:
            return False
        if self.capacity_rps is not None:
            found = x_max_rps(verdict)
            if found is None or abs(found - self.capacity_rps) > 0.1 * self.capacity_rps:
                return False
        if self.summary_says is not None:
            return self.summary_says in verdict.get("summary", "")
        return verdict.get("verdict") == self.truth

    def evidence(self, verdict: dict[str, Any]) -> str:
        """The evidence that decided it: the summary where the truth is about the summary, else
        the deciding check's evidence."""
        if self.summary_says is not None:
            return str(verdict.get("summary", ""))
        found = check(verdict, str(verdict.get("verdict")))
        text = str(found.get("evidence") or verdict.get("summary", ""))
        if self.capacity_rps is not None:
            model = verdict.get("capacity_model") or {}
            text += f"; capacity model {model.get('name')}: X_max {x_max_rps(verdict) or 0:.0f}/s"
        return text


#: A single run whose time is spent at the server: the truth is the server, but one level
#: cannot show it is at its capacity, and the verdict says so instead of guessing (issue 34).
ONE_LEVEL = "inconclusive: one level"
ONE_LEVEL_SAYS = "one level cannot tell a server at its capacity"

TESTBEDS = (
    Testbed(
        "server capacity: 8 workers × 10 ms, sweep 1…64",
        "server",
        record_server_capacity,
        capacity_rps=CAPACITY_RPS,
    ),
    Testbed(
        "client CPU quota: 25 % of one core, -c 50",
        "client",
        _in_quota,
        why_not=harness.why_no_cpu_cgroup,
    ),
    Testbed(
        "network: tbf 200 Mbit/s, albums, 25 KB image",
        "network",
        _behind_link("25KB", 40),
        why_not=harness.why_no_shaped_link,
    ),
    Testbed(
        "network: tbf 200 Mbit/s, albums, 2 KB image",
        "network",
        _behind_link("2KB", 200),
        why_not=harness.why_no_shaped_link,
    ),
    Testbed(
        "same link, 2 KB image, server of 8 workers × 10 ms",
        ONE_LEVEL,
        _behind_link("2KB", 40, CAPACITY_SERVER),
        why_not=harness.why_no_shaped_link,
        summary_says=ONE_LEVEL_SAYS,
    ),
    Testbed("think time: 30 ms, -c 8", "none", record_think_time),
    Testbed("errors: 10 % answered 500", "errors", record_errors),
    Testbed(
        "embedded demo: loadgen run (no URL)",
        "shares the cores",
        record_demo,
        summary_says="the embedded server shares these",
    ),
)


def by_name(prefix: str) -> Testbed:
    """The testbed whose name starts with ``prefix`` (e.g. ``"network"`` finds the first)."""
    return next(t for t in TESTBEDS if t.name.startswith(prefix))
