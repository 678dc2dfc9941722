"""Reading run directories: finding the Parquet segments, checking the schema version, loading
run.json, joining the shard directories of one sharded run into one run, and exposing the raw
records of one or several runs to DuckDB.

This module never aggregates: it only validates what is on disk and hands out a DuckDB
connection on which the view ``records`` stacks every run's rows (with ``run_index``, ``run``,
``connections`` and ``shard_index`` columns added, and a sharded run's times rebased on its
earliest wall-clock anchor). Reductions live in :mod:`loadgen_analysis.summary`; ``s3://``
inputs are mirrored to a local cache by :mod:`loadgen_analysis.s3` and then read from there.

Sharded runs (``loadgen run --shard I/N``) write one directory per shard. Shard directories
belong to one run when they have the same N and the same ``start_at_unix_ns`` (``--start-at``)
or, without one, the same configuration; :func:`load_runs` and :func:`as_runs` return such a
set as one :class:`Run` whose ``shards`` are the members. An incomplete set is analysed with an
:class:`IncompleteShardSetWarning`; a set with an index twice or with different N is a
:class:`RunLoadError`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile
import tomllib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from .errors import RunLoadError

#: Record schema versions this package knows how to read (see the README's record schema).
SUPPORTED_SCHEMA_VERSIONS = frozenset({1, 2, 3})

#: The columns of schema version 1, which every segment must have (version 2 adds ``send_ns``,
#: version 3 ``check``).
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


class IncompleteShardSetWarning(UserWarning):
    """A sharded run is analysed from fewer than all N of its shard directories."""


def _share(total: int, index: int, count: int) -> int:
    """Shard ``index`` of ``count``'s part of ``total``, as ``loadgen``'s ``Shard::share``:
    ⌊total / N⌋, plus one for the first ``total mod N`` shards."""
    return total // count + (1 if index < total % count else 0)


def _parse_shard(text: object) -> tuple[int, int] | None:
    """``"I/N"`` → (I, N); None when absent, malformed or N = 1 (not sharded)."""
    if not isinstance(text, str):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        return None
    index, count = int(match.group(1)), int(match.group(2))
    return (index, count) if count > 1 and index < count else None


@dataclass(frozen=True)
class Run:
    """One run: a run directory's segments, run.json and ``loadgen.*`` Parquet metadata — or,
    for a sharded run, the union of its shard directories (``shards``, ordered by index).

    A merged run's ``meta`` is made from its shards': the shared configuration, the earliest
    anchor and start, the exit reasons; it has no ``summary`` (each shard printed only its own).
    ``url`` is where the run was read from when that was not a local path (``s3://…``).
    """

    path: Path
    segments: tuple[Path, ...]
    rows: int
    meta: dict[str, Any] = field(repr=False)
    parquet_meta: dict[str, str] = field(repr=False)
    shards: tuple[Run, ...] = field(default=(), repr=False)
    url: str | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """A short name for tables and legends: the run directory's name (the folder of a
        sharded run's directories), its ``s3://`` URL when read from S3, or for shards given
        one by one ``<run-id>-shards-of-N``."""
        return self.name or self.url or self.path.name

    @property
    def location(self) -> str:
        """Where the run was read from: its ``s3://`` URL or its local path (for shards given
        one by one, theirs)."""
        if self.shards and self.name:
            return ", ".join(s.location for s in self.shards)
        return self.url or str(self.path)

    @property
    def shard(self) -> tuple[int, int] | None:
        """(I, N) of a single shard directory (``--shard I/N``); None for an unsharded run and
        for a merged one."""
        if self.shards:
            return None
        return _parse_shard(self.meta.get("shard", self.parquet_meta.get("loadgen.shard")))

    @property
    def shard_count(self) -> int | None:
        """N of a sharded run (merged or one shard directory); None when not sharded."""
        if self.shards:
            return self.shards[0].shard_count
        return self.shard[1] if self.shard else None

    @property
    def missing_shards(self) -> tuple[int, ...]:
        """Indices of a merged run's shards that were not given (empty when complete)."""
        if not self.shards or self.shard_count is None:
            return ()
        present = {s.shard[0] for s in self.shards if s.shard}
        return tuple(i for i in range(self.shard_count) if i not in present)

    @property
    def is_complete(self) -> bool:
        """False for a sharded run analysed from fewer than all of its N shards."""
        if self.shards:
            return not self.missing_shards
        return self.shard is None

    @property
    def parts(self) -> tuple[Run, ...]:
        """The directories whose rows make up this run: its shards, or itself."""
        return self.shards or (self,)

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
        None when the configuration does not say.

        A shard directory's configuration is the whole run's scenario, so a shard counts its
        slice of it (split as ``loadgen --shard`` splits it); a merged run sums its shards'."""
        if self.shards:
            counts = [s.connections for s in self.shards]
            return None if any(c is None for c in counts) else sum(c for c in counts if c)
        shard = self.shard

        def part(total: int) -> int:
            return _share(total, *shard) if shard else total

        model = self.model_config
        value = model.get("workers")
        if isinstance(value, int) and not isinstance(value, bool):
            return part(value)
        value = model.get("max_workers")
        if isinstance(value, int) and not isinstance(value, bool):
            initial = model.get("initial_workers")
            initial = initial if isinstance(initial, int) and not isinstance(initial, bool) else 0
            return max(part(value), part(initial)) if shard else value
        groups, size = model.get("groups"), model.get("group_size")
        if isinstance(groups, int) and isinstance(size, int):
            startup = model.get("startup")
            extra = startup.get("workers", 0) if isinstance(startup, dict) else 0
            return groups * part(size) + part(extra if isinstance(extra, int) else 0)
        value = self.config.get("connections")
        return part(value) if isinstance(value, int) else None

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
    def client_metrics_files(self) -> tuple[Path, ...]:
        """The 1 Hz client samples (``client-metrics.parquet``) of each directory of the run."""
        files = (p.path / "client-metrics.parquet" for p in self.parts)
        return tuple(f for f in files if f.is_file())

    @property
    def has_client_metrics(self) -> bool:
        return bool(self.client_metrics_files)

    def describe(self) -> str:
        """One line naming the run for reports: label, model, workers, target and shards."""
        parts = [self.label]
        if self.model:
            parts.append(f"{self.model} model")
        if self.connections is not None:
            parts.append(f"{self.connections} workers")
        url = self.config.get("url")
        if url:
            parts.append(str(url))
        if self.shards:
            parts.append(f"{len(self.shards)} of {self.shard_count} shards")
        elif self.shard:
            parts.append(f"shard {self.shard[0]}/{self.shard[1]}")
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
    """Read a run directory written by ``loadgen run`` (a local path or an ``s3://`` URL).

    Checks that the directory exists, holds at least one closed Parquet segment under
    ``requests/`` with at least one row, and that every segment (and run.json) has a schema
    version this package reads. A run without run.json (a killed process) still loads, with a
    warning, from the Parquet metadata alone. A folder holding the shard directories of one
    sharded run (and nothing else) loads as that run, merged.

    Raises :class:`RunLoadError` with a message naming the path and the problem.
    """
    if _is_s3(path):
        from . import s3

        url = s3.normalise_url(str(path))
        local = s3.mirror(url)
        return _with_url(load_run(local), local, url)
    path = Path(path)
    if not path.exists():
        raise RunLoadError(f"{path}: no such run directory")
    if not path.is_dir():
        raise RunLoadError(f"{path}: not a directory (expected a loadgen run directory)")
    if not (path / "requests").is_dir():
        if _is_folder_of_runs(path):
            runs = _load_folder(path)
            if len(runs) == 1 and runs[0].shards:
                return runs[0]
            raise RunLoadError(
                f"{path}: a folder of {len(runs)} runs, not one run directory; "
                "load it with load_runs, or pass one run directory"
            )
        raise RunLoadError(f"{path}: not a loadgen run directory: no requests/ folder")
    _require_utf8_path(path)
    return _load_directory(path)


