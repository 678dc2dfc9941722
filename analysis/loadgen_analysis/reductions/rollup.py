"""The rollup: one pass over a run's rows into sums, counts, minima and maxima per run, op,
phase, error class, answered-or-not, timed-or-not and second — the table the summary tables are
re-aggregated from, instead of each reading every row again.

At 100 million rows every pass over the records costs seconds; the op summary, the run table,
the timeline, the phase spans and table, the error breakdown and the latency components used
to make one each. They all group by coarser keys than the rollup's, and every number they
show is a count, a sum, a minimum or a maximum of the rows, or a quotient of two of them — so
each is exactly the same when computed from the rollup's groups: sums and counts are carried,
never averages, and a mean is ``sum(…) / sum(count)`` at the end, which is what DuckDB's
``avg`` computes (the HUGEINT sum divided by the count); a mean of a difference is the
difference of two sums, the same integer. The one number that is not a sum — how many distinct
workers sent requests — comes from a narrow second statement (run, phase, worker).

A rollup has a few rows per second of the run and op, so it stays a small DuckDB temporary
table whatever the row count. This module knows the record columns but no table built from
them (see :mod:`.summary`, :mod:`.timeline`), and does not compute percentiles (see
:mod:`.percentiles`).
"""

from __future__ import annotations

import duckdb

#: Keys of a rollup: run_index, op, phase, error (class), responded (``status > 0``), timed
#: (``ttfb_ns`` not NULL) and bucket (``(start_ns + latency_ns) // bucket_ns``, by completion
#: time); ``run`` and ``connections`` are carried along.
_KEYS = (
    "run_index, op, phase, error, status > 0 AS responded, ttfb_ns IS NOT NULL AS timed, "
    "(start_ns + latency_ns) // {bucket_ns} AS bucket"
)

#: The other columns of a rollup, as DuckDB aggregates of the records: plain sums, counts,
#: minima and maxima, no FILTER (the keys split what the tables filter on). ``{sent}`` is the
#: end of sending (NULL for record schema 1, which has no ``send_ns``).
_AGGREGATES = {
    "requests": "count(*)",
    "latency_ns": "sum(latency_ns)",
    "latency_min_ns": "min(latency_ns)",
    "latency_max_ns": "max(latency_ns)",
    "intended": "count(intended_ns)",
    "reported_ns": "sum(reported_latency_ns)",
    "reported_min_ns": "min(reported_latency_ns)",
    "reported_max_ns": "max(reported_latency_ns)",
    "ttfb_ns": "sum(ttfb_ns)",
    "connects": "count(connect_ns)",
    "connect_ns": "sum(connect_ns)",
    "sent_ns": "sum({sent})",
    "queue_waits": "count(queue_wait_ns)",
    "queue_wait_ns": "sum(queue_wait_ns)",
    "bytes_sent": "sum(bytes_sent)",
    "bytes_received": "sum(bytes_received)",
    "first_start_ns": "min(start_ns)",
    "last_start_ns": "max(start_ns)",
    "last_end_ns": "max(start_ns + latency_ns)",
    "judged_from_ns": "max(judged_from_ns)",
}


def build_rollup(con: duckdb.DuckDBPyConnection, bucket_ns: int, name: str) -> None:
    """Create the temporary tables ``name`` (the rollup of ``con``'s view ``records`` with time
    buckets of ``bucket_ns``) and ``name_workers`` (run_index, phase, worker: who sent
    requests). Two statements: a second grouping set in the first costs more than a second
    scan of two narrow columns."""
    columns = {r[0] for r in con.execute("DESCRIBE records").fetchall()}
    # Rows without send_ns (version 1, or a request that sent nothing) count no send time.
    sent = "coalesce(send_ns, connect_ns, 0)" if "send_ns" in columns else "NULL::BIGINT"
    aggregates = ",\n".join(
        f"{sql.format(sent=sent)} AS {column}" for column, sql in _AGGREGATES.items()
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {name} AS
        SELECT {_KEYS.format(bucket_ns=bucket_ns)},
            any_value(run) AS run, any_value(connections) AS connections,
            {aggregates}
        FROM records GROUP BY ALL
        """
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name}_workers AS "
        "SELECT DISTINCT run_index, phase, worker FROM records"
    )


def mean_sql(total: str, count: str, condition: str = "") -> str:
    """SQL: the mean that ``total`` and ``count`` of a rollup's groups (those meeting
    ``condition``) make: what ``avg`` of the records gives (the HUGEINT sum over the count)."""
    where = f" FILTER (WHERE {condition})" if condition else ""
    return f"(sum({total}){where} / sum({count}){where})"


def count_sql(condition: str = "") -> str:
    """SQL: the rows of a rollup's groups (those meeting ``condition``), as ``count(*)``
    (``FILTER (WHERE condition)``) would count the records."""
    where = f" FILTER (WHERE {condition})" if condition else ""
    return f"coalesce(sum(requests){where}, 0)::BIGINT"
