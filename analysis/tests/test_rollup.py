"""Issue 14: the summary tables come from one rollup of the rows (per run, op, phase, error,
answered, timed and second) instead of a pass each. Re-aggregating it must give what DuckDB
gives on the rows themselves, to the last bit: counts, sums, minima, maxima, and means as
``avg`` computes them — on a real run with errors (record schema 3), alone and with a second
run, and with time buckets of another width."""

from __future__ import annotations

import pandas as pd
import pytest

import loadgen_analysis as la
from loadgen_analysis.io.engine import connect

from .conftest import Recorded

#: Per run and op, straight from the rows: what op_summary and latency_components show.
PER_OP = """
    SELECT run_index, op,
        count(*) AS requests,
        count(*) FILTER (WHERE error IS NULL) AS ok,
        count(*) FILTER (WHERE status > 0) AS responses,
        avg(latency_ns) FILTER (WHERE status > 0) / 1e6 AS mean_ms,
        min(latency_ns) FILTER (WHERE status > 0) / 1e6 AS min_ms,
        max(latency_ns) FILTER (WHERE status > 0) / 1e6 AS max_ms,
        sum(bytes_sent)::BIGINT AS bytes_sent,
        avg(coalesce(connect_ns, 0)) FILTER (WHERE status > 0 AND ttfb_ns IS NOT NULL) / 1e6
            AS connect_ms,
        avg(coalesce(send_ns, connect_ns, 0) - coalesce(connect_ns, 0))
            FILTER (WHERE status > 0 AND ttfb_ns IS NOT NULL) / 1e6 AS send_ms,
        avg(ttfb_ns - coalesce(send_ns, connect_ns, 0)) FILTER (WHERE status > 0) / 1e6
            AS first_byte_ms,
        avg(latency_ns - ttfb_ns) FILTER (WHERE status > 0) / 1e6 AS transfer_ms
    FROM records GROUP BY run_index, op ORDER BY run_index, op
"""

#: Per run, straight from the rows: what run_table shows beside its percentiles.
PER_RUN = """
    SELECT run_index, max(start_ns + latency_ns) / 1e9 AS wall_s,
        avg(latency_ns) FILTER (WHERE status > 0) / 1e6 AS mean_latency_ms,
        avg(ttfb_ns) FILTER (WHERE status > 0) / 1e6 AS mean_ttfb_ms,
        sum(latency_ns) / count(*) / 1e6 AS mean_busy_ms,
        count(DISTINCT worker) AS workers_seen
    FROM records GROUP BY run_index ORDER BY run_index
"""


@pytest.mark.parametrize("bucket_s", [1.0, 0.25])
def test_tables_from_the_rollup_equal_duckdbs_aggregates_of_the_rows(
    error_run: Recorded, think_time_run: Recorded, bucket_s: float
) -> None:
    runs = la.load_runs([error_run.path, think_time_run.path])
    con = connect(runs)
    per_op = con.execute(PER_OP).df()
    per_run = con.execute(PER_RUN).df()
    assert per_op["ok"].sum() < per_op["requests"].sum(), "the run should have failures"

    summary = la.op_summary(runs)
    for column in ["requests", "ok", "responses", "mean_ms", "min_ms", "max_ms", "bytes_sent"]:
        pd.testing.assert_series_equal(summary[column], per_op[column], check_exact=True)
    components = la.latency_components(runs)
    for column in ["connect_ms", "send_ms", "first_byte_ms", "transfer_ms"]:
        pd.testing.assert_series_equal(components[column], per_op[column], check_exact=True)
    table = la.run_table(runs)
    for column in ["wall_s", "mean_latency_ms", "mean_ttfb_ms", "mean_busy_ms", "workers_seen"]:
        pd.testing.assert_series_equal(table[column], per_run[column], check_exact=True)

    bucket_ns = int(bucket_s * 1e9)
    per_bucket = con.execute(
        f"""
        SELECT run_index, phase, (start_ns + latency_ns) // {bucket_ns} * {bucket_s} AS t_s,
            count(*) AS requests, count(*) FILTER (WHERE error IS NOT NULL) AS errors
        FROM records GROUP BY ALL ORDER BY run_index, t_s, phase
        """
    ).df()
    timeline = la.timeline(runs, bucket_s=bucket_s, latency=False)
    for column in ["t_s", "requests", "errors"]:
        pd.testing.assert_series_equal(timeline[column], per_bucket[column], check_exact=True)


def test_phase_table_counts_each_phases_distinct_workers(error_run: Recorded) -> None:
    con = connect(la.load_runs([error_run.path]))
    workers = dict(
        con.execute("SELECT phase, count(DISTINCT worker) FROM records GROUP BY phase").fetchall()
    )
    table = la.phase_table(error_run.path)
    assert dict(zip(table["phase"], table["workers"], strict=True)) == workers
