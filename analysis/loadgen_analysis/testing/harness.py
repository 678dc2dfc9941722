"""Recording runs from Python: start ``loadgen-server`` on 127.0.0.1 and drive it with
``loadgen run`` at one or several concurrency levels.

Responsible for process handling only (finding the binaries, the server's port, bounded
timeouts, clean shutdown, several ``loadgen run`` processes started together with
``--start-at``, as the shards of a sharded run are); the tests and
``data/record-samples.sh``'s Python twin use it to make real runs. It does not analyse
anything. :func:`sweep` is the tests' plain sweep — one ``loadgen run`` per level into
``c0001`` … — where ``loadgen sweep`` (the product's command, with its sweep.json and
calibration) is not what is under test.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]

_LISTENING = re.compile(r"listening on (http://\S+)")


class BinaryNotFoundError(FileNotFoundError):
    """A loadgen binary is missing: the workspace has not been built."""


def find_binary(name: str, env_var: str, repo_root: Path = REPO_ROOT) -> Path:
    """The binary named by ``env_var``, else ``<repo>/target/debug/<name>``.

    Raises :class:`BinaryNotFoundError` telling the user to run ``cargo build``.
    """
    configured = os.environ.get(env_var)
    path = Path(configured) if configured else repo_root / "target" / "debug" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        source = f"${env_var}" if configured else f"the default (set {env_var} to override)"
        raise BinaryNotFoundError(
            f"{name} not found at {path} ({source}): run `cargo build --workspace` at the "
            "repository root first"
        )
    return path


def loadgen_bin() -> Path:
    return find_binary("loadgen", "LOADGEN_BIN")


def server_bin() -> Path:
    return find_binary("loadgen-server", "LOADGEN_SERVER_BIN")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """Terminates ``proc`` if it still runs (SIGTERM, then SIGKILL after 5 s) and reaps it."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class Server:
    """``loadgen-server --port 0 ARGS…`` on 127.0.0.1 for the length of a ``with`` block
    (``port`` another port: a second server on the port of one stopped before, so runs against
    both have the same target).

        ``bind`` and ``prefix`` put it elsewhere: e.g. ``ShapedLink.server`` starts it inside a
        network namespace (prefix ``ip netns exec NS``) bound to the namespace's address.
    """

    def __init__(
        self,
        args: Sequence[str] = (),
        binary: Path | None = None,
        start_timeout_s: float = 15.0,
        bind: str = "127.0.0.1",
        prefix: Sequence[str] = (),
        port: int = 0,
    ) -> None:
        self.binary = binary or server_bin()
        self.port = port
        self.args = list(args)
        self.start_timeout_s = start_timeout_s
        self.bind = bind
        self.prefix = list(prefix)
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        # Lives as long as the server (closed in __exit__), so no `with` block here.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self) -> Server:
        # Output goes to a file, not a pipe: a chatty server must never block on a full pipe.
        command = [
            *self.prefix,
            str(self.binary),
            *("--bind", self.bind, "--port", str(self.port), *self.args),
        ]
        self._proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            self._log.seek(0)
            text = self._log.read().decode(errors="replace")
            match = _LISTENING.search(text)
            if match:
                self.url = match.group(1).rstrip("/")
                return self
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"loadgen-server exited with {self._proc.returncode}: {' '.join(command)}\n"
                    f"{text}"
                )
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"loadgen-server did not print its address in {self.start_timeout_s}s")

    def stop(self) -> None:
        stop_process(self._proc)
        self._proc = None

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._log.close()


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m)?\s*", duration)
    if not match:
        return 60.0
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def probe_requests(run_dir: Path) -> int:
    """Requests the probe at one connection sent after the level (run.json ``probe``; 0
    without one): the server counted them beside the run's rows."""
    probe = json.loads((Path(run_dir) / "run.json").read_text()).get("probe") or {}
    return int(probe.get("requests", 0))