def _require_utf8_path(path: Path) -> None:
    """DuckDB and pyarrow take paths as UTF-8 text, so a run directory whose name is not
    UTF-8 (which loadgen writes fine) cannot be read; say that, not "unreadable Parquet"."""
    try:
        str(path.resolve()).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise RunLoadError(
            f"{shown}: the path is not valid UTF-8, which the Parquet readers need; "
            "rename the directory (or link to it) with a UTF-8 name"
        ) from None


def _load_directory(path: Path) -> Run:
    """One run directory, checked (see :func:`load_run`); shards are not merged here."""
    requests_dir = path / "requests"
    run_json = path / "run.json"
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
        if meta.get("exit_reason") == "running":
            # The run.json written at the start (S3 output), never replaced by the final one.
            warnings.warn(
                f"{path}: the run did not finish (run.json still says running: the process was "
                "lost, or is still going); reading the segments it closed",
                stacklevel=3,
            )
    else:
        warnings.warn(
            f"{path}: no run.json (was the run killed?); reading the Parquet segments alone",
            stacklevel=3,
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


def _is_s3(path: object) -> bool:
    return isinstance(path, str) and path[:5].lower() == "s3://"


def _with_url(run: Run, root: Path, url: str) -> Run:
    """``run`` (read from ``root``, the local mirror of ``url``) labelled with its URL."""

    def url_of(path: Path) -> str:
        rel = path.relative_to(root).as_posix()
        return url if rel == "." else f"{url}/{rel}"

    return replace(
        run,
        url=url_of(run.path),
        name=f"{url_of(run.path)}/{run.name}" if run.name else None,
        shards=tuple(_with_url(s, root, url) for s in run.shards),
    )


_SHARD_SUFFIX = re.compile(r"-shard-\d+-of-\d+$")


def _set_key(run: Run) -> tuple[str, str]:
    """What the shard directories of one run share: the ``--start-at`` instant, or else the
    configuration (minus its description, which states the shard's own slice)."""
    # run.json's, or the segments' own copy when a lost process left no run.json.
    start_at = run.meta.get("start_at_unix_ns", run.parquet_meta.get("loadgen.start_at_unix_ns"))
    if start_at is not None:
        return ("start_at", str(int(start_at)))
    config = {k: v for k, v in run.config.items() if k != "description"}
    if config.get("embedded_server"):
        # Each shard started its own embedded server, on its own port.
        config.pop("url", None)
        definition = config.get("definition")
        if isinstance(definition, dict):
            config["definition"] = {k: v for k, v in definition.items() if k != "target"}
    return ("config", json.dumps(config, sort_keys=True, default=str))


def _merge_set(members: list[Run], folder: Path | None) -> Run:
    """One run out of shard directories checked to belong together (same N, distinct I)."""
    members = sorted(members, key=lambda r: r.shard or (0, 0))
    count = members[0].shard_count
    by_anchor = sorted(members, key=lambda r: r.anchor_unix_ns or 0)
    anchors = [r.anchor_unix_ns for r in members if r.anchor_unix_ns is not None]
    anchor = min(anchors) if anchors else None
    base = _SHARD_SUFFIX.sub("", members[0].run_id)
    reasons = [str(r.meta.get("exit_reason", "no run.json")) for r in members]
    exit_reason = reasons[0]
    if len(set(reasons)) > 1:
        exit_reason = "mixed: " + ", ".join(
            f"{r.shard[0] if r.shard else '?'}: {reason}"
            for r, reason in zip(members, reasons, strict=True)
        )
    with_json = [r for r in members if r.meta] or members
    meta: dict[str, Any] = {
        key: with_json[0].meta[key]
        for key in ("schema_version", "kind", "loadgen_version", "start_at_unix_ns")
        if key in with_json[0].meta
    }
    meta |= {
        "run_id": f"{base}-shards-of-{count}",
        "anchor_unix_ns": anchor,
        "config": with_json[0].config,
        "created_at": by_anchor[0].meta.get("created_at"),
        "exit_reason": exit_reason,
        "shard_count": count,
        "shards": [r.meta.get("shard", r.parquet_meta.get("loadgen.shard")) for r in members],
    }
    parquet_meta = {k: v for k, v in members[0].parquet_meta.items() if k != "loadgen.shard"}
    parquet_meta["loadgen.run_id"] = meta["run_id"]
    if anchor is not None:
        parquet_meta["loadgen.anchor_unix_ns"] = str(anchor)
    name: str | None = None
    url: str | None = None
    if folder is None:
        # Shards given one by one: the run lives in the folder that holds them, and is named
        # after its run id.
        folder = Path(os.path.commonpath([r.path.parent for r in members]))
        name = meta["run_id"]
        urls = [r.url for r in members]
        if all(urls):
            parents = [posixpath.dirname(u.removeprefix("s3://")) for u in urls if u]
            url = "s3://" + posixpath.commonpath(parents)
            name = f"{url}/{name}"
    merged = Run(
        path=folder,
        segments=tuple(s for r in members for s in r.segments),
        rows=sum(r.rows for r in members),
        meta=meta,
        parquet_meta=parquet_meta,
        shards=tuple(members),
        url=url,
        name=name,
    )
    if merged.missing_shards:
        missing = ", ".join(f"{i}/{count}" for i in merged.missing_shards)
        warnings.warn(
            f"{merged.label}: incomplete sharded run: {len(members)} of {count} shards "
            f"(missing {missing}); analysing the shards present, so totals, throughput and "
            "workers cover only their part of the load",
            IncompleteShardSetWarning,
            stacklevel=4,
        )
    return merged


def _merge_shards(runs: Sequence[Run], folder: Path | None = None) -> list[Run]:
    """Replace the shard directories among ``runs`` by one merged run per sharded run.

    Unsharded and already merged runs pass through; a merged run takes the place of its first
    shard. ``folder``: the runs are a folder's content, so a folder holding one shard set and
    nothing else is that run (labelled by the folder's name).
    """
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        if run.shard is not None:
            groups.setdefault(_set_key(run), []).append(run)
    if not groups:
        return list(runs)
    whole_folder = folder is not None and len(groups) == 1 and all(r.shard for r in runs)
    merged: dict[tuple[str, str], Run] = {}
    for key, members in groups.items():
        counts = {r.shard[1] for r in members if r.shard}
        if len(counts) > 1:
            listing = ", ".join(
                f"{r.location} is {r.shard[0]}/{r.shard[1]}" for r in members if r.shard
            )
            raise RunLoadError(
                f"shard directories of one run disagree on the number of shards N ({listing}); "
                "every shard of a run must come from `--shard I/N` with the same N — pass each "
                "run's shard directories on their own"
            )
        seen: dict[int, Run] = {}
        for r in members:
            assert r.shard is not None
            other = seen.get(r.shard[0])
            if other is not None:
                raise RunLoadError(
                    f"{other.location} and {r.location} are both shard {r.shard[0]}/{r.shard[1]} "
                    "of the same run; keep one of them (a rerun shard?), or put each run's shard "
                    "directories in their own folder (runs started with different --start-at "
                    "times are told apart automatically)"
                )
            seen[r.shard[0]] = r
        merged[key] = _merge_set(members, folder if whole_folder else None)
    out: list[Run] = []
    for run in runs:
        if run.shard is None:
            out.append(run)
            continue
        key = _set_key(run)
        if key in merged:
            out.append(merged.pop(key))
    return out


def _load_folder(path: Path) -> list[Run]:
    """A folder of run directories: each run, with shard directories merged, sorted by
    configured workers then name. A subfolder holding only shard directories is one run."""
    runs: list[Run] = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if (child / "requests").is_dir():
            runs.append(_load_directory(child))
            continue
        nested = _child_runs(child)
        if nested:
            members = [_load_directory(c) for c in nested]
            if all(m.shard is not None for m in members):
                runs.extend(_merge_shards(members, folder=child))
    loaded = _merge_shards(runs, folder=path)
    loaded.sort(key=lambda r: (r.connections or 0, r.label))
    return loaded


def _load_any(raw: str | Path) -> list[Run]:
    """A run directory, a folder of them, or an ``s3://`` prefix of either; loose shard
    directories are left for the caller to merge with their siblings."""
    if _is_s3(raw):
        from . import s3

        url = s3.normalise_url(str(raw))
        local = s3.mirror(url)
        return [_with_url(r, local, url) for r in _load_any(local)]
    path = Path(raw)
    if _is_folder_of_runs(path):
        return _load_folder(path)
    return [load_run(path)]


def _is_folder_of_runs(path: Path) -> bool:
    """A folder (not a run) with run directories in it, or in its subfolders."""
    if not path.is_dir() or (path / "requests").exists():
        return False
    return bool(_child_runs(path)) or any(p.is_dir() and _child_runs(p) for p in path.iterdir())


def load_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Load several runs (sweep levels, repeats, shards) in the order given.

    Each item is a run directory or an ``s3://`` URL of one. An item that is not itself a run
    but directly contains run directories (e.g. a sweep's parent folder, or the folder of a
    sharded run's shard directories) stands for all of them, sorted by configured workers then
    name. Shard directories of one sharded run — in one folder, or given one by one — become one
    merged run (see the module docstring).
    """
    runs: list[Run] = []
    for raw in paths:
        runs.extend(_load_any(raw))
    if not runs:
        raise RunLoadError("no run directories given")
    return _merge_shards(runs)


def as_runs(runs: Run | str | Path | Sequence[Run | str | Path]) -> list[Run]:
    """Normalise the argument every analysis function accepts: a run, a path or ``s3://`` URL,
    or a list of them; shard directories of one sharded run become one merged run."""
    items: list[Run | str | Path] = []

    def flatten(item: Run | str | Path | Sequence[Run | str | Path]) -> None:
        if isinstance(item, Run | str | Path):
            items.append(item)
        else:
            for sub in item:
                flatten(sub)

    flatten(runs)
    out: list[Run] = []
    for item in items:
        out.extend([item] if isinstance(item, Run) else _load_any(item))
    if not out:
        raise RunLoadError("no runs given")
    return _merge_shards(out)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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


def connect(runs: Run | Sequence[Run]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose view ``records`` stacks every run's rows.

    Extra columns: ``run_index`` (position in ``runs``), ``run`` (label), ``connections``
    (configured workers, may be NULL) and ``shard_index`` (I of the row's shard directory, NULL
    when not sharded). A sharded run's ``start_ns`` and ``intended_ns`` are rebased on its
    earliest shard's wall-clock anchor (row time + shard anchor − earliest anchor), so its
    per-second buckets line up across machines. DuckDB streams the Parquet files and runs
    under :func:`engine_settings` (a memory limit, spilling to disk), so a query over a
    100-million-row run needs bounded memory — as long as it uses no holistic aggregate such as
    ``quantile_disc`` over all rows (see :mod:`loadgen_analysis.quantiles`).
    """
    runs = as_runs(runs)
    con = duckdb.connect(":memory:", config=engine_settings())
    con.execute("SET enable_progress_bar = false")  # a session option, not a global one
    parts = []
    for index, run in enumerate(runs):
        connections = "NULL" if run.connections is None else str(int(run.connections))
        for part in run.parts:
            files = ", ".join(_sql_string(str(s)) for s in part.segments)
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
                f"CAST(error AS VARCHAR) AS error_class, *{rebase} "
                f"FROM read_parquet([{files}])"
            )
    con.execute("CREATE VIEW records AS " + " UNION ALL BY NAME ".join(parts))
    return con
