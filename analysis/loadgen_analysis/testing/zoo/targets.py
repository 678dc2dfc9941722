"""The zoo's targets and modes: a target starts a stack of :mod:`.stacks` / :mod:`.nginx` and
gives its URL and the server's own count of what it served (its access log or counters); a
mode is loadgen's arguments (a closed level, an open rate, a sweep, a capacity search);
:func:`record` runs one against the other, as a :class:`~..testbeds.Testbed` records.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..testbeds import Binaries, Recording, favoured, loadgen_json
from . import nginx, stacks

#: A target: its URL and a function giving the server's own count of what it served
#: (``requests``: all it answered; ``text``: the count as a sentence; more where it has them).
Target = tuple[str, Callable[[], dict[str, Any]]]
TargetFactory = Callable[[], contextlib.AbstractContextManager[Target]]

CPU_MS = 2.0  # CPU per request of the CPU-bound handlers: one core serves 500 req/s
SWEEP = ("--levels", "1,2,4,8,16,32", "-d", "1s")


# --------------------------------------------------------------------------- the targets


def _stats(stack: stacks.Stack) -> Callable[[], dict[str, Any]]:
    def counted() -> dict[str, Any]:
        found: dict[str, Any] = dict(stack.stats())
        found["text"] = "server counted " + ", ".join(f"{k} {v}" for k, v in found.items())
        return found

    return counted


def go(mode: str, slots: int = 8, service: str = "10ms") -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        args = ["-mode", mode, "-slots", str(slots), "-service", service]
        with stacks.go_server(args) as stack:
            yield stack.url + "/", _stats(stack)

    return target


def jdk(threads: int = 8, sleep_ms: int = 10) -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        with stacks.jdk_server(threads, sleep_ms) as stack:
            yield stack.url + "/", _stats(stack)

    return target


def node() -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        with stacks.node_server(CPU_MS) as stack:
            yield stack.url + "/", _stats(stack)

    return target


def cpython() -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        with stacks.gil_server(CPU_MS, prefix=stacks.pinned(0)) as stack:

            def counted() -> dict[str, Any]:
                with urllib.request.urlopen(stack.url + "/metrics", timeout=10) as answer:
                    lines = answer.read().decode().splitlines()
                values = dict(line.split(" ", 1) for line in lines if not line.startswith("#"))
                cpu = float(values.get("process_cpu_seconds_total", "nan"))
                requests = int(float(values["zoo_requests_total"]))
                text = f"server counted {requests} requests, {cpu:.2f} s of its CPU"
                return {"requests": requests, "cpu_s": cpu, "text": text}

            yield stack.url + "/", counted

    return target


def gunicorn(workers: int, handler: str) -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        prefix: list[str] = []
        with contextlib.ExitStack() as exit_stack:
            scratch = Path(exit_stack.enter_context(tempfile.TemporaryDirectory()))
            log = scratch / "access.log"
            stack = exit_stack.enter_context(stacks.gunicorn(workers, log, prefix, CPU_MS))
            yield stack.url + "/" + handler, lambda: _statuses(dict(stacks.statuses(log)))

    return target


def nginx_path(path: str) -> TargetFactory:
    @contextlib.contextmanager
    def target() -> Iterator[Target]:
        with contextlib.ExitStack() as exit_stack:
            upstream = "127.0.0.1:9"
            if path == "/proxy":
                up = exit_stack.enter_context(stacks.go_server(["-slots", "4"]))
                upstream = up.url.split("//")[1]
            server = exit_stack.enter_context(nginx.nginx(upstream))
            yield server.url + path, lambda: _nginx_count(server)

    return target


def _statuses(counts: dict[str, int]) -> dict[str, Any]:
    text = "access log: " + ", ".join(f"{n} × {status}" for status, n in sorted(counts.items()))
    return {"requests": sum(counts.values()), "ok": counts.get("200", 0), "text": text}


def _nginx_count(server: nginx.Nginx) -> dict[str, Any]:
    rows = server.log()
    if not rows:
        return {"requests": 0, "text": "access log: empty"}
    ok = [t for t, status, _ in rows if status == "200"]
    span = max(t for t, _, _ in rows) - min(t for t, _, _ in rows)
    counts: dict[str, int] = {}
    for _, status, _ in rows:
        counts[status] = counts.get(status, 0) + 1
    found = _statuses(counts)
    found["ok_rps"] = len(ok) / max(span, 1e-3)
    found["text"] += f"; {found['ok_rps']:.0f} × 200 per s over {span:.1f} s"
    return found


# --------------------------------------------------------------------------- the modes

#: A mode: loadgen's arguments for a target URL (the recording adds --url and --out).
Mode = Callable[[str], list[str]]


def closed(connections: int, duration: str = "2s") -> Mode:
    return lambda url: ["run", "--url", url, "-c", str(connections), "-d", duration]


def open_rate(rps: int, duration: str = "2s") -> Mode:
    return lambda url: ["run", "--url", url, "--rate", str(rps), "-d", duration]


def sweep(url: str) -> list[str]:
    return ["sweep", "--url", url, *SWEEP]


def capacity(url: str) -> list[str]:
    level = ("--level-duration", "2s", "--warmup", "500ms", "--cool-down", "500ms")
    slo = ("--slo", "p99<100ms", "--slo", "error_rate<1%")
    return ["capacity", "--url", url, *slo, *level, "--tolerance", "10%", "--allow-unconverged"]


def _measured(summary: dict[str, Any]) -> str:
    if summary.get("kind") == "capacity" or "capacity_rps" in summary:
        found = {k: summary.get(k) for k in ("capacity_rps", "limited_by", "ended")}
        return "capacity: " + json.dumps(found) + f"; {summary.get('answer', '')}"
    if "levels" in summary:  # a sweep
        best = max(summary["levels"], key=lambda level: level["throughput_rps"])
        return f"peak {best['throughput_rps']:.0f} req/s at N = {best['level']:.0f}"
    if "summary" in summary:  # a run
        s = summary["summary"]
        return f"loadgen: {s['ok']} ok, {s['failed']} failed, {s['throughput_rps']:.0f} req/s"
    return json.dumps(summary)[:300]


def record(
    target: TargetFactory, mode: Mode, metrics: bool = False, pin_client: bool = False
) -> Callable[[Binaries, Path], Recording]:
    """Start ``target``, run loadgen in ``mode`` against it (scraping its ``/metrics`` when
    ``metrics``; on core 1 when ``pin_client``, the server being on core 0), and note what
    the server itself counted."""

    def run(binaries: Binaries, out: Path) -> Recording:
        with favoured() as prefix, target() as (url, counted):
            args = mode(url)
            if metrics:
                base = url.split("/", 3)
                args += ["--server-metrics", "/".join(base[:3]) + "/metrics"]
            client = [*prefix, *(stacks.pinned(1) if pin_client else [])]
            summary = loadgen_json(binaries, [*args, "--out", str(out)], client, timeout_s=600)
            server = counted()
        measured = f"{_measured(summary)}; {server['text']}"
        return Recording(out, summary, {"measured": measured, "server": server})

    return run
