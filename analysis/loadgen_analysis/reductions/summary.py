"""Reductions of raw request records into small pandas frames, computed in DuckDB.

Responsible for: the per-op summary (the same numbers the Rust console prints, exactly and not
at HDR precision), the per-run table a sweep is analysed from, the errors over time, latency
components and, for sharded runs, each shard's share and start skew. Over time:
:mod:`.timeline`; gaps: :mod:`.gap_tables`; percentiles: :mod:`.percentiles`. Not responsible
for interpreting them (see :mod:`loadgen_analysis.models`, :mod:`loadgen_analysis.verdict`).

Semantics match ``loadgen``'s summary: a request *failed* when ``error`` is set; latency
statistics cover rows with ``status > 0``; a run's wall time is the end of its last request
(``max(start_ns + latency_ns)``, from the anchor at 0, or after a warm-up from the first judged
request's start: ``judged_from_ns``); throughput is requests / wall time. Warm-up rows are not
in ``records``.
A sharded run is one run: its shards' rows together, timed from its earliest shard's anchor.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd

from ..io.engine import connect
from ..io.load import RunsArg, as_runs
from .cache import cached_rollup, reused
from .percentiles import SUMMARY_PERCENTILES, op_latency_quantiles, pick, with_latency_quantiles
from .quantiles import exact_quantiles
from .rollup import count_sql, mean_sql


def run_walls_ns(runs: RunsArg) -> dict[int, int]:
    """Per run_index: the run's wall time (ns), the end of its last request. From the rollup,
    which inside :func:`reuse_reductions` the other tables share."""
    con, rollup = cached_rollup(as_runs(runs))
    query = (
        f"SELECT run_index, max(last_end_ns) - max(judged_from_ns) FROM {rollup} GROUP BY run_index"
    )
    return {int(i): int(wall) for i, wall in con.execute(query).fetchall()}


@reused
def op_summary(runs: RunsArg) -> pd.DataFrame:
    """Per run and op: counts, error rate, throughput and latency statistics (ms).

    Columns: run, op, requests, ok, failed, error_rate, throughput_rps, ok_throughput_rps,
    responses, mean_ms, min_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms, bytes_sent,
    bytes_received. Throughput divides by the whole run's wall time (as loadgen does).

    Latency is the one each run kind reports (:data:`~loadgen_analysis.io.engine.
    REPORTED_LATENCY`): for an open-model run from the intended send time, as loadgen's console
    and run.json. When any run is open, ``latency_from`` says which (``intended send`` or
    ``send``) and p50/p90/p99_from_send_ms give the open model's latency from the actual send
    beside it (NaN for the other runs).
    """
    runs = as_runs(runs)
    con, rollup = cached_rollup(runs)
    frame = con.execute(
        f"""
        WITH per_op AS (
            SELECT run_index, any_value(run) AS run, op,
                {count_sql()} AS requests,
                {count_sql("error IS NULL")} AS ok,
                {count_sql("error IS NOT NULL")} AS failed,
                {count_sql("responded")} AS responses,
                {mean_sql("reported_ns", "requests", "responded")} / 1e6 AS mean_ms,
                min(reported_min_ns) FILTER (WHERE responded) / 1e6 AS min_ms,
                max(reported_max_ns) FILTER (WHERE responded) / 1e6 AS max_ms,
                sum(bytes_sent)::BIGINT AS bytes_sent,
                sum(bytes_received)::BIGINT AS bytes_received,
                max(last_end_ns) - max(judged_from_ns) AS end_ns,
                sum(intended) AS intended
            FROM {rollup} GROUP BY run_index, op
        )
        -- The run's wall time from its ops' ends.
        SELECT * EXCLUDE (end_ns), max(end_ns) OVER (PARTITION BY run_index) AS wall_ns
        FROM per_op ORDER BY run_index, op
        """
    ).df()
    quantiles = pick(op_latency_quantiles(runs, True), [q for _, q in SUMMARY_PERCENTILES])
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
    if frame["intended"].sum() > 0:
        frame = _from_send(con, frame)
        columns += ["latency_from", *(f"{name}_from_send_ms" for name in FROM_SEND)]
    return frame[columns].reset_index(drop=True)


#: The open model's latency from the actual send, shown beside the reported one.
FROM_SEND = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _from_send(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``latency_from`` and the open rows' percentiles from the actual send."""
    relation = (
        "(SELECT run_index, op, latency_ns FROM records "
        "WHERE status > 0 AND intended_ns IS NOT NULL)"
    )
    quantiles = exact_quantiles(
        con, relation, ["run_index", "op"], "latency_ns", list(FROM_SEND.values())
    ).rename(columns={"q": "q_send"})
    frame = frame.merge(quantiles, on=["run_index", "op"], how="left")
    for i, name in enumerate(FROM_SEND):
        frame[f"{name}_from_send_ms"] = [
            v[i] / 1e6 if isinstance(v, list | np.ndarray) else math.nan for v in frame["q_send"]
        ]
    frame["latency_from"] = np.where(frame["intended"] > 0, "intended send", "send")
    return frame


