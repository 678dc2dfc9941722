"""load_run / load_runs on real run directories, and the clear errors on bad ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen_analysis import RunLoadError, connect, load_run, load_runs
from loadgen_analysis.io import contract

from .conftest import Recorded


def _copy(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest)
    return dest


def _rewrite_segments(run: Path, **metadata: str) -> None:
    """Rewrite every segment with some ``loadgen.*`` metadata values replaced."""
    for segment in sorted((run / "requests").glob("*.parquet")):
        table = pq.read_table(segment)
        kv = dict(pq.read_metadata(segment).metadata)
        for key, value in metadata.items():
            kv[f"loadgen.{key}".encode()] = value.encode()
        kv.pop(b"ARROW:schema", None)
        pq.write_table(table.replace_schema_metadata(kv), segment)


def test_load_run_reads_segments_and_run_json(error_run: Recorded) -> None:
    run = load_run(error_run.path)
    assert run.rows == error_run.summary["summary"]["requests"]
    assert run.schema_version == int(contract.schema_version("requests"))
    assert run.run_id == error_run.summary["run_id"]
    assert run.connections == 8
    assert run.model == "closed"
    assert run.anchor_unix_ns and run.anchor_unix_ns > 1_600_000_000 * 10**9
    assert run.summary is not None
    assert run.segments and all(s.suffix == ".parquet" for s in run.segments)
    (count,) = connect(run).execute("SELECT count(*) FROM records").fetchone()
    assert count == run.rows


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunLoadError, match="no such run directory"):
        load_run(tmp_path / "nope")


def test_directory_without_requests_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunLoadError, match="not a loadgen run directory"):
        load_run(tmp_path)


def test_run_without_segments_is_empty(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "empty")
    for segment in (run / "requests").glob("*.parquet"):
        segment.unlink()
    with pytest.raises(RunLoadError, match="empty run"):
        load_run(run)


def test_run_with_zero_rows_is_empty(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "zero")
    segments = sorted((run / "requests").glob("*.parquet"))
    for segment in segments:
        table = pq.read_table(segment)
        kv = dict(pq.read_metadata(segment).metadata)
        kv.pop(b"ARROW:schema", None)
        pq.write_table(table.slice(0, 0).replace_schema_metadata(kv), segment)
    with pytest.raises(RunLoadError, match="hold no rows"):
        load_run(run)


def test_unknown_schema_version_in_parquet_is_refused(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "v99")
    _rewrite_segments(run, schema_version="99")
    with pytest.raises(RunLoadError, match=r"schema version 99 is not supported"):
        load_run(run)


def test_unknown_schema_version_in_run_json_is_refused(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "json99")
    meta = json.loads((run / "run.json").read_text())
    meta["schema_version"] = 99
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunLoadError, match=r"schema version 99 is not supported"):
        load_run(run)


def test_parquet_not_written_by_loadgen_is_refused(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "foreign")
    for segment in (run / "requests").glob("*.parquet"):
        pq.write_table(pq.read_table(segment).replace_schema_metadata({}), segment)
    with pytest.raises(RunLoadError, match="not written by loadgen"):
        load_run(run)


def test_partial_segments_are_ignored(error_run: Recorded, tmp_path: Path) -> None:
    run = _copy(error_run.path, tmp_path / "partial")
    (run / "requests" / ".part-00099.parquet.partial").write_bytes(b"half a file")
    assert load_run(run).rows == error_run.summary["summary"]["requests"]


def test_killed_run_without_run_json_loads_with_a_warning(
    error_run: Recorded, tmp_path: Path
) -> None:
    run = _copy(error_run.path, tmp_path / "killed")
    (run / "run.json").unlink()
    with pytest.warns(UserWarning, match="no run.json"):
        loaded = load_run(run)
    assert loaded.rows == error_run.summary["summary"]["requests"]
    # The configuration comes from the Parquet scenario metadata instead …
    assert loaded.model == "closed"
    assert loaded.summary is None
    # … but the workers are what the engine counted (run.json), never derived from it.
    assert loaded.connections is None


def test_load_runs_expands_a_folder_of_runs_by_concurrency(capacity_sweep: list[Path]) -> None:
    runs = load_runs([capacity_sweep[0].parent])
    assert [r.connections for r in runs] == sorted(r.connections for r in runs)
    assert {r.path for r in runs} == set(capacity_sweep)
    con = connect(runs)
    rows = con.execute("SELECT run, count(*) FROM records GROUP BY run").fetchall()
    assert dict(rows) == {r.label: r.rows for r in runs}
