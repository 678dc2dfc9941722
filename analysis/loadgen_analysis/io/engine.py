"""The DuckDB connection every reduction runs on, with bounded memory.

:func:`connect` hands out a connection on which the view ``records`` stacks every run's judged
rows (with ``run_index``, ``run``, ``connections`` and ``shard_index`` columns added, and a
sharded run's times rebased on its earliest wall-clock anchor): every row but the warm-up's (the
phase the contract names ``warmup``, :data:`WARMUP_PHASE`, in a run whose run.json counts them
in ``summary.warmup_requests``), which the engine records and every judgement leaves out — the
summary, thresholds, verdict, report and compare all read ``records``. Its column
``judged_from_ns`` is where a run's judged part starts: 0 (the anchor), or after a warm-up the
first judged request's start, as loadgen's ``summary.wall_time_ns`` counts it; a run's wall
time is ``max(start_ns + latency_ns - judged_from_ns)``. The view ``records_all`` has the
warm-up rows too. This module never aggregates: reductions live in
:mod:`loadgen_analysis.reductions`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import duckdb

from . import contract
from .load import as_runs
from .parquet import literal_path
from .parquet import sql_string as _sql_string
from .run import Run

#: The phase label of the warm-up rows (``--warmup``, a capacity level's warm-up), read from
#: the contract's ``requests.phase_labels``, where the engine's label is held to it.
WARMUP_PHASE: str = contract.file("requests")["phase_labels"]["warmup"]["label"]


def parquet_files_sql(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The SQL list of ``paths`` for ``read_parquet``, each taken literally."""
    return "[" + ", ".join(_sql_string(literal_path(p)) for p in paths) + "]"


#: DuckDB's memory limit for one analysis connection; past it DuckDB spills to disk. Override
#: with the environment variable ``LOADGEN_ANALYSIS_MEMORY`` (e.g. ``2GB``).
DEFAULT_MEMORY_LIMIT = "500MB"


def engine_settings() -> dict[str, str]:
    """DuckDB settings that keep an analysis within bounded memory whatever the row count: a
    memory limit (``LOADGEN_ANALYSIS_MEMORY``), spilling to a temporary directory
    (``LOADGEN_ANALYSIS_TMP``, else the system's temporary folder), threads
    (``LOADGEN_ANALYSIS_THREADS``, else one per core), and no insertion order to keep."""
    tmp = os.environ.get("LOADGEN_ANALYSIS_TMP") or str(
        Path(tempfile.gettempdir()) / f"loadgen-analysis-{os.getpid()}"
    )
    settings = {
        "memory_limit": os.environ.get("LOADGEN_ANALYSIS_MEMORY", DEFAULT_MEMORY_LIMIT),
        "temp_directory": tmp,
        "preserve_insertion_order": "false",
    }
    threads = os.environ.get("LOADGEN_ANALYSIS_THREADS")
    if threads:
        settings["threads"] = threads
    return settings


#: The latency every table reports, one definition per run kind: for a row with an intended
#: send time (the open model) from that time — the console's, run.json's and the thresholds'
#: definition, free of coordinated omission — else from the actual send (``latency_ns``). The
#: open model's from-actual-send figures are shown beside it, labelled (``*_from_send_ms``).
REPORTED_LATENCY = "reported_latency_ns"
_REPORTED_SQL = (
    "CASE WHEN intended_ns IS NULL THEN latency_ns "
    "ELSE start_ns + latency_ns - least(intended_ns, start_ns) END"
)


