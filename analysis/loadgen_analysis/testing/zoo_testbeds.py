"""The zoo's testbeds (issue 44): servers the project did not write — nginx, CPython's
``http.server``, gunicorn, Node's ``http``, the JDK's ``com.sun.net.httpserver``, Go's
``net/http`` — each with a truth by construction (workers / service time, a core / CPU per
request, a limiter's rate), recorded in the modes it runs (a closed level, an open rate, a
sweep or a capacity search) and judged by ``loadgen-analyze explain --json`` like every
testbed (:mod:`.testbeds`). A row is graded ``right`` (the true cause), ``inconclusive``
(honest), ``weak-wrong`` or ``STRONG-WRONG`` (:meth:`ZooTestbed.grade`); each recording's
``measured`` is the server's own count (its access log or counters) against loadgen's.
The stacks come from :mod:`.zoo`; quick rows are asserted in ``analysis/tests/test_zoo.py``,
all rows printed by ``bench/zoo.sh`` (``python -m loadgen_analysis.testing.zoo_testbeds``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .testbeds import Binaries, Testbed, x_max_rps
from .zoo import nginx, stacks
from .zoo.targets import (
    CPU_MS,
    Mode,
    TargetFactory,
    capacity,
    closed,
    cpython,
    go,
    gunicorn,
    jdk,
    nginx_path,
    node,
    open_rate,
    record,
    sweep,
)

# --------------------------------------------------------------------------- the rows

#: One closed level at half capacity: the server has room, so `inconclusive`, or `none` when
#: nothing queued there and the connections set the pace (none.no_queue, issue 44).
ONE_LEVEL_OK = ("none",)
#: An open rate above a server's capacity: the server, or the timeouts it causes (errors).
OVERLOADED = ("server", "errors")


@dataclass(frozen=True)
class ZooTestbed(Testbed):
    """A zoo row in one mode: the causes that are right (``accept``; ``inconclusive`` is
    always honest), whether it is quick enough for CI, and for a capacity search the rate
    its answer must be within 15 % of."""

    accept: tuple[str, ...] = ()
    quick: bool = True
    capacity_answer_rps: float | None = None
    #: The limit by construction (req/s answered 200): no run may get more through.
    limit_rps: float | None = None

    def grade(self, verdict: dict[str, Any]) -> str:
        """``right``, ``inconclusive``, ``weak-wrong``, ``STRONG-WRONG`` or, on a sweep,
        ``x_max-off`` (the right cause, its capacity model more than 10 % from the truth)."""
        cause, strength = verdict.get("verdict"), verdict.get("strength")
        if self.capacity_answer_rps is not None:
            found = capacity_found_rps(self.record_path(verdict))
            if found is None or abs(found - self.capacity_answer_rps) > 0.15 * found:
                return "STRONG-WRONG" if cause != "inconclusive" else "inconclusive"
        if cause in self.accept and self.capacity_rps is not None:
            found = x_max_rps(verdict)
            if found is None or abs(found - self.capacity_rps) > 0.1 * self.capacity_rps:
                return "x_max-off"  # the right cause, a capacity model more than 10 % off
        if cause in self.accept:
            return "right"
        if cause == "inconclusive":
            return "inconclusive"
        return "STRONG-WRONG" if strength == "strong" else "weak-wrong"

    def right(self, verdict: dict[str, Any]) -> bool:
        return self.grade(verdict) in ("right", "inconclusive")

    @staticmethod
    def record_path(verdict: dict[str, Any]) -> Path | None:
        found = verdict.get("path")
        return Path(found) if found else None


def capacity_found_rps(path: Path | None) -> float | None:
    """capacity.json's answer (req/s) in the recording at ``path``."""
    if path is None or not (path / "capacity.json").is_file():
        return None
    answer = json.loads((path / "capacity.json").read_text())
    value = answer.get("capacity_rps", answer.get("sustained_rps"))
    return float(value) if value is not None else None


