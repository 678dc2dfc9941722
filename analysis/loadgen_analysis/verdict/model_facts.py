"""What the engine knew about how a run was paced, read back for the verdict: the workers'
time (alive, in a request, waiting for their next one) per phase or thread group, the open
model's schedule (offered, dropped, late, send lag) and the producer-buffer waits.

Responsible for reading these facts — run.json ``summary.workers`` and ``summary.open``, and the
request rows — into one :class:`RunFacts` per run. It never derives them from the model's
configuration (how many workers a phase should have, when a group should start): a run
recorded before the engine wrote a fact (request schema ≤ 3) has it as ``None``, and the
checks say "not measured". What the facts mean for the verdict is the checks' business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from ..io.engine import connect
from ..io.load import as_runs
from ..io.run import Run
from ..reductions.quantiles import exact_quantiles


@dataclass(frozen=True)
class PhaseTime:
    """The workers of one phase (thread group, phase, or ``main``): their time in seconds."""

    phase: str
    started: int
    alive_s: float
    busy_s: float
    waiting_s: float
    sent: int
    #: From the first of them starting to the last ending.
    span_s: float

    @property
    def busy_share(self) -> float:
        return self.busy_s / self.alive_s if self.alive_s > 0 else 0.0

    @property
    def waiting_share(self) -> float:
        return self.waiting_s / self.alive_s if self.alive_s > 0 else 0.0

    @property
    def own_share(self) -> float:
        """The client's own work between requests: alive, neither busy nor waiting."""
        return max(0.0, 1.0 - self.busy_share - self.waiting_share)

    @property
    def workers_alive(self) -> float:
        """Workers alive on average while the phase ran."""
        return self.alive_s / self.span_s if self.span_s > 0 else 0.0


@dataclass(frozen=True)
class OpenFacts:
    """How an open-model run kept its schedule."""

    scheduled: int
    dropped: int
    late: int
    max_lateness_ms: float
    #: Offered load (run.json ``open.offered_rps``; for older runs scheduled / wall time).
    offered_rps: float
    achieved_rps: float
    #: start_ns - intended_ns over the rows (exact).
    lag_p50_ms: float | None = None
    lag_p99_ms: float | None = None
    #: Median latency from the intended send time, first and second half of the schedule.
    first_half_p50_ms: float | None = None
    second_half_p50_ms: float | None = None
    #: p99 latency from the intended send time, of the requests that got a response.
    latency_p99_ms: float | None = None


@dataclass(frozen=True)
class RunFacts:
    run: str
    #: The model that ran (``closed``, ``open``, ``thread-groups``, ``phased``,
    #: ``producer-buffer``), as run.json's configuration names it.
    kind: str | None
    #: Per phase; empty when the run predates the engine's worker clocks.
    phases: tuple[PhaseTime, ...] = ()
    open: OpenFacts | None = None
    #: Producer-buffer: consumers' total wait on an empty buffer and items' total wait in the
    #: buffer (seconds, from the rows; ``buffer_wait_s`` from request schema 4).
    queue_wait_s: float | None = None
    buffer_wait_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        """Whether the engine wrote the workers' time (request schema ≥ 4)."""
        return bool(self.phases)

    def deciding_phase(self) -> PhaseTime | None:
        """The phase judged for the whole run: the one with the most workers (started in it,
        all alive together unless the phase is long), the longer one on a tie."""
        if not self.phases:
            return None
        return max(self.phases, key=lambda p: (p.started, p.span_s))

    def total(self) -> PhaseTime | None:
        """Every phase's workers together (the run's own time span)."""
        if not self.phases:
            return None
        return PhaseTime(
            phase="all",
            started=sum(p.started for p in self.phases),
            alive_s=sum(p.alive_s for p in self.phases),
            busy_s=sum(p.busy_s for p in self.phases),
            waiting_s=sum(p.waiting_s for p in self.phases),
            sent=sum(p.sent for p in self.phases),
            span_s=max(p.span_s for p in self.phases),
        )


def _phase_times(parts: tuple[Run, ...]) -> tuple[PhaseTime, ...]:
    """run.json ``summary.workers.phases`` of every directory, summed per phase label (a
    sharded run's shards ran the same phases side by side); () when any part lacks them."""
    merged: dict[str, dict[str, float]] = {}
    for part in parts:
        workers = (part.summary or {}).get("workers")
        if not isinstance(workers, dict) or not isinstance(workers.get("phases"), list):
            return ()
        for p in workers["phases"]:
            into = merged.setdefault(str(p["phase"]), dict.fromkeys(_SUMMED, 0.0) | {"span": 0.0})
            for key in _SUMMED:
                into[key] += float(p[key])
            span = (float(p["last_ended_ns"]) - float(p["first_started_ns"])) / 1e9
            into["span"] = max(into["span"], span)
    return tuple(
        PhaseTime(
            phase=name,
            started=int(v["started"]),
            alive_s=v["alive_ns"] / 1e9,
            busy_s=v["busy_ns"] / 1e9,
            waiting_s=v["waiting_ns"] / 1e9,
            sent=int(v["sent"]),
            span_s=v["span"],
        )
        for name, v in merged.items()
    )


