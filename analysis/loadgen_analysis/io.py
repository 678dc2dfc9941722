"""Reading run directories: finding the Parquet segments, checking the schema version, loading
run.json, and exposing the raw records of one or several runs to DuckDB.

This module never aggregates: it only validates what is on disk and hands out a DuckDB
connection on which the view ``records`` stacks every run's rows (with ``run_index``, ``run``
and ``connections`` columns added). Reductions live in :mod:`loadgen_analysis.summary`.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

#: Record schema versions this package knows how to read (see the README's record schema).
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})

#: The columns of schema version 1, which every segment must have.
REQUIRED_COLUMNS = (
    "start_ns",
    "intended_ns",
    "latency_ns",
    "connect_ns",
    "ttfb_ns",
    "queue_wait_ns",
    "op",
    "status",
    "error",
    "bytes_sent",
    "bytes_received",
    "worker",
    "phase",
    "attempt",
)


class RunLoadError(ValueError):
    """A run directory cannot be read: missing, empty, or written in an unknown schema."""


@dataclass(frozen=True)
class Run:
    """One run directory: its segments, run.json and the ``loadgen.*`` Parquet metadata."""

    path: Path
    segments: tuple[Path, ...]
    rows: int
    meta: dict[str, Any] = field(repr=False)
    parquet_meta: dict[str, str] = field(repr=False)

    @property
    def label(self) -> str:
        """A short name for tables and legends: the run directory's name."""
        return self.path.name

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.parquet_meta.get("loadgen.run_id", self.label))

    @property
    def schema_version(self) -> int:
        return int(self.parquet_meta["loadgen.schema_version"])

    @property
    def config(self) -> dict[str, Any]:
        """The resolved configuration (run.json ``config``, else the Parquet scenario TOML)."""
        config = self.meta.get("config")
        if isinstance(config, dict):
            return config
        scenario = self.parquet_meta.get("loadgen.scenario")
        if scenario:
            try:
                return tomllib.loads(scenario)
            except tomllib.TOMLDecodeError:
                return {}
        return {}

    @property
    def model_config(self) -> dict[str, Any]:
        """The resolved ``model`` table of the scenario (``kind``, ``workers``, …)."""
        definition = self.config.get("definition")
        model = definition.get("model") if isinstance(definition, dict) else None
        if model is None:
            model = self.config.get("model")
        return model if isinstance(model, dict) else {}

    @property
    def connections(self) -> int | None:
        """Configured concurrency N: the closed model's workers (``-c``), the most workers a
        producer-buffer or phased run may grow to, or all thread groups' workers together.
        None when the configuration does not say."""
        model = self.model_config
        for key in ("workers", "max_workers"):
            value = model.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        groups, size = model.get("groups"), model.get("group_size")
        if isinstance(groups, int) and isinstance(size, int):
            startup = model.get("startup")
            extra = startup.get("workers", 0) if isinstance(startup, dict) else 0
            return groups * size + (extra if isinstance(extra, int) else 0)
        value = self.config.get("connections")
        return value if isinstance(value, int) else None

    @property
    def model(self) -> str | None:
        kind = self.model_config.get("kind")
        if kind is None and isinstance(self.config.get("model"), str):
            kind = self.config["model"]
        return str(kind) if kind is not None else None

    @property
    def anchor_unix_ns(self) -> int | None:
        value = self.meta.get("anchor_unix_ns", self.parquet_meta.get("loadgen.anchor_unix_ns"))
        return int(value) if value is not None else None

    @property
    def summary(self) -> dict[str, Any] | None:
        """The summary loadgen printed (run.json), or None for a run without run.json."""
        summary = self.meta.get("summary")
        return summary if isinstance(summary, dict) else None

    @property
    def has_client_metrics(self) -> bool:
        return (self.path / "client-metrics.parquet").is_file()

    def describe(self) -> str:
        """One line naming the run for reports: label, model, workers and target."""
        parts = [self.label]
        if self.model:
            parts.append(f"{self.model} model")
        if self.connections is not None:
            parts.append(f"{self.connections} workers")
        url = self.config.get("url")
        if url:
            parts.append(str(url))
        return ", ".join(parts)


def _segments(requests_dir: Path) -> tuple[Path, ...]:
    # Hidden `.part-N.parquet.partial` files are segments still being written: never read them.
    return tuple(sorted(p for p in requests_dir.glob("*.parquet") if not p.name.startswith(".")))


def _loadgen_metadata(segment: Path) -> tuple[dict[str, str], int]:
    try:
        file_meta = pq.read_metadata(segment)
        schema = file_meta.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise RunLoadError(f"{segment}: not a readable Parquet file ({exc})") from exc
    # File-level key-value metadata (where loadgen writes), not the Arrow schema's own.
    raw = file_meta.metadata or {}
    meta = {
        k.decode(): v.decode()
        for k, v in raw.items()
        if k.startswith(b"loadgen.")  # the Arrow schema blob is not ours
    }
    missing = [c for c in REQUIRED_COLUMNS if c not in schema.names]
    version = meta.get("loadgen.schema_version")
    if version is None:
        raise RunLoadError(
            f"{segment}: no loadgen.schema_version in the Parquet metadata; "
            "this file was not written by loadgen"
        )
    if not version.isdigit() or int(version) not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))
        raise RunLoadError(
            f"{segment}: record schema version {version} is not supported "
            f"(this loadgen-analysis reads version {supported}); "
            "upgrade loadgen-analysis to read it"
        )
    if missing:
        raise RunLoadError(
            f"{segment}: schema version {version} segment lacks columns {', '.join(missing)}"
        )
    return meta, file_meta.num_rows