def _row(
    name: str,
    truth: str,
    target: TargetFactory,
    mode: Mode,
    accept: Sequence[str] = ("server",),
    why_not: Callable[[], str | None] = lambda: None,
    **options: Any,
) -> ZooTestbed:
    """A row; its ``limit_rps`` is the rate its truth names (``… 400 r/s``), if any."""
    metrics, pin = options.pop("metrics", False), options.pop("pin_client", False)
    named = re.search(r"(\d+) r/s", truth)
    options.setdefault("limit_rps", float(named.group(1)) if named else None)
    return ZooTestbed(
        name,
        truth,
        record(target, mode, metrics=metrics, pin_client=pin),
        why_not=why_not,
        accept=tuple(accept),
        **options,
    )


def _go_why_not() -> str | None:
    return stacks.why_not("go")


def _jdk_why_not() -> str | None:
    return stacks.why_not("java", "javac")


def _node_why_not() -> str | None:
    return stacks.why_not("node")


NGINX_RATE = f"limit_req {nginx.LIMIT_RPS} r/s"
GIL = f"CPython ThreadingHTTPServer, {CPU_MS:.0f} ms GIL-bound CPU, 64-byte body, one core"

ZOO_TESTBEDS = (
    # nginx: the static path is faster than one client core can ask (truth: a CPU, the
    # client's or nginx's single worker's — both are at 100 %; never the network).
    _row(
        "nginx static 64 B, -c 16",
        "client or server CPU",
        nginx_path("/static"),
        closed(16),
        accept=("client", "server"),
        why_not=nginx.why_not,
    ),
    _row(
        f"nginx {NGINX_RATE} → 429, -c 8",
        "errors (429 above 300 r/s)",
        nginx_path("/limit429"),
        closed(8),
        accept=("errors",),
        why_not=nginx.why_not,
    ),
    _row(
        f"nginx {NGINX_RATE} → 429, open 200 r/s",
        "none (under the limit)",
        nginx_path("/limit429"),
        open_rate(200),
        accept=("none",),
        why_not=nginx.why_not,
    ),
    _row(
        f"nginx {NGINX_RATE} → 503 + Retry-After, open 600 r/s",
        "errors (503 above 300 r/s)",
        nginx_path("/limit503"),
        open_rate(600),
        accept=("errors",),
        why_not=nginx.why_not,
    ),
    _row(
        f"nginx {NGINX_RATE} → 429, capacity search",
        "errors at 300 r/s",
        nginx_path("/limit429"),
        capacity,
        accept=("errors",),
        why_not=nginx.why_not,
        quick=False,
        capacity_answer_rps=float(nginx.LIMIT_RPS),
    ),
    _row(
        f"nginx {NGINX_RATE} → 503 + Retry-After, capacity search",
        "errors at 300 r/s",
        nginx_path("/limit503"),
        capacity,
        accept=("errors",),
        why_not=nginx.why_not,
        quick=False,
        capacity_answer_rps=float(nginx.LIMIT_RPS),
    ),
    _row(
        "nginx proxy → Go 4 × 10 ms (400 r/s), keepalive 2, -c 16",
        "server (upstream at 400 r/s)",
        nginx_path("/proxy"),
        closed(16),
        why_not=lambda: nginx.why_not() or _go_why_not(),
    ),
    _row(
        "nginx proxy → Go 4 × 10 ms, keepalive 2, sweep 1…32",
        "server, X_max 400 r/s",
        nginx_path("/proxy"),
        sweep,
        why_not=lambda: nginx.why_not() or _go_why_not(),
        quick=False,
        capacity_rps=400.0,
    ),
    _row(
        f"{GIL}, -c 16, /metrics scraped",
        "server (500 r/s: one core / 2 ms)",
        cpython(),
        closed(16),
        metrics=True,
        pin_client=True,
    ),
    _row(
        f"{GIL}, open 800 r/s, /metrics scraped",
        "server (above its 500 r/s; timeouts are its symptom)",
        cpython(),
        open_rate(800),
        accept=OVERLOADED,
        metrics=True,
        pin_client=True,
        quick=False,  # its timeouts make it ~12 s
    ),
    _row(
        f"{GIL}, open 100 r/s",
        "none (a fifth of its capacity)",
        cpython(),
        open_rate(100),
        accept=("none",),
        pin_client=True,
    ),
    _row(
        "gunicorn 1 sync worker, 2 ms CPU, -c 8",
        "server (500 r/s)",
        gunicorn(1, "cpu"),
        closed(8),
        why_not=stacks.why_no_gunicorn,
    ),
    _row(
        "gunicorn 4 sync workers × 10 ms sleep, -c 16",
        "server (400 r/s)",
        gunicorn(4, "sleep"),
        closed(16),
        why_not=stacks.why_no_gunicorn,
    ),
    _row(
        "gunicorn 4 sync workers × 10 ms sleep, sweep 1…32",
        "server, X_max 400 r/s",
        gunicorn(4, "sleep"),
        sweep,
        why_not=stacks.why_no_gunicorn,
        quick=False,
        capacity_rps=400.0,
    ),
    _row(
        "Node http, one loop, 2 ms CPU, -c 8",
        "server (500 r/s)",
        node(),
        closed(8),
        why_not=_node_why_not,
    ),
    _row(
        "Node http, one loop, 2 ms CPU, open 800 r/s",
        "server (above its 500 r/s; timeouts are its symptom)",
        node(),
        open_rate(800),
        accept=OVERLOADED,
        why_not=_node_why_not,
        quick=False,  # its timeouts make it ~12 s
    ),
    _row(
        "JDK HttpServer 8 threads × 10 ms, 3-byte body, Nagle on, -c 4",
        # Half the pool's capacity, but each body waits ~40 ms for the client's delayed ACK
        # of its headers under the server's Nagle (issue 59): that sets each request's time.
        "server (its Nagle delay: ~52 ms a request, the pool at half its capacity)",
        jdk(),
        closed(4),
        why_not=_jdk_why_not,
    ),
    _row(
        "JDK HttpServer 8 threads × 10 ms, 3-byte body, Nagle on, -c 16",
        "server (its Nagle delay: ~56 ms a request; 800 r/s at most)",
        jdk(),
        closed(16),
        why_not=_jdk_why_not,
        quick=False,  # its body share sits at the 50 % threshold: network (strong) or not
    ),
    _row(
        "JDK HttpServer 8 threads × 10 ms, sweep 1…32",
        "server, X_max 800 r/s",
        jdk(),
        sweep,
        why_not=_jdk_why_not,
        quick=False,
        capacity_rps=800.0,
    ),
    _row(
        "Go net/http, semaphore 8 × 10 ms, -c 32",
        "server (800 r/s)",
        go("plain"),
        closed(32),
        why_not=_go_why_not,
    ),
    _row(
        "Go net/http, semaphore 8 × 10 ms, sweep 1…32",
        "server, X_max 800 r/s",
        go("plain"),
        sweep,
        why_not=_go_why_not,
        quick=False,
        capacity_rps=800.0,
    ),
    _row(
        "Go, headers flushed 10 ms before a 64-byte body, 8 slots, -c 4",
        "inconclusive (half capacity)",
        go("flush"),
        closed(4),
        accept=ONE_LEVEL_OK,
        why_not=_go_why_not,
    ),
    _row(
        "Go, headers flushed 10 ms before a 64-byte body, 8 slots, -c 32",
        "server (800 r/s)",
        go("flush"),
        closed(32),
        why_not=_go_why_not,
    ),
    _row(
        "Go, chunked: 4 × 16 B over 10 ms, 8 slots, -c 32",
        "server (800 r/s)",
        go("chunked"),
        closed(32),
        why_not=_go_why_not,
    ),
    _row(
        "Go, Connection: close while requests wait, 8 × 10 ms, -c 32",
        "server (800 r/s)",
        go("close"),
        closed(32),
        why_not=_go_why_not,
    ),
    _row(
        "Go, accept backlog 2, 4 conns × 5 ms, no keep-alive, -c 32",
        "server (800 r/s, its accept queue full)",
        go("backlog", slots=4, service="5ms"),
        closed(32),
        why_not=_go_why_not,
        # The requests still in a SYN retry when the run ends are `cancelled` failures, ~1 %:
        # at errors.share's threshold, so errors (strong) in some runs, inconclusive in others.
        quick=False,
    ),
)
#: The rows the test command runs (analysis/tests/test_zoo.py): one per stack and cause, and
#: every row the verdict once got strongly wrong. The other quick rows are bench/zoo.sh's with
#: the long ones (`--quick` runs the quick ones): measurements of this machine, not tests.
TESTED = (
    "nginx limit_req 300 r/s → 429, -c 8",
    "nginx proxy → Go 4 × 10 ms (400 r/s), keepalive 2, -c 16",
    GIL + ", open 100 r/s",
    "gunicorn 4 sync workers × 10 ms sleep, -c 16",
    "Node http, one loop, 2 ms CPU, -c 8",
    "JDK HttpServer 8 threads × 10 ms, 3-byte body, Nagle on, -c 4",
    "Go, headers flushed 10 ms before a 64-byte body, 8 slots, -c 4",
)
QUICK = tuple(t for t in ZOO_TESTBEDS if t.quick)
IN_TESTS = tuple(t for t in ZOO_TESTBEDS if t.name in TESTED)
assert len(IN_TESTS) == len(TESTED), "a tested row's name changed"