def run_loadgen(
    url: str,
    out: Path,
    connections: int,
    duration: str | None = "1s",
    requests: int | None = None,
    extra: Sequence[str] = (),
    binary: Path | None = None,
    timeout_s: float | None = None,
    prefix: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``loadgen run`` once into ``out`` and return its ``--json`` summary. ``prefix``
    goes before the command (e.g. :meth:`CpuCgroup.prefix`, to run it inside a cgroup).

    Bounded: the process is killed after ``timeout_s`` (default: the duration plus 60 s).
    Raises RuntimeError with loadgen's stderr when it exits non-zero.
    """
    binary = binary or loadgen_bin()
    command = [
        *prefix,
        str(binary),
        "run",
        "--url",
        url,
        "-c",
        str(connections),
        "--no-progress",
        "--json",
        "--out",
        str(out),
        *extra,
    ]
    if requests is not None:
        command += ["-n", str(requests)]
    elif duration is not None:
        command += ["-d", duration]
    limit = timeout_s if timeout_s is not None else _seconds(duration or "0s") + 60.0
    proc = subprocess.run(command, capture_output=True, timeout=limit, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited with {proc.returncode}:\n"
            f"{proc.stderr.decode(errors='replace')}"
        )
    return json.loads(proc.stdout)


def sweep(
    url: str,
    out_dir: Path,
    levels: Sequence[int],
    duration: str = "1s",
    extra: Sequence[str] = (),
    binary: Path | None = None,
) -> list[Path]:
    """One run per concurrency level into ``out_dir/c0001`` …; returns the run directories."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for level in levels:
        path = out_dir / f"c{level:04d}"
        run_loadgen(url, path, level, duration=duration, extra=extra, binary=binary)
        paths.append(path)
    return paths


def start_at_ms(delay_s: float) -> int:
    """A ``--start-at`` value (Unix milliseconds) ``delay_s`` from now."""
    return int((time.time() + delay_s) * 1000)


def run_together(
    url: str,
    runs: Sequence[tuple[Path, Sequence[str]]],
    start_at: int | None = None,
    binary: Path | None = None,
    timeout_s: float = 120.0,
) -> list[dict[str, Any]]:
    """Start ``loadgen run --url URL --out OUT ARGS…`` for every (OUT, ARGS) at once and
    return their ``--json`` summaries in order — e.g. the N shards of a sharded run, each with
    ``--shard I/N`` and the same ``--start-at`` (put it in ARGS, see :func:`start_at_ms`).

    Bounded: every process still running after ``timeout_s`` is killed. Raises RuntimeError
    with the stderr of the first process that exits non-zero.
    """
    binary = binary or loadgen_bin()
    procs = []
    deadline = time.monotonic() + timeout_s
    try:
        for out, args in runs:
            command = [
                str(binary),
                "run",
                "--url",
                url,
                "--no-progress",
                "--json",
                "--out",
                str(out),
                *(["--start-at", str(start_at)] if start_at is not None else []),
                *args,
            ]
            # Files, not pipes: no process can block on a full pipe while we wait on another.
            stdout, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
            procs.append(
                (command, subprocess.Popen(command, stdout=stdout, stderr=stderr), stdout, stderr)
            )
        summaries = []
        for command, proc, stdout, stderr in procs:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            stdout.seek(0)
            stderr.seek(0)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"{' '.join(command)} exited with {proc.returncode}:\n"
                    f"{stderr.read().decode(errors='replace')}"
                )
            summaries.append(json.loads(stdout.read()))
        return summaries
    finally:
        for _, proc, stdout, stderr in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
            stdout.close()
            stderr.close()


# --------------------------------------------------------------------------- environments
# The testbeds' limits: a cgroup CPU quota for the client, a shaped link to the server. Both
# need root; ``why_no_*`` say why one cannot be made here (tests skip with that reason). Every
# name carries the pid and a counter, so parallel runs never collide, and ``__exit__`` removes
# everything it made even when the block failed.

_serial = itertools.count()
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _run(*command: str) -> None:
    """An ``ip``/``tc`` command that must succeed; raises RuntimeError with its stderr."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {proc.returncode}: {proc.stderr}")


def _cpu_controller() -> tuple[str, Path] | None:
    """(``cgroup-v2``, root) when the unified hierarchy offers the cpu controller, else
    (``cgroup-v1``, the cpu hierarchy's mount), else None."""
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return "cgroup-v2", CGROUP_ROOT
    for name in ("cpu", "cpu,cpuacct"):
        if (CGROUP_ROOT / name / "cpu.cfs_quota_us").is_file():
            return "cgroup-v1", CGROUP_ROOT / name
    return None


def why_no_cpu_cgroup() -> str | None:
    """Why :class:`CpuCgroup` cannot work here, or None when it can."""
    if os.geteuid() != 0:
        return "a cgroup with a CPU quota needs root"
    if _cpu_controller() is None:
        return (
            "no cgroup cpu controller (neither cgroup v2 listing cpu in "
            f"{CGROUP_ROOT}/cgroup.controllers nor v1 at {CGROUP_ROOT}/cpu)"
        )
    return None


class CpuCgroup:
    """A fresh cgroup for the length of a ``with`` block, with an optional CPU quota
    (``quota_cores``, fractional: 0.25 = a quarter of one core) and ``weight`` times the
    default CPU weight (v1 ``cpu.shares``, v2 ``cpu.weight``). The weight is there because
    the machine may be shared: a testbed's limit must be its own (the quota, the link), not
    the neighbours' compilers taking the cores. Put a command in it with :meth:`prefix`; read
    its throttling with :meth:`stat`. Removed on exit (after the commands in it have ended)."""

    def __init__(
        self, quota_cores: float | None = None, weight: int = 10, period_us: int = 100_000
    ) -> None:
        found = _cpu_controller()
        if found is None:
            raise RuntimeError(why_no_cpu_cgroup() or "no cgroup cpu controller")
        self.version, root = found
        self.quota_cores = quota_cores
        self.weight = weight
        self.period_us = period_us
        self.path = root / f"loadgen-test-{os.getpid()}-{next(_serial)}"

    def __enter__(self) -> CpuCgroup:
        quota_us = max(int(self.quota_cores * self.period_us), 1000) if self.quota_cores else None
        if self.version == "cgroup-v2":
            subtree = self.path.parent / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                subtree.write_text("+cpu")
            self.path.mkdir()
            (self.path / "cpu.weight").write_text(str(100 * self.weight))
            if quota_us is not None:
                (self.path / "cpu.max").write_text(f"{quota_us} {self.period_us}")
        else:
            self.path.mkdir()
            (self.path / "cpu.shares").write_text(str(1024 * self.weight))
            if quota_us is not None:
                (self.path / "cpu.cfs_period_us").write_text(str(self.period_us))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota_us))
        return self

    def prefix(self) -> list[str]:
        """Put before a command: a shell moves itself into the cgroup, then execs it."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs")]

    def stat(self) -> dict[str, int]:
        """The cgroup's ``cpu.stat`` (v2: ``throttled_usec``…, v1: ``throttled_time`` in ns…)."""
        lines = (self.path / "cpu.stat").read_text().split("\n")
        return {k: int(v) for k, v in (line.split() for line in lines if line.strip())}

    def __exit__(self, *_: object) -> None:
        # A cgroup with processes cannot be removed: move any leftovers to the parent first.
        procs = self.path / "cgroup.procs"
        for _attempt in range(50):
            try:
                for pid in procs.read_text().split():
                    (self.path.parent / "cgroup.procs").write_text(pid)
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        self.path.rmdir()


