"""Starting the zoo's servers: each a process of a real stack (nginx, CPython, gunicorn, Node,
the JDK, Go) on 127.0.0.1, found on this machine (``why_not_*`` say what is missing), with
its own record of what it served (nginx's and gunicorn's access logs, the handlers' counters)
for the truth check. A :class:`Stack` is a ``with`` block: started, its URL known, stopped and
reaped on exit. Go and Java handlers are built into ``target/zoo/<hash>/`` once. Pinning to a
core is ``taskset -c N`` (:func:`pinned`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from .. import harness

HERE = Path(__file__).resolve().parent
BUILD_ROOT = harness.REPO_ROOT / "target" / "zoo"
_LISTENING = re.compile(r"listening on (http://\S+)")


def pinned(cpu: int) -> list[str]:
    """``taskset -c CPU`` (empty where taskset or that CPU is missing): a server on one core,
    so its capacity is that core's, and the client on the other."""
    if shutil.which("taskset") is None or cpu >= (os.cpu_count() or 1):
        return []
    return ["taskset", "-c", str(cpu)]


def why_not(*tools: str) -> str | None:
    """Why a stack cannot start here (a missing program), or None."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return f"{', '.join(missing)} not installed" if missing else None


def why_no_gunicorn() -> str | None:
    if (Path(sys.executable).parent / "gunicorn").is_file():
        return None
    return "gunicorn is not in this venv (scripts/test-python.sh installs analysis/zoo.lock)"


class Stack:
    """A server process started with ``command``; its URL is the one it prints (``listening
    on URL``) or ``url`` when given (nginx prints nothing: its port is chosen beforehand)."""

    def __init__(
        self, command: Sequence[str], url: str = "", env: dict[str, str] | None = None
    ) -> None:
        self.command, self.url, self.env = list(command), url, env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server)

    def __enter__(self) -> Stack:
        env = {**os.environ, **(self.env or {})}
        self._proc = subprocess.Popen(
            self.command, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.url and _answers(self.url):
                return self
            match = _LISTENING.search(self.output())
            if match and not self.url:
                self.url = match.group(1).rstrip("/")
                return self
            if self._proc.poll() is not None:
                self._stop()
                raise RuntimeError(f"{' '.join(self.command)} exited:\n{self.output()}")
            time.sleep(0.05)
        self._stop()
        raise RuntimeError(f"{' '.join(self.command)} did not start in 30 s:\n{self.output()}")

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stats(self) -> dict[str, int]:
        """The handler's own counters (``/stats``, JSON)."""
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as answer:
            return json.loads(answer.read())

    def _stop(self) -> None:
        harness.stop_process(self._proc)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()
        self._log.close()


def _answers(url: str) -> bool:
    try:
        with socket.create_connection(tuple(url.split("//")[1].split(":")), timeout=0.2):  # type: ignore[arg-type]
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _built(source: Path, name: str, build: Sequence[str]) -> Path:
    """``target/zoo/<hash>/NAME``, built by ``BUILD… OUT SOURCE`` when missing."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out_dir = BUILD_ROOT / digest
    target = out_dir / name
    if not target.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [*build, str(out_dir), str(source)], capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            raise RuntimeError(f"building {source.name} failed:\n{proc.stderr}")
    return target


def go_server(args: Sequence[str], prefix: Sequence[str] = ()) -> Stack:
    """``gosem ARGS…`` (Go's net/http behind a semaphore; see gosem.go for the modes)."""
    binary = _built(HERE / "gosem.go", "gosem", ["sh", "-c", 'go build -o "$0/gosem" "$1"'])
    return Stack([*prefix, str(binary), *args])


def jdk_server(threads: int, sleep_ms: int, prefix: Sequence[str] = ()) -> Stack:
    """The JDK's HttpServer with a fixed pool of ``threads``, ``sleep_ms`` per request."""
    classes = _built(HERE / "JdkPool.java", "JdkPool.class", ["javac", "-d"]).parent
    command = ["java", "-Xss512k", "-XX:+UseSerialGC", "-cp", str(classes), "JdkPool"]
    return Stack([*prefix, *command, str(threads), str(sleep_ms)])


def node_server(cpu_ms: float, prefix: Sequence[str] = ()) -> Stack:
    return Stack([*prefix, "node", str(HERE / "node_cpu.js"), str(cpu_ms)])


def gil_server(cpu_ms: float, prefix: Sequence[str] = ()) -> Stack:
    module = "loadgen_analysis.testing.zoo.gil_server"
    return Stack([*prefix, sys.executable, "-m", module, "--cpu-ms", str(cpu_ms)])


@contextlib.contextmanager
def gunicorn(workers: int, access_log: Path, prefix: Sequence[str] = (), cpu_ms: float = 2):
    """gunicorn with ``workers`` sync workers serving :mod:`.wsgi_app`, its access log
    (status and request time in µs, ``%(s)s %(D)s``) at ``access_log``."""
    port = free_port()
    command = [
        *prefix,
        str(Path(sys.executable).parent / "gunicorn"),
        *("--workers", str(workers), "--worker-class", "sync", "--bind", f"127.0.0.1:{port}"),
        *("--access-logfile", str(access_log), "--access-logformat", "%(s)s %(D)s"),
        *("--backlog", "2048", "--keep-alive", "5"),
        "loadgen_analysis.testing.zoo.wsgi_app:app",
    ]
    env = {"ZOO_CPU_MS": str(cpu_ms), "PYTHONPATH": str(HERE.parents[2])}
    with Stack(command, url=f"http://127.0.0.1:{port}", env=env) as stack:
        time.sleep(0.5 + 0.1 * workers)  # the workers boot after the master binds
        yield stack


def statuses(access_log: Path, column: int = 0) -> Counter[str]:
    """Requests per status in an access log whose ``column`` (split on spaces) is the status."""
    lines = access_log.read_text().splitlines() if access_log.exists() else []
    return Counter(line.split()[column] for line in lines if line.strip())
