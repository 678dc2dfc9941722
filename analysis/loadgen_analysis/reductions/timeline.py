"""Reductions over time: the per-bucket timeline, the phases' spans and the per-phase table.

A request counts in the bucket in which it ended (by completion time); a sharded run's
buckets are timed from its earliest shard's anchor. Not responsible for interpreting the
shape of the curve (see :mod:`loadgen_analysis.verdict`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from .cache import cached_rollup, reused, runs_key, store
from .percentiles import latency_cube
from .quantiles import exact_quantiles
from .rollup import count_sql, mean_sql


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
    reused = store()
    if reused is not None and not latency:
        key = ("_timeline", runs_key(runs), (bucket_s, by_phase, True), ())
        if key in reused:  # the same buckets with their latency: drop it
            frame = reused[key].copy()
            frame["p50_ms"] = frame["p99_ms"] = math.nan
            return frame
    return _timeline(runs, bucket_s, by_phase, latency)


@reused
def _timeline(runs: list[Run], bucket_s: float, by_phase: bool, latency: bool) -> pd.DataFrame:
    con, rollup = cached_rollup(runs, bucket_s)
    bucket_ns = int(bucket_s * 1e9)
    phase = "phase" if by_phase else "'all'"
    frame = con.execute(
        f"""
        WITH buckets AS (
            SELECT run_index, any_value(run) AS run, {phase} AS phase, bucket,
                {count_sql()} AS requests,
                {count_sql("error IS NULL")} AS ok,
                {count_sql("error IS NOT NULL")} AS errors,
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
        "reported_latency_ns AS latency_ns FROM records WHERE status > 0)"
    )
    keys = ["run_index", "phase", "bucket"]
    cube = latency_cube(runs, bucket_s) if latency else None
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


@reused
def phase_spans(runs: RunsArg) -> pd.DataFrame:
    """Per run and phase: when its first request started and its last one ended (seconds)."""
    runs = as_runs(runs)
    con, rollup = cached_rollup(runs)
    return con.execute(
        f"""
        SELECT any_value(run) AS run, phase,
            min(first_start_ns) / 1e9 AS start_s, max(last_end_ns) / 1e9 AS end_s,
            {count_sql()} AS requests
        FROM {rollup} GROUP BY run_index, phase ORDER BY run_index, start_s
        """
    ).df()


#: Percentiles of the per-phase table (the StepCounter course report quotes p95 and p99).
PHASE_PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


@reused
def phase_table(runs: RunsArg) -> pd.DataFrame:
    """Per run and phase: what the course's phased clients report for each phase.

    Columns: run, phase, workers (distinct workers that sent a request), requests, failed,
    start_s, end_s, wall_s (the phase's first start to its last end), throughput_rps
    (requests / wall_s), mean_ms, p50_ms, p95_ms, p99_ms (rows with a response, exact
    ⌈q·n⌉-th smallest). Phases in order of their first request.
    """
    runs = as_runs(runs)
    con, rollup = cached_rollup(runs)
    frame = con.execute(
        f"""
        WITH workers AS (
            SELECT run_index, phase, count(DISTINCT worker) AS workers
            FROM {rollup}_workers GROUP BY run_index, phase
        )
        SELECT run_index, any_value(run) AS run, phase,
            any_value(workers) AS workers,
            {count_sql()} AS requests,
            {count_sql("error IS NOT NULL")} AS failed,
            min(first_start_ns) / 1e9 AS start_s,
            max(last_end_ns) / 1e9 AS end_s,
            {mean_sql("reported_ns", "requests", "responded")} / 1e6 AS mean_ms
        FROM {rollup} JOIN workers USING (run_index, phase)
        GROUP BY run_index, phase ORDER BY run_index, start_s
        """
    ).df()
    relation = (
        "(SELECT run_index, phase, reported_latency_ns AS latency_ns FROM records WHERE status > 0)"
    )
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
