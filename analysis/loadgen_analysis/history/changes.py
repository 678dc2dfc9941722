"""Series of runs and the change points in them, found by Apache Otava's E-divisive means.

A *series* is the runs of one fingerprint (scenario, request, model, protocol, loadgen version —
:mod:`.identity`; or a ``--series`` name) in start-time order, per op; a run whose fingerprint
differs from the run before it starts another series, and :func:`series_starts` marks where and
what changed. Per series and metric, :func:`change_points` hands the values to
``otava.analysis.compute_change_points`` — Hunter's split-and-merge form of E-divisive means
(Matteson and James; Fleming et al., ICPE 2023), a Student's t-test for each candidate's
significance — and keeps each change point's position, the runs either side, the segment means,
the relative change and its p-value.

This module finds and describes; judging the newest change against a limit is :mod:`.gate`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from . import DEFAULT_MAX_PVALUE
from .identity import FINGERPRINT_FIELDS, run_name, series_title
from .record import METRICS

#: Every metric a series may have (a capacity search's answer besides the runs' figures).
ALL_METRICS = (*METRICS, "capacity_rps")

#: Metrics where a higher value is worse; for the others (throughput, capacity) lower is.
HIGHER_IS_WORSE = frozenset({"p50_ms", "p90_ms", "p99_ms", "p999_ms", "error_rate"})

#: Metrics whose change is absolute (percentage points), not relative: a rate that starts at 0.
ABSOLUTE = frozenset({"error_rate"})

#: Otava's sliding window for the split step, in runs (its own default).
WINDOW_RUNS = 50


@dataclass(frozen=True)
class ChangePoint:
    """A change in one metric of one series: ``index`` is the position (0-based) of the first
    run after it; ``change`` is relative (0.2 = +20 %), or absolute for :data:`ABSOLUTE`."""

    fingerprint: str
    op: str
    metric: str
    index: int
    runs: int
    run_before: str
    run_after: str
    started_after_unix_ns: int
    commit_after: str | None
    mean_before: float
    mean_after: float
    change: float
    pvalue: float
    #: The first run after it as people know it (:func:`~.identity.run_name`).
    name_after: str = ""

    @property
    def worse(self) -> bool:
        """Whether the change makes the metric worse (higher latency, lower throughput)."""
        up = self.mean_after > self.mean_before
        return up if self.metric in HIGHER_IS_WORSE else not up

    @property
    def runs_after(self) -> int:
        return self.runs - self.index

    def describe(self) -> str:
        """``p99_ms of op main +19.6 % (5.11 → 6.11) at run 11 of 15, first run after it R``."""
        size = (
            f"{self.change * 100:+.2f} points"
            if self.metric in ABSOLUTE
            else f"{self.change * 100:+.1f} %"
        )
        commit = f", commit {self.commit_after}" if self.commit_after else ""
        return (
            f"{self.metric} of op {self.op} {size} ({self.mean_before:.4g} → "
            f"{self.mean_after:.4g}, p = {self.pvalue:.2g}) at run {self.index + 1} of "
            f"{self.runs}: first run after it {self.name_after or self.run_after}{commit}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "worse": self.worse, "runs_after": self.runs_after}


def _otava_change_points() -> Any:
    """Otava's ``compute_change_points``, imported when a series needs it: Otava is the
    ``history`` extra (it brings BigQuery, Postgres and Slack clients), not a main dependency,
    so a ``pip install ./`` without it says what to install rather than fail on import."""
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:
        raise ValueError(
            "finding change points in the history needs Apache Otava, which is not installed: "
            "pip install './[history]' (or apache-otava)"
        ) from exc
    return compute_change_points


def series(history: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """The history's rows by (fingerprint, op), each in start-time order."""
    ordered = history.sort_values(["started_unix_ns", "run_id"], kind="stable")
    return {
        (str(fp), str(op)): rows.reset_index(drop=True)
        for (fp, op), rows in ordered.groupby(["fingerprint", "op"], sort=False)
    }