_SUMMED = ("started", "alive_ns", "busy_ns", "waiting_ns", "sent")


def _columns(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.execute("DESCRIBE records").fetchall()}


def _waits(con: duckdb.DuckDBPyConnection, columns: set[str]) -> tuple[float | None, ...]:
    """Σ queue_wait_ns and Σ buffer_wait_ns of the rows, in seconds (None where no row has
    one, or the column does not exist)."""
    sums = [
        f"sum({c}) / 1e9" if c in columns else "NULL" for c in ("queue_wait_ns", "buffer_wait_ns")
    ]
    row = con.execute(f"SELECT {', '.join(sums)} FROM records").fetchone()
    return tuple(None if v is None else float(v) for v in row)


def _open_rows(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """From the rows with an intended time: the send lag's p50/p99 and the median latency from
    the intended time in the schedule's first and second half."""
    lag = exact_quantiles(
        con,
        "(SELECT 0 AS k, greatest(start_ns - intended_ns, 0) AS v FROM records "
        "WHERE intended_ns IS NOT NULL)",
        ["k"],
        "v",
        [0.5, 0.99],
    )
    halves = exact_quantiles(
        con,
        """(SELECT CAST(intended_ns >= (min(intended_ns) OVER () + max(intended_ns) OVER ()) / 2
                AS INTEGER) AS half,
            start_ns + latency_ns - least(intended_ns, start_ns) AS v
            FROM records WHERE intended_ns IS NOT NULL AND status > 0)""",
        ["half"],
        "v",
        [0.5],
    )
    latency = exact_quantiles(
        con,
        "(SELECT 0 AS k, start_ns + latency_ns - least(intended_ns, start_ns) AS v "
        "FROM records WHERE intended_ns IS NOT NULL AND status > 0)",
        ["k"],
        "v",
        [0.99],
    )
    out: dict[str, Any] = {}
    if not lag.empty:
        out["lag_p50_ms"], out["lag_p99_ms"] = (v / 1e6 for v in lag["q"].iloc[0])
    if not latency.empty:
        out["latency_p99_ms"] = latency["q"].iloc[0][0] / 1e6
    by_half = {int(r.half): r.q[0] / 1e6 for r in halves.itertuples()}
    out["first_half_p50_ms"] = by_half.get(0)
    out["second_half_p50_ms"] = by_half.get(1)
    return out


def _open_facts(run: Run, con: duckdb.DuckDBPyConnection) -> OpenFacts | None:
    opens = [(p.summary or {}).get("open") for p in run.parts]
    if not opens or not all(isinstance(o, dict) for o in opens):
        return None
    requests, wall_ns = con.execute(
        "SELECT count(*), max(start_ns + latency_ns - judged_from_ns) FROM records"
    ).fetchone()
    wall_s = max((wall_ns or 0) / 1e9, 1e-9)
    scheduled = sum(int(o["scheduled"]) for o in opens)
    offered = [o.get("offered_rps") for o in opens]
    return OpenFacts(
        scheduled=scheduled,
        dropped=sum(int(o["dropped"]) for o in opens),
        late=sum(int(o["late"]) for o in opens),
        max_lateness_ms=float(opens[0]["max_lateness_ns"]) / 1e6,
        offered_rps=sum(offered) if all(o is not None for o in offered) else scheduled / wall_s,
        achieved_rps=requests / wall_s,
        **_open_rows(con),
    )


def run_facts(runs: Run | str | list[Run | str]) -> list[RunFacts]:
    """One :class:`RunFacts` per run, in order."""
    out = []
    for run in as_runs(runs):
        con = connect(run)
        queue_wait, buffer_wait = _waits(con, _columns(con))
        phases = _phase_times(run.parts)
        notes = []
        if not phases:
            notes.append(
                "the workers' busy and waiting time was not measured: the run was recorded "
                "before loadgen wrote it (request schema ≤ 3)"
            )
        out.append(
            RunFacts(
                run=run.label,
                kind=run.model,
                phases=phases,
                open=_open_facts(run, con),
                queue_wait_s=queue_wait,
                buffer_wait_s=buffer_wait,
                notes=notes,
            )
        )
    return out