def engine_verdict(path: Path) -> dict[str, Any] | None:
    """A single run's verdict as the engine decided it (run.json ``verdict``), in explain's
    shape (``verdict``, ``strength``, ``rule``, ``summary``); None for a sweep or a search.
    ``explain`` presents this decision and never judges again, so a quick check may read it
    without starting the analysis (the agreement of every command is the table's check)."""
    if (path / "capacity.json").is_file() or not (path / "run.json").is_file():
        return None
    found = json.loads((path / "run.json").read_text()).get("verdict") or {}
    return {
        "verdict": found.get("cause"),
        "strength": found.get("strength"),
        "rule": found.get("rule"),
        "summary": found.get("summary", ""),
        "evidence": found.get("evidence", []),
        "checks": [{"name": found.get("cause"), "evidence": found.get("summary", "")}],
    }


def judge(
    testbed: ZooTestbed, binaries: Binaries, out: Path, agreement: bool = True
) -> tuple[dict[str, Any], str]:
    """Record ``testbed`` into ``out`` and judge it: (explain's answer — or, without
    ``agreement``, the engine's run.json verdict for a single run — with ``path``, and the
    grade)."""
    from .testbeds import explain

    recording = testbed.record(binaries, out)
    verdict = None if agreement else engine_verdict(out)
    if verdict is None:
        verdict = explain(recording)
    verdict["path"] = str(out)
    verdict["measured"] = recording.facts.get("measured", "")
    return verdict, testbed.grade(verdict)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import subprocess
    import tempfile

    parser = argparse.ArgumentParser(
        prog="python -m loadgen_analysis.testing.zoo_testbeds",
        description="Record every zoo row with the loadgen binaries ($LOADGEN_BIN) and print "
        "rows × modes: truth, verdict, evidence, the server's own count, grade. Exit 1 when a "
        "row is wrong.",
    )
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="only the rows CI runs")
    parser.add_argument("--long", action="store_true", help="only the rows CI does not run")
    parser.add_argument("--only", default="", help="only rows whose name contains this")
    parser.add_argument(
        "--no-agreement",
        action="store_true",
        help="judge single runs by run.json's verdict, without running explain and report",
    )
    args = parser.parse_args(argv)
    root = args.out or Path(tempfile.mkdtemp(prefix="loadgen-zoo-"))
    root.mkdir(parents=True, exist_ok=True)
    binaries = Binaries.find()
    rows = [t for t in ZOO_TESTBEDS if args.only in t.name]
    rows = [t for t in rows if (not args.quick or t.quick) and (not args.long or not t.quick)]
    print("| row × mode | truth | verdict | rule | evidence | server's own count | grade |")
    print("|---|---|---|---|---|---|---|")
    all_right = True
    for i, testbed in enumerate(rows):
        reason = testbed.why_not()
        cells: list[str]
        if reason:
            cells = [testbed.name, testbed.truth, "—", "", f"skipped: {reason}", "", "—"]
        else:
            try:
                out = root / f"zoo-{i:02d}"
                verdict, grade = judge(testbed, binaries, out, not args.no_agreement)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                verdict, grade = {"summary": str(exc).strip().splitlines()[-1][:300]}, "failed"
            all_right &= grade in ("right", "inconclusive")
            shown = f"{verdict.get('verdict')} ({verdict.get('strength')})"
            cells = [testbed.name, testbed.truth, shown, str(verdict.get("rule", ""))]
            cells += [testbed.evidence(verdict), str(verdict.get("measured", "")), grade]
        print("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        sys.stdout.flush()
    return 0 if all_right else 1


if __name__ == "__main__":
    sys.exit(main())
