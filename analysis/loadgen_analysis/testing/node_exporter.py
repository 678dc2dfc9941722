"""Debian's node_exporter (``prometheus-node-exporter``) on a free loopback port, for the
tests that scrape a real host's metrics with ``--server-metrics`` (scripts/test.sh installs
it, as loadgen/tests/server_metrics.rs needs it too).

Responsible for starting it, waiting until it answers and stopping it; ``why_not`` says why
it cannot be started here (the tests skip with that reason).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from types import TracebackType

from . import harness

BINARY = "prometheus-node-exporter"


def why_not() -> str | None:
    """None when node_exporter can be started here, else why not."""
    if shutil.which(BINARY) is None:
        return f"{BINARY} is not installed (scripts/test.sh installs it: apt-get install {BINARY})"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class NodeExporter:
    """node_exporter on 127.0.0.1 for the length of a ``with`` block; ``url`` is its
    ``/metrics``."""

    def __init__(self, start_timeout_s: float = 15.0) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NodeExporter:
        address = f"--web.listen-address=127.0.0.1:{self.port}"
        self._proc = subprocess.Popen(
            [BINARY, address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{BINARY} exited with {self._proc.returncode} at start")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError(f"{BINARY} did not listen on port {self.port} in time")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        harness.stop_process(self._proc)
        self._proc = None