def why_no_shaped_link() -> str | None:
    """Why :class:`ShapedLink` cannot work here, or None when it can."""
    if os.geteuid() != 0:
        return "a network namespace with a shaped veth needs root"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (iproute2)"
    return None


class ShapedLink:
    """A network namespace joined to the host by a veth pair whose two ends are both shaped
    by ``tc … tbf rate RATE`` (so requests and responses each get ``rate``), for the length of
    a ``with`` block. The pair has a /30 of its own in 10.254.0.0/16 (picked from the pid);
    :meth:`server` starts ``loadgen-server`` inside the namespace on its address, which is the
    only address traffic goes to. Namespace and veth are deleted on exit."""

    def __init__(self, rate: str = "200mbit", burst: str = "256kb", latency: str = "50ms") -> None:
        serial = next(_serial)
        self.rate, self.burst, self.latency = rate, burst, latency
        self.netns = f"loadgen-test-{os.getpid()}-{serial}"
        tag = f"{os.getpid()}{serial}"[-11:]
        self.host_if, self.peer_if = f"lgh{tag}", f"lgn{tag}"
        base = ((os.getpid() * 8 + serial) % 16384) * 4  # the /30's first address, as an offset
        self.server_ip = f"10.254.{base // 256}.{base % 256 + 1}"
        self.host_ip = f"10.254.{base // 256}.{base % 256 + 2}"
        self._servers: list[Server] = []

    def __enter__(self) -> ShapedLink:
        try:
            self._create()
        except BaseException:
            self._delete()
            raise
        return self

    def _create(self) -> None:
        ns = ("ip", "netns", "exec", self.netns)
        shape = ("root", "tbf", "rate", self.rate, "burst", self.burst, "latency", self.latency)
        _run("ip", "netns", "add", self.netns)
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.peer_if)
        _run("ip", "link", "set", self.peer_if, "netns", self.netns)
        _run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _run("ip", "link", "set", self.host_if, "up")
        _run(*ns, "ip", "addr", "add", f"{self.server_ip}/30", "dev", self.peer_if)
        _run(*ns, "ip", "link", "set", self.peer_if, "up")
        _run(*ns, "ip", "link", "set", "lo", "up")
        _run("tc", "qdisc", "add", "dev", self.host_if, *shape)
        _run(*ns, "tc", "qdisc", "add", "dev", self.peer_if, *shape)

    def server(
        self, args: Sequence[str] = (), binary: Path | None = None, prefix: Sequence[str] = ()
    ) -> Server:
        """``PREFIX… loadgen-server ARGS…`` inside the namespace (use it in a ``with`` block);
        stopped at the latest when the link is torn down."""
        in_netns = (*prefix, "ip", "netns", "exec", self.netns)
        server = Server(args, binary=binary, bind=self.server_ip, prefix=in_netns)
        self._servers.append(server)
        return server

    def tx_bytes(self) -> int:
        """Bytes the host end has sent so far (toward the server): the kernel's counter."""
        return int(Path(f"/sys/class/net/{self.host_if}/statistics/tx_bytes").read_text())

    def rx_bytes(self) -> int:
        """Bytes the host end has received so far (from the server)."""
        return int(Path(f"/sys/class/net/{self.host_if}/statistics/rx_bytes").read_text())

    def _delete(self) -> None:
        for server in self._servers:
            server.stop()
        for command in (
            ("ip", "netns", "del", self.netns),
            ("ip", "link", "del", self.host_if),
        ):
            subprocess.run(command, capture_output=True, timeout=30, check=False)

    def __exit__(self, *_: object) -> None:
        self._delete()
