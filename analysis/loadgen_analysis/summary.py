"""Reductions of raw request records into small pandas frames, computed in DuckDB.

Responsible for: the per-op summary (the same numbers the Rust console prints, exactly and not
at HDR precision), the per-run table a sweep is analysed from, the per-second timeline, phase
spans, gaps between a worker's consecutive requests, latency components, the percentile
spectrum and, for sharded runs, each shard's share and start skew. Not responsible for
interpreting them (see littles_law, usl, attribution).

Semantics match ``loadgen``'s summary: a request *failed* when ``error`` is set; latency
statistics cover rows with ``status > 0``; a run's wall time is the end of its last request
(``max(start_ns + latency_ns)``, from the anchor at 0); throughput is requests / wall time.
A sharded run is one run: its shards' rows together, timed from its earliest shard's anchor.
Percentiles use the same rank as HDR histograms (the ⌈q·n⌉-th smallest value), exactly.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import duckdb
import numpy as np
import pandas as pd

from .gaps import GapScan, OutOfOrderError, register_gap_values, scan_gaps
from .io import Run, as_runs, connect
from .quantiles import exact_quantile_sets, exact_quantiles
from .rollup import build_rollup

#: Percentiles of the per-op summary, as (column suffix, quantile).
SUMMARY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p999", 0.999),
)

#: Percentiles drawn on a spectrum plot.
SPECTRUM_PERCENTILES: tuple[float, ...] = (
    0.0,
    0.25,
    0.5,
    0.75,
    0.9,
    0.95,
    0.99,
    0.995,
    0.999,
    0.9995,
    0.9999,
    0.99999,
)

RunsArg = Run | str | Sequence[Run | str]

_Reduction = TypeVar("_Reduction", bound=Callable[..., pd.DataFrame])
_Result = TypeVar("_Result")

#: Frames computed inside :func:`reuse_reductions`, by (function, runs, arguments); None
#: outside one.
_REUSED: dict[tuple[Any, ...], Any] | None = None


#: Inside :func:`reuse_reductions` with ``all_percentiles``: compute every latency percentile
#: a report shows in one go (see :func:`_latency_cube`).
_ALL_PERCENTILES = False


@contextlib.contextmanager
def reuse_reductions(all_percentiles: bool = False) -> Iterator[None]:
    """Within this block, a reduction asked for twice on the same runs with the same arguments
    (a report asks for the run table, the errors and the latency components both for its
    verdict and for its tables) reads the rows once; each call still gets its own copy.
    Outside it every call reads the rows, so a notebook never sees a stale frame.

    ``all_percentiles``: the first latency percentile asked for computes all a report shows
    (per run, per op, per second) in the same two passes; worth it only when they will all be
    asked for."""
    global _REUSED, _ALL_PERCENTILES
    outer, outer_all = _REUSED, _ALL_PERCENTILES
    _REUSED = {} if outer is None else outer
    _ALL_PERCENTILES = all_percentiles or outer_all
    try:
        yield
    finally:
        _REUSED, _ALL_PERCENTILES = outer, outer_all


def _runs_key(runs: Sequence[Run]) -> tuple[Any, ...]:
    return tuple((r.label, r.location, r.segments, r.rows) for r in runs)


def _timed(function: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
    """``function(*args, **kwargs)``; with ``LOADGEN_ANALYSIS_PROFILE=1`` in the environment,
    its wall time goes to stderr (which reduction a slow command spends its time in)."""
    if os.environ.get("LOADGEN_ANALYSIS_PROFILE") != "1":
        return function(*args, **kwargs)
    started = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        took = time.perf_counter() - started
        print(f"loadgen-analysis: {function.__name__} {took:.2f} s", file=sys.stderr)


def _reused(function: _Reduction) -> _Reduction:
    """Make ``function(runs, *args, **kwargs)`` answer from :func:`reuse_reductions`'s store."""

    @functools.wraps(function)
    def wrapper(runs: RunsArg, *args: Any, **kwargs: Any) -> pd.DataFrame:
        if _REUSED is None:
            return _timed(function, runs, *args, **kwargs)
        runs = as_runs(runs)
        key = (function.__name__, _runs_key(runs), args, tuple(sorted(kwargs.items())))
        if key not in _REUSED:
            _REUSED[key] = _timed(function, runs, *args, **kwargs)
        return _REUSED[key].copy()

    return wrapper  # type: ignore[return-value]


def _connection(runs: list[Run]) -> duckdb.DuckDBPyConnection:
    """:func:`~loadgen_analysis.io.connect` on ``runs``; inside :func:`reuse_reductions` one
    per set of runs, so the rollups built on it serve every reduction."""
    if _REUSED is None:
        return connect(runs)
    key = ("_connection", _runs_key(runs))
    if key not in _REUSED:
        _REUSED[key] = connect(runs)
    return _REUSED[key]


