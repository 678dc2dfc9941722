"""The rollup: one pass over a run's rows into sums, counts, minima and maxima per run, op,
phase, error class, answered-or-not and time bucket — the table the summary tables are
re-aggregated from, instead of each reading every row again.

At 100 million rows every pass over the records costs seconds; the op summary, the run table,
the timeline, the phase spans and table, the error breakdown and the latency components used
to make one (or more) each. They all group by coarser keys than the rollup's, and every
number they show is a count, a sum, a minimum or a maximum of the rows, or a quotient of two
of them — so each is exactly the same when computed from the rollup's groups: sums and counts
are carried, never averages, and a mean is ``sum(…) / sum(count)`` at the end, which is what
DuckDB's ``avg`` computes (the HUGEINT sum divided by the count). The one number that is not
a sum — how many distinct workers sent requests — comes from a second grouping of the same
pass, per run, phase and worker.

A rollup has a few rows per second of the run and op, so it stays a small DuckDB temporary
table whatever the row count. This module knows the record columns but no table built from
them (see :mod:`loadgen_analysis.summary`), and does not compute percentiles (see
:mod:`loadgen_analysis.quantiles`).
"""

from __future__ import annotations

import duckdb

#: Columns of a rollup (beside its keys run_index, op, phase, error, responded, bucket, and
#: run and connections carried along), as DuckDB aggregates of the records. ``{sent}``: the
#: end of sending (``send_ns``; NULL for record schema 1, which has none).
_AGGREGATES = {
    "requests": "count(*)",
    "latency_ns": "sum(latency_ns)",
    "latency_min_ns": "min(latency_ns)",
    "latency_max_ns": "max(latency_ns)",
    "ttfb_count": "count(ttfb_ns)",
    "ttfb_ns": "sum(ttfb_ns)",
    "queue_waits": "count(queue_wait_ns)",
    "queue_wait_ns": "sum(queue_wait_ns)",
    "bytes_sent": "sum(bytes_sent)",
    "bytes_received": "sum(bytes_received)",
    "first_start_ns": "min(start_ns)",
    "last_start_ns": "max(start_ns)",
    "last_end_ns": "max(start_ns + latency_ns)",
    # Latency components, over the rows with a first byte (ttfb_count of them).
    "connects": "count(connect_ns) FILTER (WHERE ttfb_ns IS NOT NULL)",
    "connect_ns": "sum(coalesce(connect_ns, 0)) FILTER (WHERE ttfb_ns IS NOT NULL)",
    "send_ns": "sum({sent} - coalesce(connect_ns, 0)) FILTER (WHERE ttfb_ns IS NOT NULL)",
    "first_byte_ns": "sum(ttfb_ns - coalesce({sent}, connect_ns, 0))",
    "transfer_ns": "sum(latency_ns - ttfb_ns)",
    "timed_latency_ns": "sum(latency_ns) FILTER (WHERE ttfb_ns IS NOT NULL)",
}


def build_rollup(con: duckdb.DuckDBPyConnection, bucket_ns: int, name: str) -> None:
    """Create the temporary tables ``name`` (the rollup of ``con``'s view ``records`` with time
    buckets of ``bucket_ns`` by completion time, ``(start_ns + latency_ns) // bucket_ns``) and
    ``name_workers`` (run_index, phase, worker: who sent requests), in one pass."""
    columns = {r[0] for r in con.execute("DESCRIBE records").fetchall()}
    # Rows without send_ns (version 1, or a request that sent nothing) count no send time.
    sent = "coalesce(send_ns, connect_ns, 0)" if "send_ns" in columns else "NULL::BIGINT"
    aggregates = ",\n".join(
        f"{sql.format(sent=sent)} AS {column}" for column, sql in _AGGREGATES.items()
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {name}_both AS
        SELECT run_index, any_value(run) AS run, any_value(connections) AS connections,
            op, phase, error, status > 0 AS responded,
            (start_ns + latency_ns) // {bucket_ns} AS bucket, worker,
            {aggregates}
        FROM records
        GROUP BY GROUPING SETS (
            (run_index, op, phase, error, responded, bucket), (run_index, phase, worker)
        )
        """
    )
    # worker is never NULL in the records: NULL marks the first grouping's rows.
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name}_workers AS "
        f"SELECT run_index, phase, worker FROM {name}_both WHERE worker IS NOT NULL"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name} AS "
        f"SELECT * EXCLUDE (worker) FROM {name}_both WHERE worker IS NULL"
    )
    con.execute(f"DROP TABLE {name}_both")
