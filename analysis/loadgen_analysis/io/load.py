"""Loading run directories: finding the Parquet segments, checking their schema version and
columns against the file contract (:mod:`.contract`), loading run.json.

:func:`load_run`, :func:`load_runs` and :func:`as_runs` take run directories, folders of them
and ``s3://`` prefixes (mirrored to a local cache by :mod:`.s3`, then read from there); the
shard directories of one sharded run come back as one merged :class:`~.run.Run`
(:mod:`.shards`). This module never aggregates (see :mod:`.engine` and
:mod:`loadgen_analysis.reductions`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb

from ..errors import RunLoadError
from . import contract
from .parquet import footer
from .run import Run
from .shards import _merge_shards

#: Record schema versions this package knows how to read: 1 up to the contract's.
SUPPORTED_SCHEMA_VERSIONS = frozenset(range(1, int(contract.schema_version("requests")) + 1))

#: The columns of schema version 1, which every segment must have (later versions add columns,
#: e.g. ``send_ns`` in 2, ``check`` in 3), taken from the contract.
REQUIRED_COLUMNS = tuple(c.name for c in contract.columns("requests") if c.since_version == 1)

#: What every analysis function accepts for its runs (see :func:`as_runs`).
RunsArg = Run | str | Path | Sequence[Run | str | Path]


def _segments(requests_dir: Path) -> tuple[Path, ...]:
    """The closed segments in ``requests/``, by the contract's ``segment_files`` rule (the one
    loadgen writes by): a hidden ``.part-N.parquet.partial`` is still being written, and any
    other file there is not a segment."""
    return tuple(
        sorted(p for p in requests_dir.iterdir() if contract.is_segment(p.name))
        if requests_dir.is_dir()
        else ()
    )


def _loadgen_metadata(segment: Path) -> tuple[dict[str, str], int]:
    try:
        found = footer(segment)
    except duckdb.Error as exc:
        raise RunLoadError(f"{segment}: not a readable Parquet file ({exc})") from exc
    # File-level key-value metadata (where loadgen writes); the Arrow schema blob is not ours.
    meta = {k: v for k, v in found.metadata.items() if k.startswith("loadgen.")}
    missing = [c for c in REQUIRED_COLUMNS if c not in found.columns]
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
    return meta, found.num_rows


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
    """DuckDB takes paths as UTF-8 text, so a run directory whose name is not
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
        meta = _read_run_json(run_json)
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


def _read_run_json(run_json: Path) -> dict[str, Any]:
    """run.json, parsed and held to the contract: an object whose fields have the contract's
    types at every level, and whose array elements (ops, phases, thresholds) have every field
    the contract requires of them. Other fields missing (older loadgens wrote fewer) or not in
    the contract (newer ones write more) are let through; anything else is one line naming
    it, as no reduction can trust the file then."""
    fix = "restore it, or move it aside to read the run from its Parquet segments alone"
    try:
        meta = json.loads(run_json.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunLoadError(f"{run_json}: not valid JSON ({exc}); {fix}") from exc
    if not isinstance(meta, dict):
        kind = {list: "an array", str: "a string", bool: "true or false"}.get(type(meta), meta)
        raise RunLoadError(f"{run_json}: a run.json is a JSON object, this one is {kind}; {fix}")
    version = meta.get("schema_version")
    if isinstance(version, int) and version not in SUPPORTED_SCHEMA_VERSIONS:
        raise RunLoadError(
            f"{run_json}: schema version {version} is not supported "
            f"(this loadgen-analysis reads version "
            f"{', '.join(str(v) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))})"
        )
    wrong = [
        problem
        for problem in contract.json_problems("run_json", meta)
        if not problem.endswith(("is missing", "is not in the contract"))
        or (problem.endswith("is missing") and "[]." in problem)
    ]
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise RunLoadError(f"{run_json}: {_shorten(wrong[0])}{more}; {fix}")
    return meta


def _shorten(problem: str, limit: int = 200) -> str:
    """A problem line with a long value (a whole object) cut to fit one line."""
    return problem if len(problem) <= limit else problem[: limit - 1] + "…"


def _with_spread_run_json(run: Run, folder: Path) -> Run:
    """A shard set that one ``loadgen run`` spread over several processes has the engine's own
    run.json at the top of its folder: the run as one (its summary from the processes' exact
    aggregates, its verdict judged once, ``spread``), held to the contract and read as the
    merged run's; the shards stay listed (``shard_count``, ``shards``)."""
    run_json = folder / "run.json"
    if not run.shards or not run_json.is_file():
        return run
    meta = run.meta | _read_run_json(run_json)
    meta |= {k: run.meta[k] for k in ("shard_count", "shards") if k in run.meta}
    return replace(run, meta=meta)


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
                merged = _merge_shards(members, folder=child)
                runs.extend(_with_spread_run_json(r, child) for r in merged)
    loaded = [
        _with_spread_run_json(r, path) if r.path == path else r
        for r in _merge_shards(runs, folder=path)
    ]
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


def as_runs(runs: RunsArg) -> list[Run]:
    """Normalise the argument every analysis function accepts: a run, a path or ``s3://`` URL,
    or a list of them; shard directories of one sharded run become one merged run."""
    items: list[Run | str | Path] = []

    def flatten(item: RunsArg) -> None:
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