@reused
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
    con, rollup = cached_rollup(runs)
    frame = con.execute(
        f"""
        WITH workers AS (
            SELECT run_index, count(DISTINCT worker) AS workers_seen
            FROM {rollup}_workers GROUP BY run_index
        )
        SELECT run_index, any_value(run) AS run, any_value(connections) AS connections,
            {count_sql()} AS requests,
            {count_sql("error IS NULL")} AS ok,
            {count_sql("error IS NOT NULL")} AS failed,
            max(last_end_ns) - max(judged_from_ns) AS wall_ns,
            {mean_sql("reported_ns", "requests", "responded")} / 1e6 AS mean_latency_ms,
            {mean_sql("ttfb_ns", "requests", "responded AND timed")} / 1e6 AS mean_ttfb_ms,
            sum(latency_ns) AS busy_ns,
            (sum(bytes_sent) + sum(bytes_received))::DOUBLE AS bytes_total,
            {mean_sql("queue_wait_ns", "queue_waits")} / 1e6 AS mean_queue_wait_ms,
            any_value(workers_seen) AS workers_seen
        FROM {rollup} JOIN workers USING (run_index) GROUP BY run_index ORDER BY run_index
        """
    ).df()
    frame = with_latency_quantiles(con, runs, frame, ["run_index"])
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


@reused
def error_breakdown(runs: RunsArg, bucket_s: float = 1.0) -> pd.DataFrame:
    """Per run and error class: how many, the share of all requests, and where in time.

    Columns: run, error, count, share, first_s, last_s, peak_t_s (start of the bucket with the
    most errors of that class), peak_count.
    """
    runs = as_runs(runs)
    con, rollup = cached_rollup(runs, bucket_s)
    return con.execute(
        f"""
        WITH totals AS (SELECT run_index, {count_sql()} AS n FROM {rollup} GROUP BY run_index),
        per_bucket AS (
            SELECT run_index, error, bucket, {count_sql()} AS c
            FROM {rollup} WHERE error IS NOT NULL GROUP BY ALL
        ),
        peaks AS (
            SELECT run_index, error, arg_max(bucket, c) * {bucket_s} AS peak_t_s,
                max(c) AS peak_count
            FROM per_bucket GROUP BY ALL
        )
        SELECT any_value(r.run) AS run, r.error, {count_sql()} AS count,
            {count_sql()} / any_value(t.n) AS share,
            min(r.first_start_ns) / 1e9 AS first_s, max(r.last_end_ns) / 1e9 AS last_s,
            any_value(p.peak_t_s) AS peak_t_s, any_value(p.peak_count) AS peak_count
        FROM {rollup} r JOIN totals t USING (run_index)
            JOIN peaks p ON p.run_index = r.run_index AND p.error = r.error
        WHERE r.error IS NOT NULL
        GROUP BY r.run_index, r.error ORDER BY r.run_index, count DESC
        """
    ).df()


@reused
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
    con, rollup = cached_rollup(runs)
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