def _rollup(runs: list[Run], bucket_s: float = 1.0) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A connection and the name of its table holding the rollup of ``runs``' rows with time
    buckets of ``bucket_s`` (see :mod:`loadgen_analysis.rollup`; ``<name>_workers`` beside it):
    built once inside :func:`reuse_reductions`, else for each call."""
    con = _connection(runs)
    bucket_ns = int(bucket_s * 1e9)
    name = f"rollup_{bucket_ns}"
    key = _rollup_key(runs, bucket_ns)
    if _REUSED is None or key not in _REUSED:
        _timed(build_rollup, con, bucket_ns, name)
        if _REUSED is not None:
            _REUSED[key] = name
    return con, name


def _rollup_key(runs: list[Run], bucket_ns: int) -> tuple[Any, ...]:
    return ("_rollup", _runs_key(runs), bucket_ns)


def run_walls_ns(runs: RunsArg) -> dict[int, int]:
    """Per run_index: the run's wall time (ns), the end of its last request. From the rollup,
    which inside :func:`reuse_reductions` the other tables share."""
    con, rollup = _rollup(as_runs(runs))
    query = f"SELECT run_index, max(last_end_ns) FROM {rollup} GROUP BY run_index"
    return {int(i): int(wall) for i, wall in con.execute(query).fetchall()}


def _mean(total: str, count: str, condition: str = "") -> str:
    """SQL: the mean that ``total`` and ``count`` of a rollup's groups (those meeting
    ``condition``) make: what ``avg`` of the records gives (the HUGEINT sum over the count)."""
    where = f" FILTER (WHERE {condition})" if condition else ""
    return f"(sum({total}){where} / sum({count}){where})"


def _count(condition: str = "") -> str:
    """SQL: the rows of a rollup's groups (those meeting ``condition``), as ``count(*)``
    (``FILTER (WHERE condition)``) would count the records."""
    where = f" FILTER (WHERE {condition})" if condition else ""
    return f"coalesce(sum(requests){where}, 0)::BIGINT"


def _with_latency_quantiles(
    con: duckdb.DuckDBPyConnection, runs: list[Run], frame: pd.DataFrame, keys: Sequence[str]
) -> pd.DataFrame:
    """``frame`` (one row per group of ``keys``) with p50_ms … p999_ms of the latency of the
    group's rows with a response (NaN for a group without one), exact, in bounded memory."""
    cube = _latency_cube(runs, 1.0) if keys == ["run_index"] else None
    if cube is not None:
        quantiles = _pick(cube["run"], [q for _, q in SUMMARY_PERCENTILES])
    else:
        relation = f"(SELECT {', '.join(keys)}, latency_ns FROM records WHERE status > 0)"
        quantiles = exact_quantiles(
            con, relation, keys, "latency_ns", [q for _, q in SUMMARY_PERCENTILES]
        )
    frame = frame.merge(quantiles, on=list(keys), how="left")
    for i, (name, _) in enumerate(SUMMARY_PERCENTILES):
        frame[f"{name}_ms"] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    return frame.drop(columns=["q"])


#: Latency percentiles computed per run and op whenever some are: the summary's and the
#: spectrum's, so a report's summary table and spectrum share one computation.
_OP_PERCENTILES: tuple[float, ...] = tuple(
    sorted({q for _, q in SUMMARY_PERCENTILES} | set(SPECTRUM_PERCENTILES))
)


@_reused
def _op_latency_quantiles(runs: RunsArg, by_op: bool) -> pd.DataFrame:
    """Per run_index and op (``all`` when not ``by_op``): list ``q`` of the exact latencies
    at :data:`_OP_PERCENTILES` of the rows with a response."""
    runs = as_runs(runs)
    cube = _latency_cube(runs, 1.0)
    if cube is not None:
        return cube["op"] if by_op else cube["run"].assign(op="all")
    con = _connection(runs)
    op_expr = "op" if by_op else "'all'"
    relation = f"(SELECT run_index, {op_expr} AS op, latency_ns FROM records WHERE status > 0)"
    return exact_quantiles(con, relation, ["run_index", "op"], "latency_ns", _OP_PERCENTILES)


def _pick(frame: pd.DataFrame, percentiles: Sequence[float]) -> pd.DataFrame:
    """``frame`` of :func:`_op_latency_quantiles` with ``q`` cut to ``percentiles``."""
    at = [_OP_PERCENTILES.index(p) for p in percentiles]
    frame = frame.copy()
    frame["q"] = [[v[i] for i in at] for v in frame["q"]]
    return frame


#: Latency percentiles of a timeline bucket.
_TIMELINE_PERCENTILES = (0.5, 0.99)


def _latency_cube(runs: list[Run], bucket_s: float) -> dict[str, pd.DataFrame] | None:
    """Inside :func:`reuse_reductions` (``all_percentiles``): every latency percentile a report
    shows — per run and per run and op (:data:`_OP_PERCENTILES`), per run, phase and time
    bucket and per run and time bucket (p50, p99) — from one :func:`exact_quantile_sets`: two
    passes over the rows instead of two per table. Frames ``run``, ``op``, ``phase_bucket``,
    ``bucket`` as :func:`exact_quantiles` returns them; None outside (each reduction computes
    its own)."""
    if _REUSED is None or not _ALL_PERCENTILES:
        return None
    key = ("_latency_cube", _runs_key(runs), bucket_s)
    if key not in _REUSED:
        bucket_ns = int(bucket_s * 1e9)
        relation = (
            f"(SELECT run_index, op, phase, (start_ns + latency_ns) // {bucket_ns} AS bucket, "
            "latency_ns FROM records WHERE status > 0)"
        )
        sets = [
            (["run_index"], _OP_PERCENTILES),
            (["run_index", "op"], _OP_PERCENTILES),
            (["run_index", "phase", "bucket"], _TIMELINE_PERCENTILES),
            (["run_index", "bucket"], _TIMELINE_PERCENTILES),
        ]
        fine = ["run_index", "op", "phase", "bucket"]
        frames = _timed(exact_quantile_sets, _connection(runs), relation, fine, "latency_ns", sets)
        _REUSED[key] = dict(zip(("run", "op", "phase_bucket", "bucket"), frames, strict=True))
    return _REUSED[key]


