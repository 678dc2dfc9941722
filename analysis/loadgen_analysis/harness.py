"""Recording runs from Python: start ``loadgen-server`` on 127.0.0.1 and drive it with
``loadgen run`` at one or several concurrency levels.

Responsible for process handling only (finding the binaries, the server's port, bounded
timeouts, clean shutdown, several ``loadgen run`` processes started together with
``--start-at``, as the shards of a sharded run are); the tests and
``data/record-samples.sh``'s Python twin use it to make real runs. It does not analyse
anything. Until ``loadgen sweep`` exists, :func:`sweep`
is how a sweep is recorded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]

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


class Server:
    """``loadgen-server --port 0 ARGS…`` on 127.0.0.1 for the length of a ``with`` block."""

    def __init__(
        self, args: Sequence[str] = (), binary: Path | None = None, start_timeout_s: float = 15.0
    ) -> None:
        self.binary = binary or server_bin()
        self.args = list(args)
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        # Lives as long as the server (closed in __exit__), so no `with` block here.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self) -> Server:
        # Output goes to a file, not a pipe: a chatty server must never block on a full pipe.
        command = [str(self.binary), "--bind", "127.0.0.1", "--port", "0", *self.args]
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
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
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


def run_loadgen(
    url: str,
    out: Path,
    connections: int,
    duration: str | None = "1s",
    requests: int | None = None,
    extra: Sequence[str] = (),
    binary: Path | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run ``loadgen run`` once into ``out`` and return its ``--json`` summary.

    Bounded: the process is killed after ``timeout_s`` (default: the duration plus 60 s).
    Raises RuntimeError with loadgen's stderr when it exits non-zero.
    """
    binary = binary or loadgen_bin()
    command = [
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
