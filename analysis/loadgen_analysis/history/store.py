"""The history store: a folder or an ``s3://`` prefix of small Parquet files, one per run.

Adding writes a new file under a name no other writer picks (start time, run id and random
digits) and never touches another file: locally written to a hidden temporary file in the
store and renamed into place (a reader never sees half a file), on S3 one PUT (atomic there).
So two CI jobs adding at once lose nothing, and there is no shared file to corrupt.

Files are written by DuckDB (``COPY … KV_METADATA``), which declares a column that holds no
null in that file REQUIRED (as the contract's non-null ones always are): files of one store
may differ there, so they are read by name and never as one fixed schema.

Reading is one DuckDB query over the store's files (``STORE/*.parquet``, listed, each path
taken literally, never as a pattern); an ``s3://`` store is first mirrored into the local
cache (:func:`~..io.s3.mirror_files`, only new or changed files are downloaded). A file
DuckDB cannot read is named in one sentence with the fix.
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import duckdb
import pandas as pd

from ..errors import RunLoadError
from ..io import contract, s3
from ..io.engine import engine_settings, parquet_files_sql
from ..io.parquet import footer, read_frame, sql_string
from .identity import keyed

#: The contract's name of a store's file.
FILE = "history_run"

_TYPES = {"int64": "BIGINT", "float64": "DOUBLE", "utf8": "VARCHAR"}


def metadata() -> dict[str, str]:
    """A history file's key-value metadata."""
    return {
        "loadgen.schema_version": str(contract.schema_version(FILE)),
        "loadgen.kind": "history-run",
    }


def _table_sql() -> str:
    """The columns of a history file as a table, from the contract (the one place they are
    written): its types, and NOT NULL where it says so (so the file says REQUIRED there)."""
    columns = ", ".join(
        f'"{c.name}" {_TYPES[c.type]}{"" if c.nullable else " NOT NULL"}'
        for c in contract.columns(FILE)
    )
    return f"CREATE TEMP TABLE history_run ({columns})"


def file_name(rows: pd.DataFrame) -> str:
    """``run-20261126T210000Z-<run_id>-<8 hex>.parquet``: sorted by time, never reused."""
    started = datetime.fromtimestamp(int(rows["started_unix_ns"].iloc[0]) / 1e9, tz=UTC)
    run_id = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in rows["run_id"].iloc[0])
    return f"run-{started:%Y%m%dT%H%M%SZ}-{run_id[:60]}-{secrets.token_hex(4)}.parquet"


def _write(rows: pd.DataFrame, path: Path) -> None:
    """``rows`` as a history file at ``path``, written by DuckDB."""
    names = contract.column_names(FILE)
    full = rows.reindex(columns=names)
    pairs = ", ".join(f"{sql_string(k)}: {sql_string(v)}" for k, v in metadata().items())
    with duckdb.connect(":memory:") as con:
        con.execute(_table_sql())
        con.register("rows_frame", full)
        listed = ", ".join(f'"{n}"' for n in names)
        con.execute(f"INSERT INTO history_run SELECT {listed} FROM rows_frame")
        con.execute(
            f"COPY history_run TO {sql_string(str(path))} (FORMAT parquet, KV_METADATA {{{pairs}}})"
        )


def add(rows: pd.DataFrame, store: str) -> str:
    """Write ``rows`` (one run's) as a new file of ``store``; returns where it went."""
    name = file_name(rows)
    if store.startswith("s3://"):
        bucket, prefix = s3.parse_url(store)
        key = str(PurePosixPath(bucket, prefix, name)) if prefix else f"{bucket}/{name}"
        local = Path(engine_settings()["temp_directory"])
        local.mkdir(parents=True, exist_ok=True)
        temp = local / f".{name}.{os.getpid()}.partial"
        try:
            _write(rows, temp)
            s3.upload(temp, f"s3://{key}")
        finally:
            temp.unlink(missing_ok=True)
        return f"s3://{key}"
    folder = Path(store)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / name
    temp = folder / f".{name}.{os.getpid()}.partial"
    try:
        _write(rows, temp)
        temp.replace(final)
    finally:
        temp.unlink(missing_ok=True)
    return str(final)


def _is_history_file(rel: PurePosixPath) -> bool:
    return len(rel.parts) == 1 and rel.suffix == ".parquet" and not rel.name.startswith(".")


def local_folder(store: str) -> Path:
    """The local folder holding ``store``'s files (an ``s3://`` store mirrored first)."""
    if store.startswith("s3://"):
        nothing = "no history file (run-*.parquet) under this prefix"
        return s3.mirror_files(store, _is_history_file, nothing)
    folder = Path(store)
    if not folder.is_dir():
        raise RunLoadError(
            f"{store}: no such history store; create it with "
            f"`loadgen-analyze history add RUN --store {store}`"
        )
    return folder


def read(store: str, by_host: bool = False) -> pd.DataFrame:
    """Every run of ``store`` (a run added more than once: its newest rows), one row per op,
    oldest run first (by start time, then run id), keyed into series by what was tested
    (:func:`~.identity.keyed`; ``by_host`` keys by the whole URL)."""
    folder = local_folder(store)
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise RunLoadError(
            f"{store}: the history store holds no runs; add some with "
            f"`loadgen-analyze history add RUN --store {store}`"
        )
    _refuse_foreign(store, files)
    # The files listed, each taken literally: the store's folder name is no pattern.
    # A run added twice (a retried CI job) counts once: its newest file's rows.
    query = (
        f"SELECT * FROM read_parquet({parquet_files_sql(files)}, union_by_name = true) "
        "QUALIFY row_number() OVER (PARTITION BY run_id, op ORDER BY added_unix_ns DESC) = 1 "
        "ORDER BY started_unix_ns, run_id, op"
    )
    try:
        with duckdb.connect(config=engine_settings()) as con:
            con.execute("SET enable_progress_bar = false")
            history = con.execute(query).df()
    except duckdb.Error as exc:
        raise _damaged(store, files, exc) from exc
    return keyed(history, by_host)


def _refuse_foreign(store: str, files: list[Path]) -> None:
    """Raise, naming the file and the fix, when a file of the store is readable Parquet but no
    history file (its metadata lacks ``loadgen.kind: history-run``) — a run's segment copied in
    would otherwise be read as runs with no identity."""
    for path in files:
        try:
            kind = footer(path).metadata.get("loadgen.kind")
        except duckdb.Error:  # a damaged file: _damaged names it when the query fails
            continue
        if kind != "history-run":
            raise RunLoadError(
                f"{store}: {path.name} is not a history file (a Parquet file, but not one "
                "`loadgen-analyze history add` wrote); remove it from the store"
            )


def _damaged(store: str, files: list[Path], exc: Exception) -> RunLoadError:
    """The first file of ``files`` that is not a readable Parquet file, named with the fix."""
    for path in files:
        try:
            read_frame(path)
        except duckdb.Error as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            return RunLoadError(
                f"{store}: {path.name} is not a readable history file ({reason}); remove it "
                "(and add its run again with `loadgen-analyze history add`)"
            )
    return RunLoadError(f"{store}: cannot read the history store ({exc})")