@_reused
def op_summary(runs: RunsArg) -> pd.DataFrame:
    """Per run and op: counts, error rate, throughput and latency statistics (ms).

    Columns: run, op, requests, ok, failed, error_rate, throughput_rps, ok_throughput_rps,
    responses, mean_ms, min_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms, bytes_sent,
    bytes_received. Throughput divides by the whole run's wall time (as loadgen does).
    """
    runs = as_runs(runs)
    con, rollup = _rollup(runs)
    frame = con.execute(
        f"""
        WITH per_op AS (
            SELECT run_index, any_value(run) AS run, op,
                {_count()} AS requests,
                {_count("error IS NULL")} AS ok,
                {_count("error IS NOT NULL")} AS failed,
                {_count("responded")} AS responses,
                {_mean("latency_ns", "requests", "responded")} / 1e6 AS mean_ms,
                min(latency_min_ns) FILTER (WHERE responded) / 1e6 AS min_ms,
                max(latency_max_ns) FILTER (WHERE responded) / 1e6 AS max_ms,
                sum(bytes_sent)::BIGINT AS bytes_sent,
                sum(bytes_received)::BIGINT AS bytes_received,
                max(last_end_ns) AS end_ns
            FROM {rollup} GROUP BY run_index, op
        )
        -- The run's wall time from its ops' ends.
        SELECT * EXCLUDE (end_ns), max(end_ns) OVER (PARTITION BY run_index) AS wall_ns
        FROM per_op ORDER BY run_index, op
        """
    ).df()
    quantiles = _pick(_op_latency_quantiles(runs, True), [q for _, q in SUMMARY_PERCENTILES])
    frame = frame.merge(quantiles, on=["run_index", "op"], how="left")
    for i, (name, _) in enumerate(SUMMARY_PERCENTILES):
        frame[f"{name}_ms"] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    wall_s = frame["wall_ns"] / 1e9
    frame["error_rate"] = frame["failed"] / frame["requests"]
    frame["throughput_rps"] = frame["requests"] / wall_s
    frame["ok_throughput_rps"] = frame["ok"] / wall_s
    columns = [
        "run",
        "op",
        "requests",
        "ok",
        "failed",
        "error_rate",
        "throughput_rps",
        "ok_throughput_rps",
        "responses",
        "mean_ms",
        "min_ms",
        *[f"{name}_ms" for name, _ in SUMMARY_PERCENTILES],
        "max_ms",
        "bytes_sent",
        "bytes_received",
    ]
    return frame[columns].reset_index(drop=True)


@_reused
def run_table(runs: RunsArg) -> pd.DataFrame:
    """One row per run: the numbers a sweep is analysed from.

    Columns: run, connections, requests, ok, failed, error_rate, wall_s, throughput_rps,
    ok_throughput_rps, mean_latency_ms (all rows with a response), p50_ms … p999_ms,
    mean_ttfb_ms, mean_busy_ms (mean time a request occupied its worker, failures included),
    n_eff (throughput × mean busy time: how many workers were busy on average, Little's Law),
    n_eff_ratio (n_eff / connections), bytes_per_s (sent + received),
    mean_queue_wait_ms.
    """
    runs = as_runs(runs)
    con, rollup = _rollup(runs)
    frame = con.execute(
        f"""
        WITH workers AS (
            SELECT run_index, count(DISTINCT worker) AS workers_seen
            FROM {rollup}_workers GROUP BY run_index
        )
        SELECT run_index, any_value(run) AS run, any_value(connections) AS connections,
            {_count()} AS requests,
            {_count("error IS NULL")} AS ok,
            {_count("error IS NOT NULL")} AS failed,
            max(last_end_ns) AS wall_ns,
            {_mean("latency_ns", "requests", "responded")} / 1e6 AS mean_latency_ms,
            {_mean("ttfb_ns", "requests", "responded AND timed")} / 1e6 AS mean_ttfb_ms,
            sum(latency_ns) AS busy_ns,
            (sum(bytes_sent) + sum(bytes_received))::DOUBLE AS bytes_total,
            {_mean("queue_wait_ns", "queue_waits")} / 1e6 AS mean_queue_wait_ms,
            any_value(workers_seen) AS workers_seen
        FROM {rollup} JOIN workers USING (run_index) GROUP BY run_index ORDER BY run_index
        """
    ).df()
    frame = _with_latency_quantiles(con, runs, frame, ["run_index"])
    wall_s = frame["wall_ns"] / 1e9
    frame["wall_s"] = wall_s
    frame["error_rate"] = frame["failed"] / frame["requests"]
    frame["throughput_rps"] = frame["requests"] / wall_s
    frame["ok_throughput_rps"] = frame["ok"] / wall_s
    frame["mean_busy_ms"] = frame["busy_ns"] / frame["requests"] / 1e6
    # Little's Law on the client: time-averaged number of requests in flight.
    frame["n_eff"] = frame["busy_ns"] / frame["wall_ns"]
    frame["n_eff_ratio"] = frame["n_eff"] / frame["connections"].astype("float64")
    frame["bytes_per_s"] = frame["bytes_total"] / wall_s
    columns = [
        "run",
        "connections",
        "requests",
        "ok",
        "failed",
        "error_rate",
        "wall_s",
        "throughput_rps",
        "ok_throughput_rps",
        "mean_latency_ms",
        *[f"{name}_ms" for name, _ in SUMMARY_PERCENTILES],
        "mean_ttfb_ms",
        "mean_busy_ms",
        "n_eff",
        "n_eff_ratio",
        "bytes_per_s",
        "mean_queue_wait_ms",
        "workers_seen",
    ]
    return frame[columns].reset_index(drop=True)


