"""A run's rows as CSV or JSON lines, with the contract's ``requests`` columns in its order
(``contract/files.json``): one line per request, for tools that do not read Parquet (as
``k6 --out csv`` and ``vegeta encode``).

Streamed: DuckDB's ``COPY`` reads the segments and writes the file as it goes, within the
analysis's memory limit whatever the row count. Dictionary columns (``op``, ``phase``,
``error``, ``check``) become text; a column an older segment lacks is empty; a sharded run's
times are rebased on its earliest shard's anchor, as the analysis does. Nothing is computed:
the values are the recorded ones.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..io import contract
from ..io.engine import engine_settings, parquet_files_sql
from ..io.parquet import sql_string
from ..io.run import Run

#: Where ``COPY`` writes when no file is given: the process's standard output, for a pipe.
STDOUT = Path("/dev/stdout")

_TYPES = {
    "int64": "BIGINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
}
_OPTIONS = {"csv": "FORMAT csv, HEADER true", "jsonl": "FORMAT json"}


def rows_sql(con: duckdb.DuckDBPyConnection, run: Run) -> str:
    """Every row of ``run`` in the contract's columns and order, segment files in order."""
    selects = []
    for part in run.parts:
        offset_ns = 0
        if run.shards and part.anchor_unix_ns is not None and run.anchor_unix_ns is not None:
            offset_ns = part.anchor_unix_ns - run.anchor_unix_ns
        files = parquet_files_sql(part.segments)
        described = con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({files}, union_by_name = true)"
        )
        present = {row[0] for row in described.fetchall()}
        columns = []
        for column in contract.columns("requests"):
            kind = _TYPES.get(column.type, "VARCHAR")
            value = f'"{column.name}"' if column.name in present else "NULL"
            if offset_ns and column.name in ("start_ns", "intended_ns"):
                value = f"{value} + {offset_ns}"
            columns.append(f'CAST({value} AS {kind}) AS "{column.name}"')
        selects.append(
            f"SELECT {', '.join(columns)} FROM read_parquet({files}, union_by_name = true)"
        )
    return " UNION ALL ".join(selects)


def write_rows(run: Run, form: str, out: Path = STDOUT) -> int:
    """Writes ``run``'s rows to ``out`` as ``csv`` (a header line; an empty cell is a null) or
    ``jsonl`` (one object per row with every column, ``null`` for a null); returns the number
    of rows."""
    # File order kept: the rows come out as the segments hold them. One thread: several would
    # each buffer row groups to put them back in order (past a 150 MB limit at 4 M rows of
    # JSON), and one writes as fast (the text, not the reading, is the work).
    settings = engine_settings() | {"preserve_insertion_order": "true", "threads": "1"}
    with duckdb.connect(":memory:", config=settings) as con:
        con.execute("SET enable_progress_bar = false")
        (count,) = con.execute(
            f"COPY ({rows_sql(con, run)}) TO {sql_string(str(out))} "
            f"({_OPTIONS[form]}, USE_TMP_FILE false)"
        ).fetchone() or (0,)
    return int(count)