def load_run(path: str | Path) -> Run:
    """Read a run directory written by ``loadgen run``.

    Checks that the directory exists, holds at least one closed Parquet segment under
    ``requests/`` with at least one row, and that every segment (and run.json) has a schema
    version this package reads. A run without run.json (a killed process) still loads, with a
    warning, from the Parquet metadata alone.

    Raises :class:`RunLoadError` with a message naming the path and the problem.
    """
    path = Path(path)
    if not path.exists():
        raise RunLoadError(f"{path}: no such run directory")
    if not path.is_dir():
        raise RunLoadError(f"{path}: not a directory (expected a loadgen run directory)")
    requests_dir = path / "requests"
    run_json = path / "run.json"
    if not requests_dir.is_dir():
        hint = " (is it a directory of several runs? pass each run)" if _child_runs(path) else ""
        raise RunLoadError(f"{path}: not a loadgen run directory: no requests/ folder{hint}")
    segments = _segments(requests_dir)
    if not segments:
        raise RunLoadError(
            f"{path}: empty run: no closed Parquet segment in {requests_dir} "
            "(the run recorded nothing, or is still writing its first segment)"
        )

    meta: dict[str, Any] = {}
    if run_json.is_file():
        try:
            meta = json.loads(run_json.read_text())
        except json.JSONDecodeError as exc:
            raise RunLoadError(f"{run_json}: not valid JSON ({exc})") from exc
        version = meta.get("schema_version")
        if version is not None and int(version) not in SUPPORTED_SCHEMA_VERSIONS:
            raise RunLoadError(
                f"{run_json}: schema version {version} is not supported "
                f"(this loadgen-analysis reads version "
                f"{', '.join(str(v) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))})"
            )
    else:
        warnings.warn(
            f"{path}: no run.json (was the run killed?); reading the Parquet segments alone",
            stacklevel=2,
        )

    parquet_meta: dict[str, str] = {}
    rows = 0
    for segment in segments:
        seg_meta, seg_rows = _loadgen_metadata(segment)
        if not parquet_meta:
            parquet_meta = seg_meta
        elif seg_meta.get("loadgen.run_id") != parquet_meta.get("loadgen.run_id"):
            raise RunLoadError(
                f"{segment}: belongs to run {seg_meta.get('loadgen.run_id')}, "
                f"not {parquet_meta.get('loadgen.run_id')}: one directory must hold one run"
            )
        rows += seg_rows
    if rows == 0:
        raise RunLoadError(f"{path}: empty run: its {len(segments)} segment(s) hold no rows")
    return Run(path=path, segments=segments, rows=rows, meta=meta, parquet_meta=parquet_meta)


def _child_runs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / "requests").is_dir())


def load_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Load several run directories (sweep levels, repeats, shards) in the order given.

    A path that is not itself a run but directly contains run directories (e.g. a sweep's
    parent folder) stands for all of them, sorted by configured workers then name.
    """
    runs: list[Run] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not (path / "requests").exists():
            children = _child_runs(path)
            if children:
                loaded = [load_run(c) for c in children]
                loaded.sort(key=lambda r: (r.connections or 0, r.label))
                runs.extend(loaded)
                continue
        runs.append(load_run(path))
    if not runs:
        raise RunLoadError("no run directories given")
    return runs


def as_runs(runs: Run | str | Path | Sequence[Run | str | Path]) -> list[Run]:
    """Normalise the argument every analysis function accepts: a run, a path, or a list."""
    if isinstance(runs, Run):
        return [runs]
    if isinstance(runs, str | Path):
        return load_runs([runs])
    out: list[Run] = []
    for item in runs:
        out.extend(as_runs(item))
    if not out:
        raise RunLoadError("no runs given")
    return out


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(runs: Run | Sequence[Run]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose view ``records`` stacks every run's rows.

    Extra columns: ``run_index`` (position in ``runs``), ``run`` (label) and ``connections``
    (configured workers, may be NULL). DuckDB streams the Parquet files, so a query over a
    100-million-row run needs little memory.
    """
    runs = as_runs(runs)
    con = duckdb.connect(":memory:")
    parts = []
    for index, run in enumerate(runs):
        files = ", ".join(_sql_string(str(s)) for s in run.segments)
        connections = "NULL" if run.connections is None else str(int(run.connections))
        parts.append(
            f"SELECT {index} AS run_index, {_sql_string(run.label)} AS run, "
            f"CAST({connections} AS BIGINT) AS connections, "
            f"CAST(op AS VARCHAR) AS op_name, CAST(phase AS VARCHAR) AS phase_name, "
            f"CAST(error AS VARCHAR) AS error_class, * "
            f"FROM read_parquet([{files}])"
        )
    con.execute("CREATE VIEW records AS " + " UNION ALL BY NAME ".join(parts))
    return con