def timeline(
    runs: RunsArg, bucket_s: float = 1.0, by_phase: bool = True, latency: bool = True
) -> pd.DataFrame:
    """Per run, phase and time bucket (by completion time): requests, errors, throughput and
    p50/p99 latency.

    Columns: run, phase (``all`` when ``by_phase`` is false), t_s (bucket start, seconds from
    the anchor), requests, ok, errors, throughput_rps, ok_throughput_rps, p50_ms, p99_ms,
    bytes_per_s (both directions), sent_bytes_per_s, received_bytes_per_s, covered_s. A request
    counts in the bucket in which it ended, so a bucket's count is the throughput delivered in
    it. Rates divide by ``covered_s``, the part of the
    bucket inside the run (the last bucket is usually partial, and a full-bucket divisor would
    show a drop that did not happen); at least a tenth of a bucket, so a sliver of a bucket
    does not turn a handful of requests into a spike. ``latency=False`` leaves p50_ms and
    p99_ms NaN and saves the two passes over the rows that compute them.
    """
    if bucket_s <= 0:
        raise ValueError(f"bucket_s must be positive, not {bucket_s}")
    runs = as_runs(runs)
    if _REUSED is not None and not latency:
        key = ("_timeline", _runs_key(runs), (bucket_s, by_phase, True), ())
        if key in _REUSED:  # the same buckets with their latency: drop it
            frame = _REUSED[key].copy()
            frame["p50_ms"] = frame["p99_ms"] = math.nan
            return frame
    return _timeline(runs, bucket_s, by_phase, latency)


@_reused
def _timeline(runs: list[Run], bucket_s: float, by_phase: bool, latency: bool) -> pd.DataFrame:
    con, rollup = _rollup(runs, bucket_s)
    bucket_ns = int(bucket_s * 1e9)
    phase = "phase" if by_phase else "'all'"
    frame = con.execute(
        f"""
        WITH buckets AS (
            SELECT run_index, any_value(run) AS run, {phase} AS phase, bucket,
                {_count()} AS requests,
                {_count("error IS NULL")} AS ok,
                {_count("error IS NOT NULL")} AS errors,
                (sum(bytes_sent) + sum(bytes_received))::DOUBLE AS bytes,
                sum(bytes_sent)::DOUBLE AS sent, sum(bytes_received)::DOUBLE AS received,
                min(first_start_ns) AS first_ns, max(last_end_ns) AS last_ns
            FROM {rollup} GROUP BY run_index, {phase}, bucket
        ),
        -- The run's span from its buckets'.
        spans AS (
            SELECT * EXCLUDE (first_ns, last_ns),
                min(first_ns) OVER (PARTITION BY run_index) AS first_ns,
                max(last_ns) OVER (PARTITION BY run_index) AS last_ns
            FROM buckets
        )
        SELECT * EXCLUDE (first_ns, last_ns),
            greatest(
                least((bucket + 1) * {bucket_ns}, last_ns)
                    - greatest(bucket * {bucket_ns}, first_ns),
                {bucket_ns} // 10
            ) / 1e9 AS covered_s
        FROM spans ORDER BY run_index, bucket, phase
        """
    ).df()
    relation = (
        f"(SELECT run_index, {phase} AS phase, (start_ns + latency_ns) // {bucket_ns} AS bucket, "
        "latency_ns FROM records WHERE status > 0)"
    )
    keys = ["run_index", "phase", "bucket"]
    cube = _latency_cube(runs, bucket_s) if latency else None
    if cube is not None:
        quantiles = cube["phase_bucket"] if by_phase else cube["bucket"].assign(phase="all")
        frame = frame.merge(quantiles, on=keys, how="left")
    elif latency:
        quantiles = exact_quantiles(con, relation, keys, "latency_ns", [0.5, 0.99])
        frame = frame.merge(quantiles, on=keys, how="left")
    else:
        frame["q"] = None
    for i, name in enumerate(("p50_ms", "p99_ms")):
        frame[name] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    frame["t_s"] = frame["bucket"] * bucket_s
    frame["throughput_rps"] = frame["requests"] / frame["covered_s"]
    frame["ok_throughput_rps"] = frame["ok"] / frame["covered_s"]
    frame["bytes_per_s"] = frame["bytes"] / frame["covered_s"]
    frame["sent_bytes_per_s"] = frame["sent"] / frame["covered_s"]
    frame["received_bytes_per_s"] = frame["received"] / frame["covered_s"]
    return frame[
        [
            "run",
            "phase",
            "t_s",
            "requests",
            "ok",
            "errors",
            "throughput_rps",
            "ok_throughput_rps",
            "p50_ms",
            "p99_ms",
            "bytes_per_s",
            "sent_bytes_per_s",
            "received_bytes_per_s",
            "covered_s",
        ]
    ].reset_index(drop=True)


