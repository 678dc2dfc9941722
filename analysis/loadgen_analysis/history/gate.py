"""The gate of ``loadgen-analyze history check``: is a metric now worse, by more than the
limit, than it was before its regressions began?

Judged are the series the newest run belongs to (and, when runs carry a ``build`` label, every
series with a run of the newest run's build), per op and gated metric. The change points with
at least ``MIN_RUNS_AFTER`` runs after them cut the series into levels; the *current* level
(the runs after the newest such point) is judged against the *baseline*: the best level
before it — where the series was before its regressions began. So a creep of small steps,
each within the limit, fails once it adds up past the limit, and a partial recovery still
fails while the series stays below where it was; a worsening beyond the limit is a regression
(exit 99), a current level within the limit of the baseline (or better) passes, reported with
the newest change. A change point with fewer runs after it is reported as not yet confirmed —
one slow run at the end of a series is an outlier until more runs agree. A series with fewer
than ``MIN_RUNS`` runs is too short to judge: said, and exit 0. Latency and throughput changes
are relative (5 % = 0.05); the error rate's is absolute (5 % = five percentage points).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from ..report.junit import xml_attr, xml_safe
from ..thresholds import EXIT_THRESHOLD
from ..units import count
from . import DEFAULT_GATED, DEFAULT_MAX_PVALUE, MIN_RUNS, MIN_RUNS_AFTER
from .changes import ABSOLUTE, HIGHER_IS_WORSE, ChangePoint, change_between, change_points, series
from .identity import run_name


@dataclass(frozen=True)
class Level:
    """The mean of ``metric`` over runs ``first``..``last`` (1-based, inclusive) of a series."""

    first: int
    last: int
    mean: float

    def describe(self) -> str:
        runs = f"run {self.first}" if self.first == self.last else f"runs {self.first}–{self.last}"
        return f"{self.mean:.4g} over {runs}"


@dataclass(frozen=True)
class Judgement:
    """One series' metric: ``status`` is ``regression``, ``improvement``, ``within limit``,
    ``no change`` or ``too few runs``; ``point`` the newest confirmed change, ``unconfirmed`` a
    newer one with too few runs after it; ``baseline`` and ``current`` the levels judged and
    ``change`` between them (relative, or absolute for the error rate)."""

    fingerprint: str
    op: str
    metric: str
    runs: int
    status: str
    point: ChangePoint | None = None
    unconfirmed: ChangePoint | None = None
    baseline: Level | None = None
    current: Level | None = None
    change: float | None = None

    def describe(self, limit: float) -> str:
        head = f"{self.status.upper() if self.status == 'regression' else self.status}:"
        runs = count(self.runs, "run")
        if self.status == "too few runs":
            text = f"{head} {self.metric} of op {self.op} has {runs}, needs {MIN_RUNS}"
        elif self.point is not None and self.baseline and self.current and self.change is not None:
            size = (
                f"{self.change * 100:+.2f} points"
                if self.metric in ABSOLUTE
                else f"{self.change * 100:+.1f} %"
            )
            text = (
                f"{head} {self.metric} of op {self.op} now {size} against its level before "
                f"its regressions ({self.current.describe()}; baseline "
                f"{self.baseline.describe()}; limit {limit:.0%}); newest change: "
                f"{self.point.describe()}"
            )
        else:
            text = f"{head} {self.metric} of op {self.op}, no change point in {runs}"
        if self.unconfirmed is not None:
            text += (
                f"; not yet confirmed: {self.unconfirmed.describe()} "
                f"({count(self.unconfirmed.runs_after, 'run')} after it, judged at "
                f"{MIN_RUNS_AFTER})"
            )
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "op": self.op,
            "metric": self.metric,
            "runs": self.runs,
            "status": self.status,
            "change_point": self.point.as_dict() if self.point else None,
            "unconfirmed": self.unconfirmed.as_dict() if self.unconfirmed else None,
            "baseline": asdict(self.baseline) if self.baseline else None,
            "current": asdict(self.current) if self.current else None,
            "change": self.change,
        }


@dataclass(frozen=True)
class GateResult:
    newest_run: str
    limit: float
    judgements: list[Judgement] = field(default_factory=list)

    @property
    def regressions(self) -> list[Judgement]:
        return [j for j in self.judgements if j.status == "regression"]

    @property
    def exit_code(self) -> int:
        return EXIT_THRESHOLD if self.regressions else 0

    def to_text(self) -> str:
        lines = [f"newest run {self.newest_run}; limit {self.limit:.0%}"]
        lines += [j.describe(self.limit) for j in self.judgements]
        if self.judgements and all(j.status == "too few runs" for j in self.judgements):
            lines.append(f"too few runs to judge (a series needs {MIN_RUNS}): passed")
        elif self.regressions:
            lines.append(f"{count(len(self.regressions), 'regression')} beyond {self.limit:.0%}")
        else:
            lines.append("no regression beyond the limit")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "newest_run": self.newest_run,
            "limit": self.limit,
            "passed": not self.regressions,
            "judgements": [j.as_dict() for j in self.judgements],
        }


def _judged_fingerprints(history: pd.DataFrame) -> tuple[str, set[str]]:
    ordered = history.sort_values(["started_unix_ns", "run_id"])
    newest = ordered.iloc[-1]
    fingerprints = {str(newest["fingerprint"])}
    build = newest.get("build")
    if isinstance(build, str):
        fingerprints |= set(ordered.loc[ordered["build"] == build, "fingerprint"].astype(str))
    return run_name(newest.to_dict()), fingerprints


def _judge(rows: pd.DataFrame, metric: str, limit: float, max_pvalue: float) -> Judgement:
    fp, op = str(rows["fingerprint"].iloc[0]), str(rows["op"].iloc[0])
    runs = int(rows[metric].notna().sum())
    if runs < MIN_RUNS:
        return Judgement(fp, op, metric, runs, "too few runs")
    points = change_points(rows, metric, max_pvalue)
    confirmed = [p for p in points if p.runs_after >= MIN_RUNS_AFTER]
    newer = [p for p in points if p.runs_after < MIN_RUNS_AFTER]
    unconfirmed = newer[-1] if newer else None
    if not confirmed:
        return Judgement(fp, op, metric, runs, "no change", None, unconfirmed)
    baseline, current = _levels(rows, metric, confirmed)
    change = change_between(metric, baseline.mean, current.mean)
    worse = (
        current.mean > baseline.mean if metric in HIGHER_IS_WORSE else current.mean < baseline.mean
    )
    status = "regression" if abs(change) > limit else "within limit"
    if not worse:
        status = "improvement"
    return Judgement(
        fp, op, metric, runs, status, confirmed[-1], unconfirmed, baseline, current, change
    )


def _levels(rows: pd.DataFrame, metric: str, confirmed: list[ChangePoint]) -> tuple[Level, Level]:
    """(baseline, current): the series cut at the ``confirmed`` change points into levels, the
    last one current and the best one before it the baseline — where the metric was before its
    regressions began (a creep's first step, the level a partial recovery has not regained)."""
    values = [float(v) for v in rows[metric].dropna()]
    cuts = [0, *(p.index for p in confirmed), len(values)]
    levels = [
        Level(start + 1, end, sum(values[start:end]) / (end - start))
        for start, end in itertools.pairwise(cuts)
        if end > start
    ]
    before = levels[:-1] or levels
    best = min if metric in HIGHER_IS_WORSE else max
    return best(before, key=lambda level: level.mean), levels[-1]


def judge_series(
    rows: pd.DataFrame,
    limit: float,
    metrics: tuple[str, ...] = DEFAULT_GATED,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
) -> list[Judgement]:
    """One series' judgements (``rows``: one fingerprint and op, in time order), per metric it
    has: what :func:`check` says of it when the newest run is in it."""
    return [
        _judge(rows, metric, limit, max_pvalue)
        for metric in metrics
        if metric in rows and rows[metric].notna().any()
    ]


def check(
    history: pd.DataFrame,
    limit: float,
    metrics: tuple[str, ...] = DEFAULT_GATED,
    ops: tuple[str, ...] | None = None,
    max_pvalue: float = DEFAULT_MAX_PVALUE,
) -> GateResult:
    """Judge the newest runs' series (module docs)."""
    newest, fingerprints = _judged_fingerprints(history)
    judgements = []
    for (fp, op), rows in series(history).items():
        if fp not in fingerprints or (ops is not None and op not in ops):
            continue
        judgements += judge_series(rows, limit, metrics, max_pvalue)
    if not judgements:
        judged = history[history["fingerprint"].astype(str).isin(fingerprints)]
        raise ValueError(
            f"nothing to judge: the newest run's series has no {', '.join(metrics)} for "
            f"{'op ' + ', '.join(ops) if ops else 'any op'}; its ops are "
            f"{', '.join(sorted(judged['op'].astype(str).unique()))}"
        )
    return GateResult(newest, limit, judgements)


def gate_junit(result: GateResult, name: str = "history") -> str:
    """JUnit XML: one suite ``name`` (``history check`` gives the store's folder name), one
    test case per series op and metric, a regression failed."""
    failures = len(result.regressions)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="loadgen-analyze history check" tests="{len(result.judgements)}" '
        f'failures="{failures}">',
        f"  <testsuite name={xml_attr(name)} tests={xml_attr(str(len(result.judgements)))} "
        f'failures="{failures}">',
    ]
    for j in result.judgements:
        text = j.describe(result.limit)
        head = (
            f"    <testcase classname={xml_attr(f'history.{j.fingerprint}.{j.op}')} "
            f"name={xml_attr(j.metric)}>"
        )
        if j.status == "regression":
            lines.append(f'{head}<failure message={xml_attr(text)} type="regression"/></testcase>')
        else:
            body = xml_safe(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            lines.append(f"{head}<system-out>{body}</system-out></testcase>")
    lines += ["  </testsuite>", "</testsuites>"]
    return "\n".join(lines) + "\n"
