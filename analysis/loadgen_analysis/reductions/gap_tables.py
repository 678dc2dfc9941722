"""The gaps between a worker's consecutive requests, as tables: per worker
(:func:`worker_gaps`) and per run (:func:`gap_summary`).

Both come from one streaming scan of the segments in file order (:mod:`.gaps`) or, when some
worker's rows are not in start order there, from a window that sorts every row; the choice is
made in one place (:func:`_gap_table`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import duckdb
import numpy as np
import pandas as pd

from ..io.load import RunsArg, as_runs
from ..io.run import Run
from .cache import cached_connection, reused, rollup_key, store
from .gaps import GapScan, OutOfOrderError, register_gap_values, scan_gaps
from .quantiles import exact_quantiles

#: Per run and worker, from the table ``gaps`` (the fallback of :func:`_gap_table`).
_WORKER_GAPS_SQL = """
    SELECT run_index, worker, count(*) AS requests,
        sum(latency_ns) / 1e9 AS busy_s,
        coalesce(sum(gap_ns), 0) / 1e9 AS idle_s,
        sum(latency_ns) / (sum(latency_ns) + coalesce(sum(gap_ns), 0)) AS busy_share,
        avg(gap_ns) / 1e6 AS gap_mean_ms,
        max(gap_ns) / 1e6 AS gap_max_ms
    FROM gaps GROUP BY run_index, worker ORDER BY run_index, worker
"""

#: Per run, from the table ``gaps`` (the fallback of :func:`_gap_table`).
_RUN_GAPS_SQL = """
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


@reused
def worker_gaps(runs: RunsArg) -> pd.DataFrame:
    """Per run and worker: how long the worker sat idle between its consecutive requests.

    The gap is the next request's start minus this request's end. In a closed model with no
    think time it should be microseconds; a large or growing gap means the client, not the
    server, is pacing the load. Columns: run, worker, requests, busy_s, idle_s, busy_share,
    gap_mean_ms, gap_p50_ms, gap_p99_ms, gap_max_ms.
    """
    columns = ["run", "worker", "requests", "busy_s", "idle_s", "busy_share", "gap_mean_ms"]
    columns += ["gap_p50_ms", "gap_p99_ms", "gap_max_ms"]
    return _gap_table(
        as_runs(runs),
        columns,
        sorted_sql=_WORKER_GAPS_SQL,
        sorted_keys=["run_index", "worker"],
        from_scan=_workers_from_scan,
        scan_keys=["g"],
    )


def _workers_from_scan(scan: GapScan) -> pd.DataFrame:
    """:func:`worker_gaps`' sums from the scan, with key ``g`` = run_index·2³² + worker."""
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
    return frame


@reused
def gap_summary(runs: RunsArg) -> pd.DataFrame:
    """Per run: the share of worker time spent idle between requests, and whether gaps grow.

    Columns: run, requests_with_next, gap_mean_ms, gap_p50_ms, gap_p99_ms, idle_share,
    gap_first_half_ms, gap_second_half_ms (mean gap in the run's first and second half).
    """
    columns = ["run", "requests_with_next", "gap_mean_ms", "gap_p50_ms", "gap_p99_ms"]
    columns += ["idle_share", "gap_first_half_ms", "gap_second_half_ms"]
    return _gap_table(
        as_runs(runs),
        columns,
        sorted_sql=_RUN_GAPS_SQL,
        sorted_keys=["run_index"],
        from_scan=_runs_from_scan,
        scan_keys=["run_index"],
    )


def _runs_from_scan(scan: GapScan) -> pd.DataFrame:
    """:func:`gap_summary`'s sums from the scan, one row per run."""
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
    return pd.DataFrame(rows)


def _gap_table(
    runs: list[Run],
    columns: list[str],
    *,
    sorted_sql: str,
    sorted_keys: list[str],
    from_scan: Callable[[GapScan], pd.DataFrame],
    scan_keys: list[str],
) -> pd.DataFrame:
    """The one choice both gap tables make: the streaming scan's sums (``from_scan``, gap
    quantiles by ``scan_keys``) or, when some worker's rows are out of order in the files, the
    table ``gaps`` sorted from every row (``sorted_sql``, quantiles by ``sorted_keys``)."""
    con = cached_connection(runs)
    scan = _scan_gaps(runs)
    if scan is None:  # files not in each worker's order: sort every row instead
        con = _with_gaps(con)
        frame = _with_gap_quantiles(con, con.execute(sorted_sql).df(), sorted_keys)
    else:
        try:
            frame = _with_gap_quantiles(con, from_scan(scan), scan_keys, scan)
        finally:
            scan.close()
    frame.insert(0, "run", [runs[int(i)].label for i in frame["run_index"]])
    return frame[columns]


def _scan_gaps(runs: list[Run]) -> GapScan | None:
    """Every gap of ``runs`` in one pass over the segments in file order (see
    :mod:`.gaps`); None when some worker's rows are not in start order there."""
    # From the rollup when one is at hand, else from one narrow column (not a whole rollup).
    reused = store()
    rollup = reused.get(rollup_key(runs, 10**9)) if reused is not None else None
    first, last, source = (
        ("first_start_ns", "last_start_ns", rollup)
        if rollup
        else ("start_ns", "start_ns", "records")
    )
    mids = dict(
        cached_connection(runs)
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
