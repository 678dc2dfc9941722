"""One Parquet file read with DuckDB: its footer (columns, row count, key-value metadata) and its
rows as a frame.

DuckDB is the analysis's engine already, so the plain install needs no second Parquet reader
(pyarrow alone is larger than DuckDB and pandas together; issue 61). Responsible for
single-file reads outside the ``records`` view of :mod:`.engine` — a segment's footer, a
metrics file — and for handing DuckDB a path it takes literally; not for aggregating, nor for
holding a schema to the contract (:mod:`.contract`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pandas as pd

_GLOB_CHARACTER = re.compile(r"[\[*?]")


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def literal_path(path: str | os.PathLike[str]) -> str:
    """``path`` as DuckDB's file readers take it literally: they read every path they are given
    as a glob pattern, so each ``[``, ``*`` and ``?`` a user's folder name holds is put in a
    character class of its own (``hc[1]`` → ``hc[[]1]``), which matches only itself."""
    return _GLOB_CHARACTER.sub(lambda m: f"[{m.group(0)}]", str(path))


@dataclass(frozen=True)
class Footer:
    """What a Parquet file's footer says: its top-level columns in order, its row count and its
    file-level key-value metadata (where loadgen writes ``loadgen.*``), decoded as UTF-8."""

    columns: tuple[str, ...]
    num_rows: int
    metadata: dict[str, str]


def footer(path: str | os.PathLike[str]) -> Footer:
    """The footer of one Parquet file; :class:`duckdb.Error` when it is not readable Parquet."""
    source = [literal_path(path)]
    with duckdb.connect(":memory:") as con:
        columns = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", source).fetchall()
        (rows,) = con.execute(
            "SELECT num_rows FROM parquet_file_metadata(?)", source
        ).fetchone() or (0,)
        pairs = con.execute("SELECT key, value FROM parquet_kv_metadata(?)", source).fetchall()
    metadata = {
        bytes(k).decode("utf-8", "replace"): bytes(v).decode("utf-8", "replace") for k, v in pairs
    }
    return Footer(tuple(c[0] for c in columns), int(rows), metadata)


def read_frame(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of one Parquet file (``columns`` of them, else all) as a pandas frame; text
    columns (dictionary-encoded ones too) as Python strings, nulls as DuckDB's ``df()`` gives
    them (NaN in a float column)."""
    chosen = ", ".join('"' + c.replace('"', '""') + '"' for c in columns) if columns else "*"
    with duckdb.connect(":memory:") as con:
        return con.execute(f"SELECT {chosen} FROM read_parquet(?)", [literal_path(path)]).df()