@_reused
def phase_spans(runs: RunsArg) -> pd.DataFrame:
    """Per run and phase: when its first request started and its last one ended (seconds)."""
    runs = as_runs(runs)
    con, rollup = _rollup(runs)
    return con.execute(
        f"""
        SELECT any_value(run) AS run, phase,
            min(first_start_ns) / 1e9 AS start_s, max(last_end_ns) / 1e9 AS end_s,
            {_count()} AS requests
        FROM {rollup} GROUP BY run_index, phase ORDER BY run_index, start_s
        """
    ).df()


#: Percentiles of the per-phase table (the StepCounter course report quotes p95 and p99).
PHASE_PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


@_reused
def phase_table(runs: RunsArg) -> pd.DataFrame:
    """Per run and phase: what the course's phased clients report for each phase.

    Columns: run, phase, workers (distinct workers that sent a request), requests, failed,
    start_s, end_s, wall_s (the phase's first start to its last end), throughput_rps
    (requests / wall_s), mean_ms, p50_ms, p95_ms, p99_ms (rows with a response, exact
    ⌈q·n⌉-th smallest). Phases in order of their first request.
    """
    runs = as_runs(runs)
    con, rollup = _rollup(runs)
    frame = con.execute(
        f"""
        WITH workers AS (
            SELECT run_index, phase, count(DISTINCT worker) AS workers
            FROM {rollup}_workers GROUP BY run_index, phase
        )
        SELECT run_index, any_value(run) AS run, phase,
            any_value(workers) AS workers,
            {_count()} AS requests,
            {_count("error IS NOT NULL")} AS failed,
            min(first_start_ns) / 1e9 AS start_s,
            max(last_end_ns) / 1e9 AS end_s,
            {_mean("latency_ns", "requests", "responded")} / 1e6 AS mean_ms
        FROM {rollup} JOIN workers USING (run_index, phase)
        GROUP BY run_index, phase ORDER BY run_index, start_s
        """
    ).df()
    relation = "(SELECT run_index, phase, latency_ns FROM records WHERE status > 0)"
    quantiles = exact_quantiles(
        con, relation, ["run_index", "phase"], "latency_ns", [q for _, q in PHASE_PERCENTILES]
    )
    frame = frame.merge(quantiles, on=["run_index", "phase"], how="left")
    for i, (name, _) in enumerate(PHASE_PERCENTILES):
        frame[f"{name}_ms"] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    frame["wall_s"] = frame["end_s"] - frame["start_s"]
    frame["throughput_rps"] = frame["requests"] / frame["wall_s"]
    columns = [
        "run",
        "phase",
        "workers",
        "requests",
        "failed",
        "start_s",
        "end_s",
        "wall_s",
        "throughput_rps",
        "mean_ms",
        *[f"{name}_ms" for name, _ in PHASE_PERCENTILES],
    ]
    return frame[columns].reset_index(drop=True)


@_reused
def error_breakdown(runs: RunsArg, bucket_s: float = 1.0) -> pd.DataFrame:
    """Per run and error class: how many, the share of all requests, and where in time.

    Columns: run, error, count, share, first_s, last_s, peak_t_s (start of the bucket with the
    most errors of that class), peak_count.
    """
    runs = as_runs(runs)
    con, rollup = _rollup(runs, bucket_s)
    return con.execute(
        f"""
        WITH totals AS (SELECT run_index, {_count()} AS n FROM {rollup} GROUP BY run_index),
        per_bucket AS (
            SELECT run_index, error, bucket, {_count()} AS c
            FROM {rollup} WHERE error IS NOT NULL GROUP BY ALL
        ),
        peaks AS (
            SELECT run_index, error, arg_max(bucket, c) * {bucket_s} AS peak_t_s,
                max(c) AS peak_count
            FROM per_bucket GROUP BY ALL
        )
        SELECT any_value(r.run) AS run, r.error, {_count()} AS count,
            {_count()} / any_value(t.n) AS share,
            min(r.first_start_ns) / 1e9 AS first_s, max(r.last_end_ns) / 1e9 AS last_s,
            any_value(p.peak_t_s) AS peak_t_s, any_value(p.peak_count) AS peak_count
        FROM {rollup} r JOIN totals t USING (run_index)
            JOIN peaks p ON p.run_index = r.run_index AND p.error = r.error
        WHERE r.error IS NOT NULL
        GROUP BY r.run_index, r.error ORDER BY r.run_index, count DESC
        """
    ).df()