def series_starts(history: pd.DataFrame) -> pd.DataFrame:
    """Where a run's fingerprint differs from the run before it (in start-time order): the run,
    its fingerprint and which of scenario, target, model, protocol, version changed."""
    runs = history.drop_duplicates("run_id").sort_values(["started_unix_ns", "run_id"])
    marks, before = [], None
    for row in runs.to_dict("records"):
        if before is not None and row["fingerprint"] != before["fingerprint"]:
            changed = [
                f"{f} {before[f]!r} → {row[f]!r}" for f in FINGERPRINT_FIELDS if row[f] != before[f]
            ]
            if not changed and isinstance(row.get("series"), str):
                changed = [f"series {before.get('series')!r} → {row['series']!r}"]
            marks.append(
                {
                    "run_id": row["run_id"],
                    "run": run_name(row),
                    "fingerprint": row["fingerprint"],
                    "changed": changed,
                }
            )
        before = row
    return pd.DataFrame(marks, columns=["run_id", "run", "fingerprint", "changed"])


def change_between(metric: str, before: float, after: float) -> float:
    if metric in ABSOLUTE:
        return after - before
    return after / before - 1.0 if before else math.inf


def change_points(
    rows: pd.DataFrame, metric: str, max_pvalue: float = DEFAULT_MAX_PVALUE
) -> list[ChangePoint]:
    """The change points of one series' ``metric`` (rows in time order), oldest first. Runs
    without the metric (NaN) are left out of that metric's series."""
    present = rows[rows[metric].notna()].reset_index(drop=True) if metric in rows else rows[:0]
    values = [float(v) for v in present[metric]] if len(present) else []
    if len(values) < 3:
        return []
    found, _ = _otava_change_points()(values, window_len=WINDOW_RUNS, max_pvalue=max_pvalue)
    points = []
    for point in found:
        index = int(point.index)
        before, after = float(point.stats.mean_1), float(point.stats.mean_2)
        commit = present["commit"][index] if "commit" in present else None
        points.append(
            ChangePoint(
                fingerprint=str(present["fingerprint"][0]),
                op=str(present["op"][0]),
                metric=metric,
                index=index,
                runs=len(values),
                run_before=str(present["run_id"][index - 1]),
                run_after=str(present["run_id"][index]),
                started_after_unix_ns=int(present["started_unix_ns"][index]),
                commit_after=commit if isinstance(commit, str) else None,
                mean_before=before,
                mean_after=after,
                change=change_between(metric, before, after),
                pvalue=float(point.stats.pvalue),
                name_after=run_name(present.iloc[index].to_dict()),
            )
        )
    return points


def all_change_points(
    history: pd.DataFrame,
    metrics: tuple[str, ...] = ALL_METRICS,
    ops: tuple[str, ...] | None = None,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
) -> list[ChangePoint]:
    """Every series' change points for ``metrics`` (and ``ops``, all when None)."""
    found = []
    for (_, op), rows in series(history).items():
        if ops is not None and op not in ops:
            continue
        for metric in metrics:
            found += change_points(rows, metric, max_pvalue)
    return found


def series_table(history: pd.DataFrame) -> pd.DataFrame:
    """One row per series: fingerprint, op, what was tested, its runs, first and last start."""
    rows = []
    for (fp, op), frame in series(history).items():
        first = frame.iloc[0]
        rows.append(
            {
                "series": series_title(first),
                "op": op,
                **{f: first[f] for f in FINGERPRINT_FIELDS},
                "key": fp,
                "runs": len(frame),
                "first": pd.Timestamp(int(frame["started_unix_ns"].iloc[0]), unit="ns"),
                "last": pd.Timestamp(int(frame["started_unix_ns"].iloc[-1]), unit="ns"),
            }
        )
    return pd.DataFrame(rows)