def connect(runs: Run | Sequence[Run]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose view ``records`` stacks every run's judged rows
    (all but the warm-up's; ``records_all`` has those too).

    Extra columns: ``run_index`` (position in ``runs``), ``run`` (label), ``connections``
    (the workers the run started, may be NULL), ``shard_index`` (I of the row's shard
    directory, NULL when not sharded) and ``reported_latency_ns`` (:data:`REPORTED_LATENCY`).
    A sharded run's ``start_ns`` and ``intended_ns`` are rebased on its
    earliest shard's wall-clock anchor (row time + shard anchor − earliest anchor), so its
    per-second buckets line up across machines. DuckDB streams the Parquet files and runs
    under :func:`engine_settings` (a memory limit, spilling to disk), so a query over a
    100-million-row run needs bounded memory — as long as it uses no holistic aggregate such as
    ``quantile_disc`` over all rows (see :mod:`loadgen_analysis.reductions.quantiles`).
    """
    runs = as_runs(runs)
    con = duckdb.connect(":memory:", config=engine_settings())
    con.execute("SET enable_progress_bar = false")  # a session option, not a global one
    parts = []
    for index, run in enumerate(runs):
        connections = "NULL" if run.connections is None else str(int(run.connections))
        for part in run.parts:
            files = parquet_files_sql(part.segments)
            shard = "NULL" if part.shard is None else str(part.shard[0])
            offset = 0
            if run.shards and part.anchor_unix_ns is not None and run.anchor_unix_ns is not None:
                offset = part.anchor_unix_ns - run.anchor_unix_ns
            rebase = (
                f" REPLACE (CAST(start_ns + {offset} AS BIGINT) AS start_ns, "
                f"CAST(intended_ns + {offset} AS BIGINT) AS intended_ns)"
                if offset
                else ""
            )
            parts.append(
                f"SELECT {index} AS run_index, {_sql_string(run.label)} AS run, "
                f"CAST({connections} AS BIGINT) AS connections, "
                f"CAST({shard} AS INTEGER) AS shard_index, "
                f"CAST(op AS VARCHAR) AS op_name, CAST(phase AS VARCHAR) AS phase_name, "
                f"CAST(error AS VARCHAR) AS error_class, *{rebase}, "
                f"{_REPORTED_SQL} AS {REPORTED_LATENCY} "
                f"FROM read_parquet({files})"
            )
    con.execute("CREATE VIEW records_all AS " + " UNION ALL BY NAME ".join(parts))
    _create_judged_view(con, runs)
    return con


def _create_judged_view(con: duckdb.DuckDBPyConnection, runs: Sequence[Run]) -> None:
    """The view ``records``: ``records_all`` without the warm-up rows of the runs that had a
    warm-up (run.json ``summary.warmup_requests``), with ``judged_from_ns``."""
    warm = [
        i
        for i, run in enumerate(runs)
        if any("warmup_requests" in (part.summary or {}) for part in run.parts)
    ]
    if not warm:
        con.execute("CREATE VIEW records AS SELECT *, 0::BIGINT AS judged_from_ns FROM records_all")
        return
    judged = f"NOT (phase_name = {_sql_string(WARMUP_PHASE)} AND run_index IN ({_list(warm)}))"
    judged_from = _judged_from_sql(con, warm, judged)
    con.execute(
        f"CREATE VIEW records AS SELECT *, {judged_from} AS judged_from_ns FROM records_all "
        f"WHERE {judged}"
    )


def _list(indexes: Sequence[int]) -> str:
    return ", ".join(str(int(i)) for i in indexes)


def _judged_from_sql(con: duckdb.DuckDBPyConnection, warm: Sequence[int], judged: str) -> str:
    """The SQL of ``judged_from_ns``: for each run of ``warm`` (its run.json counts warm-up
    rows), its first judged request's start (one pass over that run); 0 for the others."""
    starts = con.execute(
        f"SELECT run_index, min(start_ns) FROM records_all "
        f"WHERE run_index IN ({_list(warm)}) AND {judged} GROUP BY run_index"
    ).fetchall()
    cases = " ".join(f"WHEN {int(i)} THEN {int(start)}" for i, start in starts)
    return f"CAST(CASE run_index {cases} ELSE 0 END AS BIGINT)" if cases else "CAST(0 AS BIGINT)"