@_reused
def worker_gaps(runs: RunsArg) -> pd.DataFrame:
    """Per run and worker: how long the worker sat idle between its consecutive requests.

    The gap is the next request's start minus this request's end. In a closed model with no
    think time it should be microseconds; a large or growing gap means the client, not the
    server, is pacing the load. Columns: run, worker, requests, busy_s, idle_s, busy_share,
    gap_mean_ms, gap_p50_ms, gap_p99_ms, gap_max_ms.
    """
    runs = as_runs(runs)
    columns = ["run", "worker", "requests", "busy_s", "idle_s", "busy_share", "gap_mean_ms"]
    columns += ["gap_p50_ms", "gap_p99_ms", "gap_max_ms"]
    con = _connection(runs)
    scan = _scan_gaps(runs)
    if scan is None:  # files not in each worker's order: sort every row instead
        con = _with_gaps(con)
        frame = con.execute(
            """
            SELECT run_index, worker, count(*) AS requests,
                sum(latency_ns) / 1e9 AS busy_s,
                coalesce(sum(gap_ns), 0) / 1e9 AS idle_s,
                sum(latency_ns) / (sum(latency_ns) + coalesce(sum(gap_ns), 0)) AS busy_share,
                avg(gap_ns) / 1e6 AS gap_mean_ms,
                max(gap_ns) / 1e6 AS gap_max_ms
            FROM gaps GROUP BY run_index, worker ORDER BY run_index, worker
            """
        ).df()
        frame = _with_gap_quantiles(con, frame, ["run_index", "worker"])
        frame.insert(0, "run", [runs[int(i)].label for i in frame["run_index"]])
        return frame[columns]
    try:
        parts = []
        for index, acc in enumerate(scan.runs):
            sums = acc.sums
            workers = np.flatnonzero(sums["requests"]) if sums else np.zeros(0, np.int64)
            s = {k: v[workers] for k, v in sums.items()}
            has = s["gaps"] > 0
            idle = s["gap_ns"].astype(float)
            busy = s["latency_ns"].astype(float)
            with np.errstate(invalid="ignore", divide="ignore"):
                part = pd.DataFrame(
                    {
                        "run_index": index,
                        "worker": workers.astype(np.uint32),
                        "requests": s["requests"],
                        "busy_s": busy / 1e9,
                        "idle_s": idle / 1e9,
                        "busy_share": busy / (busy + idle),
                        "gap_mean_ms": np.where(has, idle / s["gaps"], np.nan) / 1e6,
                        "gap_max_ms": np.where(has, acc.gap_max_ns[workers], 0) / 1e6,
                    }
                )
            part.loc[~has, "gap_max_ms"] = math.nan
            parts.append(part)
        frame = pd.concat(parts, ignore_index=True)
        frame["g"] = frame["run_index"].astype(np.int64) * 2**32 + frame["worker"].astype(np.int64)
        frame = _with_gap_quantiles(con, frame, ["g"], scan)
    finally:
        scan.close()
    frame.insert(0, "run", [runs[int(i)].label for i in frame["run_index"]])
    return frame[columns]


def _scan_gaps(runs: list[Run]) -> GapScan | None:
    """Every gap of ``runs`` in one pass over the segments in file order (see
    :mod:`loadgen_analysis.gaps`); None when some worker's rows are not in start order there."""
    # From the rollup when one is at hand, else from one narrow column (not a whole rollup).
    rollup = _REUSED.get(_rollup_key(runs, 10**9)) if _REUSED is not None else None
    first, last, source = (
        ("first_start_ns", "last_start_ns", rollup)
        if rollup
        else ("start_ns", "start_ns", "records")
    )
    mids = dict(
        _connection(runs)
        .execute(f"SELECT run_index, (min({first}) + max({last})) / 2 FROM {source} GROUP BY 1")
        .fetchall()
    )
    try:
        return scan_gaps(runs, [mids.get(i, 0.0) for i in range(len(runs))])
    except OutOfOrderError:
        return None


def _with_gaps(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` with a temporary table ``gaps``: each row's run_index, worker, start_ns,
    latency_ns and gap_ns (the worker's next start minus this row's end; NULL for its last
    row), by a window that sorts every row: the fallback of :func:`_scan_gaps`. A table, not a
    view, so the window is sorted once; DuckDB spills it to disk."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE gaps AS
        SELECT run_index, worker, start_ns, latency_ns,
            lead(start_ns) OVER w - (start_ns + latency_ns) AS gap_ns
        FROM records
        WINDOW w AS (PARTITION BY run_index, worker ORDER BY start_ns)
        """
    )
    return con


def _with_gap_quantiles(
    con: duckdb.DuckDBPyConnection,
    frame: pd.DataFrame,
    keys: list[str],
    scan: GapScan | None = None,
) -> pd.DataFrame:
    """``frame`` with gap_p50_ms and gap_p99_ms per group of ``keys``: of the table ``gaps``,
    or of ``scan``'s gap file (keys: ``g`` = run_index·2³² + worker, or ``run_index``)."""
    if scan is None:
        quantiles = exact_quantiles(con, "gaps", keys, "gap_ns", [0.5, 0.99])
    else:
        group = "g" if keys == ["g"] else "g >> 32"
        relation = f"(SELECT {group} AS {keys[0]}, gap_ns FROM gap_values)"
        quantiles = exact_quantiles(
            con,
            relation,
            keys,
            "gap_ns",
            [0.5, 0.99],
            before_pass=lambda: register_gap_values(con, scan, "gap_values"),
        )
    frame = frame.merge(quantiles, on=keys, how="left")
    for i, name in enumerate(("gap_p50_ms", "gap_p99_ms")):
        frame[name] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q"]
        ]
    return frame.drop(columns=["q"])


@_reused
def gap_summary(runs: RunsArg) -> pd.DataFrame:
    """Per run: the share of worker time spent idle between requests, and whether gaps grow.

    Columns: run, requests_with_next, gap_mean_ms, gap_p50_ms, gap_p99_ms, idle_share,
    gap_first_half_ms, gap_second_half_ms (mean gap in the run's first and second half).
    """
    runs = as_runs(runs)
    columns = ["run", "requests_with_next", "gap_mean_ms", "gap_p50_ms", "gap_p99_ms"]
    columns += ["idle_share", "gap_first_half_ms", "gap_second_half_ms"]
    con = _connection(runs)
    scan = _scan_gaps(runs)
    if scan is None:  # files not in each worker's order: sort every row instead
        con = _with_gaps(con)
        frame = con.execute(
            """
            WITH g AS (SELECT * FROM gaps),
            mid AS (
                SELECT run_index, (min(start_ns) + max(start_ns)) / 2 AS mid_ns FROM g GROUP BY 1
            )
            SELECT g.run_index, count(g.gap_ns) AS requests_with_next,
                avg(g.gap_ns) / 1e6 AS gap_mean_ms,
                sum(g.gap_ns) / (sum(g.gap_ns)
                    + sum(g.latency_ns) FILTER (WHERE g.gap_ns IS NOT NULL)) AS idle_share,
                avg(g.gap_ns) FILTER (WHERE g.start_ns < m.mid_ns) / 1e6 AS gap_first_half_ms,
                avg(g.gap_ns) FILTER (WHERE g.start_ns >= m.mid_ns) / 1e6 AS gap_second_half_ms
            FROM g JOIN mid m USING (run_index)
            GROUP BY g.run_index ORDER BY g.run_index
            """
        ).df()
        frame = _with_gap_quantiles(con, frame, ["run_index"])
        frame.insert(0, "run", [runs[int(i)].label for i in frame["run_index"]])
        return frame[columns]
    try:
        rows = []
        for index, acc in enumerate(scan.runs):
            gaps = int(acc.sums["gaps"].sum())
            gap_ns = float(acc.sums["gap_ns"].sum())
            busy_ns = float(acc.sums["gap_latency_ns"].sum())
            (n1, s1), (n2, s2) = acc.halves
            rows.append(
                {
                    "run_index": index,
                    "requests_with_next": gaps,
                    "gap_mean_ms": gap_ns / gaps / 1e6 if gaps else math.nan,
                    "idle_share": gap_ns / (gap_ns + busy_ns) if gaps else math.nan,
                    "gap_first_half_ms": s1 / n1 / 1e6 if n1 else math.nan,
                    "gap_second_half_ms": s2 / n2 / 1e6 if n2 else math.nan,
                }
            )
        frame = _with_gap_quantiles(con, pd.DataFrame(rows), ["run_index"], scan)
    finally:
        scan.close()
    frame.insert(0, "run", [runs[int(i)].label for i in frame["run_index"]])
    return frame[columns]


@_reused
def latency_components(runs: RunsArg) -> pd.DataFrame:
    """Per run and op: mean latency split into connect, send, wait for first byte, and transfer
    (ms).

    ``connect_ms`` averages the connect time over all responses (0 when the connection was
    reused), so connect + send + first byte wait + transfer = mean latency. ``send_ms`` is the
    time to hand the whole request to the socket after any connect (``send_ns``, record schema
    2; NaN for version-1 runs, whose ``first_byte_ms`` then includes it). ``first_byte_ms`` is
    the time from sending to the first response byte: server time plus network round trip;
    ``transfer_ms`` is the rest of the body. Also: connects (how many rows opened a
    connection), mean_ttfb_ms, ttfb_share (first byte / latency).
    """
    runs = as_runs(runs)
    con, rollup = _rollup(runs)
    frame = con.execute(
        f"""
        WITH sums AS (
            SELECT run_index, any_value(run) AS run, op, sum(requests) AS n,
                sum(connects)::BIGINT AS connects,
                -- Sums of the rows' parts: connect (0 when reused), send, wait, transfer.
                coalesce(sum(connect_ns), 0) AS connect_ns,
                sum(sent_ns) - coalesce(sum(connect_ns), 0) AS send_ns,
                sum(ttfb_ns) - coalesce(sum(sent_ns), sum(connect_ns), 0) AS first_byte_ns,
                sum(latency_ns) - sum(ttfb_ns) AS transfer_ns,
                sum(latency_ns) AS latency_ns, sum(ttfb_ns) AS ttfb_ns
            FROM {rollup} WHERE responded AND timed GROUP BY run_index, op
        )
        SELECT run, op, n::BIGINT AS responses, connects,
            connect_ns / n / 1e6 AS connect_ms,
            send_ns / n / 1e6 AS send_ms,
            first_byte_ns / n / 1e6 AS first_byte_ms,
            transfer_ns / n / 1e6 AS transfer_ms,
            latency_ns / n / 1e6 AS mean_latency_ms,
            ttfb_ns / n / 1e6 AS mean_ttfb_ms
        FROM sums ORDER BY run_index, op
        """
    ).df()
    frame["send_ms"] = frame["send_ms"].astype(float)
    frame["ttfb_share"] = frame["mean_ttfb_ms"] / frame["mean_latency_ms"]
    return frame


@_reused
def percentile_spectrum(
    runs: RunsArg, percentiles: Sequence[float] = SPECTRUM_PERCENTILES, by_op: bool = True
) -> pd.DataFrame:
    """Latency at many percentiles, exactly, for a spectrum plot.

    Long frame with columns run, op (``all`` when ``by_op`` is false), percentile (0–1),
    latency_ms. Covers rows with a response.
    """
    runs = as_runs(runs)
    if not percentiles:
        raise ValueError("percentiles must not be empty")
    for p in percentiles:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"percentile {p} outside [0, 1)")
    if set(percentiles) <= set(_OP_PERCENTILES):
        frame = _pick(_op_latency_quantiles(runs, by_op), percentiles)
    else:
        con = _connection(runs)
        op_expr = "op" if by_op else "'all'"
        relation = f"(SELECT run_index, {op_expr} AS op, latency_ns FROM records WHERE status > 0)"
        frame = exact_quantiles(con, relation, ["run_index", "op"], "latency_ns", percentiles)
    frame = frame.sort_values(["run_index", "op"])
    rows = []
    for record in frame.itertuples(index=False):
        for p, value in zip(percentiles, record.q, strict=True):
            rows.append((runs[int(record.run_index)].label, record.op, float(p), value / 1e6))
    return pd.DataFrame(rows, columns=["run", "op", "percentile", "latency_ms"])


#: Columns of :func:`shard_table`.
SHARD_COLUMNS = (
    "run",
    "shard",
    "index",
    "shards",
    "present",
    "complete",
    "directory",
    "host",
    "workers",
    "requests",
    "share_pct",
    "first_request_ms",
    "anchor_offset_ms",
    "start_offset_ms",
    "first_request_skew_ms",
    "start_offset_skew_ms",
)


def shard_table(runs: RunsArg) -> pd.DataFrame:
    """Per shard of every sharded run: its share of the requests and when it started.

    Columns: run (the merged run's label), shard (``I/N``), index (I), shards (N), present (how
    many of the N were given), complete, directory (the shard directory's label), host (client
    hostname), workers (configured, this shard's slice), requests, share_pct (of the run's
    requests), first_request_ms (the shard's first request, from the run's earliest anchor —
    wall-clock time, so it includes the machines' clock skew), anchor_offset_ms (the shard's
    anchor after the earliest), start_offset_ms (how late the shard started after
    ``--start-at``, from run.json; NaN without one), and per run, repeated on each of its
    rows: first_request_skew_ms and start_offset_skew_ms (max − min over its shards). Empty
    when no run is sharded. In the open model the first requests are also apart by design:
    shard I's schedule runs I/N of a gap early, so their skew includes up to one gap of a
    shard's rate (10 ms at 100 req/s per shard); start_offset_skew_ms does not.
    """
    sharded = [r for r in as_runs(runs) if r.shards]
    if not sharded:
        return pd.DataFrame(columns=list(SHARD_COLUMNS))
    per_shard = (
        connect(sharded)
        .execute(
            """
        SELECT run_index, shard_index, count(*) AS requests, min(start_ns) AS first_ns
        FROM records GROUP BY run_index, shard_index
        """
        )
        .fetchall()
    )
    stats = {(int(r), int(s)): (int(n), int(first)) for r, s, n, first in per_shard}
    rows = []
    for run_index, run in enumerate(sharded):
        total = sum(stats.get((run_index, s.shard[0]), (0, 0))[0] for s in run.shards if s.shard)
        for shard in run.shards:
            assert shard.shard is not None
            index, count = shard.shard
            requests, first_ns = stats.get((run_index, index), (0, None))
            offset = shard.meta.get("start_offset_ns")
            anchor_offset = (
                (shard.anchor_unix_ns - run.anchor_unix_ns) / 1e6
                if shard.anchor_unix_ns is not None and run.anchor_unix_ns is not None
                else math.nan
            )
            host = shard.meta.get("host") or {}
            rows.append(
                {
                    "run": run.label,
                    "shard": f"{index}/{count}",
                    "index": index,
                    "shards": count,
                    "present": len(run.shards),
                    "complete": run.is_complete,
                    "directory": shard.label,
                    "host": host.get("hostname", "") if isinstance(host, dict) else "",
                    "workers": shard.connections,
                    "requests": requests,
                    "share_pct": 100.0 * requests / total if total else math.nan,
                    "first_request_ms": first_ns / 1e6 if first_ns is not None else math.nan,
                    "anchor_offset_ms": anchor_offset,
                    "start_offset_ms": offset / 1e6 if offset is not None else math.nan,
                }
            )
    frame = pd.DataFrame(rows)
    spread = frame.groupby("run", sort=False)[["first_request_ms", "start_offset_ms"]].agg(
        lambda v: v.max() - v.min() if v.notna().sum() >= 2 else math.nan
    )
    frame["first_request_skew_ms"] = frame["run"].map(spread["first_request_ms"])
    frame["start_offset_skew_ms"] = frame["run"].map(spread["start_offset_ms"])
    return frame[list(SHARD_COLUMNS)]
